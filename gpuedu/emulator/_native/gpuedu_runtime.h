// The emulator's runtime, compiled into every kernel module: it runs a grid
// block by block, either as a plain loop over threads (kernels with no barrier)
// or as fibers (one small stack per thread, switched at each barrier or warp
// intrinsic), and turns faults, deadlocks and interrupts into error codes.
// Its parts: the state and scheduler here, the context switch in
// gpuedu_fiber.h, the launch entry and signal handling in gpuedu_launch.h.
#pragma once
#ifndef GPUEDU_SCAN  // in the scan, macro expansions must stay attributed to the user's file
#pragma GCC system_header
#endif
#ifndef GPUEDU_SCAN
// No system header beyond the C library's basics that CUDA sources also see:
// the signal, mapping and thread calls live behind gpuedu_host.h.
#include "gpuedu_host.h"
#include "gpuedu_profile.h"
#include <tuple>
#include <type_traits>
#include <utility>
#if !(defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__)))
#define GPUEDU_UCONTEXT 1
#endif
#ifdef GPUEDU_UCONTEXT
#include <ucontext.h>  // the portable context switch's types (this one does bring signal.h along)
#endif

namespace __gpuedu {

// Error codes returned by the launch entry (mirrored in function.py).
enum : int {
  OK = 0, FAULT = 1, BARRIER_PARTIAL = 2, DEADLOCK = 3, INTERRUPT = 4, TIMEOUT = 5,
  LOOP_BARRIER = 6, WARP_EXITED = 7, WARP_MISMATCH = 8, STACK_OVERFLOW = 9, ASSERT = 10, TOO_MUCH_SHARED = 11,
  DIVIDE_BY_ZERO = 12, SIGNALLED = 13, STACK_SMASHED = 14, DEVICE_MISUSE = 15, DYNAMIC_SHARED_OVERRUN = 16,
  STATIC_SHARED_OVERRUN = 17,
  STOPPED = 100,  // (not a launch's code) why a worker stops: another failed
};
enum : int { READY = 0, AT_BLOCK = 1, AT_WARP = 2, DONE = 3,
             AT_MBARRIER = 4,    // suspended at an mbarrier wait (gpuedu_mbarrier.h), woken by its phase's completion
             AT_CLUSTER = 5 };   // suspended at barrier.cluster.wait (gpuedu_cluster.h)
enum : int { SCHED_FORWARD = 0, SCHED_REVERSE = 1, SCHED_RANDOM = 2 };
enum : int {
  W_SYNC = 0, W_SHFL = 1, W_SHFL_UP = 2, W_SHFL_DOWN = 3, W_SHFL_XOR = 4, W_BALLOT = 5, W_ANY = 6, W_ALL = 7,
  W_RED_ADD = 8, W_RED_MIN = 9, W_RED_MAX = 10, W_RED_AND = 11, W_RED_OR = 12, W_RED_XOR = 13,
  W_MMA = 14,  // mma.h: the lanes meet so that one of them computes the warp's product
  W_MATCH_ANY = 15, W_MATCH_ALL = 16,
  W_PTX = 17,  // gpuedu_ptx.h: the lanes meet at a warp-wide PTX instruction (mma.sync, ldmatrix)
};
static const char* const warp_op_names[] = {
  "__syncwarp", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync", "__ballot_sync",
  "__any_sync", "__all_sync", "__reduce_add_sync", "__reduce_min_sync", "__reduce_max_sync",
  "__reduce_and_sync", "__reduce_or_sync", "__reduce_xor_sync", "wmma::mma_sync", "__match_any_sync",
  "__match_all_sync", "mma.sync/ldmatrix",
};

constexpr unsigned MAX_THREADS = 1024;
constexpr size_t STACK_BYTES = 128 * 1024;  // per fiber; a guard page below each
constexpr size_t LAUNCH_STACK_BYTES = 8 << 20;  // the launch's own stack (gpuedu_launch.h), as a thread's default
constexpr size_t LAUNCH_STACK_HEADROOM = 256;  // left unused at its top, under the inaccessible window (gpuedu_launch.h)
constexpr size_t STACK_COLOURS = 64, STACK_COLOUR_BYTES = 64;  // stack tops staggered by cache line (stack_top)
constexpr size_t DYNAMIC_SHARED_BYTES = 96 * 1024;
// Reserved, inaccessible, after each worker's dynamic shared buffer: an index far past the launch's dynamic shared
// memory faults there (place_dynamic), never in another mapping.
constexpr size_t DYNAMIC_GUARD_BYTES = 16 << 20;

// What Python reads after a failed launch (layout mirrored in function.py).
struct ErrorInfo {
  int code;
  unsigned block[3];
  unsigned thread[3];
  int fault_is_write;        // 1 write, 0 read, -1 unknown
  unsigned long long fault_address;
  char message[768];
};

struct Fiber {
  void* sp;
#ifdef GPUEDU_UCONTEXT
  ucontext_t uc;
#endif
  uint3 tid;
};

struct Warp {
  unsigned arrived;           // lanes waiting at a warp intrinsic
  unsigned exited;            // lanes whose thread has finished
  unsigned existing;          // lanes that exist (the last warp of a block may be partial)
  unsigned need[32];          // the mask each waiting lane must meet
  int op[32];
  int arg[32];
  int width[32];
  unsigned long long value[32];
  unsigned long long result[32];
  // cooperative_groups::coalesced_threads(): the lanes waiting at one, where each waits, and
  // the group each was given (done: lanes whose group is known but which have not yet run on)
  unsigned coalescing, coalesced_done;
  const void* coalesce_site[32];
  unsigned coalesce_group[32];
  // A warpgroup's meeting (gpuedu_wgmma.h, wgmma.mma_async): the lanes waiting there, their operands left in
  // Runtime::mma_meeting, until the group's last thread computes for all 128 and clears them
  unsigned grouped;
};

// The fiber stacks are mapped once per process and shared by every loaded
// module (launches never overlap): a pool per module would cost each module
// 2,049 memory mappings, and a test run loads hundreds of modules against
// the kernel's limit of about 65,000 mappings.
struct StackPool {
  char* base;
  size_t bytes;
  size_t stride;
  char* launch_base;          // the launch's own stack (gpuedu_launch.h): a guard page, then the stack
  size_t launch_bytes;
};

// A cp.async copy issued and not yet landed (gpuedu_ptx.h): its source's bytes, read when it was issued, are
// written to `dst` at the wait that covers its group.
struct AsyncCopy {
  unsigned char* dst;
  unsigned char data[16];
  unsigned bytes;
  unsigned group;             // the thread's commit count when it was issued: the group it belongs to
};
constexpr unsigned ASYNC_IN_FLIGHT = 128;   // a thread's copies in flight at most (2 KiB of 16-byte copies)
struct AsyncQueue {
  AsyncCopy copies[ASYNC_IN_FLIGHT];
  unsigned n;                 // copies in flight
  unsigned committed;         // cp.async.commit_group calls so far in this block
};
struct MBarriers;             // a block's mbarrier objects and the threads waiting on them (gpuedu_mbarrier.h)
struct ClusterBarrier;        // barrier.cluster's state (gpuedu_cluster.h)

struct Runtime {
  StackPool* pool;            // process-wide, set by Python when the module is loaded
  // launch
  void (*thread_fn)(void*);
  void* thread_arg;
  unsigned nthreads;
  int schedule;
  unsigned long long rng;
  unsigned long long seed;    // the launch's (GPUEDU_SEED): each block's shuffle is drawn from it and the block
  bool fiber_mode;
  int worker;                 // which of the launch's workers this thread is (0: the thread that launched)
  unsigned long long block_linear;  // the running block's index in the grid (x fastest)
  // fibers of the current block
  Fiber* fibers;
  char* stacks;
  size_t stacks_bytes;
  size_t stack_stride;        // a stack and its guard page
  void* main_sp;
#ifdef GPUEDU_UCONTEXT
  ucontext_t main_uc;
#endif
  unsigned order[MAX_THREADS];
  unsigned char state[MAX_THREADS];  // READY, AT_BLOCK, AT_WARP, AT_MBARRIER or DONE, by linear thread id (bytes:
                                     // a barrier's release rewrites them all)
  unsigned pos;               // position in order[] of the running fiber
  unsigned cur;               // linear id of the running fiber
  unsigned n_ready, n_warp, n_block, n_done;   // (n_ready and n_block apart: the compiler would update the pair in
                                               // one vector store, which the loads after it wait for)
  int barrier_count, barrier_result;
  int barrier_line;           // source line of the __syncthreads the waiting threads reached (0: none yet)
  unsigned barrier_first;     // the first thread that reached it
  Warp warps[MAX_THREADS / 32];
  const void* kernel;         // the KernelInfo of the running launch
  size_t shared_limit;        // static + dynamic shared memory allowed per block
  int n_known;                // static __shared__ variables whose guards this worker has filled (SharedVars)
  unsigned char* dyn;         // the launch's dynamic shared memory, in dyn_buffer (place_dynamic)
  unsigned char* arena;       // this worker's static __shared__ variables, at the offsets their module gave
  size_t arena_open;          // the arena's first bytes that are accessible (whole pages; the rest faults)
  unsigned char* dyn_buffer;  // this worker's dynamic shared buffer: DYNAMIC_SHARED_BYTES, then inaccessible pages
  unsigned char* dyn_end;     // the end of the accessible bytes of the buffer R.dyn lies in
  size_t dynamic_shared_bytes;
  bool dynamic_used;          // an extern __shared__ declaration ran in this launch
  // watched bytes: [0] past the dynamic shared memory, then the guards after static __shared__ arrays
  unsigned char* watched[257];
  size_t watched_bytes[257];
  int watched_shared[257];    // which R.shared entry a guard follows
  int n_watched;
  int barrier_site;           // which __syncthreads the waiting threads reached (two may share a line)
  void* mma_meeting[MAX_THREADS / 32][32];   // where each warp's lanes leave their accumulators at mma_sync (mma.h),
                                             // or their operands at a warp-wide PTX instruction (gpuedu_ptx.h)
  AsyncQueue* async;          // each thread's cp.async copies in flight (gpuedu_ptx.h), made when first used
  bool async_used;            // some thread of this block issued one: the queues are emptied before the next
  MBarriers* mbar;            // the block's mbarriers (gpuedu_mbarrier.h), made when first used
  bool mbar_used;             // some thread of this block used one: they are forgotten before the next block
  // clusters (gpuedu_cluster.h)
  ClusterBarrier* cluster;    // the running cluster's barrier: the launch's, in a cluster launch; else this worker's
                              // own once a block used it (null until then, in each block)
  ClusterBarrier* own_cluster;  // this worker's, for a launch without clusters (each block a cluster of one)
  unsigned cluster_rank;      // the block's rank in its cluster
};

// The launch's own stack (gpuedu_launch.h): where a worker's switch to it saved its caller's stack pointer.
struct LaunchStack {
  void* sp;
  void* host_sp;
  void* body;
};

// A worker: an OS thread running blocks of a launch, with a state of its own, as each SM of a GPU has its own
// (threadIdx and blockIdx first, then the scheduler's state, its error record and its launch stack; its shared
// memory is mapped apart: Runtime's arena and dyn_buffer). Launches run one at a time, so a worker's state serves
// every module that shares its layout (the prelude's; ucontext's fibers, GPUEDU_UCONTEXT, lay it out otherwise and
// have a set of their own); the process's Workers hold them, and __gpuedu_worker points at this thread's.
struct Worker {
  WorkerHead head;
  Runtime r;
  ErrorInfo e;
  LaunchStack l;
};
static_assert(sizeof(Worker) <= host::WORKER_BYTES, "a worker's state must fit where the thread-local pointer starts");
static_assert(__builtin_offsetof(Worker, head) == 0, "threadIdx and blockIdx are at the worker's start");
#ifdef GPUEDU_PROFILE
static_assert(__builtin_offsetof(WorkerHead, prof) == prof::WORKER_HEAD_PROF &&
              __builtin_offsetof(WorkerHead, prof_running) == prof::WORKER_HEAD_RUNNING &&
              sizeof(WorkerHead::prof_running) == prof::WORKER_HEAD_RUNNING_BYTES, "the counters find theirs there");
#endif

#if !defined(__linux__)
alignas(128) GPUEDU_HIDDEN unsigned char only_worker[sizeof(Worker)];
extern "C" GPUEDU_HIDDEN WorkerHead* __gpuedu_worker = (WorkerHead*)only_worker;
#endif
inline Worker& worker() { return *(Worker*)__gpuedu_worker; }
inline Runtime& rt() { return worker().r; }
inline ErrorInfo& err() { return worker().e; }
// Within the runtime's headers (undefined again at their end), R is the running worker's runtime state and E its
// error record.
#define R (::__gpuedu::rt())
#define E (::__gpuedu::err())
#define L (::__gpuedu::worker().l)

// The process's worker states of this module's layout (host::Workers), by worker.
inline void** worker_states() {
#ifdef GPUEDU_UCONTEXT
  return host::workers_of_process()->states[1];
#else
  return host::workers_of_process()->states[0];
#endif
}

// What Python reads after a failed launch: the error record of the worker whose failure stopped it.
GPUEDU_HIDDEN ErrorInfo E_launch;
// Every `extern __shared__` array the compiler could not rewrite as a pointer names this storage (by this
// assembler name): worker 0's dynamic shared memory, in a module whose blocks then run on worker 0 alone.
alignas(128) GPUEDU_HIDDEN unsigned char dynamic_shared[DYNAMIC_SHARED_BYTES] __asm__("__gpuedu_dynamic_shared");
// Set when the module loads if one of its arrays names it (the compiler adds the assignment): worker 0's
// dynamic shared memory is then this storage, at its start, not the worker's buffer.
GPUEDU_HIDDEN bool dynamic_named;

// What the workers of a launch share: the next block to run, and whether to stop.
struct Grid {
  unsigned long long blocks;  // in the grid
  unsigned long long next;    // the next block a worker takes (atomically)
  unsigned long long chunk;   // how many blocks a worker takes at once
  volatile int stop_reason;   // TIMEOUT when the watchdog asked the launch to stop, INTERRUPT on Ctrl-C,
                              // STOPPED when a worker failed
  unsigned grid;              // which grid of the launch runs: 0, then those launched from device code
  unsigned cluster[3];        // the running grid's cluster shape, in blocks (1, 1, 1: no clusters)
  unsigned cluster_size;      // blocks in a cluster
};
GPUEDU_HIDDEN Grid G;

// The module's static __shared__ variables declared so far (each registers the first time its declaration runs,
// or when the module loads for one at file scope). One in a function is a slot of each worker's arena, at the
// offset it was given; one at file scope is a variable of the module (absolute), whose blocks then run on one
// worker.
constexpr size_t ARENA_BYTES = 64 << 20;   // reserved per worker, touched as used (static shared memory is 48 KiB
                                            // a kernel; a module's kernels each have theirs)
struct SharedVar {
  size_t offset;              // in the arena
  unsigned char* absolute;    // or its address (file scope)
  size_t n;
  const void* kernel;         // the kernel whose launch declared it (nullptr: at file scope, every kernel's)
  ptrdiff_t guard;            // the watched bytes after it, from its start (GuardedShared), or -1
  const char* name;
};
struct SharedVars {
  SharedVar at[256];
  int n;                      // entries [0, n) are complete (set with release order, read with acquire)
  int lock;
  size_t arena_used;
};
GPUEDU_HIDDEN SharedVars S;

inline unsigned char* shared_address(const SharedVar& v) { return v.absolute ? v.absolute : R.arena + v.offset; }
inline int shared_count() { return __atomic_load_n(&S.n, __ATOMIC_ACQUIRE); }
// Whether the module keeps a __shared__ variable at file scope, or names its dynamic shared memory as an array
// the compiler could not rewrite: storage of the module's own, one for every block (its blocks run on one worker).
inline bool module_shares_shared_memory() {
  for (int i = 0, n = shared_count(); i < n; ++i)
    if (S.at[i].absolute) return true;
  return dynamic_named;
}

// A worker's arena is reserved inaccessible and opened, whole pages, as far as the running module's variables
// reach (guards included): an index far past them faults instead of landing in unused arena. Each worker opens
// (or closes) its own to the module's extent when a launch starts (open_own_arena); a variable registered during
// a launch opens every worker's before its slot is published (open_arenas), so that a worker that then runs the
// declaration finds its slot accessible. Both under S.lock. A profiled build opens it all: memcheck reports such an
// index (with the line), and a plain access must not fault where the counters' run expects none.
inline size_t arena_extent() {
#ifdef GPUEDU_PROFILE
  return ARENA_BYTES;
#else
  size_t page = host::page_bytes();
  return (S.arena_used + page - 1) / page * page;
#endif
}

inline bool open_arena(Runtime& r, size_t bytes) {
  unsigned char* a = __atomic_load_n(&r.arena, __ATOMIC_ACQUIRE);
  if (!a || r.arena_open == bytes) return true;
  bool ok = bytes > r.arena_open ? host::set_accessible(a + r.arena_open, bytes - r.arena_open, true)
                                 : host::set_accessible(a + bytes, r.arena_open - bytes, false);
  if (ok) r.arena_open = bytes;
  return ok;
}

inline bool open_arenas() {
  size_t want = arena_extent();
  void** states = worker_states();
  bool ok = true;
  for (int w = 0; w < host::MAX_WORKERS; ++w) {
    Worker* state = (Worker*)__atomic_load_n(&states[w], __ATOMIC_ACQUIRE);
    if (state && state->r.arena_open < want && !open_arena(state->r, want)) ok = false;
  }
  return ok;
}

GPUEDU_PROF_QUIET inline bool open_own_arena() {
  while (__atomic_exchange_n(&S.lock, 1, __ATOMIC_ACQUIRE)) {}
  bool ok = open_arena(R, arena_extent());
  __atomic_store_n(&S.lock, 0, __ATOMIC_RELEASE);
  return ok;
}

// Where the launch's dynamic shared memory lies in this worker's buffer (once its size is known): in a plain build
// against the buffer's end, rounded to the 128-byte line CUDA's shared memory is allocated in (the bytes up to
// that line past the launch's are watched, the next page faults: an index far past it stops the thread that made
// it); in a profiled build at the start, as memcheck's bounds check expects; in a module whose arrays name
// dynamic_shared (one worker), there.
GPUEDU_PROF_QUIET inline void place_dynamic() {
  if (dynamic_named && R.worker == 0) {
    R.dyn = dynamic_shared;
    R.dyn_end = dynamic_shared + DYNAMIC_SHARED_BYTES;
    return;
  }
  size_t page = host::page_bytes();
  R.dyn_end = R.dyn_buffer + (DYNAMIC_SHARED_BYTES + page - 1) / page * page;
#ifdef GPUEDU_PROFILE
  R.dyn = R.dyn_buffer;
#else
  size_t used = (R.dynamic_shared_bytes + 127) / 128 * 128;
  R.dyn = used <= DYNAMIC_SHARED_BYTES ? R.dyn_end - used : R.dyn_buffer;   // (more fails the launch before it runs)
#endif
}

// A worker state other than the launching one's (another worker, or another block of a cluster) takes the launch's
// sizes and settings from it, and starts with no error. (A function of its own, called after the switch to that
// state: a profiled build's code may keep the thread's state pointer it read first; gpuedu_cluster.h's switch_rank.)
__attribute__((noinline)) inline void take_launch(const Runtime* from) {
  R.nthreads = from->nthreads;
  R.schedule = from->schedule;
  R.seed = from->seed;
  R.kernel = from->kernel;
  R.shared_limit = from->shared_limit;
  R.dynamic_shared_bytes = from->dynamic_shared_bytes;
  place_dynamic();
  E.code = 0;
  E.message[0] = 0;
}
}  // namespace __gpuedu

// Bytes of printf output waiting to be shown; Python polls it after each launch.
extern "C" __attribute__((visibility("default"))) size_t gpuedu_printf_len;
size_t gpuedu_printf_len = 0;
// A GPU keeps a launch's printf output in a FIFO of limit.PRINTF_FIFO_SIZE bytes (1 MiB by default) and
// drops what does not fit; Python sets the limit (Context.set_limit) and reports what was dropped.
extern "C" __attribute__((visibility("default"))) size_t gpuedu_printf_limit;
size_t gpuedu_printf_limit = 1 << 20;
extern "C" __attribute__((visibility("default"))) size_t gpuedu_printf_dropped;
size_t gpuedu_printf_dropped = 0;

namespace __gpuedu {

// Kept by the worker with its block's index; the launch lays the records out in block order when it ends
// (host::printf_collect), keeping whole records within gpuedu_printf_limit, as a GPU's FIFO does.
inline void printf_append(const char* text, size_t n) { host::printf_add(R.worker, G.grid, R.block_linear, text, n); }

// ---- shared memory -------------------------------------------------------------------
// Shared memory starts each block with garbage on a GPU, often the previous
// block's values, which hides a missing __syncthreads. The emulator fills it
// with 0xff bytes (NaN as float, -1 as int) before every block instead, so
// reading a value no thread of this block wrote shows. The compiler registers
// each static __shared__ variable the first time its declaration runs.
// Static shared memory a kernel has declared so far (its declarations register
// on first use, so this is known once a block has run).
inline size_t static_shared_of(const void* kernel) {
  size_t total = 0;
  // A variable declared at file scope registers when the module loads, outside any kernel: every
  // kernel counts it.
  for (int i = 0, n = shared_count(); i < n; ++i)
    if (S.at[i].kernel == kernel || !S.at[i].kernel) total += S.at[i].n;
  return total;
}

[[noreturn]] void fail_too_much_shared(size_t static_bytes);

// A static __shared__ array is a member of this struct (the compiler rewrites its declaration), so the
// bytes right after its end are the guard's: the runtime fills them and checks them after every block
// (check_watches), which catches a block that wrote past the array's end.
constexpr size_t SHARED_GUARD_BYTES = host::WATCH_MAX_BYTES;
template <typename T, size_t Align> struct GuardedShared {
  alignas(Align > alignof(T) ? Align : alignof(T)) T value;
  unsigned char guard[SHARED_GUARD_BYTES];
};

// The guard after S.at[i] joins this worker's watched bytes (check_watches).
inline void watch_guard(int i) {
  if (R.n_watched >= 257) return;
  R.watched[R.n_watched] = shared_address(S.at[i]) + S.at[i].guard;
  R.watched_bytes[R.n_watched] = SHARED_GUARD_BYTES;
  R.watched_shared[R.n_watched] = i;
  ++R.n_watched;
}

// A profiled build registers on every execution of the declaration (not once, behind a
// static guard whose branch only the first thread would take) and keeps this function
// out of the counters.
// A new entry of S (under its lock); the registering worker's copy is garbage from now, its guard filled and
// watched (fill_watches adds it when later launches start; poison_shared for the other workers).
GPUEDU_PROF_QUIET inline int add_shared(const SharedVar& v) {
  while (__atomic_exchange_n(&S.lock, 1, __ATOMIC_ACQUIRE)) {}
  int i = -1;
  if (S.n < 256) {
    i = S.n;
    S.at[i] = v;
    __atomic_store_n(&S.n, i + 1, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&S.lock, 0, __ATOMIC_RELEASE);
  return i;
}

GPUEDU_PROF_QUIET inline void shared_registered(int i, unsigned char* p, size_t n) {
  memset(p, 0xff, n);
#ifndef GPUEDU_PROFILE
  if (i >= 0 && S.at[i].guard >= 0) {
    memset(p + S.at[i].guard, host::WATCH_PATTERN, SHARED_GUARD_BYTES);
    // In a launch, watched from now on.
    if (host::launching() && R.n_watched >= 1) {
      watch_guard(i);
      if (R.n_known == i) R.n_known = i + 1;   // (else poison_shared adds those before it first)
    }
  }
#endif
  size_t static_bytes = static_shared_of(R.kernel);
  // (At file scope the declaration registers while the module loads: no launch to fail yet.)
  if (host::launching() && static_bytes + R.dynamic_shared_bytes > R.shared_limit)
    fail_too_much_shared(static_bytes);
}

// A static __shared__ variable at file scope (the compiler adds this after its declaration).
GPUEDU_PROF_QUIET inline bool register_shared(void* p, size_t n, unsigned char* guard = nullptr,
                                              const char* name = nullptr) {
  for (int i = 0, k = shared_count(); i < k; ++i)
    if (S.at[i].absolute == p) return true;
#ifdef GPUEDU_PROFILE
  bool counting = prof::suspend();  // what runs below once per variable is the runtime's, not the thread's
  prof::shared_range(p, n);
#endif
  // (While the module loads no kernel runs: the variable is every kernel's.)
  int i = add_shared(SharedVar{0, (unsigned char*)p, n, host::launching() ? R.kernel : nullptr,
                               guard ? (ptrdiff_t)(guard - (unsigned char*)p) : (ptrdiff_t)-1, name});
  shared_registered(i, (unsigned char*)p, n);
#ifdef GPUEDU_PROFILE
  prof::resume(counting);
#endif
  return true;
}

// The slot a static __shared__ variable in a function has in every worker's arena: its offset + 1 kept in the
// declaration's key (0 until the first time it runs). The compiler rewrites the declaration to
// `auto& name = shared_var<T>(&key, "name")`.
template <typename T> struct SlotOf {
  static constexpr size_t value_bytes = sizeof(T);
  static constexpr ptrdiff_t guard = -1;
};
template <typename T, size_t A> struct SlotOf<GuardedShared<T, A>> {
  static constexpr size_t value_bytes = sizeof(T);
  using Holder = GuardedShared<T, A>;
  static constexpr ptrdiff_t guard = __builtin_offsetof(Holder, guard);
};

[[noreturn]] void fail_arena_full(size_t bytes);
[[noreturn]] void fail_arena_closed(size_t bytes);

GPUEDU_PROF_QUIET __attribute__((noinline)) inline long long shared_slot(long long* key, size_t bytes, size_t align,
                                                                      size_t value_bytes, ptrdiff_t guard,
                                                                      const char* name) {
  long long k = __atomic_load_n(key, __ATOMIC_ACQUIRE);
#ifdef GPUEDU_PROFILE
  // Each worker's copy of the variable is its own, at this offset of its arena (the counters tell shared memory
  // by its address). (R would call the module's instrumented worker(), which g++ does not inline here.)
  if (k) {
    prof::shared_slot(k - 1, value_bytes);
    return k;
  }
  bool counting = prof::suspend();
#else
  if (k) return k;
#endif
  while (__atomic_exchange_n(&S.lock, 1, __ATOMIC_ACQUIRE)) {}
  k = *key;   // (two workers may both run a declaration's first time: the second finds the first's slot)
  size_t offset = 0;
  int index = -1;
  bool fresh = !k;
  if (fresh) {
    // Each variable starts a 128-byte line of its own, as a kernel's shared memory starts at 0 on a GPU: how many
    // wavefronts an access takes then depends on the kernel alone, not on which variables registered before it.
    if (align < 128) align = 128;
    offset = (S.arena_used + align - 1) / align * align;
    if (offset + bytes > ARENA_BYTES) {
      __atomic_store_n(&S.lock, 0, __ATOMIC_RELEASE);
      fail_arena_full(offset + bytes);
    }
    S.arena_used = offset + bytes;
    if (!open_arenas()) {
      __atomic_store_n(&S.lock, 0, __ATOMIC_RELEASE);
      fail_arena_closed(offset + bytes);
    }
    k = (long long)offset + 1;
    if (S.n < 256) {
      index = S.n;
      S.at[index] = SharedVar{offset, nullptr, value_bytes, R.kernel, guard, name};
      __atomic_store_n(&S.n, index + 1, __ATOMIC_RELEASE);
    }
    // Published before the lock goes: a worker that runs the declaration's first time meanwhile waits at the lock
    // and then finds this slot. (Published after it, the second worker made a slot of its own, and threads of one
    // block could read the variable at two offsets: a reduction's partial sums then read the poison, NaN.)
    __atomic_store_n(key, k, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&S.lock, 0, __ATOMIC_RELEASE);
  if (fresh) shared_registered(index, R.arena + offset, value_bytes);
#ifdef GPUEDU_PROFILE
  prof::shared_slot(k - 1, value_bytes);   // (whichever worker made the slot)
  prof::resume(counting);
#endif
  return k;
}

template <typename T> inline T& shared_var(long long* key, const char* name) {
#ifdef GPUEDU_PROFILE
  // (Every thread calls the runtime here, so that the counters see no branch that only the first thread takes.)
  long long k = shared_slot(key, sizeof(T), alignof(T), SlotOf<T>::value_bytes, SlotOf<T>::guard, name);
#else
  long long k = *key;
  if (__builtin_expect(!k, 0))
    k = shared_slot(key, sizeof(T), alignof(T), SlotOf<T>::value_bytes, SlotOf<T>::guard, name);
#endif
  return *(T*)(R.arena + (k - 1));
}

// The bytes of the dynamic buffer just past what the launch asked for (shared=) are watched: a block that
// writes there wrote past its dynamic shared memory, which faults on a GPU. So are the guards after static
// __shared__ arrays. They are filled when the launch starts (and a guard when its array registers) and
// checked after every block: a kernel that declares extern __shared__ marks the launch, and only then is
// the dynamic buffer's watch checked after each block too (else once, after the last). A profiled build
// leaves all this to memcheck, which names the thread and the line.
constexpr size_t DYNAMIC_WATCH_BYTES = 256;

inline size_t dynamic_watch_bytes() {
  if (R.dyn + R.dynamic_shared_bytes >= R.dyn_end) return 0;
  size_t room = (size_t)(R.dyn_end - (R.dyn + R.dynamic_shared_bytes));
  return room < DYNAMIC_WATCH_BYTES ? room : DYNAMIC_WATCH_BYTES;
}

// What an extern __shared__ declaration evaluates to (the compiler rewrites it so): the dynamic buffer.
inline unsigned char* dynamic_shared_used() {
  R.dynamic_used = true;
  return R.dyn;
}

// Before each block: its shared memory is garbage (0xff bytes). The guards of variables another worker has
// registered since this worker last looked are filled and watched from now on.
inline void poison_shared() {
  int n = shared_count();
  for (int i = 0; i < n; ++i) memset(shared_address(S.at[i]), 0xff, S.at[i].n);
  if (R.dynamic_shared_bytes) memset(R.dyn, 0xff, R.dynamic_shared_bytes);
#ifndef GPUEDU_PROFILE
  for (; R.n_known < n; ++R.n_known)
    if (S.at[R.n_known].guard >= 0) {
      memset(shared_address(S.at[R.n_known]) + S.at[R.n_known].guard, host::WATCH_PATTERN, SHARED_GUARD_BYTES);
      watch_guard(R.n_known);
    }
#endif
}

inline void fill_watches() {
#ifndef GPUEDU_PROFILE
  R.dynamic_used = false;
  R.watched[0] = R.dyn + R.dynamic_shared_bytes;
  R.watched_bytes[0] = dynamic_watch_bytes();
  R.n_watched = 1;
  R.n_known = shared_count();
  for (int i = 0; i < R.n_known; ++i)
    if (S.at[i].guard >= 0) watch_guard(i);
  host::fill_watched(R.watched, R.watched_bytes, R.n_watched);
#endif
}

[[noreturn]] void fail_dynamic_shared_overrun(size_t first, size_t last);
[[noreturn]] void fail_static_shared_overrun(int which, size_t first, size_t last);

// After a block (final: after the last): did it write past a static __shared__ array, or past its
// dynamic shared memory?
inline void check_watches(bool final) {
#ifndef GPUEDU_PROFILE
  size_t first = 0, last = 0;
  int from = R.dynamic_used || final ? 0 : 1;
  int k = host::first_changed(R.watched + from, R.watched_bytes + from, R.n_watched - from, &first, &last);
  if (k < 0) return;
  k += from;
  if (k == 0) fail_dynamic_shared_overrun(R.dynamic_shared_bytes + first, R.dynamic_shared_bytes + last);
  fail_static_shared_overrun(R.watched_shared[k], first, last);
#else
  (void)final;
#endif
}

// ---- failing a launch ---------------------------------------------------------
// Everything ends in a jump (host::jump_out) back to the launch entry (on the main stack),
// whether we are in the thread loop, on a fiber stack, or in a signal handler.
__attribute__((noreturn, format(printf, 2, 3))) inline void fail(int code, const char* fmt, ...) {
  E.code = code;
  E.block[0] = blockIdx.x; E.block[1] = blockIdx.y; E.block[2] = blockIdx.z;
  E.thread[0] = threadIdx.x; E.thread[1] = threadIdx.y; E.thread[2] = threadIdx.z;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(E.message, sizeof E.message, fmt, ap);
  va_end(ap);
  host::jump_out(code);
}

}  // namespace __gpuedu

#include "gpuedu_fiber.h"

namespace __gpuedu {

inline void ensure_stacks() {
  if (R.stacks) return;
  if (!R.pool || !R.pool->base) {
    size_t stride = 0, total = 0;
    char* p = host::map_stacks(STACK_BYTES, MAX_THREADS, &stride, &total);  // a guard page under each
    if (!p) fail(DEADLOCK, "could not map %zu bytes for the threads' stacks", (size_t)MAX_THREADS * STACK_BYTES);
    static StackPool own;
    if (!R.pool) R.pool = &own;
    R.pool->base = p;
    R.pool->bytes = total;
    R.pool->stride = stride;
  }
  R.stacks = R.pool->base;
  R.stacks_bytes = R.pool->bytes;
  R.stack_stride = R.pool->stride;
  R.fibers = (Fiber*)calloc(MAX_THREADS, sizeof(Fiber));
}

// Stacks lie at a 132 KiB stride, so their tops would all share the same L1
// cache sets (and alias each other mod 4 KiB): each block switches between
// hundreds of them, and they would keep evicting one another. Starting each
// stack up to 63 cache lines below its top (STACK_COLOURS) spreads them over
// the cache's sets.
inline char* stack_top(unsigned i) {
  return R.stacks + (i + 1) * R.stack_stride - (i % STACK_COLOURS) * STACK_COLOUR_BYTES;
}

// ---- the scheduler --------------------------------------------------------------
GPUEDU_PROF_QUIET inline void resume(unsigned pos, Fiber* me) {
  Runtime& r = R;  // (this worker's: its address found once)
  r.pos = pos;
  unsigned t = r.order[pos];
  if (me && t == r.cur) return;  // the caller is the next to run: carry on
  Fiber* to = &r.fibers[t];
  r.cur = t;
  __gpuedu_threadIdx = to->tid;
  // The fibers after this one in schedule order usually run next: start loading
  // the saved registers and frame of the one after next now (each stack top is a
  // cache and TLB miss; one switch ahead is too late to hide it).
  unsigned after = pos + 2 < r.nthreads ? pos + 2 : 0;
  const char* next_sp = (const char*)r.fibers[r.order[after]].sp;
  __builtin_prefetch(next_sp);
  __builtin_prefetch(next_sp + 64);
  switch_to(me, me ? &me->sp : &r.main_sp, to);
}

[[noreturn]] void report_deadlock();
// (gpuedu_mbarrier.h) Threads polling an mbarrier with test_wait made ready again when nothing else can run
// (false: there were none, or their polls have stopped changing anything); a deadlock described from the threads
// waiting on mbarriers, if any wait; the block's mbarriers forgotten before the next block.
GPUEDU_PROF_QUIET bool wake_mbarrier_pollers();
void report_mbarrier_deadlock();
GPUEDU_PROF_QUIET void forget_mbarriers();

// Called by the running fiber once it can no longer run (barrier, warp
// intrinsic, finished): run the next ready fiber in schedule order; release a
// block barrier that every thread has reached; detect deadlock.
// Called by the running fiber once it can no longer run (barrier, warp
// intrinsic, finished): run the next ready fiber in schedule order; release a
// block barrier that every thread has reached; detect deadlock. (The switch to the next ready fiber is the hot
// path, small and inlined into __syncthreads and the warp intrinsics; the rest, once a barrier's round, is
// run_when_none_ready's, out of line.)
GPUEDU_PROF_QUIET void run_when_none_ready(Fiber* me);
GPUEDU_PROF_QUIET_PART inline void run_next() {
  Runtime& r = R;  // (this worker's: its address found once)
  Fiber* me = &r.fibers[r.cur];
  unsigned n = r.nthreads;
  if (r.n_ready) {
    for (unsigned k = 1; k <= n; ++k) {
      unsigned p = r.pos + k;
      if (p >= n) p -= n;
      if (r.state[r.order[p]] == READY) { resume(p, me); return; }
    }
  }
  run_when_none_ready(me);
}

// No fiber is ready: every thread is done; or all wait at __syncthreads, which is released; or, where mbarriers are
// used, the main context (run_block_fibers) makes pollers ready or lands TMA copies before it calls a deadlock;
// else a deadlock.
GPUEDU_PROF_QUIET __attribute__((noinline)) inline void run_when_none_ready(Fiber* me) {
  Runtime& r = R;
  unsigned n = r.nthreads;
  if (r.n_block && !r.n_warp && r.n_block + r.n_done == n) {
    if (r.n_done) {
      __gpuedu_threadIdx = me->tid;
      fail(BARRIER_PARTIAL,
           "__syncthreads reached by %u of %u threads; %u exited - __syncthreads must be reached by every "
           "thread of the block (look for a return, or an if around the barrier, that not every thread takes)",
           r.n_block, n, r.n_done);
    }
    // Everyone arrived: release the barrier and start again from the first thread in schedule order.
    r.barrier_result = r.barrier_count;
    r.barrier_count = 0;
    r.barrier_line = 0;
    GPUEDU_PROF(barrier_released());
    memset(r.state, READY, n);  // one vector store per 32 threads
    r.n_ready = n;
    r.n_block = 0;
    resume(0, me);
    return;
  }
  if (r.n_done == n || r.mbar_used || G.cluster_size > 1) {
    // every thread done, or an mbarrier's block stuck: run_block_fibers goes on; or, in a cluster, this block
    // waits for the others: the cluster's loop (run_clusters) goes on
    switch_to_main(me);
    return;
  }
  report_deadlock();
}

[[noreturn]] inline void report_cluster_deadlock();
inline unsigned cluster_waiting();   // (gpuedu_cluster.h)
inline void report_deadlock() {
  // Threads waiting at barrier.cluster first (the report names who has not arrived);
  if (cluster_waiting()) report_cluster_deadlock();
  // then a thread waiting on an mbarrier (the lanes and threads that wait for it are waiting for its barrier);
  // then the first warp that waits at a warp intrinsic; else the barrier.
  if (R.mbar_used) report_mbarrier_deadlock();
  for (unsigned w = 0; w < (R.nthreads + 31) / 32; ++w) {
    Warp& W = R.warps[w];
    if (!W.arrived) continue;
    int lane = __builtin_ctz(W.arrived);
    unsigned need = W.need[lane];
    unsigned waiting = (unsigned)__builtin_popcount(W.arrived & need);
    unsigned exited = (unsigned)__builtin_popcount(W.exited & need);
    unsigned elsewhere = (unsigned)__builtin_popcount(need & ~W.arrived & ~W.exited);
    __gpuedu_threadIdx = R.fibers[w * 32 + lane].tid;
    if (exited)
      fail(WARP_EXITED,
           "warp %u: %u threads at %s(mask=0x%08x), %u exited - every lane named in the mask must reach the "
           "intrinsic (use __activemask() or __ballot_sync to build the mask of the lanes still running)",
           w, waiting, warp_op_names[W.op[lane]], need, exited);
    fail(DEADLOCK,
         "deadlock: warp %u has %u threads at %s(mask=0x%08x) waiting for %u lanes that are at __syncthreads "
         "or another intrinsic - every lane in the mask must reach the same intrinsic",
         w, waiting, warp_op_names[W.op[lane]], need, elsewhere);
  }
  fail(DEADLOCK, "deadlock: %u threads at __syncthreads, %u at warp intrinsics, %u exited", R.n_block, R.n_warp,
       R.n_done);
}

GPUEDU_PROF_QUIET void cluster_thread_exited();   // (gpuedu_cluster.h)

// A fiber runs its thread once per block: when the thread has finished, the
// fiber waits (DONE) until the next block makes it READY, then runs it again
// from the top of its stack, so fibers are prepared once per launch.
inline void fiber_entry() {
  Runtime& r = R;  // (this worker's: its address found once)
  for (;;) {
    GPUEDU_PROF(enter(r.cur));
    r.thread_fn(r.thread_arg);
    GPUEDU_PROF(thread_done(r.cur));
    r.state[r.cur] = DONE;
    r.n_ready--;
    r.n_done++;
    r.warps[r.cur / 32].exited |= 1u << (r.cur % 32);
    if (r.cluster) cluster_thread_exited();   // barrier.cluster waits for it no more
    // A lane that exits may leave lanes waiting for it forever; run_next finds out.
    run_next();
  }
}

[[noreturn]] inline void fail_too_much_shared(size_t static_bytes) {
  fail(TOO_MUCH_SHARED,
       "too many resources requested for launch: %zu bytes of static __shared__ memory + %zu bytes of dynamic "
       "(shared=) make %zu bytes per block; the limit is %zu bytes",
       static_bytes, R.dynamic_shared_bytes, static_bytes + R.dynamic_shared_bytes, R.shared_limit);
}

[[noreturn]] inline void fail_loop_mode(const char* what) {
  fail(LOOP_BARRIER,
       "reached %s while running its threads as a plain loop (the emulator's analysis found no barrier in "
       "this kernel, e.g. the barrier is called through a function pointer); set GPUEDU_FIBERS=always to run "
       "every kernel with fibers",
       what);
}

// The waiting at a block-wide barrier (after the thread has stopped counting): the runtime's, not the kernel's,
// so that a profiled build counts none of it and calls no hook in it. Returns the barrier's count.
GPUEDU_PROF_QUIET_PART inline int barrier_wait(int predicate, int line, int site) {
  Runtime& r = R;  // (this worker's: its address found once)
  if (line) {
    // Every thread of a block must wait at the same __syncthreads: two in the branches of an if are two
    // barriers, and a GPU hangs or lets threads run on past each other there (compute-sanitizer synccheck).
    if (r.n_block == 0) {
      r.barrier_line = line;
      r.barrier_site = site;
      r.barrier_first = r.cur;
    } else if (r.barrier_line && site != r.barrier_site) {   // (each __syncthreads has a site of its own)
      const uint3 a = r.fibers[r.barrier_first].tid;
      fail(BARRIER_PARTIAL,
           "threads of the block wait at different __syncthreads(): thread (%u,%u,%u) at %s %d, thread "
           "(%u,%u,%u) at %s %d - each __syncthreads is a barrier of its own, which every thread must reach "
           "(undefined on a GPU: compute-sanitizer's synccheck reports it); move the barrier out of the if/else "
           "so that all threads take the same one",
           a.x, a.y, a.z, line == r.barrier_line ? "one on line" : "line", r.barrier_line,
           threadIdx.x, threadIdx.y, threadIdx.z, line == r.barrier_line ? "another on line" : "line", line);
    }
  }
  Fiber* me = &r.fibers[r.cur];
  r.state[r.cur] = AT_BLOCK;
  r.n_ready--;
  r.n_block++;
  r.barrier_count += predicate != 0;
  // Fast path: the next thread in schedule order is ready (the common case).
  unsigned p = r.pos + 1;
  if (p < r.nthreads && r.state[r.order[p]] == READY) resume(p, me);
  else run_next();
  return r.barrier_result;
}

// Block-wide barrier; op 0 plain, 1 count, 2 and, 3 or. Returns the reduction. (Out of line in a profiled
// build, as it was before its waiting became a function of its own: the kernels' counted blocks stay as they
// were.)
GPUEDU_PROF_OUTLINED inline int block_barrier(int op, int predicate, int line = 0, int site = 0) {
  Runtime& r = R;  // (this worker's: its address found once)
  if (!r.fiber_mode) fail_loop_mode("__syncthreads");
  // The barrier's own branches (the first thread to arrive notes its place) are not the kernel's:
  // the profiler stops counting before them.
  GPUEDU_PROF(leave());
  int count = barrier_wait(predicate, line, site);
  GPUEDU_PROF(enter(r.cur));
  if (op == 1) return count;
  if (op == 2) return count == (int)r.nthreads;
  if (op == 3) return count != 0;
  return 0;
}

inline unsigned long long warp_result(const Warp& W, unsigned lane, unsigned need) {
  int op = W.op[lane], width = W.width[lane], arg = W.arg[lane];
  unsigned long long own = W.value[lane];
  if (width <= 0 || width > 32 || (width & (width - 1))) width = 32;
  unsigned base = lane & ~(unsigned)(width - 1), seg = lane & (unsigned)(width - 1);
  auto from = [&](unsigned src) { return (need >> src) & 1u ? W.value[src] : own; };
  switch (op) {
    case W_SHFL: return from(base + ((unsigned)arg & (unsigned)(width - 1)));
    case W_SHFL_UP: return seg < (unsigned)arg ? own : from(lane - (unsigned)arg);
    case W_SHFL_DOWN: return seg + (unsigned)arg >= (unsigned)width ? own : from(lane + (unsigned)arg);
    case W_SHFL_XOR: {
      unsigned src = lane ^ ((unsigned)arg & 31u);
      return src >= base + (unsigned)width ? own : from(src);
    }
    case W_BALLOT: case W_ANY: case W_ALL: {
      unsigned ballot = 0;
      for (unsigned l = 0; l < 32; ++l)
        if (((need >> l) & 1u) && W.value[l]) ballot |= 1u << l;
      if (op == W_BALLOT) return ballot;
      if (op == W_ANY) return ballot != 0;
      return ballot == need;
    }
    case W_RED_ADD: case W_RED_MIN: case W_RED_MAX: case W_RED_AND: case W_RED_OR: case W_RED_XOR: {
      // Values are 32-bit; min/max use the signedness recorded in arg (1 signed).
      bool first = true;
      unsigned long long acc = 0;
      for (unsigned l = 0; l < 32; ++l) {
        if (!((need >> l) & 1u)) continue;
        unsigned u = (unsigned)W.value[l];
        if (first) { acc = u; first = false; continue; }
        unsigned a = (unsigned)acc;
        if (op == W_RED_ADD) acc = a + u;
        else if (op == W_RED_AND) acc = a & u;
        else if (op == W_RED_OR) acc = a | u;
        else if (op == W_RED_XOR) acc = a ^ u;
        else if (arg) acc = (unsigned)((op == W_RED_MIN) == ((int)u < (int)a) ? u : a);
        else acc = (op == W_RED_MIN) == (u < a) ? u : a;
      }
      return acc;
    }
    case W_MATCH_ANY: case W_MATCH_ALL: {
      // the lanes of the mask whose value equals this lane's; "all" answers the mask or 0
      unsigned same = 0;
      for (unsigned l = 0; l < 32; ++l)
        if (((need >> l) & 1u) && W.value[l] == own) same |= 1u << l;
      if (op == W_MATCH_ANY) return same;
      return same == need ? need : 0u;
    }
    default: return 0;
  }
}

// A warp-collective operation: wait for every lane of the mask (the lanes of
// the warp that exist), then compute each lane's result.
// A lane arrives at a warp intrinsic (the runtime's own code, between leave() and enter(): uninstrumented in a
// profiled build): it waits for the others (returns true once they came), or it is the last, which computes
// every lane's result and wakes the others (returns false).
GPUEDU_PROF_QUIET inline bool warp_arrive(int op, unsigned mask, unsigned long long value, int arg, int width) {
  Runtime& r = R;  // (this worker's: its address found once)
  unsigned t = r.cur, lane = t % 32;
  Warp& W = r.warps[t / 32];
  unsigned need = (mask & W.existing) | (1u << lane);
  if (need & W.exited)
    fail(WARP_EXITED,
         "%s(mask=0x%08x) names %d lanes that already exited - every lane named in the mask must reach the "
         "intrinsic (use __activemask() or __ballot_sync to build the mask of the lanes still running)",
         warp_op_names[op], mask, __builtin_popcount(need & W.exited));
  W.op[lane] = op;
  W.arg[lane] = arg;
  W.width[lane] = width;
  W.value[lane] = value;
  W.need[lane] = need;
  W.arrived |= 1u << lane;
  if ((W.arrived & need) != need) {
    r.state[t] = AT_WARP;
    r.n_ready--;
    r.n_warp++;
    run_next();
    return true;
  }
  // The last lane to arrive computes every lane's result and wakes the others.
  for (unsigned l = 0; l < 32; ++l) {
    if (!((need >> l) & 1u)) continue;
    if (W.op[l] != op || W.need[l] != need)
      fail(WARP_MISMATCH,
           "lanes of warp %u meet at different warp intrinsics or masks: lane %u at %s(mask=0x%08x), lane %u "
           "at %s(mask=0x%08x)",
           t / 32, lane, warp_op_names[op], need, l, warp_op_names[W.op[l]], W.need[l]);
  }
  for (unsigned l = 0; l < 32; ++l)
    if ((need >> l) & 1u) W.result[l] = warp_result(W, l, need);
  for (unsigned l = 0; l < 32; ++l) {
    if (!((need >> l) & 1u) || l == lane) continue;
    r.state[(t / 32) * 32 + l] = READY;
    r.n_ready++;
    r.n_warp--;
  }
  W.arrived &= ~need;
  return false;
}

GPUEDU_PROF_OUTLINED inline unsigned long long warp_collective(int op, unsigned mask, unsigned long long value,
                                                               int arg, int width) {
  if (!R.fiber_mode) fail_loop_mode(warp_op_names[op]);
  GPUEDU_PROF(leave());
  unsigned t = R.cur, lane = t % 32;
  Warp& W = R.warps[t / 32];
  if (warp_arrive(op, mask, value, arg, width)) {
    GPUEDU_PROF(enter(R.cur));
    return W.result[lane];
  }
  GPUEDU_PROF(warp_synced(t / 32));
  if (op >= W_SHFL && op <= W_SHFL_XOR) GPUEDU_PROF(shuffled());   // counted once, by the lane that came last
  GPUEDU_PROF(enter(t));
  return W.result[lane];
}

inline unsigned active_mask() {
  if (!R.fiber_mode) {
    unsigned w = (unsigned)(((threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x) / 32);
    unsigned left = R.nthreads - w * 32;
    return left >= 32 ? 0xffffffffu : (1u << left) - 1u;
  }
  const Warp& W = R.warps[R.cur / 32];
  return W.existing & ~W.exited;
}

// cooperative_groups::coalesced_threads(): the lanes of this warp that reach the same call site
// (site) together, as the lanes of a warp that took the same branch reach it together on a GPU.
// A lane waits there, ready, letting the others run, until no other lane of its warp could still
// come: each has exited, waits at a barrier or warp intrinsic, or waits at a coalesced_threads()
// itself. The lanes waiting at this site then form the group.
inline unsigned coalesce(const void* site) {
  if (!R.fiber_mode) fail_loop_mode("cooperative_groups::coalesced_threads()");
  GPUEDU_PROF(leave());
  unsigned t = R.cur, lane = t % 32, first = t - lane, me = 1u << lane;
  Warp& W = R.warps[t / 32];
  W.coalesce_site[lane] = site;
  W.coalescing |= me;
  for (;;) {
    if (W.coalesced_done & me) break;  // a lane of the group found it and told this one
    unsigned others = W.existing & ~W.exited & ~W.coalescing;
    bool settled = true;
    for (unsigned l = 0; l < 32 && settled; ++l)
      if (((others >> l) & 1u) && R.state[first + l] == READY) settled = false;
    if (settled) {
      unsigned group = 0;
      for (unsigned l = 0; l < 32; ++l)
        if (((W.coalescing >> l) & 1u) && W.coalesce_site[l] == site) group |= 1u << l;
      for (unsigned l = 0; l < 32; ++l)
        if ((group >> l) & 1u) W.coalesce_group[l] = group;
      W.coalescing &= ~group;
      W.coalesced_done |= group;
      break;
    }
    run_next();  // this lane stays ready: the others of the block run, then it looks again
  }
  W.coalesced_done &= ~me;
  W.coalescing &= ~me;
  GPUEDU_PROF(enter(t));
  return W.coalesce_group[lane];
}

// ---- running a grid -------------------------------------------------------------
// A block starts with no cp.async in flight (copies a thread never waited for end with its block).
GPUEDU_PROF_QUIET inline void forget_async_copies() {
  for (unsigned t = 0; t < MAX_THREADS; ++t) {
    R.async[t].n = 0;
    R.async[t].committed = 0;
  }
  R.async_used = false;
}

// The xorshift state a block's shuffle starts from (a splitmix64 step over the launch's seed and the block).
inline unsigned long long block_seed(unsigned long long seed, unsigned long long block) {
  unsigned long long x = seed + (block + 1) * 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return (x ^ (x >> 31)) | 1;   // never 0, where xorshift would stay
}

inline unsigned long long next_random() {
  R.rng ^= R.rng << 13;
  R.rng ^= R.rng >> 7;
  R.rng ^= R.rng << 17;
  return R.rng;
}

inline void make_order(unsigned n) {
  for (unsigned i = 0; i < n; ++i) R.order[i] = R.schedule == SCHED_REVERSE ? n - 1 - i : i;
  if (R.schedule == SCHED_RANDOM)
    for (unsigned i = n - 1; i > 0; --i) {
      unsigned j = (unsigned)(next_random() % (i + 1));
      unsigned tmp = R.order[i]; R.order[i] = R.order[j]; R.order[j] = tmp;
    }
}

inline uint3 thread_of(unsigned linear) {
  return uint3{linear % blockDim.x, (linear / blockDim.x) % blockDim.y, linear / (blockDim.x * blockDim.y)};
}

// A block's fibers made ready to run its threads from the top (each fiber was prepared, and its tid set, once for
// the launch: run_grid).
inline void prepare_block_fibers() {
  Runtime& r = R;  // (this worker's: its address found once)
  unsigned n = r.nthreads;
  make_order(n);
  memset(r.state, READY, n);  // each fiber was prepared, and its tid set, once for the launch (run_grid)
  for (unsigned w = 0; w < (n + 31) / 32; ++w) {
    Warp& W = r.warps[w];
    unsigned left = n - w * 32;
    W.existing = left >= 32 ? 0xffffffffu : (1u << left) - 1u;
    W.arrived = 0;
    W.exited = 0;
    W.coalescing = 0;
    W.coalesced_done = 0;
    W.grouped = 0;
  }
  r.n_ready = n;
  r.n_block = r.n_warp = r.n_done = 0;
  r.barrier_count = 0;
  r.barrier_line = 0;
  r.cur = r.order[0];
}

// The running worker starts block `b` (`linear` in the grid's order, x fastest): its shared memory poisoned, no
// copies in flight, no mbarriers.
inline void begin_block(uint3 b, unsigned long long linear) {
  __gpuedu_blockIdx = b;
  R.block_linear = linear;
  // A shuffled schedule draws each block's order from the seed and the block, whichever worker runs it.
  R.rng = block_seed(R.seed, linear);
  GPUEDU_PROF(block_begin(linear));
  poison_shared();
  if (R.async_used) forget_async_copies();
  if (R.mbar_used) forget_mbarriers();
}

inline void run_block_fibers() {
  Runtime& r = R;  // (this worker's: its address found once)
  unsigned n = r.nthreads;
  prepare_block_fibers();
  resume(0, nullptr);  // returns once every thread of the block is done (or, using mbarriers, none can run)
  while (r.n_done != n) {
    // No thread can run, and some wait on mbarriers: pollers made ready, or TMA copies landed, let some run on
    // (gpuedu_mbarrier.h); else none ever will.
    if (!wake_mbarrier_pollers()) report_deadlock();
    unsigned p = 0;
    while (r.state[r.order[p]] != READY) ++p;
    resume(p, nullptr);
  }
}

}  // namespace __gpuedu
#include "gpuedu_cluster.h"
namespace __gpuedu {

// Always inlined into run_grid: the kernel's local arrays then share one frame with the arguments it
// reads, below the stack protector's guard, so an overrun of a local array is found when run_grid returns
// instead of garbling the arguments of the next thread first (clang++ kept this loop a function apart).
// body(t) runs thread t (linear in the block), with threadIdx set.
template <typename Body>
__attribute__((always_inline)) inline void run_block_loop(Body&& body) {
  uint3* const tid = &__gpuedu_threadIdx;   // this worker's (thread_local): its address found once, not per thread
  if (R.schedule == SCHED_FORWARD) {
    unsigned linear = 0;
    for (unsigned z = 0; z < blockDim.z; ++z)
      for (unsigned y = 0; y < blockDim.y; ++y) {
        tid->y = y;   // kernels never write threadIdx: only x changes in the inner loop
        tid->z = z;
        // One thread at a time, with threadIdx in memory before each runs (a volatile store: not kept
        // in a register, not vectorised across threads), where the fault handler reads it: a fault
        // then names the thread that made it, whatever the compiler.
        for (unsigned x = 0; x < blockDim.x; ++x, ++linear) {
          *(volatile unsigned*)&tid->x = x;
          body(linear);
        }
      }
  } else {
    make_order(R.nthreads);
    for (unsigned i = 0; i < R.nthreads; ++i) {
      uint3 t = thread_of(R.order[i]);
      *(volatile unsigned*)&tid->x = t.x;
      *(volatile unsigned*)&tid->y = t.y;
      *(volatile unsigned*)&tid->z = t.z;
      body(R.order[i]);
    }
  }
}

// Parameters: unpacked once from PyCUDA's packed argument buffer (each at its
// natural alignment, as CUDA lays out kernel parameters).
template <typename... A> struct Params {
  using Tuple = std::tuple<std::decay_t<A>...>;
  static constexpr int count = (int)sizeof...(A);
  template <size_t... I> static Tuple unpack(const char* buf, std::index_sequence<I...>) {
    Tuple t;
    size_t off = 0;
    ((off = (off + alignof(std::decay_t<A>) - 1) / alignof(std::decay_t<A>) * alignof(std::decay_t<A>),
      memcpy((void*)&std::get<I>(t), buf + off, sizeof(std::decay_t<A>)), off += sizeof(std::decay_t<A>)),
     ...);
    (void)buf;
    (void)off;
    return t;
  }
  // The other way, for a launch from device code: the values packed as PyCUDA packs a launch's arguments.
  static constexpr size_t bytes() {
    size_t off = 0;
    ((off = (off + alignof(std::decay_t<A>) - 1) / alignof(std::decay_t<A>) * alignof(std::decay_t<A>) +
            sizeof(std::decay_t<A>)), ...);
    return off ? off : 1;
  }
  template <size_t... I> static void pack(char* buf, const Tuple& t, std::index_sequence<I...>) {
    size_t off = 0;
    ((off = (off + alignof(std::decay_t<A>) - 1) / alignof(std::decay_t<A>) * alignof(std::decay_t<A>),
      memcpy(buf + off, (const void*)&std::get<I>(t), sizeof(std::decay_t<A>)), off += sizeof(std::decay_t<A>)),
     ...);
    (void)buf;
    (void)t;
    (void)off;
  }
  template <typename T> static constexpr int kind() {
    return std::is_pointer_v<T> ? 1 : std::is_floating_point_v<T> ? 3 : std::is_integral_v<T> || std::is_enum_v<T> ? 2 : 4;
  }
  static constexpr int sizes[sizeof...(A) + 1] = {(int)sizeof(std::decay_t<A>)..., 0};
  static constexpr int aligns[sizeof...(A) + 1] = {(int)alignof(std::decay_t<A>)..., 0};
  static constexpr int kinds[sizeof...(A) + 1] = {kind<std::decay_t<A>>()..., 0};
  // What a pointer parameter points to, for Python's checks of the argument given for it: in the low 16 bits
  // 0x100 + size for a floating-point type, 0x200 + size for an integer, 0 for anything else (void, a struct);
  // above them the alignment the type needs (float4: 16), which the address must keep. 0 if not a pointer.
  template <typename T> static constexpr int pointee() {
    if constexpr (std::is_pointer_v<T>) {
      using U = std::remove_cv_t<std::remove_pointer_t<T>>;
      constexpr int align = [] {
        if constexpr (std::is_void_v<U> || std::is_function_v<U>) return 1;
        else return (int)alignof(U);
      }();
      if constexpr (std::is_floating_point_v<U>) return align << 16 | (0x100 + (int)sizeof(U));
      else if constexpr (std::is_integral_v<U>) return align << 16 | (0x200 + (int)sizeof(U));
      else return align << 16;
    } else {
      return 0;
    }
  }
  static constexpr int pointees[sizeof...(A) + 1] = {pointee<std::decay_t<A>>()..., 0};
};
template <typename... A> Params<A...> params_of(void (*)(A...));

// (Clusters: the kernel is declared with __cluster_dims__; only such kernels compile the cluster launch's part.)
template <auto F, bool Clusters = false> void run_grid(const void* buf, int use_fibers) {
  using P = decltype(params_of(F));
  typename P::Tuple args = P::unpack((const char*)buf, std::make_index_sequence<P::count>{});
  R.fiber_mode = use_fibers != 0;
  auto prepare_fibers = [&args] {
    ensure_stacks();
    // Each fiber's threadIdx is the same in every block: three divisions per thread, once per launch.
    for (unsigned i = 0; i < R.nthreads; ++i) {
      R.fibers[i].tid = thread_of(i);
      fiber_init(R.fibers[i], stack_top(i));  // fresh: a failed launch may have left it anywhere
    }
    R.thread_fn = [](void* a) { std::apply(F, *(typename P::Tuple*)a); };
    R.thread_arg = &args;
  };
  if (R.fiber_mode) prepare_fibers();
  fill_watches();
  R.cluster = nullptr;
  R.cluster_rank = 0;
  if constexpr (Clusters) {
    if (G.cluster_size > 1) {   // a cluster launch (gpuedu_cluster.h): each block of a cluster on a state of its own
      using Prepare = decltype(prepare_fibers);
      run_cluster_launch([](void* p) { (*(Prepare*)p)(); }, &prepare_fibers);
      return;
    }
  }
  // Each worker takes the next blocks not yet taken (a few at a time: taking them costs the cache line the
  // workers share), in the grid's order (x fastest): one worker runs them in that order.
  const unsigned long long per_plane = (unsigned long long)gridDim.x * gridDim.y;
  unsigned long long b = 0, taken_end = 0;
  for (;; ++b) {
    if (G.stop_reason == TIMEOUT || G.stop_reason == INTERRUPT) fail(G.stop_reason, "stopped");
    if (G.stop_reason) break;   // another worker failed: its error is the launch's
    if (b >= taken_end) {
      b = __atomic_fetch_add(&G.next, G.chunk, __ATOMIC_RELAXED);
      taken_end = b + G.chunk < G.blocks ? b + G.chunk : G.blocks;
    }
    if (b >= G.blocks) break;
    unsigned bz = (unsigned)(b / per_plane), by = (unsigned)(b % per_plane / gridDim.x),
             bx = (unsigned)(b % gridDim.x);
    begin_block(uint3{bx, by, bz}, b);
    R.cluster = nullptr;   // (barrier.cluster, if a thread uses it, starts afresh: own_cluster)
    if (R.fiber_mode) {
      run_block_fibers();
    } else {
      // A copy whose address never escapes: the compiler may keep the
      // arguments in registers across the kernel's stores.
      typename P::Tuple local = args;
      // (The thread's number comes from the loop: read back from threadIdx, it would be ten counted
      // reads a thread in a profiled build, each a call to a hook.)
      run_block_loop([&]([[maybe_unused]] unsigned me) {
        GPUEDU_PROF(enter(me));
        std::apply(F, local);
        GPUEDU_PROF(thread_done(me));
      });
    }
    GPUEDU_PROF(block_end());
    check_watches(false);
  }
  check_watches(true);
}

inline void fail_static_shared_overrun(int which, size_t first, size_t last) {
  __gpuedu_threadIdx = uint3{0, 0, 0};
  size_t n = S.at[which].n;
  fail(STATIC_SHARED_OVERRUN,
       "wrote past the end of the __shared__ array '%s' (%zu bytes): bytes %zu to %zu from its start changed, "
       "which on a GPU overwrites other shared data or faults; check each index against the array's size. "
       "gpuedu.memcheck() names the thread and the line", S.at[which].name ? S.at[which].name : "?", n,
       n + first, n + last);
}

inline void fail_arena_full(size_t bytes) {
  fail(TOO_MUCH_SHARED, "the module's static __shared__ variables take %zu bytes in all, more than the emulator "
       "keeps for them (%zu); split the kernels into several modules", bytes, ARENA_BYTES);
}

inline void fail_arena_closed(size_t bytes) {
  fail(TOO_MUCH_SHARED, "the system refused to map %zu bytes for the module's static __shared__ variables", bytes);
}

inline void fail_dynamic_shared_overrun(size_t first, size_t last) {
  __gpuedu_threadIdx = uint3{0, 0, 0};   // the block is done: which of its threads wrote there is not known
  fail(DYNAMIC_SHARED_OVERRUN,
       "wrote past the dynamic shared memory the launch asked for (shared=%zu bytes): bytes %zu to %zu of the "
       "dynamic buffer changed, which faults on a GPU; pass a larger shared= (in bytes, not elements) or check "
       "the index. gpuedu.memcheck() names the thread and the line", R.dynamic_shared_bytes, first, last);
}

struct KernelInfo {
  void (*run)(const void*, int);
  void* address;
  const char* name;
  int needs_fibers;
  int nparams;
  const int* sizes;
  const int* aligns;
  const int* kinds;
  const int* pointees;
  unsigned cluster[3];        // __cluster_dims__(x, y, z), in blocks (0, 0, 0: none declared)
};

// ---- a launch from device code (`child<<<grid, block, shared, stream>>>(args)`, with -rdc=true) ----------
// The compiler (_scanner) rewrites it to __gpuedu::device_launch(child, grid, block, ...)(args): the child grid
// is queued and runs when the launching grid has finished (host::queue_child).
}  // namespace __gpuedu
extern "C" GPUEDU_HIDDEN const __gpuedu::KernelInfo* __gpuedu_kernel_for(const void* address);  // the kernel table's
namespace __gpuedu {
template <typename... P> struct DeviceLaunch {
  void (*kernel)(P...);
  unsigned dims[8];
  template <typename... A> void operator()(A&&... a) const {
    static_assert(sizeof...(A) == sizeof...(P), "a kernel launched from device code takes one argument per parameter");
    using Ps = Params<P...>;
    typename Ps::Tuple values(static_cast<std::decay_t<P>>(a)...);
    char buf[Ps::bytes()];
    Ps::pack(buf, values, std::make_index_sequence<sizeof...(P)>{});
    const KernelInfo* k = __gpuedu_kernel_for((const void*)kernel);
    if (!k) fail(DEVICE_MISUSE, "launched, from device code, a function that is not a __global__ kernel of this module");
    if (dims[3] * dims[4] * dims[5] > 1024u || !dims[3] || !dims[4] || !dims[5] || !dims[0] || !dims[1] || !dims[2])
      fail(DEVICE_MISUSE, "launched a grid from device code with grid (%u,%u,%u) and block (%u,%u,%u): a block holds 1 to "
           "1024 threads, a grid at least one block", dims[0], dims[1], dims[2], dims[3], dims[4], dims[5]);
    if (!host::queue_child(k, dims, buf, sizeof buf))
      fail(DEVICE_MISUSE, "launched more than %zu grids from device code that have not run yet (CUDA's limit on pending "
           "launches, cudaLimitDevRuntimePendingLaunchCount); launch fewer, e.g. one grid from one thread",
           host::PENDING_LIMIT);
  }
};
template <typename... P, typename G, typename B, typename S = int>
inline DeviceLaunch<P...> device_launch(void (*kernel)(P...), G grid, B block, size_t shared = 0, S = S()) {
  dim3 g = dim3(grid), b = dim3(block);
  return DeviceLaunch<P...>{kernel, {g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)shared, (unsigned)R.shared_limit}};
}

// The kernel among functions of its name: a C++-linkage kernel may share its name
// with a C library function (time, sleep), and only the kernel returns void.
template <typename... A> constexpr auto as_kernel(void (*f)(A...)) { return f; }

// (A kernel declared with __cluster_dims__ gives its dims, and gets the grid loop that runs clusters.)
template <auto F> inline KernelInfo kernel_info(const char* name, int needs_fibers) {
  using P = decltype(params_of(F));
  return KernelInfo{&run_grid<F>, (void*)F, name, needs_fibers, P::count, P::sizes, P::aligns, P::kinds,
                    P::pointees, {0, 0, 0}};
}
template <auto F> inline KernelInfo kernel_info(const char* name, int needs_fibers, unsigned cluster_x,
                                                unsigned cluster_y, unsigned cluster_z) {
  using P = decltype(params_of(F));
  return KernelInfo{&run_grid<F, true>, (void*)F, name, needs_fibers, P::count, P::sizes, P::aligns, P::kinds,
                    P::pointees, {cluster_x, cluster_y, cluster_z}};
}

}  // namespace __gpuedu

// ---- the CUDA intrinsics that need the runtime --------------------------------------
// Macros, so that each barrier knows its source line and which one it is (__COUNTER__: two on one line are
// two barriers too); two different ones reached at once are an error.
#define __syncthreads() __gpuedu::block_barrier(0, 1, __LINE__, __COUNTER__ + 1)
#define __syncthreads_count(p) __gpuedu::block_barrier(1, (p), __LINE__, __COUNTER__ + 1)
#define __syncthreads_and(p) __gpuedu::block_barrier(2, (p), __LINE__, __COUNTER__ + 1)
#define __syncthreads_or(p) __gpuedu::block_barrier(3, (p), __LINE__, __COUNTER__ + 1)
static inline void __syncwarp(unsigned mask = 0xffffffffu) { __gpuedu::warp_collective(__gpuedu::W_SYNC, mask, 0, 0, 32); }
static inline unsigned __activemask() { return __gpuedu::active_mask(); }
static inline unsigned __ballot_sync(unsigned mask, int p) {
  return (unsigned)__gpuedu::warp_collective(__gpuedu::W_BALLOT, mask, p != 0, 0, 32);
}
static inline int __any_sync(unsigned mask, int p) {
  return (int)__gpuedu::warp_collective(__gpuedu::W_ANY, mask, p != 0, 0, 32);
}
static inline int __all_sync(unsigned mask, int p) {
  return (int)__gpuedu::warp_collective(__gpuedu::W_ALL, mask, p != 0, 0, 32);
}
static inline unsigned __reduce_add_sync(unsigned mask, unsigned v) { return (unsigned)__gpuedu::warp_collective(__gpuedu::W_RED_ADD, mask, v, 0, 32); }
static inline int __reduce_add_sync(unsigned mask, int v) { return (int)__gpuedu::warp_collective(__gpuedu::W_RED_ADD, mask, (unsigned)v, 1, 32); }
static inline unsigned __reduce_min_sync(unsigned mask, unsigned v) { return (unsigned)__gpuedu::warp_collective(__gpuedu::W_RED_MIN, mask, v, 0, 32); }
static inline int __reduce_min_sync(unsigned mask, int v) { return (int)__gpuedu::warp_collective(__gpuedu::W_RED_MIN, mask, (unsigned)v, 1, 32); }
static inline unsigned __reduce_max_sync(unsigned mask, unsigned v) { return (unsigned)__gpuedu::warp_collective(__gpuedu::W_RED_MAX, mask, v, 0, 32); }
static inline int __reduce_max_sync(unsigned mask, int v) { return (int)__gpuedu::warp_collective(__gpuedu::W_RED_MAX, mask, (unsigned)v, 1, 32); }
static inline unsigned __reduce_and_sync(unsigned mask, unsigned v) { return (unsigned)__gpuedu::warp_collective(__gpuedu::W_RED_AND, mask, v, 0, 32); }
static inline unsigned __reduce_or_sync(unsigned mask, unsigned v) { return (unsigned)__gpuedu::warp_collective(__gpuedu::W_RED_OR, mask, v, 0, 32); }
static inline unsigned __reduce_xor_sync(unsigned mask, unsigned v) { return (unsigned)__gpuedu::warp_collective(__gpuedu::W_RED_XOR, mask, v, 0, 32); }

// Match: which lanes of the mask hold the same 32- or 64-bit value (sm_70 and later).
template <typename T> static inline unsigned __match_any_sync(unsigned mask, T value) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "__match_any_sync compares 32- or 64-bit values");
  unsigned long long bits = 0;
  memcpy(&bits, &value, sizeof(T));
  return (unsigned)__gpuedu::warp_collective(__gpuedu::W_MATCH_ANY, mask, bits, 0, 32);
}
template <typename T> static inline unsigned __match_all_sync(unsigned mask, T value, int* pred) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "__match_all_sync compares 32- or 64-bit values");
  unsigned long long bits = 0;
  memcpy(&bits, &value, sizeof(T));
  unsigned all = (unsigned)__gpuedu::warp_collective(__gpuedu::W_MATCH_ALL, mask, bits, 0, 32);
  *pred = all != 0;
  return all;
}

// Shuffles move the value's bits (any type of up to 8 bytes, e.g. __half2).
template <typename T> static inline T __gpuedu_shfl(int op, unsigned mask, T var, int arg, int width) {
  static_assert(sizeof(T) <= 8, "warp shuffles move values of at most 8 bytes");
  unsigned long long bits = 0;
  memcpy(&bits, &var, sizeof(T));
  bits = __gpuedu::warp_collective(op, mask, bits, arg, width);
  T out;
  memcpy((void*)&out, &bits, sizeof(T));
  return out;
}
template <typename T> static inline T __shfl_sync(unsigned mask, T var, int src, int width = 32) {
  return __gpuedu_shfl(__gpuedu::W_SHFL, mask, var, src, width);
}
template <typename T> static inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return __gpuedu_shfl(__gpuedu::W_SHFL_UP, mask, var, (int)delta, width);
}
template <typename T> static inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return __gpuedu_shfl(__gpuedu::W_SHFL_DOWN, mask, var, (int)delta, width);
}
template <typename T> static inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  return __gpuedu_shfl(__gpuedu::W_SHFL_XOR, mask, var, lane_mask, width);
}

// Device-side assert: stop the launch with the failed expression (as CUDA's
// "device-side assert triggered"); assert.h in this folder defines assert().
namespace __gpuedu {
[[noreturn]] inline void assert_failed(const char* expression, int line) {
  fail(ASSERT, "assertion `%s' failed at line %d", expression, line);
}
}  // namespace __gpuedu
#include "assert.h"
namespace __gpuedu {
[[noreturn]] inline void misaligned_atomic(const void* p, unsigned size) {
  fail(DEVICE_MISUSE, "made a %u-byte atomic operation at address %p, which is not a multiple of %u: a GPU "
       "stops the kernel there (misaligned address); an atomic's address must be aligned to its size",
       size, p, size);
}
[[noreturn]] inline void printf_bad_string(int index, unsigned long long value) {
  fail(DEVICE_MISUSE, "called printf with %%s for argument %d, whose value is %#llx: a number, not a pointer to a "
       "string (print numbers with %%d or %%f, strings with %%s)", index, value);
}
}  // namespace __gpuedu
// ---- the device heap ------------------------------------------------------------------
// malloc, free, new and delete in the user's kernels come here (the compiler rewrites them): blocks of
// the guarded device heap (gpuedu_host.cpp), never the host's heap, so an overrun stops the launch
// instead of corrupting the notebook's process. As on a GPU, malloc and new give nullptr when the heap's
// limit (Context.set_limit(limit.MALLOC_HEAP_SIZE, ...), 8 MiB by default) would be passed.
namespace __gpuedu {
struct DeviceHeap {};
constexpr DeviceHeap device_heap{};
GPUEDU_PROF_QUIET inline void* device_malloc(size_t bytes) { return host::heap_alloc(bytes); }
GPUEDU_PROF_QUIET inline void device_free(void* p) {
  if (!host::heap_free(p))
    fail(DEVICE_MISUSE, "called free() (or delete) with %p, which is not the start of a live block from malloc() "
         "(or new) in device code: freed twice, a pointer into a block, or memory that malloc did not give", p);
}
template <typename T> GPUEDU_PROF_QUIET inline void device_delete(T* p) {
  if (!p) return;
  p->~T();
  device_free((void*)const_cast<typename std::remove_cv<T>::type*>(p));
}
// delete[]: new[] of a type with a destructor keeps the count in a cookie just before the elements
// (the Itanium C++ ABI); a trivially destructible type has none.
template <typename T> GPUEDU_PROF_QUIET inline void device_delete_array(T* p) {
  if (!p) return;
  using U = typename std::remove_cv<T>::type;
  if constexpr (std::is_trivially_destructible<U>::value) {
    device_free((void*)const_cast<U*>(p));
  } else {
    constexpr size_t cookie = sizeof(size_t) > alignof(U) ? sizeof(size_t) : alignof(U);
    char* start = (char*)const_cast<U*>(p) - cookie;
    size_t n = *(size_t*)((char*)const_cast<U*>(p) - sizeof(size_t));
    for (size_t i = n; i-- > 0;) p[i].~T();
    device_free(start);
  }
}
}  // namespace __gpuedu
GPUEDU_PROF_QUIET inline void* operator new(size_t bytes, __gpuedu::DeviceHeap) noexcept {
  return __gpuedu::host::heap_alloc(bytes);
}
GPUEDU_PROF_QUIET inline void* operator new[](size_t bytes, __gpuedu::DeviceHeap) noexcept {
  return __gpuedu::host::heap_alloc(bytes);
}
// new T[n] with a negative or overflowing n: the compiler calls this (which throws in host C++).
extern "C" [[noreturn]] GPUEDU_HIDDEN void __cxa_throw_bad_array_new_length() {
  __gpuedu::fail(__gpuedu::DEVICE_MISUSE, "used new[] with a negative or too large number of elements");
}
// Called only when a constructor throws, which device code cannot.
inline void operator delete(void* p, __gpuedu::DeviceHeap) noexcept { __gpuedu::host::heap_free(p); }
inline void operator delete[](void* p, __gpuedu::DeviceHeap) noexcept { __gpuedu::host::heap_free(p); }

#define __trap() __gpuedu::fail(__gpuedu::ASSERT, "__trap() called")
#define __brkpt() ((void)0)

#include "gpuedu_launch.h"
#endif  // GPUEDU_SCAN
