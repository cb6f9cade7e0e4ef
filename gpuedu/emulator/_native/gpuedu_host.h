// The boundary between a kernel module's code and the emulator's host side
// (gpuedu_host.cpp): signal handlers, the jump out of a failed launch and the
// fiber stacks' mappings. Only plain types cross it, so the system headers the
// host side needs (unistd.h, signal.h, sys/mman.h, pthread.h) stay out of the
// translation unit that holds the user's kernels: nvcc accepts kernels and
// device functions called read, write, close, sleep or signal, so must we.
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#include <cstddef>

#define GPUEDU_HIDDEN __attribute__((visibility("hidden")))

namespace __gpuedu {
namespace host {

// A launch's blocks may run on several OS threads at once, its workers: worker 0 is the thread that
// launched, the others come from a pool of threads kept for the process (Workers).
constexpr int MAX_WORKERS = 64;
// Run body(arg) on this thread, as worker 0, with the fault and Ctrl-C handlers installed;
// returns 0, or the code that a fault, an interrupt or jump_out() ended it with.
GPUEDU_HIDDEN int run_guarded(void (*body)(void*), void* arg);
// A launch on several workers: enter_launch installs the handlers, then each worker runs its part with
// run_guarded_worker (worker 0 too, on the launching thread), and leave_launch puts the handlers back.
GPUEDU_HIDDEN void enter_launch();
GPUEDU_HIDDEN void leave_launch();
GPUEDU_HIDDEN int run_guarded_worker(int worker, void (*body)(void*), void* arg);
// Leave the running launch for this worker's run_guarded with `code` (never returns).
[[noreturn]] GPUEDU_HIDDEN void jump_out(int code);
// Whether a launch is running (set and cleared by run_guarded).
GPUEDU_HIDDEN bool launching();
// Interrupt the running launch on every worker (from any thread); nothing if none runs.
GPUEDU_HIDDEN void interrupt_launch();
// In a child made by fork(): forget a launch the parent was running (its handlers, its workers' slots).
GPUEDU_HIDDEN void after_fork();

// The pool of worker threads: one per process (Python owns it and hands it to every module, as the heap), the
// threads started by the first launch that needs them. run_parallel runs job(arg, w) for w = 0 .. n-1, worker 0
// on the calling thread, and returns when all have finished; false if the threads could not be started (then
// nothing ran).
// Each worker's state (__gpuedu::Worker), made by the first launch it runs in: one set for modules built with the
// hand-written fiber switch, one for those with ucontext's (GPUEDU_UCONTEXT), whose state is laid out otherwise.
constexpr int WORKER_LAYOUTS = 2;
struct Workers {
  void* impl;
  void* states[WORKER_LAYOUTS][MAX_WORKERS];
};
// The bytes a worker's state may take (the thread-local pointer's first target has as many: gpuedu_worker.cpp).
constexpr size_t WORKER_BYTES = 1 << 20;
GPUEDU_HIDDEN Workers* workers_of_process();
GPUEDU_HIDDEN void use_workers(Workers* workers);
GPUEDU_HIDDEN bool run_parallel(int n, void (*job)(void*, int), void* arg);

// printf's output of a launch: each worker keeps what its blocks print, record by record, with the grid's number
// in the launch (grids launched from device code come after it) and the block's index; when the launch ends,
// printf_collect lays the records out in that order (the order one worker gives),
// keeping whole records while they fit in `limit` bytes. Returns the text (valid until the next launch) and sets
// its length and the bytes dropped.
GPUEDU_HIDDEN void printf_add(int worker, unsigned grid, unsigned long long block, const char* text, size_t n);
GPUEDU_HIDDEN const char* printf_collect(size_t limit, size_t* length, size_t* dropped);
// Map `count` stacks of `stack_bytes` with an inaccessible guard page below each;
// returns the base (nullptr on failure) and sets the stride and the total size.
// `above` more bytes are reserved, inaccessible, over the last stack (the launch's stack keeps 1 MiB there,
// so that what a local array written far past its end hits is its own, never another mapping).
// `bytes` of address space, readable and writable, its pages made as they are first touched; nullptr if none.
GPUEDU_HIDDEN void* reserve(size_t bytes);
// `bytes` of address space that every access faults in, until set_accessible opens part of it; nullptr if none.
GPUEDU_HIDDEN void* reserve_inaccessible(size_t bytes);
// Make [p, p + bytes) readable and writable, or inaccessible again (whole pages; what it held is kept); false if
// the system refused.
GPUEDU_HIDDEN bool set_accessible(void* p, size_t bytes, bool accessible);
GPUEDU_HIDDEN size_t page_bytes();
GPUEDU_HIDDEN char* map_stacks(size_t stack_bytes, unsigned count, size_t* stride, size_t* total, size_t above = 0);

// Watched bytes (after static __shared__ arrays, past the dynamic shared memory a launch asked for):
// fill `count` regions with WATCH_PATTERN, or find the first that changed (its index, and the offsets of its
// first and last changed byte; -1 if none). Kept here, compiled once, rather than in every kernel module.
constexpr unsigned char WATCH_PATTERN = 0xa5;
constexpr size_t WATCH_MAX_BYTES = 256;
GPUEDU_HIDDEN void fill_watched(unsigned char* const* regions, const size_t* bytes, int count);
GPUEDU_HIDDEN int first_changed(unsigned char* const* regions, const size_t* bytes, int count, size_t* first,
                                size_t* last);

// The device heap (malloc, free, new and delete in kernels). Each block is mapped on its own, its end
// against an inaccessible page and another below its start, so an overrun faults at once instead of
// corrupting the host's heap. The state is process-wide: Python owns it and hands it to every module.
struct Heap {
  void* blocks;        // the live blocks (a map the first module to allocate creates)
  size_t limit;        // bytes the blocks may hold in all (cudaLimitMallocHeapSize: 8 MiB by default)
  size_t used;         // bytes the live blocks hold
};
GPUEDU_HIDDEN void use_heap(Heap* heap);
// A block of `bytes`, 16-byte aligned; nullptr when the heap's limit would be passed (as on a GPU).
GPUEDU_HIDDEN void* heap_alloc(size_t bytes);
// Release a block; false when `p` is not the start of a live block (nullptr is fine, as in C).
GPUEDU_HIDDEN bool heap_free(void* p);
// The block whose pages (guards included) hold `address`: its start and size; false if none.
GPUEDU_HIDDEN bool heap_find(const void* address, const char** start, size_t* bytes);

// Grids launched from device code (`kernel<<<grid, block>>>(...)` in a kernel, built with -rdc=true): queued
// while the launching grid runs, run after it, in launch order. CUDA 12 gives a parent no way to wait for its
// children inside the kernel, so no kernel can tell. `kernel` is the child's KernelInfo, `dims` as a launch's,
// `args` its parameters packed as PyCUDA packs them; false when PENDING_LIMIT launches wait already.
constexpr size_t PENDING_LIMIT = 2048;   // cudaLimitDevRuntimePendingLaunchCount's default
GPUEDU_HIDDEN bool queue_child(const void* kernel, const unsigned* dims, const void* args, size_t bytes);
// The next queued child (its arguments stay valid until the next call); false when none is left.
GPUEDU_HIDDEN bool take_child(const void** kernel, unsigned* dims, const void** args);
GPUEDU_HIDDEN void clear_children();

// Defined by the module (gpuedu_launch.h), called from the signal handlers
// during a launch: record where it stopped and return the launch's error code.
// is_write: 1 a write, 0 a read, -1 unknown, NO_ADDRESS when the CPU refused the access without saying where.
enum { NO_ADDRESS = 2 };
GPUEDU_HIDDEN int on_fault(bool divide_by_zero, void* address, int is_write);
GPUEDU_HIDDEN int on_interrupt();
// An illegal instruction (0), a breakpoint trap (1) or abort() (2) stopped the launch.
GPUEDU_HIDDEN int on_signal(int what);

}  // namespace host
}  // namespace __gpuedu
