// The profiler's counters: compiled on its own, without instrumentation, and
// linked into each profiled kernel module (compiler.build(..., profile=True)).
//
// The compiler's instrumentation calls in here for every load and store
// (-fsanitize=thread: __tsan_read4(address), __tsan_write16(...), ...) and
// every basic block (-fsanitize-coverage=trace-pc: __sanitizer_cov_trace_pc()),
// and the runtime says which thread runs (gpuedu_profile.h). The return address
// of each call names the instruction. From those the counters rebuild what a GPU
// executes, warp by warp (SIMT): the k-th time lane a executes instruction i and
// the k-th time lane b executes it are one warp-level instruction, with both
// lanes active. That gives Nsight Compute's counts exactly as their definitions
// say: requests (warp-level memory instructions), 32-byte sectors, shared-memory
// wavefronts and bank conflicts, divergent branches; and, with racecheck on, the
// hazards compute-sanitizer's racecheck reports (two threads touch one address
// between barriers, at least one writes, not both atomically).
//
// A launch's blocks run on several worker threads at once, as a plain launch's do. Each worker counts its
// own blocks (a Lane); what a block counts depends on that block alone, and the launch's counts are the
// workers' sums. The L2 model, the DRAM maps and memcheck's errors depend on order: each block hands its
// lines and errors on (a BlockOut), and they are taken block by block in the grid's order (hand_on), so
// every count is the same with any number of workers, and what one worker running the blocks in the grid's
// order gives. Racecheck's launches run on one worker (its hazards lie between blocks too).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "gpuedu_profile.h"

namespace {

// LOCAL: a thread's own array that nvcc keeps in local memory (DRAM-backed, through L1 and L2), registered by the
// profiled build's rewrite (__gpuedu_prof_local).
enum Space : uint8_t { GLOBAL = 0, SHARED = 1, LOCAL = 2 };
// RED: an atomic whose result the kernel never reads (nvcc makes it a RED instruction, ATOM otherwise).
// LDSM: a lane's row of an ldmatrix; CP_LD and CP_ST: a cp.async's global read and its shared write (LDGSTS).
// Racecheck and memcheck see each as the plain read or write it is (plain_op).
enum Op : uint8_t { LD = 0, ST = 1, ATOM = 2, RED = 3, LDSM = 4, CP_LD = 5, CP_ST = 6 };
enum SiteKind : uint8_t { MEMORY = 0, BLOCK = 1 };

// Counter slots, mirrored in gpuedu/emulator/_instrument.py (COUNTERS).
enum Counter {
  G_REQ = 0,      // + op: global requests (ld, st, atom)
  G_SECT = 3,     // + op: global sectors
  G_BYTES = 6,    // + op: bytes the active lanes asked for
  S_REQ = 9,      // + op: shared requests
  S_WAVE = 12,    // + op: shared wavefronts
  S_IDEAL = 15,   // + op: wavefronts the access width needs at least
  DIVERGENT = 18, BLOCK_INSTANCES = 19, DRAM_READ_SECTORS = 20, DRAM_WRITE_SECTORS = 21,
  THREADS = 22, WARPS = 23, G_ATOM_LANES = 24, S_ATOM_LANES = 25,
  G_RED_REQ = 26, G_RED_SECT = 27, G_RED_BYTES = 28, G_RED_LANES = 29,
  G_LD_LANES = 30, G_ST_LANES = 31, S_LD_LANES = 32, S_ST_LANES = 33,
  HOST_DIVERGENT = 34,    // every split of a warp at a branch of the host compiler's code
  L2_LINES = 35,          // distinct 128-byte lines the launch's global accesses touched
  DRAM_READ_PAIRS = 36,   // 64-byte pairs an L2 that evicted nothing would read from DRAM
  BARRIERS = 37,          // __syncthreads released, summed over the blocks (one per block per barrier)
  GLOBAL_LINES = 38,      // distinct 128-byte lines each global request touched, summed over the requests
  MMA_SYNC = 39,          // WMMA mma_sync operations, one per warp per call (mma.h)
  L_REQ = 40,             // + op (ld, st): local requests
  L_SECT = 42,            // + op: local sectors, in a GPU's layout of local memory (count_request)
  L_LANES = 44,           // + op: lanes of local loads and stores
  SHUFFLES = 46,          // warp shuffles (__shfl*_sync, cooperative groups' shfl*): one per warp per call, as SHFL
  HMMA_16816 = 47,        // inline PTX mma.sync.m16n8k16, one per warp per call (HMMA.16816 on sm_80 and later)
  HMMA_1688 = 48,         // ... and m16n8k8 (HMMA.1688)
  LDSM_REQ = 49,          // ldmatrix: warp-level instructions (LDSM), their shared wavefronts, and the wavefronts
  LDSM_WAVE = 50,         // one matrix a wavefront would take (bank conflicts: the difference)
  LDSM_IDEAL = 51,
  CP_REQ = 52,            // cp.async (LDGSTS): warp-level instructions (its shared writes' requests), their
  CP_WAVE = 53,           // wavefronts, the wavefronts their width needs at least,
  CP_IDEAL = 54,
  CP_LANES = 55,          // the lanes that executed them,
  CP_G_REQ = 56,          // and the global requests and sectors of their reads (lanes whose copy reads something)
  CP_G_SECT = 57,
  GMMA = 58,              // wgmma.mma_async, one per warpgroup per call (gpuedu_wgmma.h)
  TMA_LD = 59,            // cp.async.bulk.tensor loads (gpuedu_tma.h), one per issuing thread, and their boxes'
  TMA_LD_BYTES = 60,      // bytes (zero-filled ones included, as complete_tx counts them);
  TMA_ST = 61,            // ... stores, and the bytes their boxes hold
  TMA_ST_BYTES = 62,
  MBAR_WAITS = 63,        // mbarrier try_wait/test_wait statements a thread reached (gpuedu_mbarrier.h)
  TMA_SECTORS = 64,       // the 32-byte global sectors the tensor copies' boxes touch inside the tensor
  GMMA_FLOPS = 65,        // wgmma.mma_async's floating-point operations: 2 x 64 x N x 16 a call
  N_COUNTERS = 66
};

// The L2 model's capacities (bytes, one per GPU the profiler knows) and what each lets through to DRAM;
// the last slot of a line's state is an L2 that never evicts (DRAM_READ_PAIRS).
const int MAX_CAPACITIES = 8;
const int UNBOUNDED = MAX_CAPACITIES - 1;
const size_t LINE_HINTS = 1024;

struct Range { uint64_t lo, hi; };
struct LocalRange { uint64_t lo, hi, offset; };

struct Request {       // a warp-level memory instruction; its lanes' addresses are in WarpState::addresses
  uint32_t site;
  uint8_t space, op, size;
  uint32_t mask;       // the lanes that executed it (those that followed the common sequence: once done)
};

// What the hooks' fast path needs of a request (one 32-byte entry): the allocation (global) or shared variable
// its first lane's address lay in, [lo, lo + span), and how a following lane's address a there is kept:
// a + delta (allocation << 40 | offset for global memory, the host address itself for shared).
struct Step {
  uintptr_t address;   // the instruction's
  uint64_t lo, delta;
  uint32_t span;       // (a larger variable's lanes past 4 GiB go the full way)
  uint32_t shared;
};

struct Instance {       // one warp-level execution of a basic block
  int32_t site;         // the block (-3: the threads' start)
  int32_t target;       // the block the lanes went on to (-2 none yet, -1 the thread ended)
  int32_t target_slot;  // ... and its instance (-1 the thread ended)
  uint32_t mask;        // the lanes that executed it
  uint32_t requests;    // warp-level memory instructions it issued
  uint8_t divergent;
  uint8_t global_atomic;  // it issued a global atomic (ATOM or RED): nvcc branches around such a body
};

struct Split {          // lanes of a divergent instance that went on to another block than its target
  int32_t instance, site, slot;
  uint32_t mask;
};

// Matches a lane's k-th execution of an instruction with the warp-level instance that the
// other lanes' k-th executions belong to. Lanes usually execute the same sequence, so each
// lane is checked against the instance at its own position in the common sequence (cursor):
// while no lane has left that sequence, a lane's executions so far are a prefix of it, and
// the instruction alone identifies the instance. A lane that leaves it (a data-dependent
// branch) starts counting its executions per instruction, and a hash table of
// (instruction, k) finds or makes the instance.
// A lane that follows the common sequence only moves its cursor (the hooks' fast path compares the
// instruction's address with the one at the cursor): which lanes executed an instance is settled when
// the warp is done (in_step_lanes), from how far each lane followed the sequence, plus the lanes that
// met it while counting.
const uint32_t LOOK_AHEAD = 4;   // (Matcher::match_counting)

struct Matcher {
  std::vector<uint64_t> keys;            // (site << 32 | k) of each instance, in creation order
  std::vector<uintptr_t> address;        // the instruction's address of each instance, in creation order
  uint32_t stepping = ~0u;               // lanes that may take the fast path (not counting, not mapped)
  uint32_t prefix[32] = {};              // [lane]: instances it followed in step before it began counting
  std::vector<uint32_t> common;          // [site]: executions in the common sequence so far
  uint32_t cursor[32] = {};
  uint32_t counting = 0;                 // lanes that count their own executions
  std::vector<uint32_t> occurrences[32];  // [lane][site], for counting lanes
  bool mapped = false;
  bool in_step = false;                  // the last match was a lane following the common sequence
  std::vector<int32_t> table;            // open addressing: instance + 1

  static size_t hash(uint64_t key) { return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17); }

  void insert(uint64_t key, int32_t index) {
    size_t mask = table.size() - 1;
    size_t i = hash(key) & mask;
    while (table[i]) i = (i + 1) & mask;
    table[i] = index + 1;
  }

  void rebuild() {
    size_t size = 1024;
    while (size < keys.size() * 2 + 2) size *= 2;
    table.assign(size, 0);
    for (size_t i = 0; i < keys.size(); ++i) insert(keys[i], (int32_t)i);
    mapped = true;
    stepping = 0;
  }

  // The instance of this execution, and whether it is new.
  inline __attribute__((always_inline)) int32_t match(unsigned lane, uint32_t site, uintptr_t ra, bool* created) {
    uint32_t j = cursor[lane];
    if (!(counting >> lane & 1u) && !mapped) {
      if (j < keys.size()) {
        if ((uint32_t)(keys[j] >> 32) == site) {
          cursor[lane] = j + 1;
          *created = false;
          in_step = true;
          return (int32_t)j;
        }
      } else {
        if (site >= common.size()) common.resize(site + 64, 0);
        keys.push_back((uint64_t)site << 32 | common[site]++);
        address.push_back(ra);
        cursor[lane] = j + 1;
        *created = true;
        return (int32_t)j;
      }
    }
    in_step = false;
    return match_counting(lane, site, ra, created);
  }

  int32_t match_counting(unsigned lane, uint32_t site, uintptr_t ra, bool* created) {
    std::vector<uint32_t>& occ = occurrences[lane];
    uint32_t j = cursor[lane];
    if (!(counting >> lane & 1u)) {  // this lane's executions so far are keys[0, j): count them
      counting |= 1u << lane;
      stepping &= ~(1u << lane);
      prefix[lane] = j;
      occ.assign(occ.size(), 0);
      for (uint32_t i = 0; i < j; ++i) {
        uint32_t s = (uint32_t)(keys[i] >> 32);
        if (s >= occ.size()) occ.resize(s + 64, 0);
        occ[s]++;
      }
    }
    if (site >= occ.size()) occ.resize(site + 64, 0);
    uint64_t key = (uint64_t)site << 32 | occ[site]++;
    // Mostly the instance is one of the next few the lanes before laid down after the lane's last (a lane that
    // skipped a branch's body goes on to the instance after it): those are looked at before the table.
    for (uint32_t k = j; k < j + LOOK_AHEAD && k < keys.size(); ++k)
      if (keys[k] == key) {
        cursor[lane] = k + 1;
        *created = false;
        return (int32_t)k;
      }
    if (!mapped) rebuild();
    size_t mask = table.size() - 1;
    for (size_t i = hash(key) & mask; table[i]; i = (i + 1) & mask)
      if (keys[table[i] - 1] == key) {
        cursor[lane] = (uint32_t)table[i];
        *created = false;
        return table[i] - 1;
      }
    int32_t index = (int32_t)keys.size();
    keys.push_back(key);
    address.push_back(ra);
    if (keys.size() * 2 > table.size()) rebuild(); else insert(key, index);
    cursor[lane] = (uint32_t)index + 1;
    *created = true;
    return index;
  }

  // Calls mark(index, lanes) for each instance, from the first, with the lanes that executed it while
  // following the common sequence.
  template <class Mark> void in_step_lanes(Mark mark) const {
    uint32_t reach[32], order[32];
    unsigned n = 0;
    uint32_t lanes = 0, longest = 0, shortest = ~0u;
    for (unsigned l = 0; l < 32; ++l) {
      reach[l] = (counting >> l & 1u) ? prefix[l] : cursor[l];
      if (reach[l]) {
        order[n++] = l;
        lanes |= 1u << l;
        longest = std::max(longest, reach[l]);
        shortest = std::min(shortest, reach[l]);
      }
    }
    if (shortest == longest) {   // (the lanes that ran all followed the whole sequence)
      for (uint32_t i = 0; i < longest; ++i) mark(i, lanes);
      return;
    }
    std::sort(order, order + n, [&](uint32_t a, uint32_t b) { return reach[a] < reach[b]; });
    unsigned k = 0;
    for (uint32_t i = 0; i < longest; ++i) {
      while (k < n && reach[order[k]] <= i) lanes &= ~(1u << order[k++]);
      mark(i, lanes);
    }
  }

  void reset() {
    for (uint64_t key : keys)   // (the sites the common sequence counted)
      if ((key >> 32) < common.size()) common[key >> 32] = 0;
    keys.clear();
    address.clear();
    stepping = ~0u;
    for (unsigned l = 0; l < 32; ++l) cursor[l] = 0;
    counting = 0;
    mapped = false;
  }
};

struct WarpState {
  bool live = false;
  unsigned existing = 0, done = 0;
  std::vector<Request> requests;
  std::vector<Step> steps;               // [request]: for the hooks' fast path
  // [request * 32 + lane]: each request's lanes' addresses side by side, as count_request reads them
  // (global: allocation << 40 | offset; shared: the host address)
  std::vector<uint64_t> addresses;
  std::vector<Instance> instances;
  std::vector<Split> splits;
  Matcher memory, blocks;   // blocks.cursor[lane]: the lane's last block instance (0: the threads' start)
  // [lane]: the local arrays the lane declared (__gpuedu_prof_local), each at its offset in the lane's local
  // frame, laid out in the order the lane first declared them; and where the next one goes
  std::vector<LocalRange> local[32];
  uint32_t local_frame[32] = {};
};

// The running lane's view of its warp, for the hooks' fast paths: where its cursors are, and how far along
// its warp's common sequences it may step without the full way (0: not at all). refresh_memory() and
// refresh_blocks() set it whenever the lane starts or resumes, and after anything that may move the vectors
// it points into (the full ways).
struct Running {
  bool on = false;                        // the running thread runs the kernel's code (the hooks count)
  uint64_t shared_lo = 0, shared_span = 0;  // the span that holds every shared range of the worker (Lane::shared)
  uint32_t* memory_cursor = nullptr;      // &memory.cursor[lane]
  const Step* steps = nullptr;
  uint64_t* addresses = nullptr;          // &addresses[lane]: request j's entry is addresses[j * 32]
  uint32_t memory_steps = 0;              // requests [0, this) have a Step and room for the lane's address
  uint32_t* block_cursor = nullptr;       // &blocks.cursor[lane]
  const uintptr_t* block_address = nullptr;
  uint32_t block_steps = 0;               // block instances [0, this) are the common sequence's
};

// Racecheck: the last write and two last reads of every 4-byte word, and the cp.async in flight to it.
struct Access {
  uint32_t thread;      // launch-wide thread number + 1 (0: none)
  uint32_t epoch;       // barrier interval of the access
  uint16_t warp_gen;    // warp intrinsics its warp had passed
  uint16_t site;
  uint8_t mask;         // bytes of the word
  uint8_t atomic;
};
// pending: a cp.async that will write the word's bytes `mask` when a wait of its thread lands it (async_landed).
struct Shadow { Access w, r1, r2, pending; };

// A hazard's kind (_instrument.py's HAZARD_KINDS): the three of two threads with no barrier between them, and an
// access to bytes a cp.async has not landed yet (no wait of its thread covers it: the first access is the cp.async).
enum HazardKind : int32_t {
  READ_AFTER_WRITE = 0, WRITE_AFTER_READ = 1, WRITE_AFTER_WRITE = 2, READ_BEFORE_WAIT = 3, WRITE_BEFORE_WAIT = 4
};

struct HazardOut {      // layout mirrored in _instrument.py
  int32_t kind;         // HazardKind
  int32_t space;
  uint32_t site_first, site_second;
  uint32_t thread_first, thread_second;   // launch-wide thread numbers
  uint64_t count;
  uint64_t where;       // global: allocation << 40 | offset; shared: range << 40 | offset
};

struct SiteEntry { uintptr_t address; uint32_t id; };

struct MemError {        // layout mirrored in _instrument.py
  int32_t kind;          // 0 out of bounds, 1 misaligned
  int32_t space;
  int32_t op;
  uint32_t size;
  uint32_t site;
  uint32_t thread;       // launch-wide thread number
  uint64_t count;
  int64_t offset;        // from the start of the nearest allocation or shared variable (negative: before it)
  uint64_t region;       // its index (global: allocation; shared: 0 dynamic, else static), and its size
  uint64_t region_bytes;
};

struct Lines {                            // (a vector whose append the hooks' callers inline)
  uint64_t* data = nullptr;
  size_t size = 0, capacity = 0;
  __attribute__((noinline)) void grow(size_t at_least) {
    size_t c = std::max<size_t>(at_least, 2 * capacity + 1024);
    uint64_t* d = new uint64_t[c];
    if (size) std::memcpy(d, data, size * sizeof *d);
    delete[] data;
    data = d;
    capacity = c;
  }
  // Room for n more.
  inline uint64_t* room(size_t n) {
    if (size + n > capacity) grow(size + n);
    return data + size;
  }
};

// What one block hands on to the launch's counters that must be taken in the grid's order, whichever worker ran
// it: its global requests' lines for the L2 model and the DRAM maps (line << 6 | op << 4 | sectors), and
// memcheck's errors.
struct BlockOut {
  uint64_t sequence = 0;                  // the block's place in the launch: its grid's base + its index in it
  Lines lines;
  std::vector<MemError> errors;
};

// One worker's state (one per worker of the launch, kept from launch to launch): the lane it runs, the warps of
// its block, and what its blocks counted. A launch's blocks run on several workers at once; what a block counts
// depends on that block alone, so each worker adds its blocks' counts to its own counters, summed when the launch
// ends (a sum, the same in any order), and hands on the rest in a BlockOut. The hooks find it from the worker's
// state (WorkerHead::prof in gpuedu_device.h).
struct Lane {
  Running* run = nullptr;                 // the worker's, in its state (HeadView), where the hooks read it
  unsigned tid = 0, lane = 0;
  WarpState* warp = nullptr;
  uint32_t epoch = 0;                     // barriers the running block has passed (racecheck)
  uint16_t warp_gen[32] = {};
  uint64_t block_linear = 0;
  uint32_t red_thread = 0;                // launch_thread() of the thread whose next atomic discards its result
  uint64_t launch = 0;                    // the launch it was made ready for (State::launch)
  uint64_t counters[N_COUNTERS] = {};
  BlockOut* out = nullptr;                // the running block's
  const unsigned char* dynamic_shared = nullptr;   // this worker's dynamic shared buffer
  const unsigned char* arena = nullptr;   // ... and its static __shared__ variables (at their modules' offsets)
  WarpState warps[32];
  // address lookups
  std::vector<Range> shared;              // [0] the dynamic buffer, then the static __shared__ variables (this
                                          // worker's copies of them)
  size_t recent[4] = {0, 0, 0, 0};        // ranges hit lately
  unsigned next_recent = 0;
  uint64_t miss_lines[256] = {};          // cache lines recently found to be neither shared nor global
  SiteEntry site_cache[1024] = {};        // instruction sites looked up lately (State::site_table's)
};

const int MAX_LANES = 64;                 // host::MAX_WORKERS (gpuedu_host.h)

// A lock the workers hold for a few instructions. Ctrl-C and the timeout stop a worker where it is (SIGURG), even
// holding one: the next launch makes it free again (launch_begin), which a std::mutex could not be.
struct Spin {
  int held = 0;
  void lock() {
    while (__atomic_exchange_n(&held, 1, __ATOMIC_ACQUIRE)) std::this_thread::yield();
  }
  void unlock() { __atomic_store_n(&held, 0, __ATOMIC_RELEASE); }
};

struct State {
  // configuration (Python, before each launch)
  std::vector<Range> ranges;              // device allocations and the module's __device__ variables, sorted
  std::vector<uint8_t> variable;          // [range]: 1 for a __device__ variable
  bool racecheck = false;
  bool memcheck = false;
  bool fast = true;                       // neither: the hooks may take their fast paths
  size_t dynamic_bytes = 0;               // the dynamic shared memory the launch asked for
  size_t dynamic_capacity = 0;            // the dynamic shared buffer's full size (shared= uses its start)
  std::vector<MemError> errors;           // memcheck's: the blocks', in the grid's order
  // launch
  uint64_t launch = 0;                    // launches begun
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  unsigned nthreads = 1;
  uint64_t grid_base = 0, grid_blocks = 1;  // the running grid's first block in the launch's order, its blocks
  Lane* lanes[MAX_LANES] = {};            // [worker]
  std::vector<Range> file_shared;         // static __shared__ variables at file scope (registered at load)
  // the blocks' outputs, taken in the grid's order (hand_on)
  Spin order_lock;
  std::map<uint64_t, BlockOut*> waiting;  // handed on before the blocks ahead of them
  uint64_t next_sequence = 0;             // the block to take next
  bool taking = false;                    // a worker is taking them
  size_t lines_waiting = 0;
  const volatile int* stop = nullptr;     // nonzero once the launch is stopping (a worker failed, Ctrl-C, timeout)
  std::vector<BlockOut*> spare;
  // what the blocks' lines give, in the grid's order
  std::vector<std::vector<uint64_t>> dram_read, dram_write;  // sector bitmaps per allocation
  uint64_t dram_read_pairs = 0;           // by an L2 that never evicts
  // the L2 model (see l2_access)
  int n_capacities = 0;
  uint64_t capacity_lines[MAX_CAPACITIES] = {};
  uint64_t l2_read_pairs[MAX_CAPACITIES] = {}, l2_written_back[MAX_CAPACITIES] = {};
  std::vector<uint64_t> line_key;         // [line]: allocation << 40 | byte offset / 128
  std::vector<uint64_t> line_time;        // [line]: when it was last accessed
  std::vector<uint8_t> line_state;        // [line * MAX_CAPACITIES + k]: valid sectors | dirty sectors << 4
  std::vector<int32_t> line_table;        // open addressing: line + 1
  uint64_t line_hint[2 * LINE_HINTS] = {};  // a direct-mapped cache in front of it (see l2_access)
  std::vector<int32_t> fenwick;           // marks at the lines' last-access times (once the footprint needs it)
  uint64_t now = 0;
  // instruction sites (the workers look them up under site_lock, behind each worker's cache)
  Spin site_lock;
  std::vector<uintptr_t> site_address;
  std::vector<uint8_t> site_kind;
  std::vector<uint32_t> site_table;       // open addressing: site + 1
  // racecheck (which runs a launch's blocks on one worker, in the grid's order: a global hazard lies between
  // blocks, which the shadow words see one after another)
  std::vector<std::vector<Shadow>> global_shadow, shared_shadow;
  std::vector<HazardOut> hazards;
};

State S;

// The worker's state as the runtime lays it out (__gpuedu::WorkerHead, gpuedu_device.h): its `prof` is the running
// worker's Lane while it runs a launch of this module, and `run` what the hooks read first (one thread-local
// pointer away, as the runtime's threadIdx is; zero, counting off, in a worker that runs no such launch).
struct HeadView {
  unsigned tid[3], bid[3];
  Lane* prof;
  alignas(64) Running run;
};
static_assert(__builtin_offsetof(HeadView, prof) == __gpuedu::prof::WORKER_HEAD_PROF &&
              __builtin_offsetof(HeadView, run) == __gpuedu::prof::WORKER_HEAD_RUNNING &&
              sizeof(Running) <= __gpuedu::prof::WORKER_HEAD_RUNNING_BYTES,
              "the counters find a worker's state where the runtime keeps room for it");
}  // namespace
#if defined(__linux__)
extern "C" __thread void* __gpuedu_worker __attribute__((tls_model("initial-exec")));
#else
extern "C" __attribute__((visibility("hidden"))) void* __gpuedu_worker;
#endif
namespace {

// The running worker's state, and its Lane (null outside a launch of this module).
inline HeadView* head() { return (HeadView*)__gpuedu_worker; }
inline Lane* running() { return head()->prof; }

// (The memory side after the memory matcher or its vectors changed, the blocks' after theirs.)
inline void refresh_memory(Lane& L) {
  WarpState& W = *L.warp;
  unsigned lane = L.lane;
  Running& R = *L.run;
  R.memory_cursor = &W.memory.cursor[lane];
  R.steps = W.steps.data();
  R.addresses = W.addresses.empty() ? nullptr : W.addresses.data() + lane;
  R.memory_steps = S.fast && (W.memory.stepping >> lane & 1u)
                       ? (uint32_t)std::min(W.steps.size(), W.addresses.size() / 32) : 0;
}

inline void refresh_blocks(Lane& L) {
  WarpState& W = *L.warp;
  unsigned lane = L.lane;
  Running& R = *L.run;
  R.block_cursor = &W.blocks.cursor[lane];
  R.block_address = W.blocks.address.data();
  R.block_steps = (W.blocks.stepping >> lane & 1u) ? (uint32_t)W.blocks.address.size() : 0;
}

uint32_t new_site(uintptr_t address, uint8_t kind);

// Instruction sites by return address: the worker's direct-mapped cache in front of the launch's table.
inline uint32_t site_of(Lane& L, uintptr_t address, uint8_t kind) {
  SiteEntry& e = L.site_cache[(address ^ (address >> 9)) & 1023];
  if (e.address == address) return e.id;
  uint32_t id;
  {
    std::lock_guard<Spin> hold(S.site_lock);
    id = new_site(address, kind);
  }
  e.address = address;
  e.id = id;
  return id;
}

// (Under S.site_lock.)
uint32_t new_site(uintptr_t address, uint8_t kind) {
  if (S.site_table.empty()) S.site_table.assign(4096, 0);
  size_t mask = S.site_table.size() - 1;
  size_t h = (address * 0x9E3779B97F4A7C15ull) >> 20;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    uint32_t e = S.site_table[i];
    if (e == 0) {
      uint32_t id = (uint32_t)S.site_address.size();
      S.site_address.push_back(address);
      S.site_kind.push_back(kind);
      S.site_table[i] = id + 1;
      if (S.site_address.size() * 2 > S.site_table.size()) {  // grow and rehash
        std::vector<uint32_t> bigger(S.site_table.size() * 2, 0);
        size_t m2 = bigger.size() - 1;
        for (uint32_t s = 0; s < S.site_address.size(); ++s) {
          size_t j = ((S.site_address[s] * 0x9E3779B97F4A7C15ull) >> 20) & m2;
          while (bigger[j]) j = (j + 1) & m2;
          bigger[j] = s + 1;
        }
        S.site_table.swap(bigger);
      }
      return id;
    }
    if (S.site_address[e - 1] == address) return e - 1;
  }
}

// ---- classifying an address ---------------------------------------------------------
inline bool find_global(Lane& L, uint64_t a, size_t* which) {
  const std::vector<Range>& r = S.ranges;
  if (r.empty()) return false;
  for (size_t k = 0; k < 4; ++k) {  // a kernel mostly reads and writes a few buffers: try those first
    size_t i = L.recent[k];
    if (i < r.size() && a - r[i].lo < r[i].hi - r[i].lo) {
      *which = i;
      return true;
    }
  }
  size_t lo = 0, hi = r.size();
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (r[mid].lo <= a) lo = mid + 1; else hi = mid;
  }
  if (lo == 0 || a >= r[lo - 1].hi) return false;
  *which = lo - 1;
  L.recent[L.next_recent++ & 3] = lo - 1;
  return true;
}

// A local array of the running lane: the address's offset in the lane's local frame.
inline bool find_local(const Lane& L, uint64_t a, uint64_t* offset) {
  for (const LocalRange& r : L.warp->local[L.lane])
    if (a - r.lo < r.hi - r.lo) { *offset = r.offset + (a - r.lo); return true; }
  return false;
}

// Whether the 64-byte line `line` holds part of a local array of the running lane (never a miss line).
inline bool local_line(const Lane& L, uint64_t line) {
  for (const LocalRange& r : L.warp->local[L.lane])
    if (line >= r.lo >> 6 && line <= (r.hi - 1) >> 6) return true;
  return false;
}

// Whether the 64-byte line `line` holds part of global memory (a __device__ variable shares its lines with the
// module's other data: such a line is never a miss line).
inline bool global_line(uint64_t line) {
  const std::vector<Range>& r = S.ranges;
  uint64_t lo = line << 6;
  size_t first = 0, last = r.size();   // the first range that ends after the line's start
  while (first < last) {
    size_t mid = (first + last) / 2;
    if (r[mid].hi <= lo) first = mid + 1; else last = mid;
  }
  return first < r.size() && r[first].lo < lo + 64;
}

inline bool find_shared(const Lane& L, uint64_t a, size_t* which) {
  if (a - L.run->shared_lo >= L.run->shared_span) return false;
  for (size_t i = 0; i < L.shared.size(); ++i)
    if (a - L.shared[i].lo < L.shared[i].hi - L.shared[i].lo) { *which = i; return true; }
  return false;
}

void bound_shared(Lane& L) {  // the span that holds every shared range, for a one-compare rejection
  uint64_t lo = ~0ull, hi = 0;
  for (const Range& r : L.shared)
    if (r.hi > r.lo) { lo = std::min(lo, r.lo); hi = std::max(hi, r.hi); }
  L.run->shared_lo = lo;
  L.run->shared_span = hi > lo ? hi - lo : 0;
  std::memset(L.miss_lines, 0, sizeof L.miss_lines);
}

// A static __shared__ variable of the running worker (or, with none running, one at file scope) is known.
void add_shared_range(Lane* L, uint64_t lo, uint64_t n) {
  std::vector<Range>& known = L ? L->shared : S.file_shared;
  if (known.empty() && L) known.push_back(Range{0, 0});
  for (size_t i = L ? 1 : 0; i < known.size(); ++i)
    if (known[i].lo == lo) return;
  known.push_back(Range{lo, lo + n});
  if (L) bound_shared(*L);
}

// ---- racecheck ------------------------------------------------------------------------
uint32_t launch_thread(const Lane& L) { return (uint32_t)(L.block_linear * S.nthreads + L.tid + 1); }

bool ordered(const Lane& L, const Access& a, bool same_block_only) {
  // Whether access `a` (by another thread) happens before the running thread's access.
  uint32_t other = a.thread - 1;
  if (other / S.nthreads != L.block_linear) return same_block_only;  // blocks are unordered within a launch
  if (a.epoch != L.epoch) return true;                              // a __syncthreads lies between
  unsigned other_warp = (other % S.nthreads) / 32;
  return other_warp == L.tid / 32 && a.warp_gen != L.warp_gen[L.tid / 32];  // a __syncwarp lies between
}

void report(const Lane& L, int kind, int space, const Access& first, uint32_t site, uint64_t where) {
  for (HazardOut& h : S.hazards)
    if (h.kind == kind && h.space == space && h.site_first == first.site && h.site_second == site) {
      h.count++;
      return;
    }
  if (S.hazards.size() >= 256) return;
  S.hazards.push_back(HazardOut{kind, space, first.site, site, first.thread - 1, launch_thread(L) - 1, 1, where});
}

// What racecheck and memcheck see of an access: a read, a write or an atomic.
inline uint8_t plain_op(uint8_t op) {
  switch (op) {
    case RED: return ATOM;
    case LDSM: case CP_LD: return LD;
    case CP_ST: return ST;
    default: return op;
  }
}

bool same_block(const Lane& L, const Access& a) { return (a.thread - 1) / S.nthreads == L.block_linear; }

void check_word(const Lane& L, Shadow& sh, int space, uint32_t site, uint8_t mask, uint8_t op_asked, uint64_t where) {
  uint32_t me = launch_thread(L);
  uint8_t op = plain_op(op_asked);
  bool write = op != LD, atomic = op == ATOM;
  bool shared = space == SHARED;
  auto conflicts = [&](const Access& a) {
    return a.thread && a.thread != me && (a.mask & mask) && !(a.atomic && atomic) && !ordered(L, a, shared);
  };
  // Bytes a cp.async of this block has issued and no wait of its thread has landed: whoever reads or writes them
  // now (its own thread too) races the copy, whatever barriers lie between. (A second cp.async to them is a write
  // like any other.)
  bool in_flight = sh.pending.thread && (sh.pending.mask & mask) && same_block(L, sh.pending) && op_asked != CP_ST;
  if (in_flight) report(L, write ? WRITE_BEFORE_WAIT : READ_BEFORE_WAIT, space, sh.pending, site, where);
  else if (conflicts(sh.w)) report(L, write ? WRITE_AFTER_WRITE : READ_AFTER_WRITE, space, sh.w, site, where);
  if (write) {
    if (conflicts(sh.r1)) report(L, WRITE_AFTER_READ, space, sh.r1, site, where);
    else if (conflicts(sh.r2)) report(L, WRITE_AFTER_READ, space, sh.r2, site, where);
  }
  Access now{me, L.epoch, L.warp_gen[L.tid / 32], (uint16_t)site, mask, (uint8_t)atomic};
  if (op_asked == CP_ST) sh.pending = now;
  if (write) {
    sh.w = now;
  } else if (!sh.r1.thread || sh.r1.thread == me || ordered(L, sh.r1, shared)) {
    sh.r1 = now;
  } else {
    sh.r2 = now;
  }
}

void racecheck(const Lane& L, int space, size_t range, uint64_t offset, unsigned size, uint32_t site, uint8_t op) {
  std::vector<std::vector<Shadow>>& all = space == SHARED ? S.shared_shadow : S.global_shadow;
  const Range& r = space == SHARED ? L.shared[range] : S.ranges[range];
  if (all.size() <= range) all.resize(range + 1);
  std::vector<Shadow>& shadow = all[range];
  if (shadow.empty()) {
    size_t words = (r.hi - r.lo + 3) / 4;
    if (words > ((size_t)16 << 20)) return;  // over 64 MB: not checked (its shadow would need 1 GB)
    shadow.assign(words, Shadow{});
  }
  uint64_t end = offset + size;
  for (uint64_t w = offset / 4; w * 4 < end; ++w) {
    uint64_t lo = std::max<uint64_t>(w * 4, offset), hi = std::min<uint64_t>(w * 4 + 4, end);
    uint8_t mask = (uint8_t)(((1u << (hi - lo)) - 1u) << (lo - w * 4));
    if (w < shadow.size()) check_word(L, shadow[w], space, site, mask, op, ((uint64_t)range << 40) | (w * 4));
  }
}

// ---- the access hook ------------------------------------------------------------------
// An error memcheck reports, once per kind and instruction (with the first thread to make it and how many times
// it was made), at most 256 of them. Each block keeps its own, and the launch's are the blocks' merged in the
// grid's order (take), which gives what one worker running the blocks in that order gives.
void note_error(std::vector<MemError>& errors, const MemError& e) {
  for (MemError& known : errors)
    if (known.kind == e.kind && known.site == e.site) { known.count += e.count; return; }
  if (errors.size() >= 256) return;
  errors.push_back(e);
}

void memcheck_error(Lane& L, int kind, int space, uint8_t op, unsigned size, uintptr_t ra, int64_t offset,
                    uint64_t region, uint64_t region_bytes) {
  uint32_t site = site_of(L, ra, MEMORY);
  note_error(L.out->errors, MemError{kind, space, op, size, site, (uint32_t)(L.block_linear * S.nthreads + L.tid), 1,
                                     offset, region, region_bytes});
}

// An address in no allocation and no shared variable: one just past (or before) an allocation,
// which owns its pages, or past the dynamic shared memory the launch asked for is an out-of-bounds
// access, as compute-sanitizer's memcheck reports it; anything else (the thread's own stack, the
// module's data) is not device memory and is left alone.
void memcheck_stray(Lane& L, uintptr_t ra, uint64_t a, unsigned size, uint8_t op) {
  const uint64_t near = 1024;
  const Range& dyn = L.shared[0];
  if (a >= dyn.lo && a < dyn.lo + S.dynamic_capacity) {   // past what the launch's shared= asked for
    memcheck_error(L, 0, SHARED, op, size, ra, (int64_t)(a - dyn.lo), 0, dyn.hi - dyn.lo);
    return;
  }
  // (Past a static __shared__ array lies the module's other data, which the kernel may read
  // legitimately: an overrun there cannot be told apart, and is not reported.)
  const std::vector<Range>& r = S.ranges;
  size_t lo = 0, hi = r.size();
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (r[mid].lo <= a) lo = mid + 1; else hi = mid;
  }
  // (Beside a module's __device__ variable lies the module's other data: no neighbourhood of its own.)
  auto allocation = [](size_t i) { return i >= S.variable.size() || !S.variable[i]; };
  if (lo > 0 && a >= r[lo - 1].hi && a - r[lo - 1].hi < near && allocation(lo - 1))
    memcheck_error(L, 0, GLOBAL, op, size, ra, (int64_t)(a - r[lo - 1].lo), lo - 1, r[lo - 1].hi - r[lo - 1].lo);
  else if (lo < r.size() && r[lo].lo > a && r[lo].lo - a <= near && allocation(lo))
    memcheck_error(L, 0, GLOBAL, op, size, ra, -(int64_t)(r[lo].lo - a), lo, r[lo].hi - r[lo].lo);
}

__attribute__((noinline)) void grow(std::vector<uint64_t>& v, size_t j) {   // (in whole requests of 32 lanes)
  v.resize((std::max<size_t>(j + 1, 2 * v.size()) + 31) & ~(size_t)31);
}

// The op a request keeps: a global atomic's RED or ATOM; a shared atomic is an ATOMS whether or not its result is
// read (shared memory has no RED); an ldmatrix row and a cp.async write are shared memory's instructions, a
// cp.async read global memory's (elsewhere each counts as the plain access it is); local memory has loads and
// stores only.
inline uint8_t request_op(uint8_t space, uint8_t op_asked) {
  if (space == SHARED) return op_asked == LDSM || op_asked == CP_ST ? op_asked : plain_op(op_asked);
  if (space == GLOBAL) return op_asked == RED || op_asked == CP_LD ? op_asked : plain_op(op_asked);
  return plain_op(op_asked);
}

__attribute__((noinline)) void access_slow(Lane& L, uintptr_t ra, uint64_t a, unsigned size, uint8_t op_asked) {
  uint8_t op = plain_op(op_asked);  // what racecheck and memcheck see: a read, a write or an atomic
  size_t which;
  uint8_t space;
  uint64_t where;
  uint64_t line = a >> 6;
  // Shared memory first: its variables are module statics, which may share a cache line with
  // data that is neither shared nor global (the line cache below would then hide them).
  if (find_shared(L, a, &which)) {
    space = SHARED;
    where = a;
  } else if (!L.warp->local[L.lane].empty() && find_local(L, a, &where)) {
    if (op != LD && op != ST) return;   // (CUDA has no atomics on local memory)
    space = LOCAL;
    which = 0;
  } else if (!S.memcheck && L.miss_lines[line & 255] == line + 1) {
    return;  // lately found to be neither global nor shared (nor on a line that holds either)
  } else if (find_global(L, a, &which)) {
    space = GLOBAL;
    where = ((uint64_t)which << 40) | (a - S.ranges[which].lo);
  } else {
    if (S.memcheck) memcheck_stray(L, ra, a, size, op);
    else if ((L.warp->local[L.lane].empty() || !local_line(L, line)) && !global_line(line))
      L.miss_lines[line & 255] = line + 1;
    return;
  }
  // A GPU faults on an access that is not aligned to its size ("misaligned address").
  if (S.memcheck && space != LOCAL && (size & (size - 1)) == 0 && (a & (size - 1)))
    memcheck_error(L, 1, space, op, size, ra,
                   (int64_t)(space == GLOBAL ? a - S.ranges[which].lo : a - L.shared[which].lo), which,
                   space == GLOBAL ? S.ranges[which].hi - S.ranges[which].lo : L.shared[which].hi - L.shared[which].lo);
  uint32_t site = site_of(L, ra, MEMORY);
  WarpState& W = *L.warp;
  bool created;
  int32_t slot = W.memory.match(L.lane, site, ra, &created);
  if (created) {
    W.requests.push_back(Request{site, space, request_op(space, op_asked), (uint8_t)size, 0});
    if (space == LOCAL) {   // each lane's array is its own: the other lanes go the full way (an empty span)
      W.steps.push_back(Step{ra, 0, 0, 0, 0});
    } else {
      const Range& r = space == GLOBAL ? S.ranges[which] : L.shared[which];
      W.steps.push_back(Step{ra, r.lo, space == GLOBAL ? ((uint64_t)which << 40) - r.lo : 0,
                             (uint32_t)std::min<uint64_t>(r.hi - r.lo, ~0u), space == SHARED});
    }
    uint32_t block = W.blocks.cursor[L.lane];
    if ((size_t)block < W.instances.size()) {
      W.instances[block].requests++;
      if (space == GLOBAL && op != LD && op != ST) W.instances[block].global_atomic = 1;
    }
  }
  W.requests[slot].mask |= 1u << L.lane;  // a lane meets each instance once (it is its k-th execution)
  size_t at = (size_t)slot * 32 + L.lane;
  if (at >= W.addresses.size()) grow(W.addresses, at);
  W.addresses[at] = where;
  refresh_memory(L);
  if (S.racecheck && space != LOCAL) {   // (a thread's local memory is its own)
    if (space == GLOBAL) racecheck(L, GLOBAL, which, a - S.ranges[which].lo, size, site, op_asked);
    else racecheck(L, SHARED, which, a - L.shared[which].lo, size, site, op_asked);
  }
}

// The hook (inlined into each of the compiler's). Most accesses are a lane's next step along the common
// sequence of its warp's memory instructions (the matcher's cursor), to the allocation or shared variable that
// the lane which laid the sequence down reached there: that lane settled the instruction's request, and this
// one only adds its address. (Allocations and shared variables never overlap, so an address within the
// request's own is one of the same kind.) Of the rest, what is neither global nor shared memory (mostly the
// thread's own stack and the kernel's parameters: the miss lines) is turned away here; the others (the lane
// that lays the sequence down, one off it, and everything racecheck or memcheck looks at) go the full way
// (access_slow), which classifies the address first. The first two save no register.
inline __attribute__((always_inline)) void access(uintptr_t ra, uint64_t a, unsigned size, uint8_t op_asked) {
  HeadView* h = head();
  Running& R = h->run;
  if (!R.on) return;
  uint32_t j = *R.memory_cursor;
  if (j < R.memory_steps) {
    const Step& q = R.steps[j];
    if (q.address == ra && a - q.lo < q.span) {
      R.addresses[(size_t)j * 32] = a + q.delta;
      *R.memory_cursor = j + 1;
      return;
    }
  }
  Lane* L = h->prof;
  if (a - R.shared_lo >= R.shared_span) {
    uint64_t line = a >> 6;
    if (L->miss_lines[line & 255] == line + 1 && !S.memcheck) return;  // lately neither global nor shared
  }
  access_slow(*L, ra, a, size, op_asked);
}

void access_range(uintptr_t ra, uint64_t a, size_t size, uint8_t op) {
  if (!head()->run.on) return;
  for (size_t off = 0; off < size; off += 16) access(ra, a + off, (unsigned)std::min<size_t>(16, size - off), op);
}

// ---- DRAM: the sectors a launch reads and writes ---------------------------------------------
std::vector<uint64_t>& dram_map(std::vector<std::vector<uint64_t>>& maps, size_t range) {
  if (maps.size() <= range) maps.resize(range + 1);
  std::vector<uint64_t>& m = maps[range];
  if (m.empty()) m.assign(((S.ranges[range].hi - S.ranges[range].lo) / 32 + 2 + 63) / 64, 0);
  return m;
}

// The sectors `sectors` (bits 0-3) of the 128-byte line `line` (allocation << 33 | line) are read from or written
// to DRAM: `map` is the allocation's. (A line's 4 sectors lie in one word of it.)
inline void mark_dram(std::vector<uint64_t>& map, uint64_t line, unsigned sectors) {
  uint64_t first = (line & ((1ull << 33) - 1)) << 2;   // the line's first sector in its allocation
  if (first / 64 < map.size()) map[first / 64] |= (uint64_t)sectors << (first % 64);
}

// ---- the L2 model ------------------------------------------------------------------------
// For each capacity the Python side configures (one per GPU it knows), an L2 of that many bytes:
// 128-byte lines of four 32-byte sectors, fully associative, the least recently used line evicted,
// empty when the launch starts (as Nsight Compute measures a kernel: it flushes the caches first).
// The warps' requests reach it block by block, in the grid's order whichever worker ran each block (hand_on),
// and within a block in the order its warps finished (a block's own schedule).
// - A load (or atomic) of a sector the line does not hold fetches it from DRAM with its neighbour:
//   DRAM moves 64-byte pairs of sectors, so one 32-byte sector read alone costs 64 bytes.
// - A store makes its sectors valid and dirty in L2 (no DRAM read); an atomic reads, then dirties.
// - A dirty line reaches DRAM only when it is evicted: what the launch leaves in L2 is not written
//   by the time it ends.
// Residency comes from stack distances: a line is still in an LRU cache of C lines iff fewer than C
// other lines were touched since its last access, so one pass answers for every capacity at once.
// Until the launch has touched more lines than the smallest capacity holds, nothing can be evicted,
// and the distances are not tracked at all: every capacity's L2 then holds what the one that never
// evicts holds, which alone is kept up to date; the others take its state when tracking begins.
void fenwick_add(size_t i, int32_t v) {
  for (++i; i <= S.fenwick.size(); i += i & (~i + 1)) S.fenwick[i - 1] += v;
}

int64_t fenwick_upto(size_t i) {  // marks at times 0..i
  int64_t sum = 0;
  for (++i; i > 0; i -= i & (~i + 1)) sum += S.fenwick[i - 1];
  return sum;
}

// Renumber the lines' last-access times 0..lines-1 (in order) and rebuild the marks with room to grow.
void fenwick_compact() {
  size_t lines = S.line_key.size();
  std::vector<uint32_t> order(lines);
  for (size_t i = 0; i < lines; ++i) order[i] = (uint32_t)i;
  std::sort(order.begin(), order.end(), [](uint32_t a, uint32_t b) { return S.line_time[a] < S.line_time[b]; });
  for (size_t r = 0; r < lines; ++r) S.line_time[order[r]] = r;
  S.now = lines;
  size_t size = 1 << 16;
  while (size < 2 * lines + 1024) size *= 2;
  S.fenwick.assign(size, 0);
  for (size_t r = 0; r < lines; ++r) fenwick_add(r, 1);
}

uint64_t smallest_capacity() {
  uint64_t c = ~0ull;
  for (int k = 0; k < S.n_capacities; ++k) c = std::min(c, S.capacity_lines[k]);
  return c;
}

// One line's sectors (bits 0-3) asked for by `op`: the DRAM pairs it reads, and the line's new state.
inline uint8_t l2_serve(unsigned valid, unsigned dirty, unsigned sectors, uint8_t op, uint64_t* pairs_read) {
  if (op != ST) {              // loads and atomics need the data: fetch each missing pair
    unsigned missing = sectors & ~valid;
    if (missing & 3u) { ++*pairs_read; valid |= 3u; }
    if (missing & 12u) { ++*pairs_read; valid |= 12u; }
  }
  if (op != LD) { valid |= sectors; dirty |= sectors; }
  return (uint8_t)(valid | dirty << 4);
}

void l2_access(uint64_t line_key, unsigned sectors, uint8_t op) {
  if (S.line_table.empty()) S.line_table.assign(1 << 12, 0);
  // the lines looked up lately, in front of the table: (line + 1, its index)
  uint64_t* hint = &S.line_hint[2 * ((line_key ^ (line_key >> 8)) & (LINE_HINTS - 1))];
  size_t h = 0;
  bool known = hint[0] == line_key + 1;
  if (!known) {
    size_t mask = S.line_table.size() - 1;
    h = (size_t)((line_key * 0x9E3779B97F4A7C15ull) >> 20) & mask;
    while (S.line_table[h] && S.line_key[S.line_table[h] - 1] != line_key) h = (h + 1) & mask;
    known = S.line_table[h] != 0;
    if (known) { hint[0] = line_key + 1; hint[1] = (uint64_t)S.line_table[h] - 1; }
  }
  uint64_t distance;           // other lines touched since this one's last access (~0: never touched)
  size_t x;
  bool tracking = !S.fenwick.empty();
  if (!known) {                // a line touched for the first time
    x = S.line_key.size();
    S.line_key.push_back(line_key);
    S.line_time.push_back(S.now);
    S.line_state.resize(S.line_state.size() + MAX_CAPACITIES, 0);
    S.line_table[h] = (int32_t)x + 1;
    hint[0] = line_key + 1;
    hint[1] = x;
    if (S.line_key.size() * 2 > S.line_table.size()) {   // grow and rehash
      std::vector<int32_t> bigger(S.line_table.size() * 2, 0);
      size_t m2 = bigger.size() - 1;
      for (size_t i = 0; i < S.line_key.size(); ++i) {
        size_t j = (size_t)((S.line_key[i] * 0x9E3779B97F4A7C15ull) >> 20) & m2;
        while (bigger[j]) j = (j + 1) & m2;
        bigger[j] = (int32_t)i + 1;
      }
      S.line_table.swap(bigger);
    }
    distance = ~0ull;
    if (tracking) fenwick_add(S.now, 1);
    S.now++;
    if (!tracking && S.n_capacities && S.line_key.size() > smallest_capacity()) {
      fenwick_compact();
      for (size_t y = 0; y < S.line_key.size(); ++y)
        for (int k = 0; k < S.n_capacities; ++k)
          S.line_state[y * MAX_CAPACITIES + k] = S.line_state[y * MAX_CAPACITIES + UNBOUNDED];
      for (int k = 0; k < S.n_capacities; ++k) S.l2_read_pairs[k] = S.dram_read_pairs;
    }
  } else {
    x = (size_t)hint[1];
    uint64_t last = S.line_time[x];
    if (last + 1 == S.now) {
      distance = 0;            // the line touched last: nothing moves
    } else if (!tracking) {
      distance = 0;            // fewer lines than any capacity holds: all still there
      S.line_time[x] = S.now++;
    } else {
      distance = S.line_key.size() - (uint64_t)fenwick_upto(last);
      fenwick_add(last, -1);
      fenwick_add(S.now, 1);
      S.line_time[x] = S.now++;
    }
  }
  if (!S.fenwick.empty() && S.now >= S.fenwick.size()) fenwick_compact();
  uint8_t* state = &S.line_state[x * MAX_CAPACITIES];
  for (int k = 0; k < (S.fenwick.empty() ? 0 : S.n_capacities); ++k) {
    unsigned valid = state[k] & 15u, dirty = state[k] >> 4;
    if (distance != ~0ull && distance >= S.capacity_lines[k]) {   // evicted since its last access
      S.l2_written_back[k] += (uint64_t)__builtin_popcount(dirty);
      valid = dirty = 0;
    }
    state[k] = l2_serve(valid, dirty, sectors, op, &S.l2_read_pairs[k]);
  }
  state[UNBOUNDED] = l2_serve(state[UNBOUNDED] & 15u, state[UNBOUNDED] >> 4, sectors, op,
                              &S.dram_read_pairs);
}

// What each capacity wrote back by the end of the launch: the evictions so far, and the dirty lines
// that the lines touched after them pushed out.
void l2_results(uint64_t* reads, uint64_t* writes) {
  if (S.fenwick.empty()) {   // never more lines than the smallest capacity: nothing left L2
    for (int k = 0; k < S.n_capacities; ++k) { reads[k] = S.dram_read_pairs; writes[k] = 0; }
    return;
  }
  for (int k = 0; k < S.n_capacities; ++k) { reads[k] = S.l2_read_pairs[k]; writes[k] = S.l2_written_back[k]; }
  uint64_t lines = S.line_key.size();
  for (size_t x = 0; x < lines; ++x) {
    uint64_t after = lines - (uint64_t)fenwick_upto(S.line_time[x]);
    for (int k = 0; k < S.n_capacities; ++k)
      if (after >= S.capacity_lines[k]) writes[k] += (uint64_t)__builtin_popcount(S.line_state[x * MAX_CAPACITIES + k] >> 4);
  }
}

void l2_reset() {
  S.line_key.clear();
  S.line_time.clear();
  S.line_state.clear();
  S.line_table.clear();
  std::memset(S.line_hint, 0, sizeof S.line_hint);
  S.fenwick.clear();
  S.now = 0;
  for (int k = 0; k < MAX_CAPACITIES; ++k) S.l2_read_pairs[k] = S.l2_written_back[k] = 0;
  S.dram_read_pairs = 0;
}

// Keep the distinct values of v[0, n) (n <= 128), in place; returns how many there are.
unsigned distinct(uint64_t* v, unsigned n) {
  uint64_t seen[128];
  uint8_t used[128] = {};
  unsigned kept = 0;
  for (unsigned i = 0; i < n; ++i) {
    unsigned h = (unsigned)((v[i] * 0x9E3779B97F4A7C15ull) >> 57);
    while (used[h] && seen[h] != v[i]) h = (h + 1) & 127;
    if (used[h]) continue;
    used[h] = 1;
    seen[h] = v[i];
    v[kept++] = v[i];
  }
  return kept;
}

void count_request(Lane& L, const WarpState& W, size_t index) {
  const Request& q = W.requests[index];
  const uint64_t* lanes_at = &W.addresses[index * 32];
  auto addr = [&](unsigned lane) { return lanes_at[lane]; };
  unsigned lanes = (unsigned)__builtin_popcount(q.mask);
  if (q.space == GLOBAL) {
    uint64_t sectors[64];
    unsigned n = 0;
    bool ascending = true;
    for (uint32_t m = q.mask; m; m &= m - 1) {
      uint64_t a = addr((unsigned)__builtin_ctz(m)), last = (a + q.size - 1) >> 5;
      for (uint64_t s = a >> 5; s <= last && n < 64; ++s) {
        if (n && s <= sectors[n - 1]) {
          if (s == sectors[n - 1]) continue;  // the lane before touched it too (a broadcast)
          ascending = false;
        }
        sectors[n++] = s;
      }
    }
    if (!ascending) {
      n = distinct(sectors, n);
      std::sort(sectors, sectors + n);
    }
    uint64_t* counters = L.counters;
    uint8_t op = q.op;
    if (q.op == RED) {
      counters[G_RED_REQ] += 1;
      counters[G_RED_SECT] += n;
      counters[G_RED_BYTES] += (uint64_t)lanes * q.size;
      counters[G_RED_LANES] += lanes;
    } else if (q.op == CP_LD) {   // a cp.async's reads: L2 and DRAM see loads
      counters[CP_G_REQ] += 1;
      counters[CP_G_SECT] += n;
      op = LD;
    } else {
      counters[G_REQ + q.op] += 1;
      counters[G_SECT + q.op] += n;
      counters[G_BYTES + q.op] += (uint64_t)lanes * q.size;
      counters[q.op == LD ? G_LD_LANES : q.op == ST ? G_ST_LANES : G_ATOM_LANES] += lanes;
    }
    // The DRAM maps and the L2 model see the request's sectors line by line (4 sectors of 32 bytes a line), once
    // the blocks before this one have been seen (take_lines).
    Lines& out = L.out->lines;
    uint64_t* at = out.room(n);
    uint64_t* first = at;
    for (unsigned i = 0; i < n;) {
      uint64_t line = sectors[i] >> 2;
      unsigned mask = 0;
      for (; i < n && (sectors[i] >> 2) == line; ++i) mask |= 1u << (sectors[i] & 3);
      *at++ = line << 6 | (uint64_t)op << 4 | mask;
    }
    counters[GLOBAL_LINES] += (uint64_t)(at - first);
    out.size += (size_t)(at - first);
    return;
  }
  if (q.space == LOCAL) {
    // A GPU interleaves local memory across a warp's lanes in 4-byte words: word w of lane l lies at byte
    // (w * 32 + l) * 4 of the warp's local window, so 32 lanes reading the same element of their arrays read
    // 128 neighbouring bytes (4 sectors), and lanes at different elements read as many rows of 128 bytes.
    uint64_t sectors[128];
    unsigned n = 0;
    for (uint32_t m = q.mask; m; m &= m - 1) {
      unsigned lane = (unsigned)__builtin_ctz(m);
      uint64_t o = addr(lane);
      for (uint64_t w = o >> 2; w <= (o + q.size - 1) >> 2 && n < 128; ++w) sectors[n++] = (w * 32 + lane) * 4 >> 5;
    }
    n = distinct(sectors, n);
    unsigned op = q.op == LD ? 0 : 1;
    L.counters[L_REQ + op] += 1;
    L.counters[L_SECT + op] += n;
    L.counters[L_LANES + op] += lanes;
    return;
  }
  // Shared memory: 32 banks of 4-byte words. A wavefront serves at most one word per bank
  // (lanes reading the same word share it); 8-byte accesses go a half-warp at a time and
  // 16-byte ones a quarter-warp at a time, so they need 2 and 4 wavefronts at best.
  // Atomics serialise every lane on its bank.
  // An ldmatrix reads its matrices so, each a phase of its own: matrix j's 8 rows of 16 bytes, at the addresses
  // lanes 8j to 8j + 7 give, are one wavefront when they lie in 8 different groups of 4 banks (a row's address
  // / 16 mod 8), and one more for each further row on the busiest group (two rows 128 bytes apart share their
  // banks: rows 128 bytes apart are an 8-way conflict, 8 wavefronts; a row read twice is one). A cp.async writes
  // its bytes as a store of its width does.
  unsigned per_phase = q.size <= 4 ? 32 : q.size <= 8 ? 16 : 8;
  uint64_t waves = 0, ideal = 0;
  for (unsigned first = 0; first < 32; first += per_phase) {
    uint32_t phase = (uint32_t)(((1ull << per_phase) - 1) << first) & q.mask;
    if (!phase) continue;
    if (q.op != ATOM) {
      // Mostly each bank is asked for one word at most (or lanes share it): one wavefront. So it is when the
      // words lie within 32 of each other (a bank is a word's number mod 32: distinct words, distinct banks),
      // which is found without a loop that waits on its last turn.
      uint64_t lo = ~0ull, hi = 0;
      for (uint32_t m = phase; m; m &= m - 1) {
        uint64_t a = addr((unsigned)__builtin_ctz(m));
        lo = std::min(lo, a >> 2);
        hi = std::max(hi, (a + q.size - 1) >> 2);
      }
      if (hi - lo < 32) { ideal += 1; waves += 1; continue; }
      uint64_t bank_word[32];
      uint32_t banks = 0;
      bool one = true;
      for (uint32_t m = phase; m && one; m &= m - 1) {
        uint64_t a = addr((unsigned)__builtin_ctz(m)), last = (a + q.size - 1) >> 2;
        for (uint64_t w = a >> 2; w <= last; ++w) {
          unsigned b = (unsigned)(w & 31);
          if (!(banks >> b & 1u)) { banks |= 1u << b; bank_word[b] = w; }
          else if (bank_word[b] != w) { one = false; break; }
        }
      }
      if (one) { ideal += 1; waves += 1; continue; }
    }
    uint64_t words[128];
    unsigned n = 0;
    for (uint32_t m = phase; m; m &= m - 1) {
      uint64_t a = addr((unsigned)__builtin_ctz(m)), last = (a + q.size - 1) >> 2;
      for (uint64_t w = a >> 2; w <= last && n < 128; ++w) words[n++] = w;
    }
    ideal += 1;
    unsigned per_bank[32] = {};
    if (q.op != ATOM) n = distinct(words, n);
    unsigned most = 0;
    for (unsigned i = 0; i < n; ++i) most = std::max(most, ++per_bank[words[i] & 31]);
    waves += most;
  }
  if (q.op == LDSM) {
    L.counters[LDSM_REQ] += 1;
    L.counters[LDSM_WAVE] += waves;
    L.counters[LDSM_IDEAL] += ideal;
  } else if (q.op == CP_ST) {
    L.counters[CP_REQ] += 1;
    L.counters[CP_WAVE] += waves;
    L.counters[CP_IDEAL] += ideal;
    L.counters[CP_LANES] += lanes;
  } else {
    L.counters[S_REQ + q.op] += 1;
    L.counters[S_WAVE + q.op] += waves;
    L.counters[S_IDEAL + q.op] += ideal;
    L.counters[q.op == LD ? S_LD_LANES : q.op == ST ? S_ST_LANES : S_ATOM_LANES] += lanes;
  }
}

// ---- divergence as a GPU shows it ------------------------------------------------------------
// nvcc does not branch around a short body: it predicates the body's instructions, which every lane
// issues, the lanes whose condition is false doing nothing (Nsight Compute then counts no divergent
// branch, and Avg. Active Threads stays 32 while the lanes doing work drop). nvcc 13's ptxas for sm_90
// predicated a body of up to 4 stores and branched around 5 (and around 4 shared read-modify-writes),
// so a split of the host compiler's code is taken for one nvcc predicates when every group of lanes
// meets the others at one block instance, either there at once or along a path of its own that issues at
// most this many memory instructions, splits no further and does not run the splitting block again (a
// loop's next iteration: a loop keeps its branch). (The host code shows memory instructions, not
// arithmetic: a long arithmetic-only body that nvcc would branch around is missed.)
// Lanes that end the thread leave by a predicated EXIT, not a branch: they are no branch target.
// A body with a global atomic (ATOM or RED) is never predicated: nvcc 13 for sm_90 put a branch around
// `if (threadIdx.x == 0) atomicAdd(p, v);` when code followed it (while it predicated a lone load), and
// Nsight Compute counted one divergent branch a block for reduction version 7's ticket on an H200
// (2026-11-26, benchmarks/results/nvidia-h200-ncu.json).
//
// A path is followed through as many basic blocks as it takes: how many blocks one source-level body
// becomes is the host compiler's choice (clang++ cuts a body with an array-bounds check into three where
// g++ keeps one), while the path's memory instructions, splits and loops are the body's. The
// instrumentation reports every basic block once, and none of its own on an edge (compiler.profile_flags),
// so g++ and clang++ give the same paths.
const uint32_t PREDICATED_BODY_REQUESTS = 4;
const unsigned LONGEST_PATH = 64;   // instances; a body longer than this is no short body

// Whether the lanes that went on to instance `slot` after the split at `split` reach instance `join`
// (-1: the threads' end) along such a path.
bool reaches(const WarpState& W, const Instance& split, int32_t slot, int32_t join) {
  uint32_t requests = 0;
  for (unsigned steps = 0; steps < LONGEST_PATH; ++steps) {
    if (slot == join) return true;
    if (slot < 0) return false;
    const Instance& t = W.instances[slot];
    requests += t.requests;
    // (an instance of the splitting block on the way is a loop's next iteration, not a short body)
    if (t.divergent || t.global_atomic || t.site == split.site || requests > PREDICATED_BODY_REQUESTS)
      return false;
    slot = t.target_slot;
  }
  return false;
}

// Whether instance `index`, whose lanes went on to the blocks of splits[first, last) besides its own
// target, is a branch nvcc keeps (a divergent branch on the GPU).
bool branches(const WarpState& W, size_t index, size_t first, size_t last) {
  const Instance& a = W.instances[index];
  int32_t groups[33];
  unsigned n = 0;
  uint32_t elsewhere = 0;
  for (size_t k = first; k < last; ++k) {
    elsewhere |= W.splits[k].mask;
    if (W.splits[k].slot >= 0 && n < 32) groups[n++] = W.splits[k].slot;
  }
  if ((a.mask & ~elsewhere) && a.target_slot >= 0) groups[n++] = a.target_slot;
  if (n < 2) return false;
  // The join lies on every group's path, the first group's too: try each instance along that one.
  int32_t join = groups[0];
  uint32_t requests = 0;
  for (unsigned steps = 0; steps < LONGEST_PATH; ++steps) {
    bool all = true;
    for (unsigned g = 1; g < n && all; ++g) all = reaches(W, a, groups[g], join);
    if (all) return false;
    if (join < 0) break;
    const Instance& t = W.instances[join];
    requests += t.requests;
    if (t.divergent || t.global_atomic || t.site == a.site || requests > PREDICATED_BODY_REQUESTS) break;
    join = t.target_slot;
  }
  return true;
}

void clear_local(WarpState& W) {
  for (unsigned l = 0; l < 32; ++l) {
    W.local[l].clear();
    W.local_frame[l] = 0;
  }
}

void finish_warp(Lane& L, WarpState& W) {
  if (!W.live) return;
  W.memory.in_step_lanes([&](uint32_t i, uint32_t lanes) { W.requests[i].mask |= lanes; });
  W.blocks.in_step_lanes([&](uint32_t i, uint32_t lanes) { W.instances[i + 1].mask |= lanes; });
  for (size_t i = 0; i < W.requests.size(); ++i) count_request(L, W, i);
  std::sort(W.splits.begin(), W.splits.end(), [](const Split& a, const Split& b) { return a.instance < b.instance; });
  for (size_t k = 0; k < W.splits.size();) {
    size_t end = k;
    while (end < W.splits.size() && W.splits[end].instance == W.splits[k].instance) ++end;
    L.counters[HOST_DIVERGENT] += 1;
    L.counters[DIVERGENT] += branches(W, (size_t)W.splits[k].instance, k, end);
    k = end;
  }
  L.counters[BLOCK_INSTANCES] += W.instances.size() - 1;
  L.counters[WARPS] += 1;
  W.requests.clear();
  W.steps.clear();
  W.instances.clear();
  W.splits.clear();
  W.memory.reset();
  W.blocks.reset();
  clear_local(W);
  W.live = false;
}

void finish_all(Lane& L) {
  for (WarpState& W : L.warps) finish_warp(L, W);
}

// The running lane went from block instance `prev` to instance `slot` of block `target`.
void go_to(Lane& L, int32_t prev, int32_t target, int32_t slot) {
  WarpState& W = *L.warp;
  Instance& i = W.instances[prev];
  if (i.target == -2) {
    i.target = target;
    i.target_slot = slot;
  } else if (i.target != target) {
    i.divergent = 1;
    for (Split& s : W.splits)
      if (s.instance == prev && s.site == target) { s.mask |= 1u << L.lane; return; }
    W.splits.push_back(Split{prev, target, slot, 1u << L.lane});
  }
}

// ---- the blocks' outputs, in the grid's order ---------------------------------------------
// A block's lines go through the DRAM maps and the L2 model, and its errors join the launch's.
void take(const BlockOut& b) {
  size_t range = ~(size_t)0;
  std::vector<uint64_t>* read = nullptr;
  std::vector<uint64_t>* written = nullptr;
  for (size_t i = 0; i < b.lines.size; ++i) {
    uint64_t e = b.lines.data[i];
    uint64_t line = e >> 6;
    unsigned sectors = e & 15u;
    uint8_t op = (uint8_t)(e >> 4 & 3u);
    if ((line >> 33) != range) {
      range = line >> 33;
      read = &dram_map(S.dram_read, range);
      written = &dram_map(S.dram_write, range);
    }
    if (op != ST) mark_dram(*read, line, sectors);
    if (op != LD) mark_dram(*written, line, sectors);
    l2_access(line, sectors, op);
  }
  for (const MemError& e : b.errors) note_error(S.errors, e);
}

// A block is done: its output is taken now if every block before it in the launch's order was, else when the
// last of those is. The worker that hands on the block next in order takes it, and any that wait after it
// (one worker at a time, outside the lock: the others hand on theirs and run on).
// A worker whose block waits behind too many lines (another worker is far behind: more workers than cores, or
// a slow block) waits too, before its next block, until they are taken or the launch stops: the lines waiting
// stay within bounds.
const size_t MOST_LINES_WAITING = (size_t)1 << 25;   // (256 MB)

void hand_on(BlockOut* b) {
  uint64_t sequence = b->sequence;
  std::unique_lock<Spin> hold(S.order_lock);
  S.waiting.emplace(sequence, b);
  S.lines_waiting += b->lines.size;
  if (!S.taking) {
    S.taking = true;
    for (;;) {
      auto next = S.waiting.find(S.next_sequence);
      if (next == S.waiting.end()) break;
      BlockOut* ready = next->second;
      S.waiting.erase(next);
      S.next_sequence++;
      S.lines_waiting -= ready->lines.size;
      hold.unlock();
      take(*ready);
      ready->lines.size = 0;
      ready->errors.clear();
      hold.lock();
      S.spare.push_back(ready);
    }
    S.taking = false;
  }
  // (The block next in order is the one a running worker holds: it never waits here with it.)
  while (S.lines_waiting > MOST_LINES_WAITING && sequence >= S.next_sequence && !(S.stop && *S.stop)) {
    hold.unlock();
    std::this_thread::yield();
    hold.lock();
  }
}

BlockOut* fresh_out() {
  std::lock_guard<Spin> hold(S.order_lock);
  if (S.spare.empty()) return new BlockOut;
  BlockOut* b = S.spare.back();
  S.spare.pop_back();
  return b;
}

// The worker's state made ready for this launch: its counts zero, what a launch that failed left behind dropped.
void ready_lane(Lane& L) {
  L.launch = S.launch;
  L.run->on = false;
  std::memset(L.counters, 0, sizeof L.counters);
  for (WarpState& W : L.warps) {
    W.live = false;
    W.requests.clear();
    W.steps.clear();
    W.instances.clear();
    W.splits.clear();
    W.memory.reset();
    W.blocks.reset();
    clear_local(W);
  }
  L.red_thread = 0;
  L.epoch++;
  for (size_t& r : L.recent) r = 0;
  L.shared.assign(1, Range{(uint64_t)(uintptr_t)L.dynamic_shared,
                           (uint64_t)(uintptr_t)L.dynamic_shared + S.dynamic_bytes});
  L.shared.insert(L.shared.end(), S.file_shared.begin(), S.file_shared.end());
  bound_shared(L);
  if (L.out) {   // (a block of a launch that failed)
    L.out->lines.size = 0;
    L.out->errors.clear();
  }
}

}  // namespace

// ---- what the runtime tells ---------------------------------------------------------------
namespace __gpuedu {
namespace prof {

void worker_begin(int worker, const void* dynamic_shared, const void* arena) {
  if (worker < 0 || worker >= MAX_LANES) return;
  Lane*& L = S.lanes[worker];
  if (!L) L = new Lane;
  HeadView* h = head();
  h->run = Running{};
  L->run = &h->run;
  L->dynamic_shared = (const unsigned char*)dynamic_shared;
  L->arena = (const unsigned char*)arena;
  L->run->on = false;
  h->prof = L;
}

void worker_end() {
  HeadView* h = head();
  h->run.on = false;
  h->prof = nullptr;
}

void launch_begin(const unsigned* grid, const unsigned* block, size_t dynamic_bytes, size_t dynamic_capacity,
                  const volatile int* stop) {
  S.launch++;
  S.order_lock.held = S.site_lock.held = 0;   // (a launch stopped where it was may have left one held)
  S.stop = stop;
  S.lines_waiting = 0;
  S.dynamic_bytes = dynamic_bytes;
  S.dynamic_capacity = dynamic_capacity;
  S.errors.clear();
  for (int i = 0; i < 3; ++i) { S.grid[i] = grid[i]; S.block[i] = block[i]; }
  S.nthreads = block[0] * block[1] * block[2];
  S.grid_base = 0;
  S.grid_blocks = (uint64_t)grid[0] * grid[1] * grid[2];
  for (auto& w : S.waiting) S.spare.push_back(w.second);   // (what a launch that failed left waiting)
  S.waiting.clear();
  S.next_sequence = 0;
  S.taking = false;
  S.dram_read.clear();
  S.dram_write.clear();
  l2_reset();
  S.hazards.clear();
  S.global_shadow.clear();
  S.shared_shadow.clear();
}

void grid_begin(const unsigned* grid) {
  S.grid_base += S.grid_blocks;
  S.grid_blocks = (uint64_t)grid[0] * grid[1] * grid[2];
}

void block_begin(unsigned long long block_linear) {
  Lane* L = running();
  if (!L) return;
  if (L->launch != S.launch) ready_lane(*L);
  if (!L->out) L->out = fresh_out();
  L->out->sequence = S.grid_base + block_linear;
  L->block_linear = block_linear;
  L->epoch++;
  std::memset(L->warp_gen, 0, sizeof L->warp_gen);
}

void block_end() {
  Lane* L = running();
  if (!L || !L->out) return;
  L->run->on = false;
  finish_all(*L);
  BlockOut* done = L->out;
  L->out = nullptr;
  hand_on(done);
}

}  // namespace prof
}  // namespace __gpuedu

namespace {
// The running thread is `tid` (linear in its block): its warp and lane.
void select_thread(Lane& L, unsigned tid) {
  L.tid = tid;
  L.lane = tid & 31u;
  WarpState& W = L.warps[tid >> 5];
  L.warp = &W;
  if (!W.live) {
    W.live = true;
    unsigned left = S.nthreads - (tid & ~31u);
    W.existing = left >= 32 ? 32 : left;
    W.done = 0;
    // The threads' start is instance 0, so a branch in the first block recorded counts too.
    W.instances.push_back(Instance{-3, -2, -2, 0, 0, 0, 0});
  }
  if (W.blocks.cursor[L.lane] == 0) W.instances[0].mask |= 1u << L.lane;
}
}  // namespace

namespace __gpuedu {
namespace prof {

void enter(unsigned tid) {
  Lane* L = running();
  if (!L) return;
  select_thread(*L, tid);
  refresh_memory(*L);
  refresh_blocks(*L);
  L->run->on = true;
}

void leave() {
  Lane* L = running();
  if (L) L->run->on = false;
}

bool suspend() {
  Lane* L = running();
  if (!L) return false;
  bool was = L->run->on;
  L->run->on = false;
  return was;
}

void resume(bool was_on) {
  Lane* L = running();
  if (L) L->run->on = was_on;
}

void thread_done(unsigned tid) {
  Lane* L = running();
  if (!L) return;
  if (L->tid != tid || L->warp != &L->warps[tid >> 5]) select_thread(*L, tid);   // (it ran last: enter chose it)
  go_to(*L, (int32_t)L->warp->blocks.cursor[L->lane], -1, -1);
  L->run->on = false;
  L->counters[THREADS] += 1;
  WarpState& W = *L->warp;
  if (++W.done >= W.existing) finish_warp(*L, W);
}

void barrier_released() {
  Lane* L = running();
  if (!L) return;
  L->epoch++;
  L->counters[BARRIERS]++;
}

// barrier.cluster's phase completed: every block of the cluster (`heads`, their workers' states) is past a barrier,
// as at __syncthreads, for racecheck's ordering of their threads' accesses. (Not a BAR.SYNC: not counted as one.)
void cluster_barrier_released(void* const* heads, unsigned n) {
  for (unsigned k = 0; k < n; ++k) {
    Lane* L = heads[k] ? ((HeadView*)heads[k])->prof : nullptr;
    if (L) L->epoch++;
  }
}

void mma_synced() {
  Lane* L = running();
  if (L) L->counters[MMA_SYNC]++;
}

void shuffled() {
  Lane* L = running();
  if (L) L->counters[SHUFFLES]++;
}

void hmma_synced(bool k16) {
  Lane* L = running();
  if (L) L->counters[k16 ? HMMA_16816 : HMMA_1688]++;
}

void gmma_synced(unsigned n) {
  Lane* L = running();
  if (!L) return;
  L->counters[GMMA]++;
  L->counters[GMMA_FLOPS] += 2ull * 64 * n * 16;
}

void tensor_copied(bool store, unsigned long long bytes) {
  Lane* L = running();
  if (!L) return;
  L->counters[store ? TMA_ST : TMA_LD]++;
  L->counters[store ? TMA_ST_BYTES : TMA_LD_BYTES] += bytes;
}

// A tensor copy reads (or writes: `store`) the `n` bytes at `p` of a tensor in global memory, one row of its box
// inside the tensor: the L2 model and the DRAM maps see its sectors line by line as a load's (a store's), and the
// counters its sectors. (TMA's requests do not go through the SM's load/store path: no request, no L1 wavefront.)
void tensor_row(const void* p, unsigned long long n, bool store) {
  Lane* L = running();
  size_t which;
  uint64_t a = (uint64_t)(uintptr_t)p;
  if (!L || !n || !find_global(*L, a, &which)) return;
  const uint64_t where = ((uint64_t)which << 40) | (a - S.ranges[which].lo);
  const uint64_t first = where >> 5, last = (where + n - 1) >> 5;
  L->counters[TMA_SECTORS] += last - first + 1;
  Lines& out = L->out->lines;
  uint64_t* at = out.room((last >> 2) - (first >> 2) + 1);
  uint64_t* start = at;
  for (uint64_t line = first >> 2; line <= last >> 2; ++line) {
    unsigned mask = 0;
    for (unsigned s = 0; s < 4; ++s)
      if ((line << 2 | s) >= first && (line << 2 | s) <= last) mask |= 1u << s;
    *at++ = line << 6 | (uint64_t)(store ? ST : LD) << 4 | mask;
  }
  out.size += (size_t)(at - start);
}

void mbarrier_waited() {
  Lane* L = running();
  if (L) L->counters[MBAR_WAITS]++;
}

// The copy's bytes are written now, by the running thread, and no longer in flight: a read by another thread with
// no barrier since is a read-after-write hazard with the cp.async's line, as for any write.
void async_landed(const void* dst, size_t n) {
  Lane* L = running();
  if (!S.racecheck || !L || L->launch != S.launch || !n) return;
  uint64_t a = (uint64_t)(uintptr_t)dst;
  size_t which;
  if (!find_shared(*L, a, &which) || which >= S.shared_shadow.size()) return;
  std::vector<Shadow>& shadow = S.shared_shadow[which];
  uint32_t me = launch_thread(*L);
  uint64_t offset = a - L->shared[which].lo, end = offset + n;
  for (uint64_t w = offset / 4; w * 4 < end && w < shadow.size(); ++w) {
    Shadow& sh = shadow[w];
    if (sh.pending.thread != me) continue;   // (another copy of these bytes since, or none in flight)
    sh.w = Access{me, L->epoch, L->warp_gen[L->tid / 32], sh.pending.site, sh.pending.mask, 0};
    sh.pending = Access{};
  }
}

void warp_synced(unsigned warp) {
  Lane* L = running();
  if (L) L->warp_gen[warp & 31]++;
}

void shared_range(const void* p, size_t n) {
  Lane* L = running();
  if (L && L->launch != S.launch) L = nullptr;   // (not in a block of this launch: a variable at file scope)
  add_shared_range(L, (uint64_t)(uintptr_t)p, n);
}

void shared_slot(size_t offset, size_t n) {
  Lane* L = running();
  if (L && L->launch == S.launch && L->arena) add_shared_range(L, (uint64_t)(uintptr_t)(L->arena + offset), n);
}

}  // namespace prof
}  // namespace __gpuedu

// ---- the compiler's instrumentation -----------------------------------------------------
#define RA ((uintptr_t)__builtin_return_address(0))
#define HIDDEN __attribute__((visibility("hidden")))
extern "C" {
HIDDEN void __gpuedu_prof_atomic(const void* p, unsigned size) {
  Lane* L = running();
  if (!L) return;
  bool red = L->run->on && L->red_thread == launch_thread(*L);
  L->red_thread = 0;
  access(RA, (uint64_t)(uintptr_t)p, size, red ? RED : ATOM);
}
// The profiled build's rewrite (_scanner.mark_local_arrays) calls this (prof::local, gpuedu_profile.h) after the
// declaration of each array that nvcc keeps in local memory (one indexed at run time), each time it runs: its `n`
// bytes at `p` are the running lane's
// until the warp ends, at the next offset of the lane's local frame (the same array again keeps its offset).
HIDDEN void __gpuedu_prof_local(const void* p, size_t n) {
  Lane* L = running();
  if (!L || !L->run->on || !n) return;
  WarpState& W = *L->warp;
  unsigned lane = L->lane;
  uint64_t lo = (uint64_t)(uintptr_t)p;
  for (LocalRange& r : W.local[lane])
    if (r.lo == lo) {
      if (r.hi - r.lo < n) r.hi = lo + n;
      return;
    }
  W.local[lane].push_back(LocalRange{lo, lo + n, W.local_frame[lane]});
  W.local_frame[lane] += (uint32_t)((n + 15) & ~(size_t)15);
  uint64_t first = lo >> 6, last = (lo + n - 1) >> 6;   // its lines are no longer lines of neither kind
  if (last - first >= 256) std::memset(L->miss_lines, 0, sizeof L->miss_lines);
  else
    for (uint64_t line = first; line <= last; ++line)
      if (L->miss_lines[line & 255] == line + 1) L->miss_lines[line & 255] = 0;
}

// The build's source rewrite (_scanner.py) calls this just before an atomic whose result the statement
// discards: that atomic is a RED on the GPU.
HIDDEN void __gpuedu_prof_red() {
  Lane* L = running();
  if (L) L->red_thread = L->run->on ? launch_thread(*L) : 0;
}

// Inline PTX's memory instructions (gpuedu_profile.h): each call is the lane's access at the asm statement's site.
HIDDEN void __gpuedu_prof_ldsm(const void* row) {
  if (row) access(RA, (uint64_t)(uintptr_t)row, 16, LDSM);
}
HIDDEN void __gpuedu_prof_ldgsts_read(const void* src, unsigned n) {
  if (n) access(RA, (uint64_t)(uintptr_t)src, n, CP_LD);
}
HIDDEN void __gpuedu_prof_ldgsts_write(const void* dst, unsigned n) {
  if (n) access(RA, (uint64_t)(uintptr_t)dst, n, CP_ST);
}

}  // extern "C"

namespace {
__attribute__((noinline)) void block_slow(Lane& L, uintptr_t ra) {
  WarpState& W = *L.warp;
  Matcher& m = W.blocks;
  unsigned lane = L.lane;
  int32_t prev = (int32_t)m.cursor[lane];
  uint32_t j = m.cursor[lane];
  if (m.counting >> lane & 1u) {
    // A counting lane whose execution is one of the next few instances after its last one (what
    // match_counting looks at first), found without looking the instruction up.
    for (uint32_t k = j; k < j + LOOK_AHEAD && k < m.address.size(); ++k) {
      if (m.address[k] != ra) continue;
      uint32_t site = (uint32_t)(m.keys[k] >> 32);
      std::vector<uint32_t>& occ = m.occurrences[lane];
      if (site < occ.size() && occ[site] == (uint32_t)m.keys[k]) {
        occ[site]++;
        m.cursor[lane] = k + 1;
        W.instances[k + 1].mask |= 1u << lane;
        go_to(L, prev, (int32_t)site, (int32_t)k + 1);
        return;
      }
      break;   // (the instruction's next instance for this lane is elsewhere)
    }
  }
  uint32_t site = site_of(L, ra, BLOCK);
  bool created;
  int32_t slot = W.blocks.match(lane, site, ra, &created) + 1;  // instance 0 is the threads' start
  refresh_blocks(L);
  if (created) {
    W.instances.push_back(Instance{(int32_t)site, -2, -2, 1u << lane, 0, 0, 0});
  } else {
    W.instances[slot].mask |= 1u << lane;
    // A lane that follows the common sequence goes where the lane that laid it down went:
    // nothing to record (that lane set the previous instance's target when it appended this one).
    if (W.blocks.in_step) return;
  }
  go_to(L, prev, (int32_t)site, slot);
}
}  // namespace

extern "C" {
HIDDEN void __sanitizer_cov_trace_pc() {
  HeadView* h = head();
  Running& R = h->run;
  if (!R.on) return;
  uintptr_t ra = RA;
  uint32_t j = *R.block_cursor;
  // The lane's next step along the common sequence: all there is to do is to move its cursor.
  if (j < R.block_steps && R.block_address[j] == ra) {
    *R.block_cursor = j + 1;
    return;
  }
  block_slow(*h->prof, ra);
}

#define GPUEDU_PLAIN(N)                                                                                   \
  HIDDEN void __tsan_read##N(void* p) { access(RA, (uint64_t)(uintptr_t)p, N, LD); }                   \
  HIDDEN void __tsan_write##N(void* p) { access(RA, (uint64_t)(uintptr_t)p, N, ST); }                  \
  HIDDEN void __tsan_unaligned_read##N(void* p) { access(RA, (uint64_t)(uintptr_t)p, N, LD); }         \
  HIDDEN void __tsan_unaligned_write##N(void* p) { access(RA, (uint64_t)(uintptr_t)p, N, ST); }        \
  HIDDEN void __tsan_volatile_read##N(void* p) { access(RA, (uint64_t)(uintptr_t)p, N, LD); }          \
  HIDDEN void __tsan_volatile_write##N(void* p) { access(RA, (uint64_t)(uintptr_t)p, N, ST); }
GPUEDU_PLAIN(1)
GPUEDU_PLAIN(2)
GPUEDU_PLAIN(4)
GPUEDU_PLAIN(8)
GPUEDU_PLAIN(16)
#undef GPUEDU_PLAIN
HIDDEN void __tsan_read_range(void* p, size_t n) { access_range(RA, (uint64_t)(uintptr_t)p, n, LD); }
HIDDEN void __tsan_write_range(void* p, size_t n) { access_range(RA, (uint64_t)(uintptr_t)p, n, ST); }
// clang++ turns a struct's copy (float4 v = in[i]; out[i] = v) into a memcpy and sends it here, where
// g++ makes it 16-byte loads and stores (__tsan_read16...): counted as those, as a GPU's vector load and
// store. (A memcpy the source calls itself goes here under clang++, to the C library under g++.)
HIDDEN void* __tsan_memcpy(void* d, const void* s, size_t n) {
  access_range(RA, (uint64_t)(uintptr_t)s, n, LD);
  access_range(RA, (uint64_t)(uintptr_t)d, n, ST);
  return memcpy(d, s, n);
}
HIDDEN void* __tsan_memmove(void* d, const void* s, size_t n) {
  access_range(RA, (uint64_t)(uintptr_t)s, n, LD);
  access_range(RA, (uint64_t)(uintptr_t)d, n, ST);
  return memmove(d, s, n);
}
HIDDEN void* __tsan_memset(void* d, int c, size_t n) {
  access_range(RA, (uint64_t)(uintptr_t)d, n, ST);
  return memset(d, c, n);
}
HIDDEN void __tsan_func_entry(void*) {}
HIDDEN void __tsan_func_exit() {}
HIDDEN void __tsan_init() {}
HIDDEN void __tsan_vptr_update(void**, void*) {}
HIDDEN void __tsan_vptr_read(void**) {}

// Atomic builtins become these calls, which do what they say, atomically (a launch's blocks run on several
// OS threads); the atomicXxx functions count themselves (__gpuedu_prof_atomic) once each.
#define GPUEDU_ATOMICS(N, T)                                                                              \
  HIDDEN T __tsan_atomic##N##_load(const volatile T* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); } \
  HIDDEN void __tsan_atomic##N##_store(volatile T* a, T v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); } \
  HIDDEN T __tsan_atomic##N##_exchange(volatile T* a, T v, int) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); } \
  HIDDEN T __tsan_atomic##N##_fetch_add(volatile T* a, T v, int) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); } \
  HIDDEN T __tsan_atomic##N##_fetch_sub(volatile T* a, T v, int) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); } \
  HIDDEN T __tsan_atomic##N##_fetch_and(volatile T* a, T v, int) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); } \
  HIDDEN T __tsan_atomic##N##_fetch_or(volatile T* a, T v, int) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); } \
  HIDDEN T __tsan_atomic##N##_fetch_xor(volatile T* a, T v, int) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); } \
  HIDDEN T __tsan_atomic##N##_fetch_nand(volatile T* a, T v, int) { return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST); } \
  HIDDEN int __tsan_atomic##N##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {            \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); }            \
  HIDDEN int __tsan_atomic##N##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {              \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); }            \
  HIDDEN T __tsan_atomic##N##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                  \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return c; }
GPUEDU_ATOMICS(8, unsigned char)
GPUEDU_ATOMICS(16, unsigned short)
GPUEDU_ATOMICS(32, unsigned int)
GPUEDU_ATOMICS(64, unsigned long long)
#undef GPUEDU_ATOMICS
HIDDEN void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
HIDDEN void __tsan_atomic_signal_fence(int) {}

// ---- what Python reads (gpuedu/emulator/_instrument.py) ------------------------------------
#define EXPORT __attribute__((visibility("default")))
// Global memory as sorted [lo, hi) pairs (device allocations, and the module's __device__ variables, which
// `variable` marks: null when there are none), and whether to look for races; before each launch.
EXPORT void gpuedu_prof_configure(const uint64_t* ranges, int n, int racecheck, int memcheck, const uint8_t* variable) {
  S.memcheck = memcheck != 0;
  S.ranges.assign(n, Range{});
  for (int i = 0; i < n; ++i) S.ranges[i] = Range{ranges[2 * i], ranges[2 * i + 1]};
  if (variable) S.variable.assign(variable, variable + n); else S.variable.clear();
  S.racecheck = racecheck != 0;
  S.fast = !S.racecheck && !S.memcheck;
}

// The launch's counts: the sums of what each worker's blocks counted, and what the L2 model and the DRAM maps
// gave for the blocks' lines, taken in the grid's order.
EXPORT int gpuedu_prof_counters(uint64_t* out, int n) {
  uint64_t counters[N_COUNTERS] = {};
  for (Lane* L : S.lanes)
    if (L && L->launch == S.launch)
      for (int i = 0; i < N_COUNTERS; ++i) counters[i] += L->counters[i];
  uint64_t reads = 0, writes = 0;
  for (auto& m : S.dram_read) for (uint64_t w : m) reads += (uint64_t)__builtin_popcountll(w);
  for (auto& m : S.dram_write) for (uint64_t w : m) writes += (uint64_t)__builtin_popcountll(w);
  counters[DRAM_READ_SECTORS] = reads;
  counters[DRAM_WRITE_SECTORS] = writes;
  counters[L2_LINES] = S.line_key.size();
  counters[DRAM_READ_PAIRS] = S.dram_read_pairs;
  int k = n < N_COUNTERS ? n : N_COUNTERS;
  for (int i = 0; i < k; ++i) out[i] = counters[i];
  return N_COUNTERS;
}

// The L2 model's capacities in bytes, one per GPU (at most MAX_CAPACITIES); before each launch.
EXPORT int gpuedu_prof_l2_capacities(const uint64_t* bytes, int n) {
  S.n_capacities = n < UNBOUNDED ? n : UNBOUNDED;
  for (int k = 0; k < S.n_capacities; ++k) S.capacity_lines[k] = bytes[k] / 128;
  return S.n_capacities;
}

// Per capacity: 64-byte pairs read from DRAM, then 32-byte sectors written back by the launch's end.
EXPORT int gpuedu_prof_l2(uint64_t* out, int n) {
  uint64_t reads[MAX_CAPACITIES] = {}, writes[MAX_CAPACITIES] = {};
  l2_results(reads, writes);
  for (int k = 0; k < S.n_capacities && 2 * k + 1 < n; ++k) { out[2 * k] = reads[k]; out[2 * k + 1] = writes[k]; }
  return S.n_capacities;
}

// Instruction sites (return addresses; 0 memory, 1 basic block), for source lines.
EXPORT int gpuedu_prof_sites(uint64_t* address, int cap) {
  int n = (int)S.site_address.size();
  for (int i = 0; i < n && i < cap; ++i) address[i] = S.site_address[i];
  return n;
}

// The shared variables of the first worker (racecheck's launches run on it alone), as its hazards number them.
EXPORT int gpuedu_prof_shared_ranges(uint64_t* out, int cap) {
  const Lane* L = S.lanes[0];
  if (!L || L->launch != S.launch) return 0;
  int n = (int)L->shared.size();
  for (int i = 0; i < n && i < cap; ++i) { out[2 * i] = L->shared[i].lo; out[2 * i + 1] = L->shared[i].hi; }
  return n;
}

EXPORT int gpuedu_prof_errors(MemError* out, int cap) {
  int n = (int)S.errors.size();
  for (int i = 0; i < n && i < cap; ++i) out[i] = S.errors[i];
  return n;
}

EXPORT int gpuedu_prof_hazards(HazardOut* out, int cap) {
  int n = (int)S.hazards.size();
  for (int i = 0; i < n && i < cap; ++i) out[i] = S.hazards[i];
  return n;
}
}  // extern "C"
