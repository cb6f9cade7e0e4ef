// cooperative_groups.h for the CPU emulator: thread groups on top of the
// emulator's barriers and warp intrinsics.
//
//   cg::this_thread_block()          the block: sync() is __syncthreads()
//   cg::tiled_partition<N>(g)        tiles of N = 1, 2, 4, 8, 16 or 32 consecutive threads: their
//   cg::tiled_partition(g, N)        shuffles, votes and sync() are the warp intrinsics on the
//                                    tile's lanes (width N)
//   cg::coalesced_threads()          the lanes of the warp that reach this call together (those
//                                    that took the same branch); shuffles and ballot by rank
//   cg::this_grid()                  thread_rank(), size(), block_rank(), num_blocks(); its sync()
//                                    needs a cooperative launch, which the emulator does not run,
//                                    so calling it is a compile error that says so
//   cg::this_cluster()               (sm_90) block_rank(), num_blocks(), sync() of every thread of the
//                                    cluster, map_shared_rank() into another block's shared memory
//   cg::reduce(g, v, cg::plus<T>())  in <cooperative_groups/reduce.h>; scans in <.../scan.h>
//
// Every lane that calls one of these runs as a fiber (the compiler's scan lists sync, shfl*,
// ballot, any, all, reduce and coalesced_threads among the names that wait). The tiles' results
// are those of a GPU: reduce() combines values in the same order (a butterfly of shfl_xor from
// N/2 down to 1), so a float sum gives the same bits.
//
// A C++ header, like NVIDIA's: include it with no_extern_c=True.
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#include "gpuedu_prelude.h"

#ifndef GPUEDU_SCAN
namespace cooperative_groups {
namespace __gpuedu_cg {
static inline unsigned linear_thread() { return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x; }
static inline unsigned block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
static inline unsigned lane() { return linear_thread() % 32; }
static inline unsigned lanes_below() { return (1u << lane()) - 1u; }
// The lanes of the tile of `size` consecutive lanes that holds this one (size a power of two <= 32).
static inline unsigned tile_mask(unsigned size) {
  if (size >= 32) return 0xffffffffu;
  return ((1u << size) - 1u) << (lane() & ~(size - 1u));
}
// The lane of the rank-th set bit of mask (32 if there is none). One instruction on a GPU (__fns),
// so a profiled build counts none of this loop's branches (nor pack's).
GPUEDU_PROF_QUIET static inline unsigned lane_of_rank(unsigned mask, unsigned rank) {
  for (unsigned l = 0; l < 32; ++l)
    if ((mask >> l) & 1u) {
      if (rank == 0) return l;
      --rank;
    }
  return 32;
}
// The bits of `lanes` that lie in `mask`, packed down to rank order.
GPUEDU_PROF_QUIET static inline unsigned pack(unsigned lanes, unsigned mask) {
  unsigned out = 0, bit = 0;
  for (unsigned l = 0; l < 32; ++l)
    if ((mask >> l) & 1u) {
      if ((lanes >> l) & 1u) out |= 1u << bit;
      ++bit;
    }
  return out;
}
static inline bool valid_tile_size(unsigned n) { return n >= 1 && n <= 32 && (n & (n - 1)) == 0; }
template <typename T> static inline T shuffle(int op, unsigned mask, T var, int arg, int width) {
  return __gpuedu_shfl(op, mask, var, arg, width);
}
enum kind { BLOCK = 0, TILE = 1, COALESCED = 2, GRID = 3 };
template <typename T> struct always_false { static constexpr bool value = false; };
}  // namespace __gpuedu_cg

// The group type every group converts to: sync(), thread_rank(), size()/num_threads().
class thread_group {
 protected:
  int kind_;
  unsigned mask_;        // tiles and coalesced groups: their lanes in this warp
  unsigned size_;
  unsigned meta_rank_, meta_size_;
  thread_group(int kind, unsigned mask, unsigned size, unsigned meta_rank = 0, unsigned meta_size = 1)
      : kind_(kind), mask_(mask), size_(size), meta_rank_(meta_rank), meta_size_(meta_size) {}
  friend thread_group tiled_partition(const thread_group& parent, unsigned int tilesz);

 public:
  unsigned long long size() const { return num_threads(); }
  unsigned long long num_threads() const {
    return kind_ == __gpuedu_cg::BLOCK ? __gpuedu_cg::block_threads() : size_;
  }
  unsigned long long thread_rank() const {
    if (kind_ == __gpuedu_cg::BLOCK) return __gpuedu_cg::linear_thread();
    return (unsigned)__builtin_popcount(mask_ & __gpuedu_cg::lanes_below());
  }
  void sync(int line = __builtin_LINE()) const {
    if (kind_ == __gpuedu_cg::BLOCK) __gpuedu::block_barrier(0, 1, line);
    else __syncwarp(mask_);
  }
  bool is_valid() const { return true; }
  // the emulator's own: the group's lanes in this warp (tiles, coalesced groups)
  unsigned __lanes() const { return mask_; }
  unsigned __meta_rank() const { return meta_rank_; }
  unsigned __meta_size() const { return meta_size_; }
};

// The block: sync() is __syncthreads().
class thread_block : public thread_group {
  thread_block() : thread_group(__gpuedu_cg::BLOCK, 0, 0) {}
  friend thread_block this_thread_block();

 public:
  static void sync(int line = __builtin_LINE()) { __gpuedu::block_barrier(0, 1, line); }
  static unsigned int size() { return __gpuedu_cg::block_threads(); }
  static unsigned int num_threads() { return __gpuedu_cg::block_threads(); }
  static unsigned int thread_rank() { return __gpuedu_cg::linear_thread(); }
  static dim3 group_index() { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  static dim3 thread_index() { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
  static dim3 group_dim() { return blockDim; }
  static dim3 dim_threads() { return blockDim; }
};
inline thread_block this_thread_block() { return thread_block(); }

// The grid: ranks and sizes only. grid.sync() waits for every thread of every block, which needs
// a cooperative launch (cudaLaunchCooperativeKernel); the emulator runs blocks one after another
// and cannot run one, so a call to it does not compile.
class grid_group {
  grid_group() {}
  friend grid_group this_grid();

 public:
  static unsigned long long num_blocks() { return (unsigned long long)gridDim.x * gridDim.y * gridDim.z; }
  static unsigned long long block_rank() {
    return ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  }
  static unsigned long long num_threads() { return num_blocks() * __gpuedu_cg::block_threads(); }
  static unsigned long long size() { return num_threads(); }
  static unsigned long long thread_rank() { return block_rank() * __gpuedu_cg::block_threads() + __gpuedu_cg::linear_thread(); }
  static dim3 group_dim() { return gridDim; }
  static dim3 dim_blocks() { return gridDim; }
  static dim3 block_index() { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  // false, as on a GPU for a grid that was not launched cooperatively
  static bool is_valid() { return false; }
  template <typename T = void> void sync() const {
    static_assert(__gpuedu_cg::always_false<T>::value,
                  "grid.sync() (cooperative_groups grid synchronization) needs a cooperative launch "
                  "(cudaLaunchCooperativeKernel), which the gpuedu emulator does not run: it runs the blocks "
                  "one after another. Split the kernel in two launches at the grid barrier instead.");
  }
};
inline grid_group this_grid() { return grid_group(); }

// The cluster (Hopper, sm_90: a kernel declared with __cluster_dims__; a launch without one is a cluster of one
// block): its blocks' ranks, the other blocks' shared memory, and a barrier of all its threads (gpuedu_cluster.h).
class cluster_group {
  cluster_group() {}
  friend cluster_group this_cluster();

 public:
  struct arrival_token {};
  static unsigned num_blocks() { return __gpuedu::cluster_size(); }
  static unsigned block_rank() { return __gpuedu::cluster_rank(); }
  static dim3 dim_blocks() { uint3 d = __gpuedu::cluster_dims(); return dim3(d.x, d.y, d.z); }
  static dim3 block_index() { uint3 b = __gpuedu::cluster_block_index(); return dim3(b.x, b.y, b.z); }
  static unsigned num_threads() { return num_blocks() * __gpuedu_cg::block_threads(); }
  static unsigned size() { return num_threads(); }
  static dim3 dim_threads() {
    uint3 d = __gpuedu::cluster_dims();
    return dim3(d.x * blockDim.x, d.y * blockDim.y, d.z * blockDim.z);
  }
  static unsigned thread_rank() { return block_rank() * __gpuedu_cg::block_threads() + __gpuedu_cg::linear_thread(); }
  static bool is_valid() { return true; }
  // Every non-exited thread of every block of the cluster arrives, then waits (barrier.cluster.arrive, .wait).
  static void sync(int line = __builtin_LINE()) {
    __gpuedu_ptx_cluster(0, line);
    __gpuedu_ptx_cluster(1, line);
  }
  static arrival_token barrier_arrive(int line = __builtin_LINE()) {
    __gpuedu_ptx_cluster(0, line);
    return arrival_token{};
  }
  static void barrier_wait(int line = __builtin_LINE()) { __gpuedu_ptx_cluster(1, line); }
  static void barrier_wait(arrival_token&&, int line = __builtin_LINE()) { __gpuedu_ptx_cluster(1, line); }
  // The same variable in block `rank`'s shared memory (distributed shared memory): read and written as one's own.
  template <typename T> static T* map_shared_rank(T* address, unsigned int rank, int line = __builtin_LINE()) {
    return (T*)__gpuedu::map_shared_rank((const void*)address, rank, line, "cluster.map_shared_rank");
  }
  template <typename T> static T& map_shared_rank(T& variable, unsigned int rank, int line = __builtin_LINE()) {
    return *(T*)__gpuedu::map_shared_rank((const void*)&variable, rank, line, "cluster.map_shared_rank");
  }
  static unsigned query_shared_rank(const void* address, int line = __builtin_LINE()) {
    return __gpuedu::query_shared_rank(address, line);
  }
};
inline cluster_group this_cluster() { return cluster_group(); }

// A tile of Size consecutive threads of the block (never more than a warp).
template <unsigned int Size, typename ParentT = void>
class thread_block_tile : public thread_group {
  static_assert(Size >= 1 && Size <= 32 && (Size & (Size - 1)) == 0,
                "tiled_partition<N>: the tile size N must be a power of two from 1 to 32 (1, 2, 4, 8, 16 or 32); "
                "the emulator does not run tiles of more than one warp");
  template <unsigned int, typename> friend class thread_block_tile;
  template <unsigned int N, typename P> friend thread_block_tile<N, P> tiled_partition(const P& parent);

 protected:
  thread_block_tile(unsigned meta_rank, unsigned meta_size)
      : thread_group(__gpuedu_cg::TILE, __gpuedu_cg::tile_mask(Size), Size, meta_rank, meta_size) {}

 public:
  // a tile of a known parent converts to the tile of no particular parent (thread_block_tile<N>)
  template <typename P>
  thread_block_tile(const thread_block_tile<Size, P>& other) : thread_group(other) {}

  static constexpr unsigned int num_threads() { return Size; }
  static constexpr unsigned int size() { return Size; }
  static unsigned int thread_rank() { return __gpuedu_cg::lane() & (Size - 1u); }
  unsigned int meta_group_rank() const { return meta_rank_; }
  unsigned int meta_group_size() const { return meta_size_; }
  void sync() const { __syncwarp(mask_); }

  template <typename T> T shfl(T var, int src_rank) const {
    return __gpuedu_cg::shuffle(__gpuedu::W_SHFL, mask_, var, src_rank, (int)Size);
  }
  template <typename T> T shfl_down(T var, unsigned int delta) const {
    return __gpuedu_cg::shuffle(__gpuedu::W_SHFL_DOWN, mask_, var, (int)delta, (int)Size);
  }
  template <typename T> T shfl_up(T var, unsigned int delta) const {
    return __gpuedu_cg::shuffle(__gpuedu::W_SHFL_UP, mask_, var, (int)delta, (int)Size);
  }
  template <typename T> T shfl_xor(T var, unsigned int lane_mask) const {
    return __gpuedu_cg::shuffle(__gpuedu::W_SHFL_XOR, mask_, var, (int)lane_mask, (int)Size);
  }
  int any(int predicate) const { return __ballot_sync(mask_, predicate) != 0; }
  int all(int predicate) const { return __ballot_sync(mask_, predicate) == (mask_ & __activemask()); }
  // bit i: the predicate of the tile's thread of rank i
  unsigned int ballot(int predicate) const {
    return __ballot_sync(mask_, predicate) >> (__gpuedu_cg::lane() & ~(Size - 1u));
  }
  template <typename T> unsigned int match_any(T value) const {
    return __match_any_sync(mask_, value) >> (__gpuedu_cg::lane() & ~(Size - 1u));
  }
  template <typename T> unsigned int match_all(T value, int& pred) const {
    return __match_all_sync(mask_, value, &pred) >> (__gpuedu_cg::lane() & ~(Size - 1u));
  }
};

template <unsigned int N, typename P> inline thread_block_tile<N, P> tiled_partition(const P& parent) {
  // parents: the block, or a larger tile (whose threads it splits further)
  unsigned rank = (unsigned)parent.thread_rank(), size = (unsigned)parent.num_threads();
  return thread_block_tile<N, P>(rank / N, (size + N - 1) / N);
}

// Groups of lanes that run together: the lanes of a warp that reach coalesced_threads() at once.
class coalesced_group : public thread_group {
  explicit coalesced_group(unsigned mask, unsigned meta_rank = 0, unsigned meta_size = 1)
      : thread_group(__gpuedu_cg::COALESCED, mask, (unsigned)__builtin_popcount(mask), meta_rank, meta_size) {}
  friend coalesced_group coalesced_threads();
  friend coalesced_group tiled_partition(const coalesced_group& parent, unsigned int tilesz);

 public:
  unsigned int num_threads() const { return size_; }
  unsigned int size() const { return size_; }
  unsigned int thread_rank() const { return (unsigned)__builtin_popcount(mask_ & __gpuedu_cg::lanes_below()); }
  unsigned int meta_group_rank() const { return meta_rank_; }
  unsigned int meta_group_size() const { return meta_size_; }
  void sync() const { __syncwarp(mask_); }

  template <typename T> T shfl(T var, int src_rank) const {
    unsigned src = __gpuedu_cg::lane_of_rank(mask_, (unsigned)src_rank % size_);
    return __gpuedu_cg::shuffle(__gpuedu::W_SHFL, mask_, var, (int)src, 32);
  }
  template <typename T> T shfl_down(T var, unsigned int delta) const {
    unsigned src = __gpuedu_cg::lane_of_rank(mask_, thread_rank() + delta);
    if (src >= 32) src = __gpuedu_cg::lane();  // past the last rank: a lane's own value
    return __gpuedu_cg::shuffle(__gpuedu::W_SHFL, mask_, var, (int)src, 32);
  }
  template <typename T> T shfl_up(T var, unsigned int delta) const {
    unsigned rank = thread_rank();
    unsigned src = rank >= delta ? __gpuedu_cg::lane_of_rank(mask_, rank - delta) : __gpuedu_cg::lane();
    return __gpuedu_cg::shuffle(__gpuedu::W_SHFL, mask_, var, (int)src, 32);
  }
  int any(int predicate) const { return __ballot_sync(mask_, predicate) != 0; }
  int all(int predicate) const { return __ballot_sync(mask_, predicate) == mask_; }
  // bit i: the predicate of the group's thread of rank i
  unsigned int ballot(int predicate) const { return __gpuedu_cg::pack(__ballot_sync(mask_, predicate), mask_); }
  template <typename T> unsigned int match_any(T value) const {
    return __gpuedu_cg::pack(__match_any_sync(mask_, value), mask_);
  }
  template <typename T> unsigned int match_all(T value, int& pred) const {
    return __gpuedu_cg::pack(__match_all_sync(mask_, value, &pred), mask_);
  }
};

// Where the caller is: lanes at the same call site, at the same time, form one group.
__attribute__((noinline)) inline coalesced_group coalesced_threads() {
  return coalesced_group(__gpuedu::coalesce(__builtin_return_address(0)));
}

// tiled_partition(group, n) at run time: n must be a power of two from 1 to 32.
inline thread_group tiled_partition(const thread_group& parent, unsigned int tilesz) {
  if (!__gpuedu_cg::valid_tile_size(tilesz))
    __gpuedu::fail(__gpuedu::ASSERT,
                   "cooperative_groups::tiled_partition(group, %u): the tile size must be a power of two from 1 to "
                   "32 (1, 2, 4, 8, 16 or 32)", tilesz);
  if (parent.kind_ == __gpuedu_cg::COALESCED) {
    // tiles of consecutive ranks of the coalesced group
    unsigned rank = (unsigned)parent.thread_rank(), first = rank / tilesz * tilesz, mask = 0;
    for (unsigned r = first; r < first + tilesz && r < parent.size_; ++r)
      mask |= 1u << __gpuedu_cg::lane_of_rank(parent.mask_, r);
    return thread_group(__gpuedu_cg::COALESCED, mask, (unsigned)__builtin_popcount(mask), rank / tilesz,
                        (parent.size_ + tilesz - 1) / tilesz);
  }
  if (parent.kind_ == __gpuedu_cg::GRID)
    __gpuedu::fail(__gpuedu::ASSERT, "cooperative_groups::tiled_partition: the grid cannot be partitioned");
  unsigned rank = (unsigned)parent.thread_rank(), size = (unsigned)parent.num_threads();
  return thread_group(__gpuedu_cg::TILE, __gpuedu_cg::tile_mask(tilesz), tilesz, rank / tilesz,
                      (size + tilesz - 1) / tilesz);
}
inline thread_group tiled_partition(const thread_block& parent, unsigned int tilesz) {
  return tiled_partition(static_cast<const thread_group&>(parent), tilesz);
}
inline coalesced_group tiled_partition(const coalesced_group& parent, unsigned int tilesz) {
  thread_group g = tiled_partition(static_cast<const thread_group&>(parent), tilesz);
  return coalesced_group(g.__lanes(), g.__meta_rank(), g.__meta_size());
}

template <typename Group> inline void sync(const Group& g) { g.sync(); }
inline void sync(const thread_block&, int line = __builtin_LINE()) { __gpuedu::block_barrier(0, 1, line); }
inline void sync(const thread_group& g, int line = __builtin_LINE()) { g.sync(line); }
template <typename Group> inline unsigned long long group_size(const Group& g) { return g.num_threads(); }
template <typename Group> inline unsigned long long thread_rank(const Group& g) { return g.thread_rank(); }

// The function objects of reduce() and the scans.
template <typename T> struct plus { T operator()(T a, T b) const { return a + b; } };
template <typename T> struct less { T operator()(T a, T b) const { return b < a ? b : a; } };
template <typename T> struct greater { T operator()(T a, T b) const { return a < b ? b : a; } };
template <typename T> struct bit_and { T operator()(T a, T b) const { return a & b; } };
template <typename T> struct bit_or { T operator()(T a, T b) const { return a | b; } };
template <typename T> struct bit_xor { T operator()(T a, T b) const { return a ^ b; } };

}  // namespace cooperative_groups
#endif  // GPUEDU_SCAN
