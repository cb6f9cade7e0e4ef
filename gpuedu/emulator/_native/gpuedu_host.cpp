// The emulator's host side, compiled on its own (once per prelude, into the
// kernel cache) and linked into every kernel module; see gpuedu_host.h for why.
// Fortified siglongjmp (-D_FORTIFY_SOURCE, a default of several distributions' compilers) refuses to
// jump from a fiber's stack back to the launch's: never fortified, whatever the command line says.
#undef _FORTIFY_SOURCE
#include <csetjmp>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <pthread.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "gpuedu_host.h"

namespace __gpuedu {
namespace host {
namespace {

sigjmp_buf jump;
pthread_t launch_thread;
volatile sig_atomic_t in_launch;
struct sigaction old_segv, old_bus, old_fpe, old_int, old_ill, old_trap, old_abrt;
alignas(16) char alt_stack[64 * 1024];
thread_local bool altstack_checked;

void fault_handler(int sig, siginfo_t* info, void* ctx) {
  if (!in_launch || !pthread_equal(pthread_self(), launch_thread)) {
    // Not ours: put the previous handler back and let the access fault again.
    sigaction(sig, sig == SIGSEGV ? &old_segv : sig == SIGBUS ? &old_bus : &old_fpe, nullptr);
    return;
  }
  int is_write = -1;  // unknown unless the CPU tells
#if defined(__x86_64__) && defined(__linux__)
  is_write = (((ucontext_t*)ctx)->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;
#else
  (void)ctx;
#endif
#ifdef SI_KERNEL
  // A general-protection fault gives no address: on x86, an aligned SSE access to a misaligned address
  // (a float4 or double2 that is not 16-byte aligned) or a non-canonical pointer.
  if (sig == SIGSEGV && info->si_code == SI_KERNEL) is_write = NO_ADDRESS;
#endif
  siglongjmp(jump, on_fault(sig == SIGFPE, info->si_addr, is_write));
}

// An illegal instruction (__builtin_trap), a breakpoint or abort() in a kernel: stop the launch
// with what it was, instead of the process.
void trap_handler(int sig, siginfo_t* info, void* ctx) {
  if (!in_launch || !pthread_equal(pthread_self(), launch_thread)) {
    sigaction(sig, sig == SIGILL ? &old_ill : sig == SIGTRAP ? &old_trap : &old_abrt, nullptr);
    if (sig == SIGABRT) raise(sig);   // abort() outside a launch: let it do what it does
    return;
  }
  (void)info;
  (void)ctx;
  siglongjmp(jump, on_signal(sig == SIGILL ? 0 : sig == SIGTRAP ? 1 : 2));
}

void interrupt_handler(int sig, siginfo_t* info, void* ctx) {
  if (!in_launch) {
    // Just before the handlers are restored: hand the signal to the previous handler (Python's).
    if (old_int.sa_flags & SA_SIGINFO) {
      if (old_int.sa_sigaction) old_int.sa_sigaction(sig, info, ctx);
    } else if (old_int.sa_handler != SIG_DFL && old_int.sa_handler != SIG_IGN) {
      old_int.sa_handler(sig);
    }
    return;
  }
  if (!pthread_equal(pthread_self(), launch_thread)) {
    pthread_kill(launch_thread, sig);  // the kernel runs on the launching thread: stop it there
    return;
  }
  siglongjmp(jump, on_interrupt());
}

void install_handlers() {
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
  sa.sa_sigaction = fault_handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &old_segv);
  sigaction(SIGBUS, &sa, &old_bus);
  sigaction(SIGFPE, &sa, &old_fpe);  // integer division by zero traps on the CPU (not on a GPU)
  sa.sa_sigaction = trap_handler;
  sigaction(SIGILL, &sa, &old_ill);
  sigaction(SIGTRAP, &sa, &old_trap);
  sigaction(SIGABRT, &sa, &old_abrt);
  sa.sa_sigaction = interrupt_handler;
  sigaction(SIGINT, &sa, &old_int);
}

void restore_handlers() {
  sigaction(SIGSEGV, &old_segv, nullptr);
  sigaction(SIGBUS, &old_bus, nullptr);
  sigaction(SIGFPE, &old_fpe, nullptr);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGILL, &old_ill, nullptr);
  sigaction(SIGTRAP, &old_trap, nullptr);
  sigaction(SIGABRT, &old_abrt, nullptr);
}

}  // namespace

int run_guarded(void (*body)(void*), void* arg) {
  launch_thread = pthread_self();
  install_handlers();
  in_launch = 1;
  // No signal mask to save: the handlers run with SA_NODEFER, so jumping out of
  // one leaves the mask as it was (and saves a system call per launch).
  int code = sigsetjmp(jump, 0);
  if (code == 0) body(arg);
  in_launch = 0;
  restore_handlers();
  return code;
}

void jump_out(int code) { siglongjmp(jump, code); }

bool launching() { return in_launch != 0; }

void interrupt_launch() {
  if (in_launch) pthread_kill(launch_thread, SIGINT);
}

char* map_stacks(size_t stack_bytes, unsigned count, size_t* stride, size_t* total, size_t above) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t one = stack_bytes + page;
  void* p = mmap(nullptr, one * count + above, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (above) mprotect((char*)p + one * count, above, PROT_NONE);
  // A guard page under each stack: an overflow faults instead of corrupting the neighbour.
  for (unsigned i = 0; i < count; ++i) mprotect((char*)p + i * one, page, PROT_NONE);
  *stride = one;
  *total = one * count;
  return (char*)p;
}

namespace {

struct Block {
  size_t bytes;      // what malloc was asked for
  char* map;         // the mapping: guard page, body, guard page
  size_t map_bytes;
};
struct Blocks {
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  std::map<uintptr_t, Block> by_start;
};

Heap* heap;

Blocks* blocks() {
  if (!heap) return nullptr;
  if (!heap->blocks) heap->blocks = new Blocks;   // launches run one at a time: no race here
  return (Blocks*)heap->blocks;
}

struct Locked {
  Blocks* b;
  explicit Locked(Blocks* b_) : b(b_) { pthread_mutex_lock(&b->lock); }
  ~Locked() { pthread_mutex_unlock(&b->lock); }
};

}  // namespace

void fill_watched(unsigned char* const* regions, const size_t* bytes, int count) {
  for (int i = 0; i < count; ++i) memset(regions[i], WATCH_PATTERN, bytes[i]);
}

int first_changed(unsigned char* const* regions, const size_t* bytes, int count, size_t* first, size_t* last) {
  static unsigned char pattern[WATCH_MAX_BYTES];
  if (pattern[0] != WATCH_PATTERN) memset(pattern, WATCH_PATTERN, sizeof pattern);
  for (int i = 0; i < count; ++i) {
    const unsigned char* p = regions[i];
    if (memcmp(p, pattern, bytes[i]) == 0) continue;
    *first = bytes[i];
    for (size_t k = 0; k < bytes[i]; ++k)
      if (p[k] != WATCH_PATTERN) {
        if (*first == bytes[i]) *first = k;
        *last = k;
      }
    return i;
  }
  return -1;
}

void use_heap(Heap* h) { heap = h; }

void* heap_alloc(size_t bytes) {
  Blocks* b = blocks();
  if (!b) return nullptr;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t body = ((bytes ? bytes : 1) + 15) / 16 * 16;
  size_t pages = (body + page - 1) / page * page;
  {
    Locked hold(b);
    if (heap->used + bytes > heap->limit) return nullptr;
    heap->used += bytes;
  }
  size_t total = pages + 2 * page;
  void* m = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    Locked hold(b);
    heap->used -= bytes;
    return nullptr;
  }
  char* map = (char*)m;
  mprotect(map, page, PROT_NONE);
  mprotect(map + page + pages, page, PROT_NONE);
  char* start = map + page + pages - body;
  Locked hold(b);
  b->by_start[(uintptr_t)start] = Block{bytes, map, total};
  return start;
}

bool heap_free(void* p) {
  if (!p) return true;
  Blocks* b = blocks();
  if (!b) return false;
  Block block;
  {
    Locked hold(b);
    auto it = b->by_start.find((uintptr_t)p);
    if (it == b->by_start.end()) return false;
    block = it->second;
    b->by_start.erase(it);
    heap->used -= block.bytes;
  }
  munmap(block.map, block.map_bytes);
  return true;
}

bool heap_find(const void* address, const char** start, size_t* bytes) {
  Blocks* b = blocks();
  if (!b) return false;
  uintptr_t a = (uintptr_t)address;
  // Called from the fault handler: the launching thread holds no lock of ours while a kernel runs
  // (heap_alloc and heap_free return before the kernel goes on), so taking it here cannot deadlock.
  Locked hold(b);
  // The block starting after `a` (a in its lower guard page), and the one starting at or before it.
  auto after = b->by_start.upper_bound(a);
  for (auto it : {after, after == b->by_start.begin() ? b->by_start.end() : std::prev(after)}) {
    if (it == b->by_start.end()) continue;
    const Block& blk = it->second;
    if (a >= (uintptr_t)blk.map && a < (uintptr_t)blk.map + blk.map_bytes) {
      *start = (const char*)it->first;
      *bytes = blk.bytes;
      return true;
    }
  }
  return false;
}

}  // namespace host
}  // namespace __gpuedu

// ---- grids launched from device code ------------------------------------------------------------------
#include <deque>
#include <vector>

namespace __gpuedu {
namespace host {
namespace {
struct Child {
  const void* kernel;
  unsigned dims[8];
  std::vector<char> args;
};
std::deque<Child> pending;
Child running;   // the child taken last: its arguments live here while it runs
}  // namespace

bool queue_child(const void* kernel, const unsigned* dims, const void* args, size_t bytes) {
  if (pending.size() >= PENDING_LIMIT) return false;
  pending.push_back(Child{kernel, {}, std::vector<char>((const char*)args, (const char*)args + bytes)});
  memcpy(pending.back().dims, dims, sizeof pending.back().dims);
  return true;
}

bool take_child(const void** kernel, unsigned* dims, const void** args) {
  if (pending.empty()) return false;
  running = std::move(pending.front());
  pending.pop_front();
  *kernel = running.kernel;
  memcpy(dims, running.dims, sizeof running.dims);
  *args = running.args.data();
  return true;
}

void clear_children() { pending.clear(); }
}  // namespace host
}  // namespace __gpuedu
