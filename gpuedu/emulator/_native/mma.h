// mma.h for the CPU emulator: the WMMA API (nvcuda::wmma) on 16x16x16 tiles
// (also 32x8x16 and 8x32x16). Each thread holds the whole tile: frag.x[i] is
// the whole tile, row-major, and frag.num_elements its size, so elementwise
// loops over x[] (scaling an accumulator) give the same result as on a GPU.
// Loads and stores are done by every lane (cheap: one tile each); the product
// in mma_sync, 16 times the work of a load, is computed once per warp: the
// lanes meet there (they are fibers, like at __shfl_sync) and the last lane
// to arrive computes it from its own fragments, which are every lane's, and
// writes the result into each lane's accumulator. A kernel that calls
// mma_sync therefore runs as fibers (the compiler's scan lists mma_sync among
// the warp intrinsics); run as a plain loop, each lane computes it alone.
// A profiled build counts each warp's mma_sync once (gpuedu_profile.cpp's
// MMA_SYNC), which the GPU time model charges to the warp's chain of waits.
//
// A C++ header, like NVIDIA's: include it with no_extern_c=True.
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#include "gpuedu_prelude.h"
#include "cuda_fp16.h"
#include "cuda_bf16.h"  // as NVIDIA's mma.h: fragments of __nv_bfloat16 (sm_80 and later)

#ifndef GPUEDU_SCAN
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
namespace precision { struct tf32 {}; }

template <typename Use, int M, int N, int K> struct __shape;
template <int M, int N, int K> struct __shape<matrix_a, M, N, K> { static constexpr int rows = M, cols = K; };
template <int M, int N, int K> struct __shape<matrix_b, M, N, K> { static constexpr int rows = K, cols = N; };
template <int M, int N, int K> struct __shape<accumulator, M, N, K> { static constexpr int rows = M, cols = N; };

template <typename T> struct __storage { using type = T; };
template <> struct __storage<precision::tf32> { using type = float; };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert((M == 16 && N == 16 && K == 16) || (M == 32 && N == 8 && K == 16) || (M == 8 && N == 32 && K == 16),
                "WMMA shapes: 16x16x16, 32x8x16 or 8x32x16");
  using element_type = typename __storage<T>::type;
  static constexpr int rows = __shape<Use, M, N, K>::rows;
  static constexpr int cols = __shape<Use, M, N, K>::cols;
  enum { num_elements = rows * cols };
  element_type x[num_elements];
};

template <typename Use, int M, int N, int K, typename T, typename L, typename V>
inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, const V& value) {
  typename fragment<Use, M, N, K, T, L>::element_type v = value;
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = v;
}

template <typename F, typename P> GPUEDU_PROF_QUIET inline void __load_tile(F& f, const P* p, unsigned ldm, bool col) {
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c) f.x[r * F::cols + c] = col ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c];
}

#ifdef GPUEDU_PROFILE
// What a lane moves of a tile on a GPU, for the counters: the warp moves the tile together, each lane its 32nd,
// in the layout of the tensor cores' fragments (PTX's mma.m16n8k16 fragments, which WMMA's are made of): in
// each 8 x 8 block of the tile, lane l holds the two neighbours at row l / 4, columns 2 (l % 4) and the next, a
// 4-byte access for halves, 8 for floats, taken along the way the tile lies in memory (rows, or columns when
// col). The emulator's lanes each hold the whole tile, moved uncounted (__load_tile, __store_tile); these
// accesses, each lane its share, are what the counters see.
inline unsigned __share_lane() {
  return ((threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x) % 32;
}
template <typename F> constexpr int __share_pairs() { return F::num_elements / 64; }   // 8 x 8 blocks
// The first of the pair lane `lane` holds in block k (its element index along and across the memory's rows).
template <typename F> inline void __share_pair(bool col, unsigned lane, int k, int* major, int* minor) {
  int across = (col ? F::rows : F::cols) / 8;   // blocks along a memory row
  *major = k / across * 8 + (int)lane / 4;
  *minor = k % across * 8 + 2 * ((int)lane % 4);
}
template <int Bytes> struct __share_word;
template <> struct __share_word<4> { using type = unsigned; };
template <> struct __share_word<8> { using type = uint2; };
template <typename F, typename P> inline void __count_share_load(const P* p, unsigned ldm, bool col) {
  using W = typename __share_word<2 * sizeof(P)>::type;
  unsigned lane = __share_lane();
  for (int k = 0; k < __share_pairs<F>(); ++k) {
    int major, minor;
    __share_pair<F>(col, lane, k, &major, &minor);
    W v = *(const W*)(p + (size_t)major * ldm + minor);
    __asm__ volatile("" : : "m"(v));   // (the access is kept: what it read goes to an empty asm statement)
  }
}
#endif

template <typename F, typename P> inline void __load(F& f, const P* p, unsigned ldm, bool col) {
  __load_tile(f, p, ldm, col);
#ifdef GPUEDU_PROFILE
  __count_share_load<F>(p, ldm, col);
#endif
}

template <typename Use, int M, int N, int K, typename T, typename P>
inline void load_matrix_sync(fragment<Use, M, N, K, T, row_major>& f, const P* p, unsigned ldm) {
  __load(f, p, ldm, false);
}
template <typename Use, int M, int N, int K, typename T, typename P>
inline void load_matrix_sync(fragment<Use, M, N, K, T, col_major>& f, const P* p, unsigned ldm) {
  __load(f, p, ldm, true);
}
template <int M, int N, int K, typename T, typename P>
inline void load_matrix_sync(fragment<accumulator, M, N, K, T, void>& f, const P* p, unsigned ldm, layout_t layout) {
  __load(f, p, ldm, layout == mem_col_major);
}

template <typename F, typename P> GPUEDU_PROF_QUIET inline void __store_tile(P* p, const F& f, unsigned ldm, bool col) {
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c) {
      P v = f.x[r * F::cols + c];
      if (col) p[(size_t)c * ldm + r] = v;
      else p[(size_t)r * ldm + c] = v;
    }
}

template <int M, int N, int K, typename T, typename P>
inline void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T, void>& f, unsigned ldm, layout_t layout) {
  using F = fragment<accumulator, M, N, K, T, void>;
  bool col = layout == mem_col_major;
  __store_tile(p, f, ldm, col);
#ifdef GPUEDU_PROFILE
  // The lane's share again, the same values, as the counters see a GPU's lane store them (__count_share_load).
  using W = typename __share_word<2 * sizeof(P)>::type;
  unsigned lane = __share_lane();
  for (int k = 0; k < __share_pairs<F>(); ++k) {
    int major, minor;
    __share_pair<F>(col, lane, k, &major, &minor);
    alignas(8) P pair[2];
    for (int j = 0; j < 2; ++j) {
      int r = col ? minor + j : major, c = col ? major : minor + j;
      pair[j] = f.x[r * F::cols + c];
    }
    *(W*)(p + (size_t)major * ldm + minor) = *(const W*)pair;
  }
#endif
}

// d = a * b + c, products and sums in float (as tensor cores accumulate); each
// d[i][j] is c[i][j] + a[i][0] b[0][j] + a[i][1] b[1][j] + ... in that order.
template <int M, int N, int K, typename TA, typename LA, typename TB, typename LB, typename TC, typename E>
inline void __mma_tile(E* d,
                       const fragment<matrix_a, M, N, K, TA, LA>& a, const fragment<matrix_b, M, N, K, TB, LB>& b,
                       const fragment<accumulator, M, N, K, TC, void>& c) {
  float af[M * K], bf[K * N], acc[M * N];
  for (int i = 0; i < M * K; ++i) af[i] = (float)a.x[i];
  for (int i = 0; i < K * N; ++i) bf[i] = (float)b.x[i];
  for (int i = 0; i < M * N; ++i) acc[i] = (float)c.x[i];
  // j innermost: the sums of a row advance together (vectorisable), each still in k order.
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k) {
      float aik = af[i * K + k];
      for (int j = 0; j < N; ++j) acc[i * N + j] += aik * bf[k * N + j];
    }
  for (int i = 0; i < M * N; ++i) d[i] = acc[i];
}

template <int M, int N, int K, typename TA, typename LA, typename TB, typename LB, typename TC, typename TD>
inline void mma_sync(fragment<accumulator, M, N, K, TD, void>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                     const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC, void>& c,
                     bool = false) {
  using D = fragment<accumulator, M, N, K, TD, void>;
  if (!__gpuedu::rt().fiber_mode) {  // a plain loop runs one lane at a time: nobody to share the work with
    __mma_tile(d.x, a, b, c);
#ifdef GPUEDU_PROFILE
    // The profiler counts one mma_sync per warp: the warp's first lane's.
    if (((threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x) % 32 == 0) GPUEDU_PROF(mma_synced());
#endif
    return;
  }
  unsigned t = __gpuedu::rt().cur, lane = t % 32;
  const __gpuedu::Warp& W = __gpuedu::rt().warps[t / 32];
  // Where the lanes of each warp leave their accumulators' addresses (this worker's).
  void* (&meeting)[__gpuedu::MAX_THREADS / 32][32] = __gpuedu::rt().mma_meeting;
  meeting[t / 32][lane] = d.x;
  // The last lane to arrive (every other lane of the warp waits here, at this intrinsic)
  // computes the product once, from its own fragments, which are every lane's, and
  // hands it to each lane before releasing them (d may be c: into a copy first).
  unsigned others = W.existing & ~(1u << lane);
  bool all_here = (W.arrived & others) == others;
  for (unsigned l = 0; all_here && l < 32; ++l)
    if (((others >> l) & 1u) && W.op[l] != __gpuedu::W_MMA) all_here = false;  // the collective reports it
  if (all_here) {
    typename D::element_type out[D::num_elements];
    __mma_tile(out, a, b, c);
    for (unsigned l = 0; l < 32; ++l)
      if ((W.existing >> l) & 1u) memcpy(meeting[t / 32][l], out, sizeof out);
    GPUEDU_PROF(mma_synced());   // the profiler's count: one mma_sync of the warp
  }
  // Wait for every lane of the warp (a lane that exited or waits elsewhere is reported).
  __gpuedu::warp_collective(__gpuedu::W_MMA, 0xffffffffu, 0, 0, 32);
}
}  // namespace wmma
}  // namespace nvcuda
#endif  // GPUEDU_SCAN
