// The profiler's boundary: what an instrumented kernel module tells the
// counters (gpuedu_profile.cpp) about the threads it runs. In an ordinary
// build every hook is an empty macro; a profiled build (GPUEDU_PROFILE, made
// with -fsanitize=thread and -fsanitize-coverage=trace-pc) calls them, and the
// compiler's instrumentation reports every load, store and basic block of the
// kernel to the same file.
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#include <cstddef>

#ifndef GPUEDU_HIDDEN
#define GPUEDU_HIDDEN __attribute__((visibility("hidden")))
#endif

#if defined(GPUEDU_PROFILE) && !defined(GPUEDU_SCAN)
namespace __gpuedu {
namespace prof {
// Where a worker's state keeps its counters' (__gpuedu::WorkerHead::prof and prof_running, gpuedu_device.h).
constexpr size_t WORKER_HEAD_PROF = 24, WORKER_HEAD_RUNNING = 64, WORKER_HEAD_RUNNING_BYTES = 128;
// This thread runs blocks of the launch as worker `worker` (0: the thread that launched), with the dynamic shared
// buffer `dynamic_shared` and its static __shared__ variables in `arena`, until worker_end(). A launch's blocks
// run on several workers at once, each counting its own; what must follow the grid's order (the L2 model,
// memcheck's errors) takes the blocks in that order.
GPUEDU_HIDDEN void worker_begin(int worker, const void* dynamic_shared, const void* arena);
GPUEDU_HIDDEN void worker_end();
// A launch starts: the grid, the block, the dynamic shared memory (the part of the buffer the launch asked
// for, and the buffer's size), and what turns nonzero when the launch stops early.
GPUEDU_HIDDEN void launch_begin(const unsigned* grid, const unsigned* block, size_t dynamic_bytes,
                                size_t dynamic_capacity, const volatile int* stop);
// A grid launched from device code starts (after the launch's own, in launch order: its blocks come after theirs).
GPUEDU_HIDDEN void grid_begin(const unsigned* grid);
// Block `block_linear` of the running grid starts and ends on this worker.
GPUEDU_HIDDEN void block_begin(unsigned long long block_linear);
GPUEDU_HIDDEN void block_end();
// Thread `tid` (linear in its block) runs the learner's code from here on, until leave().
GPUEDU_HIDDEN void enter(unsigned tid);
GPUEDU_HIDDEN void leave();
// Runtime work inside a thread that must not count as the thread's own (suspend returns the state to resume).
GPUEDU_HIDDEN bool suspend();
GPUEDU_HIDDEN void resume(bool was_on);
GPUEDU_HIDDEN void thread_done(unsigned tid);
// Every thread of the block passed a __syncthreads; the lanes of `warp` met at a warp intrinsic.
GPUEDU_HIDDEN void barrier_released();
GPUEDU_HIDDEN void cluster_barrier_released(void* const* heads, unsigned n);
GPUEDU_HIDDEN void warp_synced(unsigned warp);
// A warp's lanes met at a WMMA mma_sync and its product was computed (once per warp per call: mma.h).
GPUEDU_HIDDEN void mma_synced();
// A warp's lanes met at a shuffle and its values were exchanged (once per warp per call: one SHFL instruction).
GPUEDU_HIDDEN void shuffled();
// A warp's lanes met at an inline PTX mma.sync and its product was computed (once per warp per call:
// gpuedu_ptx.h): one HMMA instruction, of shape m16n8k16 (k16) or m16n8k8.
GPUEDU_HIDDEN void hmma_synced(bool k16);
// A warpgroup's 128 threads met at a wgmma.mma_async of N columns (m64nNk16) and its product was computed (once per
// warpgroup per call: gpuedu_wgmma.h).
GPUEDU_HIDDEN void gmma_synced(unsigned n);
// The running thread issued a TMA copy (cp.async.bulk.tensor, gpuedu_tma.h): a load, or a store, of a box of `bytes`.
GPUEDU_HIDDEN void tensor_copied(bool store, unsigned long long bytes);
// ... one row of its box inside the tensor: the `n` bytes at `p` in global memory, read (or written: `store`).
GPUEDU_HIDDEN void tensor_row(const void* p, unsigned long long n, bool store);
// The running thread reached an mbarrier wait (try_wait or test_wait: gpuedu_mbarrier.h), once however long it waited.
GPUEDU_HIDDEN void mbarrier_waited();
// The running thread's cp.async copy of `n` bytes to shared memory at `dst` landed, at the wait that covers its
// group (gpuedu_ptx.h): for racecheck, its bytes are written now, and no longer in flight.
GPUEDU_HIDDEN void async_landed(const void* dst, size_t n);
// A static __shared__ variable of `n` bytes at `p` exists (registered when its declaration first runs).
GPUEDU_HIDDEN void shared_range(const void* p, size_t n);
// ... and the running worker's copy of one in a function, at `offset` of its arena (each time its declaration runs).
GPUEDU_HIDDEN void shared_slot(size_t offset, size_t n);
}  // namespace prof
}  // namespace __gpuedu
// An atomic read-modify-write of `size` bytes at `p`; the caller's address names the instruction.
extern "C" GPUEDU_HIDDEN __attribute__((noinline)) void __gpuedu_prof_atomic(const void* p, unsigned size);
// The next atomic of the calling thread discards its result (a RED on the GPU); the profiled build's
// source rewrite puts this call before each such atomic (gpuedu/emulator/_scanner.py).
extern "C" GPUEDU_HIDDEN __attribute__((noinline)) void __gpuedu_prof_red();
// The `n` bytes at `p` are a local array of the calling thread (one nvcc keeps in local memory).
extern "C" GPUEDU_HIDDEN __attribute__((noinline)) void __gpuedu_prof_local(const void* p, size_t n);
// Inline PTX's memory instructions, one call each at the asm statement's own site (the profiled build's rewrite,
// gpuedu/emulator/_ptx.py; cuda_pipeline.h's __pipeline_memcpy_async): the caller's address names the
// instruction, as an atomic's does, and each is the lane's access, seen by racecheck and memcheck too.
// - ldmatrix: the 16-byte row at `row` the lane gives (null: the lane gives none; .x1 uses lanes 0-7, .x2 0-15),
//   an LDSM's share;
// - cp.async: its global read of `n` bytes at `src` (none when n is 0: a zero-filling copy reads nothing), and
//   its write of `n` bytes to shared memory at `dst`, both LDGSTS's; the write lands at the wait that covers it
//   (async_landed).
extern "C" GPUEDU_HIDDEN __attribute__((noinline)) void __gpuedu_prof_ldsm(const void* row);
extern "C" GPUEDU_HIDDEN __attribute__((noinline)) void __gpuedu_prof_ldgsts_read(const void* src, unsigned n);
extern "C" GPUEDU_HIDDEN __attribute__((noinline)) void __gpuedu_prof_ldgsts_write(const void* dst, unsigned n);
#define GPUEDU_PROF(call) ::__gpuedu::prof::call
namespace __gpuedu {
namespace prof {
// A local array nvcc keeps in local memory: the profiled build's rewrite (_scanner.mark_local_arrays) declares it
// under another name and makes the learner's name a reference to what this returns. The counters learn where it
// lies, and the address the kernel then uses comes out of an empty asm: neither compiler sees the array behind it
// any more, so -fsanitize=thread reports every access (g++ skips a local array whose address is never taken,
// clang++ one whose element addresses never leave the function, however the array's own address does), and
// neither keeps any of it in registers.
template <class T>
inline __attribute__((always_inline)) T* local(T* p) {
  __gpuedu_prof_local(p, sizeof(T));
  __asm__ volatile("" : "+r"(p));
  return p;
}
// While one lives, the thread's code is the runtime's, not the kernel's (suspend/resume).
struct Quiet {
  bool was;
  Quiet() : was(suspend()) {}
  ~Quiet() { resume(was); }
};
}  // namespace prof
}  // namespace __gpuedu
// Counting stops until the end of the scope: the runtime's work for an instruction (gpuedu_ptx.h). GPUEDU_PROF_QUIET
// alone is not enough there: g++ does not inline an instrumented helper (rt(), a format conversion) into an
// uninstrumented caller, and the helper's own loads, stores and basic blocks would count as the lane's.
#define GPUEDU_PROF_SUSPEND ::__gpuedu::prof::Quiet __gpuedu_prof_quiet
// Every atomic starts here: counted (and checked by memcheck) in a profiled build, checked for alignment in a
// plain one, where a misaligned atomic stops the launch as it does on a GPU ("misaligned address"). The rest of
// the atomic's body (a compare-and-swap loop for float, where a GPU has one instruction) is the runtime's: its
// branches are not the kernel's, so counting stops until the atomic returns. (A statement, at the top of the body.)
#define GPUEDU_ATOMIC_AT(p) \
  __gpuedu_prof_atomic((const void*)(p), (unsigned)sizeof(*(p))); ::__gpuedu::prof::Quiet __gpuedu_atomic_quiet
// Runtime code that must not count as the kernel's own loads, stores and branches. (clang++ spells the
// coverage half no_sanitize("coverage"), and ignores g++'s no_sanitize_coverage without a word under -w.)
#ifdef __clang__
#define GPUEDU_PROF_QUIET __attribute__((noinline, no_sanitize("coverage", "thread")))
#else
#define GPUEDU_PROF_QUIET __attribute__((noinline, no_sanitize_coverage, no_sanitize_thread))
#endif
// Atomics are inlined where they are called, so that each call is an instruction of its own; so is any function
// that tells the counters of an instruction (cuda_pipeline.h's __pipeline_memcpy_async).
#define GPUEDU_ATOMIC_FN static inline __attribute__((always_inline))
#define GPUEDU_INSTRUCTION_FN static inline __attribute__((always_inline))
// A runtime function whose uninstrumented part is a function of its own (GPUEDU_PROF_QUIET) stays out of
// line (warp_collective): small without that part, it would be inlined into kernels where the host compiler
// keeps it whole out of line, and its counted blocks would merge with the kernel's (other counts of
// basic-block instances).
#define GPUEDU_PROF_OUTLINED __attribute__((noinline))
// The runtime's part of a function the kernel calls, made a function of its own so that a profiled build does
// not instrument it: an ordinary build inlines it back, and its code is what it was before the split.
#define GPUEDU_PROF_QUIET_PART GPUEDU_PROF_QUIET
#else
#define GPUEDU_PROF_OUTLINED
#define GPUEDU_PROF_QUIET_PART __attribute__((always_inline))
#define GPUEDU_PROF(call) ((void)0)
#define GPUEDU_PROF_SUSPEND ((void)0)
namespace __gpuedu {
[[noreturn]] void misaligned_atomic(const void* p, unsigned size);
}
#define GPUEDU_ATOMIC_AT(p) \
  ((__builtin_expect(((unsigned long)(const void*)(p) & (sizeof(*(p)) - 1)) != 0, 0)) \
       ? ::__gpuedu::misaligned_atomic((const void*)(p), (unsigned)sizeof(*(p))) : (void)0)
#define GPUEDU_PROF_QUIET
#define GPUEDU_ATOMIC_FN static inline
#define GPUEDU_INSTRUCTION_FN static inline
#endif
