// The launch entry of a kernel module and what a fault or an interrupt records,
// part of the emulator's runtime (included at the end of gpuedu_runtime.h):
// faults, Ctrl-C and timeouts during a launch jump back here (through the
// host side's handlers, gpuedu_host.cpp) and become error codes.
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#ifndef GPUEDU_SCAN
namespace __gpuedu {

// Reserved, inaccessible, above the launch's stack: a fault there is a local array written upwards off it.
constexpr size_t SMASH_WINDOW = 1 << 20;

static const char* const LOCAL_ARRAY_OVERRUN =
    "wrote past the end of a local array (its stack frame was overwritten): an index beyond the size of a local "
    "array such as `float tmp[8]`, in the kernel or a function it calls; check each index against the array's size "
    "(gpuedu.memcheck() names the line, and finds an index one past the end too)";

// ---- faults, Ctrl-C and timeouts during a launch ----------------------------------
// The host side's signal handlers (gpuedu_host.cpp) ask these where the launch
// stopped, then jump back to the launch entry with the code returned.
namespace host {

int on_fault(bool divide_by_zero, void* address, int is_write) {
  char* a = (char*)address;
  int code = divide_by_zero ? DIVIDE_BY_ZERO : FAULT;
  // A fault in a guard page between the fibers' stacks (or just under the first) is an
  // overflow; the compiler probes large frames page by page (-fstack-clash-protection),
  // so an overflow cannot jump over a guard page.
  bool upward = false;
  if (code == FAULT && R.fiber_mode && R.stacks && a >= R.stacks - 65536 && a < R.stacks + R.stacks_bytes) {
    size_t offset = a >= R.stacks ? (size_t)(a - R.stacks) % R.stack_stride : 0;
    if (offset < R.stack_stride - STACK_BYTES) code = STACK_OVERFLOW;
    // The guard page above this thread's stack (the next fiber's) is reached by writing upwards, past the end
    // of a local array, not by a stack growing down: that is an overrun, not an overflow.
    size_t me = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    upward = code == STACK_OVERFLOW && a >= R.stacks && (size_t)(a - R.stacks) / R.stack_stride == me + 1;
    if (upward) code = STACK_SMASHED;
  }
  // ... or in the guard page under the launch's own stack.
  char* launch = R.pool ? R.pool->launch_base : nullptr;
  if (code == FAULT && launch && a >= launch - 65536 && a < launch + (R.pool->launch_bytes - LAUNCH_STACK_BYTES))
    code = STACK_OVERFLOW;
  // Just above the launch's stack: a local array written far past its end, upwards off the stack.
  // In a guard page of a block from the device heap (malloc or new in a kernel).
  const char* block = nullptr;
  size_t block_bytes = 0;
  bool in_heap = code == FAULT && host::heap_find(a, &block, &block_bytes);
  if (in_heap) code = DEVICE_MISUSE;
  bool smashed = code == FAULT && launch && a >= launch + R.pool->launch_bytes &&
                 a < launch + R.pool->launch_bytes + SMASH_WINDOW;
  if (smashed) code = STACK_SMASHED;
  E.code = code;
  E.fault_address = (unsigned long long)(uintptr_t)address;
  E.fault_is_write = is_write;
  E.block[0] = blockIdx.x; E.block[1] = blockIdx.y; E.block[2] = blockIdx.z;
  E.thread[0] = threadIdx.x; E.thread[1] = threadIdx.y; E.thread[2] = threadIdx.z;
  E.message[0] = 0;
  if (smashed || upward) snprintf(E.message, sizeof E.message, "%s", LOCAL_ARRAY_OVERRUN);
  if (in_heap) {
    const char* verb = is_write == 1 ? "wrote" : is_write == 0 ? "read" : "accessed";
    if (a >= block)
      snprintf(E.message, sizeof E.message, "%s past the end of a %zu-byte block from malloc() or new in device "
               "code (at byte offset %zu, %zu bytes past its end); check the index against the size allocated",
               verb, block_bytes, (size_t)(a - block), (size_t)(a - block) - block_bytes);
    else
      snprintf(E.message, sizeof E.message, "%s %zu bytes before the start of a %zu-byte block from malloc() or "
               "new in device code (a negative index?)", verb, (size_t)(block - a), block_bytes);
  }
  return code;
}

int on_signal(int what) {
  static const char* const what_stopped[] = {
      "executed an illegal instruction (__builtin_trap(), or code the compiler marked unreachable, such as the "
      "end of a non-void function that returns nothing)",
      "hit a breakpoint instruction",
      "called abort(): device code cannot call host functions (nvcc refuses abort, exit and the like); use "
      "assert() or __trap() to stop a kernel"};
  E.code = SIGNALLED;
  E.block[0] = blockIdx.x; E.block[1] = blockIdx.y; E.block[2] = blockIdx.z;
  E.thread[0] = threadIdx.x; E.thread[1] = threadIdx.y; E.thread[2] = threadIdx.z;
  snprintf(E.message, sizeof E.message, "%s", what_stopped[what < 0 || what > 2 ? 0 : what]);
  return SIGNALLED;
}

int on_interrupt() {
  if (!G.stop_reason) G.stop_reason = INTERRUPT;   // Ctrl-C: the other workers stop too
  int code = G.stop_reason == TIMEOUT ? TIMEOUT : INTERRUPT;
  E.code = code;
  E.block[0] = blockIdx.x; E.block[1] = blockIdx.y; E.block[2] = blockIdx.z;
  E.thread[0] = threadIdx.x; E.thread[1] = threadIdx.y; E.thread[2] = threadIdx.z;
  E.message[0] = 0;
  return code;
}

}  // namespace host

struct LaunchBody {
  const KernelInfo* kernel;
  const void* args;
  int use_fibers;
  size_t known_static;
};

inline void run_launch(void* p) {
  const LaunchBody& b = *(const LaunchBody*)p;
  if (b.known_static + R.dynamic_shared_bytes > R.shared_limit) fail_too_much_shared(b.known_static);
  b.kernel->run(b.args, b.use_fibers);
}

// A launch runs on a stack of its own, with a guard page under it, not on the caller's (the
// Python interpreter's): a kernel that overruns a local array or recurses too deep then damages
// only that stack, and the fault or the stack protector's check stops the launch, not the process.
// (Fibers have their own stacks already; this one holds the grid loop and barrier-free threads.)

#ifndef GPUEDU_UCONTEXT
[[noreturn]] inline void launch_stack_entry() {
  run_launch(L.body);
  __gpuedu_switch(&L.sp, L.host_sp);  // back to the caller's stack; this one starts afresh next launch
  __builtin_unreachable();
}
#endif

inline void run_on_launch_stack(void* p) {
#ifdef GPUEDU_UCONTEXT
  run_launch(p);  // the portable switch keeps the caller's stack
#else
  static StackPool own;
  if (!R.pool) R.pool = &own;
  if (!R.pool->launch_base) {
    size_t stride = 0, total = 0;
    char* base = host::map_stacks(LAUNCH_STACK_BYTES, 1, &stride, &total, SMASH_WINDOW);
    if (!base) {  // no memory for a stack of its own: run where we are, as before
      run_launch(p);
      return;
    }
    R.pool->launch_base = base;
    R.pool->launch_bytes = total;
  }
  L.body = p;
  // Start just below the top: a local array written past the end of the first frames reaches the inaccessible
  // window above the stack (SMASH_WINDOW) after a few hundred bytes and faults there, instead of landing in
  // unused stack where nothing looks (an overrun that stays within the frames is the stack protector's to find).
  L.sp = prepare_stack(R.pool->launch_base + R.pool->launch_bytes - LAUNCH_STACK_HEADROOM, &launch_stack_entry);
  __gpuedu_switch(&L.host_sp, L.sp);
#endif
}

// -fstack-protector's check failed: a kernel wrote past the end of a local array.
extern "C" [[noreturn]] GPUEDU_HIDDEN void __stack_chk_fail() { fail(STACK_SMASHED, "%s", LOCAL_ARRAY_OVERRUN); }

// ---- undefined behaviour the compiler checks for (-fsanitize=return,unreachable, integer-divide-by-zero on aarch64;
// bounds in profiled builds) ---
// The compiler calls these (the layout is the sanitizer runtime's, in GCC and clang alike); the emulator
// defines them itself, so no sanitizer library is linked, and each stops the launch naming the line.
struct UbLocation { const char* file; unsigned line; unsigned column; };
struct UbType { unsigned short kind, info; char name[1]; };
struct UbOutOfBounds { UbLocation loc; const UbType* array; const UbType* index; };
struct UbPlace { UbLocation loc; };

inline const char* ub_where(const UbLocation& loc, char* buf, size_t n) {
  const char* base = loc.file ? loc.file : "?";   // (no strrchr: the module calls no C library function)
  for (const char* p = base; *p; ++p)
    if (*p == '/') base = p + 1;
  const char* mine = "kernel.cu";
  const char* p = base;
  while (*p && *p == *mine) ++p, ++mine;
  if (!*p && !*mine) snprintf(buf, n, "line %u of your source", loc.line);
  else snprintf(buf, n, "line %u of %s", loc.line, base);
  return buf;
}

[[noreturn]] inline void ub_out_of_bounds(UbOutOfBounds* d, uintptr_t index) {
  char where[256];
  bool is_signed = d->index && (d->index->info & 1);
  long long shown = is_signed ? (long long)(intptr_t)index : (long long)index;
  fail(DEVICE_MISUSE, "indexed the array %s at [%lld] (%s), outside it: on a GPU that reads or writes whatever "
       "lies there, which compute-sanitizer reports; check the index against the array's size",
       d->array ? d->array->name : "?", shown, ub_where(d->loc, where, sizeof where));
}

[[noreturn]] inline void ub_missing_return(UbPlace* d) {
  char where[256];
  fail(DEVICE_MISUSE, "reached the end of a function that returns a value without a `return` (%s): undefined "
       "behaviour, which on a GPU gives whatever is in a register; return a value on every path",
       ub_where(d->loc, where, sizeof where));
}

[[noreturn]] inline void ub_unreachable(UbPlace* d) {
  char where[256];
  fail(DEVICE_MISUSE, "reached __builtin_unreachable() (%s): undefined behaviour, which on a GPU runs whatever "
       "code comes next; the path the program promised never to take was taken", ub_where(d->loc, where, sizeof where));
}

// An integer division or remainder by zero (-fsanitize=integer-divide-by-zero, on aarch64 only: x86's division
// traps by itself, and the SIGFPE ends the same way).
[[noreturn]] inline void ub_divide_by_zero(UbPlace*) { fail(DIVIDE_BY_ZERO, "%s", ""); }

extern "C" GPUEDU_HIDDEN void __ubsan_handle_divrem_overflow(UbPlace* d, uintptr_t, uintptr_t) {
  ub_divide_by_zero(d);
}
extern "C" GPUEDU_HIDDEN void __ubsan_handle_divrem_overflow_abort(UbPlace* d, uintptr_t, uintptr_t) {
  ub_divide_by_zero(d);
}
extern "C" GPUEDU_HIDDEN void __ubsan_handle_out_of_bounds(UbOutOfBounds* d, uintptr_t i) { ub_out_of_bounds(d, i); }
extern "C" GPUEDU_HIDDEN void __ubsan_handle_out_of_bounds_abort(UbOutOfBounds* d, uintptr_t i) { ub_out_of_bounds(d, i); }
extern "C" GPUEDU_HIDDEN void __ubsan_handle_missing_return(UbPlace* d) { ub_missing_return(d); }
extern "C" GPUEDU_HIDDEN void __ubsan_handle_builtin_unreachable(UbPlace* d) { ub_unreachable(d); }

}  // namespace __gpuedu

// ---- the launch entry ------------------------------------------------------------------
extern "C" __attribute__((visibility("default"))) int gpuedu_launch(const __gpuedu::KernelInfo* k,
                                                                     const unsigned* dims, int schedule, unsigned long long seed,
                                                                     int force_fibers, const void* args, int workers);
extern "C" __attribute__((visibility("default"))) const __gpuedu::ErrorInfo* gpuedu_error() { return &__gpuedu::E_launch; }
namespace __gpuedu { GPUEDU_HIDDEN const char* printed = ""; }  // the last launch's printf output
extern "C" __attribute__((visibility("default"))) const char* gpuedu_take_output() {
  // The caller copies the text before the next launch; the length is reset here.
  gpuedu_printf_len = 0;
  return __gpuedu::printed;
}
extern "C" __attribute__((visibility("default"))) size_t gpuedu_static_shared(const __gpuedu::KernelInfo* k) {
  return __gpuedu::static_shared_of(k);
}
// Where `address` lies in the shared memory of this module's workers, for the description of a fault there:
// 1 in a worker's arena of static __shared__ variables, beyond the pages the module's variables use (out[0]: how
// many bytes past the end of the last variable that starts before it, the running kernel's if it has one there
// (out[2] bit 0 set) or else the module's, out[1]: that variable's size, out[2] bit 1: whether it is an array,
// *name: its name or nullptr; out[0] is the offset in the arena if none starts before it, out[1] then 0); 2 past
// the dynamic shared memory of the worker's last launch (out[0]: how many bytes past its end, out[1]: its size,
// shared=); 0 neither.
extern "C" __attribute__((visibility("default"))) int gpuedu_shared_place(const void* address,
                                                                           unsigned long long* out,
                                                                           const char** name) {
  using namespace __gpuedu;
  const unsigned char* a = (const unsigned char*)address;
  void** states = worker_states();
  *name = nullptr;
  for (int w = 0; w < host::MAX_WORKERS; ++w) {
    const Runtime* r = states[w] ? &((const Worker*)states[w])->r : nullptr;
    if (!r) continue;
    if (r->arena && a >= r->arena + r->arena_open && a < r->arena + ARENA_BYTES) {
      size_t offset = (size_t)(a - r->arena);
      out[0] = offset;
      out[1] = out[2] = 0;
      const SharedVar* last = nullptr;
      for (int pass = 1; pass >= 0 && !last; --pass)
        for (int i = 0, n = shared_count(); i < n; ++i)
          if (!S.at[i].absolute && S.at[i].offset <= offset && (!pass || S.at[i].kernel == r->kernel) &&
              (!last || S.at[i].offset > last->offset))
            last = &S.at[i];
      if (last) {
        out[2] = (last->kernel == r->kernel) | (last->guard >= 0) << 1;   // (guarded: an array)
        out[0] = offset > last->offset + last->n ? offset - (last->offset + last->n) : 0;
        out[1] = last->n;
        *name = last->name;
      }
      return 1;
    }
    size_t page = host::page_bytes();
    const unsigned char* end = r->dyn_buffer + (DYNAMIC_SHARED_BYTES + page - 1) / page * page;
    if (r->dyn_buffer && a >= end && a < end + DYNAMIC_GUARD_BYTES && r->dyn >= r->dyn_buffer && r->dyn <= end) {
      out[0] = (size_t)(a - (r->dyn + r->dynamic_shared_bytes));
      out[1] = r->dynamic_shared_bytes;
      return 2;
    }
  }
  return 0;
}
// Share the process-wide fiber stack pools, one per worker (see StackPool); called once at load.
namespace __gpuedu { GPUEDU_HIDDEN StackPool* pools; }
// The process-wide device heap, owned by Python (shared by every module, like the stacks).
extern "C" __attribute__((visibility("default"))) void gpuedu_use_heap(__gpuedu::host::Heap* heap) {
  __gpuedu::host::use_heap(heap);
}
extern "C" __attribute__((visibility("default"))) void gpuedu_use_stack_pool(__gpuedu::StackPool* pools) {
  __gpuedu::pools = pools;
}
// Share the process-wide pool of worker threads; called once at load.
extern "C" __attribute__((visibility("default"))) void gpuedu_use_workers(__gpuedu::host::Workers* workers) {
  __gpuedu::host::use_workers(workers);
}
// Whether `address` lies in a block of the device heap (malloc/new in a kernel): device memory too.
extern "C" __attribute__((visibility("default"))) int gpuedu_heap_holds(const void* address) {
  const char* start;
  size_t bytes;
  return __gpuedu::host::heap_find(address, &start, &bytes) ? 1 : 0;
}
// In a child made by fork(): this module's host side forgets a launch the parent was running (Python calls it
// for every loaded module, os.register_at_fork).
extern "C" __attribute__((visibility("default"))) void gpuedu_after_fork() { __gpuedu::host::after_fork(); }
// Ask a running launch to stop (the Python timeout watchdog calls this from another thread).
extern "C" __attribute__((visibility("default"))) void gpuedu_request_stop(int reason) {
  if (!__gpuedu::host::launching()) return;
  __gpuedu::G.stop_reason = reason;
  __gpuedu::host::interrupt_launch();
}

namespace __gpuedu {
// dims: grid x, y, z, block x, y, z, the dynamic shared memory size and the shared memory limit (bytes)
// (dims[8..10], the launch's only: its cluster shape in blocks, which Python checked divides the grid; a grid
// launched from device code has none here.)
inline void begin_grid(const KernelInfo* k, const unsigned* dims) {
  __gpuedu_gridDim = dim3(dims[0], dims[1], dims[2]);
  __gpuedu_blockDim = dim3(dims[3], dims[4], dims[5]);
  R.nthreads = dims[3] * dims[4] * dims[5];
  R.dynamic_shared_bytes = dims[6];
  R.shared_limit = dims[7];
  R.kernel = k;
  place_dynamic();
}
}  // namespace __gpuedu

// The kernel whose grid was running last (a failed launch's: the one launched, or a grid it launched).
extern "C" __attribute__((visibility("default"))) const char* gpuedu_running_kernel() {
  return R.kernel ? ((const __gpuedu::KernelInfo*)R.kernel)->name : "";
}

namespace __gpuedu {
// A grid's blocks on `workers` OS threads at once (each with its own runtime state, fibers, stacks and shared
// memory), as a GPU's SMs run blocks at once; one worker runs them in the grid's order, as before.
struct GridJob {
  LaunchBody* body;
  const Runtime* launcher;    // worker 0's state: the launch's sizes and settings, copied by the others
  int codes[host::MAX_WORKERS];
  ErrorInfo errors[host::MAX_WORKERS];
};

// Worker w's state (made the first time it runs), this thread's from now on; false (and E_launch says why)
// when there is no memory for it. (Two functions: a profiled build's code sees the thread's pointer as const, so the
// state is read in a function called after the one that changed the pointer: set_up_worker.)
__attribute__((noinline)) inline bool attach_worker(int w) {
  void*& state = worker_states()[w];
  if (!state) {
    char* p = (char*)calloc(1, sizeof(Worker) + 128);
    if (!p) {
      E_launch = ErrorInfo{DEADLOCK, {0, 0, 0}, {0, 0, 0}, -1, 0, "no memory for a worker thread's state"};
      return false;
    }
    __atomic_store_n(&state, (void*)(p + (128 - (uintptr_t)p % 128)), __ATOMIC_RELEASE);   // (open_arenas reads it)
  }
  *const_cast<WorkerHead**>(&__gpuedu_worker) = (WorkerHead*)state;   // (const to a profiled build's reads)
  return true;
}

__attribute__((noinline)) inline bool set_up_worker(int w);
inline bool become_worker(int w) { return attach_worker(w) && set_up_worker(w); }

inline bool set_up_worker(int w) {
  R.worker = w;
  if (pools) R.pool = &pools[w];
  if (!R.dyn_buffer) {
    size_t page = host::page_bytes(), open = (DYNAMIC_SHARED_BYTES + page - 1) / page * page;
    unsigned char* p = (unsigned char*)host::reserve_inaccessible(open + DYNAMIC_GUARD_BYTES);
    if (p && host::set_accessible(p, open, true)) R.dyn_buffer = p;
  }
  if (!R.arena) __atomic_store_n(&R.arena, (unsigned char*)host::reserve_inaccessible(ARENA_BYTES), __ATOMIC_RELEASE);
  if (!R.arena || !R.dyn_buffer || !open_own_arena()) {
    E_launch = ErrorInfo{DEADLOCK, {0, 0, 0}, {0, 0, 0}, -1, 0,
                         "no address space left for the shared memory of a worker thread"};
    return false;
  }
  // The profiler learns where this worker's dynamic shared memory lies (a profiled build places it at its buffer's
  // start whatever the launch's size, so it is known before begin_grid sets the size).
  place_dynamic();
  GPUEDU_PROF(worker_begin(w, R.dyn, R.arena));
  return true;
}

inline void run_worker(void* p, int w) {
  GridJob& job = *(GridJob*)p;
  if (w) {
    if (!become_worker(w)) {
      job.codes[w] = DEADLOCK;
      job.errors[w] = E_launch;
      if (!G.stop_reason) G.stop_reason = STOPPED;
      return;
    }
    take_launch(job.launcher);
  }
  int code = host::run_guarded_worker(w, run_on_launch_stack, job.body);
  if (w) GPUEDU_PROF(worker_end());
  job.codes[w] = code;
  if (code) {
    job.errors[w] = E;
    // The other workers stop before their next block (a GPU abandons the grid); Ctrl-C and the timeout
    // stopped them already.
    if (code != INTERRUPT && code != TIMEOUT && !G.stop_reason) G.stop_reason = STOPPED;
  }
}

inline int run_grid_on(LaunchBody* body, int workers) {
  G.blocks = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
  G.next = 0;
  if (G.cluster_size > 1) workers = 1;   // (a cluster's blocks run together on one worker: gpuedu_cluster.h)
  if (workers > 1 && (unsigned long long)workers > G.blocks) workers = (int)G.blocks;
  // Some 16 shares per worker: few trips to the shared counter, and the last blocks still spread.
  G.chunk = workers > 1 ? G.blocks / ((unsigned long long)workers * 16) : 1;
  if (G.chunk < 1) G.chunk = 1;
  auto on_one_worker = [body] {
    int code = host::run_guarded(run_on_launch_stack, body);
    if (code) E_launch = E;
    return code;
  };
  if (workers <= 1) return on_one_worker();
  static GridJob job;   // (launches run one at a time)
  job.body = body;
  job.launcher = &R;
  host::enter_launch();
  bool ran = host::run_parallel(workers, run_worker, &job);
  host::leave_launch();
  if (!ran) return on_one_worker();   // no threads to be had: one worker
  // The failure to report: the first in the grid's order among the workers' own (not a stop they were asked
  // for), else the first stop.
  int chosen = -1;
  auto linear = [](const ErrorInfo& e) {
    return ((unsigned long long)e.block[2] * gridDim.y + e.block[1]) * gridDim.x + e.block[0];
  };
  for (int pass = 0; pass < 2 && chosen < 0; ++pass)
    for (int w = 0; w < workers; ++w) {
      int code = job.codes[w];
      if (!code || (pass == 0 && (code == INTERRUPT || code == TIMEOUT))) continue;
      if (chosen < 0 || linear(job.errors[w]) < linear(job.errors[chosen])) chosen = w;
    }
  if (chosen < 0) return 0;
  E_launch = job.errors[chosen];
  return job.codes[chosen];
}
}  // namespace __gpuedu

int gpuedu_launch(const __gpuedu::KernelInfo* k, const unsigned* dims, int schedule,
                    unsigned long long seed, int force_fibers, const void* args, int workers) {
  using namespace __gpuedu;
  // (The launching thread is worker 0; its state may serve another module's launch next.)
  if (!become_worker(0)) return DEADLOCK;
  begin_grid(k, dims);
  // Declarations registered by earlier launches count now, before any block runs.
  size_t known_static = __gpuedu::static_shared_of(k);
  R.schedule = schedule;
  R.seed = seed * 2654435761ULL + 0x9E3779B97F4A7C15ULL;
  G.stop_reason = 0;
  G.grid = 0;
  E.code = 0;
  E.message[0] = 0;
  E_launch.code = 0;
  G.cluster_size = 1;
  for (int i = 0; i < 3; ++i) {
    G.cluster[i] = dims[8 + i] ? dims[8 + i] : 1;
    G.cluster_size *= G.cluster[i];
  }
  GPUEDU_PROF(launch_begin(dims, dims + 3, R.dynamic_shared_bytes, DYNAMIC_SHARED_BYTES, &G.stop_reason));
  // (A cluster's blocks wait for one another: their threads run as fibers.)
  LaunchBody body{k, args, force_fibers || k->needs_fibers || G.cluster_size > 1, known_static};
  int code = run_grid_on(&body, workers);
  if (G.cluster_size > 1) leave_cluster_launch();
  G.cluster[0] = G.cluster[1] = G.cluster[2] = G.cluster_size = 1;   // (grids launched from device code)
  // The grids its threads launched from device code, in launch order (each may launch more): part of this launch,
  // as on a GPU, where a grid is complete only when its children are.
  const void* child;
  const void* child_args;
  unsigned child_dims[8];
  while (code == 0 && host::take_child(&child, child_dims, &child_args)) {
    const KernelInfo* ck = (const KernelInfo*)child;
    begin_grid(ck, child_dims);
    GPUEDU_PROF(grid_begin(child_dims));
    ++G.grid;
    LaunchBody grid{ck, child_args, force_fibers || ck->needs_fibers, __gpuedu::static_shared_of(ck)};
    code = run_grid_on(&grid, 1);
  }
  host::clear_children();
  GPUEDU_PROF(worker_end());
  size_t length = 0, dropped = 0;
  printed = host::printf_collect(gpuedu_printf_limit, &length, &dropped);
  gpuedu_printf_len = length;
  gpuedu_printf_dropped += dropped;
  return code;
}
// R, E and L were the runtime's words for the running worker's state: not the names of the kernel's code.
#undef R
#undef E
#undef L
#endif  // GPUEDU_SCAN
