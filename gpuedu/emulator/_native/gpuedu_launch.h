// The launch entry of a kernel module and the signal handling around it, part of
// the emulator's runtime (included at the end of gpuedu_runtime.h): faults,
// Ctrl-C and timeouts during a launch jump back here and become error codes.
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#ifndef GPUEDU_SCAN
namespace __gpuedu {

// ---- signals: faults, Ctrl-C and timeouts during a launch ---------------------------
GPUEDU_HIDDEN struct sigaction old_segv, old_bus, old_fpe, old_int;
alignas(16) GPUEDU_HIDDEN char alt_stack[64 * 1024];

inline void on_fault(int sig, siginfo_t* info, void* ctx) {
  if (!R.in_launch || !pthread_equal(pthread_self(), R.launch_thread)) {
    // Not ours: put the previous handler back and let the access fault again.
    sigaction(sig, sig == SIGSEGV ? &old_segv : sig == SIGBUS ? &old_bus : &old_fpe, nullptr);
    return;
  }
  E.fault_address = (unsigned long long)(uintptr_t)info->si_addr;
  E.fault_is_write = -1;
#if defined(__x86_64__) && defined(__linux__)
  E.fault_is_write = (((ucontext_t*)ctx)->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;
#else
  (void)ctx;
#endif
  char* a = (char*)info->si_addr;
  int code = sig == SIGFPE ? DIVIDE_BY_ZERO : FAULT;
  // A fault in a guard page between the fibers' stacks (or just under the first) is an
  // overflow; the compiler probes large frames page by page (-fstack-clash-protection),
  // so an overflow cannot jump over a guard page.
  if (code == FAULT && R.fiber_mode && R.stacks && a >= R.stacks - 65536 && a < R.stacks + R.stacks_bytes) {
    size_t offset = a >= R.stacks ? (size_t)(a - R.stacks) % R.stack_stride : 0;
    if (offset < R.stack_stride - STACK_BYTES) code = STACK_OVERFLOW;
  }
  E.code = code;
  E.block[0] = blockIdx.x; E.block[1] = blockIdx.y; E.block[2] = blockIdx.z;
  E.thread[0] = threadIdx.x; E.thread[1] = threadIdx.y; E.thread[2] = threadIdx.z;
  E.message[0] = 0;
  siglongjmp(R.jump, code);
}

inline void on_interrupt(int sig, siginfo_t* info, void* ctx) {
  if (!R.in_launch) {
    // Just before the handlers are restored: hand the signal to the previous handler (Python's).
    if (old_int.sa_flags & SA_SIGINFO) {
      if (old_int.sa_sigaction) old_int.sa_sigaction(sig, info, ctx);
    } else if (old_int.sa_handler != SIG_DFL && old_int.sa_handler != SIG_IGN) {
      old_int.sa_handler(sig);
    }
    return;
  }
  if (!pthread_equal(pthread_self(), R.launch_thread)) {
    pthread_kill(R.launch_thread, sig);  // the kernel runs on the launching thread: stop it there
    return;
  }
  int code = R.stop_reason == TIMEOUT ? TIMEOUT : INTERRUPT;
  E.code = code;
  E.block[0] = blockIdx.x; E.block[1] = blockIdx.y; E.block[2] = blockIdx.z;
  E.thread[0] = threadIdx.x; E.thread[1] = threadIdx.y; E.thread[2] = threadIdx.z;
  E.message[0] = 0;
  siglongjmp(R.jump, code);
}

GPUEDU_HIDDEN thread_local bool altstack_checked;

inline void install_handlers() {
  // The fault handler must run on an alternate stack (a fiber that overflows
  // its stack cannot run it). Any alternate stack will do, e.g. faulthandler's:
  // only a thread without one gets ours, once, and keeps it.
  if (!altstack_checked) {
    altstack_checked = true;
    stack_t current;
    if (sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE)) {
      stack_t ss;
      ss.ss_sp = alt_stack;
      ss.ss_size = sizeof alt_stack;
      ss.ss_flags = 0;
      sigaltstack(&ss, nullptr);
    }
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &old_segv);
  sigaction(SIGBUS, &sa, &old_bus);
  sigaction(SIGFPE, &sa, &old_fpe);  // integer division by zero traps on the CPU (not on a GPU)
  sa.sa_sigaction = on_interrupt;
  sigaction(SIGINT, &sa, &old_int);
}

inline void restore_handlers() {
  sigaction(SIGSEGV, &old_segv, nullptr);
  sigaction(SIGBUS, &old_bus, nullptr);
  sigaction(SIGFPE, &old_fpe, nullptr);
  sigaction(SIGINT, &old_int, nullptr);
}

}  // namespace __gpuedu

// ---- the launch entry ------------------------------------------------------------------
extern "C" __attribute__((visibility("default"))) int gpuedu_launch(const __gpuedu::KernelInfo* k,
                                                                     const unsigned* dims, int schedule, unsigned long long seed,
                                                                     int force_fibers, const void* args);
extern "C" __attribute__((visibility("default"))) const __gpuedu::ErrorInfo* gpuedu_error() { return &__gpuedu::E; }
extern "C" __attribute__((visibility("default"))) const char* gpuedu_take_output() {
  // The caller copies the text before the next launch; the length is reset here.
  gpuedu_printf_len = 0;
  return __gpuedu::R.out ? __gpuedu::R.out : "";
}
extern "C" __attribute__((visibility("default"))) size_t gpuedu_static_shared(const __gpuedu::KernelInfo* k) {
  return __gpuedu::static_shared_of(k);
}
// Share the process-wide fiber stack pool (see StackPool); called once at load.
extern "C" __attribute__((visibility("default"))) void gpuedu_use_stack_pool(__gpuedu::StackPool* pool) {
  __gpuedu::R.pool = pool;
}
// Ask a running launch to stop (the Python timeout watchdog calls this from another thread).
extern "C" __attribute__((visibility("default"))) void gpuedu_request_stop(int reason) {
  if (!__gpuedu::R.in_launch) return;
  __gpuedu::R.stop_reason = reason;
  pthread_kill(__gpuedu::R.launch_thread, SIGINT);
}

int gpuedu_launch(const __gpuedu::KernelInfo* k, const unsigned* dims, int schedule,
                    unsigned long long seed, int force_fibers, const void* args) {
  using namespace __gpuedu;
  // dims: grid x, y, z, block x, y, z, the dynamic shared memory size and the shared memory limit (bytes)
  gridDim = dim3(dims[0], dims[1], dims[2]);
  blockDim = dim3(dims[3], dims[4], dims[5]);
  R.nthreads = dims[3] * dims[4] * dims[5];
  R.dynamic_shared_bytes = dims[6];
  R.shared_limit = dims[7];
  R.kernel = k;
  // Declarations registered by earlier launches count now, before any block runs.
  size_t known_static = __gpuedu::static_shared_of(k);
  R.schedule = schedule;
  R.rng = seed * 2654435761ULL + 0x9E3779B97F4A7C15ULL;
  R.stop_reason = 0;
  E.code = 0;
  E.message[0] = 0;
  R.launch_thread = pthread_self();
  install_handlers();
  R.in_launch = true;
  // No signal mask to save: the handlers run with SA_NODEFER, so jumping out of
  // one leaves the mask as it was (and saves a system call per launch).
  int code = sigsetjmp(R.jump, 0);
  if (code == 0) {
    if (known_static + R.dynamic_shared_bytes > R.shared_limit) __gpuedu::fail_too_much_shared(known_static);
    k->run(args, force_fibers || k->needs_fibers);
  }
  R.in_launch = false;
  restore_handlers();
  return code;
}
#endif  // GPUEDU_SCAN
