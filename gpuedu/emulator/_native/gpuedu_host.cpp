// The emulator's host side, compiled on its own (once per prelude, into the
// kernel cache) and linked into every kernel module; see gpuedu_host.h for why.
// Fortified siglongjmp (-D_FORTIFY_SOURCE, a default of several distributions' compilers) refuses to
// jump from a fiber's stack back to the launch's: never fortified, whatever the command line says.
#undef _FORTIFY_SOURCE
#include <algorithm>
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

// Each worker of the running launch: its thread, where a fault or interrupt on it jumps to, whether it runs
// the launch's code now, and whether it was asked to stop already.
struct Slot {
  pthread_t thread;
  sigjmp_buf jump;
  volatile sig_atomic_t active;
  volatile sig_atomic_t kicked;
};
Slot slots[MAX_WORKERS];
volatile sig_atomic_t in_launch;
struct sigaction old_segv, old_bus, old_fpe, old_int, old_ill, old_trap, old_abrt, old_urg;
alignas(16) char alt_stack[64 * 1024];
thread_local bool altstack_checked;

// Which worker this thread is, if it runs the launch's code now (-1: none). Async-signal-safe.
int my_slot() {
  pthread_t self = pthread_self();
  for (int i = 0; i < MAX_WORKERS; ++i)
    if (slots[i].active && pthread_equal(slots[i].thread, self)) return i;
  return -1;
}

// Ask every other worker to stop where it is (SIGURG, whose handler jumps out of its launch; ignored by
// default, so one that arrives after the launch has ended does nothing).
void kick_others(int me) {
  for (int i = 0; i < MAX_WORKERS; ++i)
    if (i != me && slots[i].active && !__atomic_exchange_n(&slots[i].kicked, 1, __ATOMIC_SEQ_CST))
      pthread_kill(slots[i].thread, SIGURG);
}

#if defined(__aarch64__) && defined(__linux__)
// Whether the A64 instruction `insn`, which faulted, writes memory (1), only reads it (0), or is none of the
// loads and stores below (-1). x86 says so in the page fault's error code; aarch64's kernel puts it in an ESR
// record of the signal frame, which qemu-user (how CI runs aarch64) does not write. The instruction itself is
// there on both, so it is read instead (Arm ARM, "Loads and Stores" encodings).
int a64_writes(uint32_t insn) {
  auto bit = [insn](int b) { return (insn >> b) & 1u; };
  auto field = [insn](int hi, int lo) { return (insn >> lo) & ((1u << (hi - lo + 1)) - 1); };
  // Single registers: a SIMD&FP register is stored when opc's low bit is clear; a general register only when
  // opc is 00 (10 and 11 load with sign extension, or prefetch, which never faults).
  auto single = [&]() { return bit(26) ? (bit(22) ? 0 : 1) : (field(23, 22) == 0 ? 1 : 0); };
  if (!bit(27) || bit(25)) return -1;                         // not in the loads-and-stores group
  unsigned op = field(29, 24);
  if (op == 0x08) {                                           // exclusive and ordered: LDXR, STLXR, LDAR, CAS
    bool o2 = bit(23), o1 = bit(21);
    if ((o2 && o1) || (!bit(31) && !o2 && o1)) return 1;      // CAS, CASP: read and write
    return bit(22) ? 0 : 1;
  }
  if (!bit(31) && (op == 0x0C || op == 0x0D)) return bit(22) ? 0 : 1;   // SIMD structures: LD1-LD4, ST1-ST4
  switch (field(29, 27)) {
    case 3:                                                   // LDR (literal); LDAPUR/STLUR
      if (!bit(24)) return 0;
      return (!bit(26) && field(11, 10) == 0) ? single() : -1;
    case 5:                                                   // pairs: LDP, STP, LDNP, STNP
      return bit(22) ? 0 : 1;
    case 7:                                                   // single registers, every addressing mode
      if (!bit(24) && bit(21)) {
        unsigned kind = field(11, 10);
        if (kind == 0) return bit(26) ? -1 : (bit(15) && field(14, 12) == 4) ? 0 : 1;  // LSE atomics; LDAPR reads
        if (kind & 1) return 0;                               // LDRAA, LDRAB
      }
      return single();
  }
  return -1;
}
#endif

void fault_handler(int sig, siginfo_t* info, void* ctx) {
  int me = in_launch ? my_slot() : -1;
  if (me < 0) {
    // Not ours: put the previous handler back and let the access fault again.
    sigaction(sig, sig == SIGSEGV ? &old_segv : sig == SIGBUS ? &old_bus : &old_fpe, nullptr);
    return;
  }
  int is_write = -1;  // unknown unless the CPU tells
#if defined(__x86_64__) && defined(__linux__)
  is_write = (((ucontext_t*)ctx)->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;
#elif defined(__aarch64__) && defined(__linux__)
  // The faulting instruction, unless fetching it was the fault (a jump to a bad address): then no data access.
  uintptr_t pc = ((ucontext_t*)ctx)->uc_mcontext.pc;
  if ((void*)pc != info->si_addr) is_write = a64_writes(*(const uint32_t*)pc);
#else
  (void)ctx;
#endif
#ifdef SI_KERNEL
  // A general-protection fault gives no address: on x86, an aligned SSE access to a misaligned address
  // (a float4 or double2 that is not 16-byte aligned) or a non-canonical pointer.
  if (sig == SIGSEGV && info->si_code == SI_KERNEL) is_write = NO_ADDRESS;
#endif
  siglongjmp(slots[me].jump, on_fault(sig == SIGFPE, info->si_addr, is_write));
}

// An illegal instruction (__builtin_trap), a breakpoint or abort() in a kernel: stop the launch
// with what it was, instead of the process.
void trap_handler(int sig, siginfo_t* info, void* ctx) {
  int me = in_launch ? my_slot() : -1;
  if (me < 0) {
    sigaction(sig, sig == SIGILL ? &old_ill : sig == SIGTRAP ? &old_trap : &old_abrt, nullptr);
    if (sig == SIGABRT) raise(sig);   // abort() outside a launch: let it do what it does
    return;
  }
  (void)info;
  int what = sig == SIGILL ? 0 : sig == SIGTRAP ? 1 : 2;
#if defined(__aarch64__) && defined(__linux__)
  // __builtin_trap() is x86's ud2 (SIGILL) but aarch64's BRK, a breakpoint (SIGTRAP): BRK #1000 from g++, BRK #1
  // from clang. Those two are the trap the source asked for, named as on x86.
  if (sig == SIGTRAP) {
    uint32_t insn = *(const uint32_t*)((ucontext_t*)ctx)->uc_mcontext.pc;
    uint32_t brk = 0xd4200000u, comment = (insn >> 5) & 0xffffu;
    if ((insn & 0xffe0001fu) == brk && (comment == 1000 || comment == 1)) what = 0;
  }
#else
  (void)ctx;
#endif
  siglongjmp(slots[me].jump, on_signal(what));
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
  // Ctrl-C stops every worker of the launch, wherever it arrives.
  int me = my_slot();
  kick_others(me);
  if (me >= 0) siglongjmp(slots[me].jump, on_interrupt());
}

// A worker asked to stop (interrupt_launch, or Ctrl-C on another worker).
void kick_handler(int, siginfo_t*, void*) {
  int me = in_launch ? my_slot() : -1;
  if (me >= 0) siglongjmp(slots[me].jump, on_interrupt());
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
  sa.sa_sigaction = kick_handler;
  sigaction(SIGURG, &sa, &old_urg);
}

void restore_handlers() {
  sigaction(SIGSEGV, &old_segv, nullptr);
  sigaction(SIGBUS, &old_bus, nullptr);
  sigaction(SIGFPE, &old_fpe, nullptr);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGILL, &old_ill, nullptr);
  sigaction(SIGTRAP, &old_trap, nullptr);
  sigaction(SIGABRT, &old_abrt, nullptr);
  sigaction(SIGURG, &old_urg, nullptr);
}

// body(arg) as worker `w`: a fault, an interrupt or jump_out() on this thread comes back here.
int run_slot(int w, void (*body)(void*), void* arg) {
  Slot& slot = slots[w];
  slot.thread = pthread_self();
  slot.kicked = 0;
  // No signal mask to save: the handlers run with SA_NODEFER, so jumping out of
  // one leaves the mask as it was (and saves a system call per launch).
  int code = sigsetjmp(slot.jump, 0);
  if (code == 0) {
    slot.active = 1;
    body(arg);
  }
  slot.active = 0;
  return code;
}

}  // namespace

void enter_launch() {
  install_handlers();
  in_launch = 1;
}

void leave_launch() {
  in_launch = 0;
  restore_handlers();
}

int run_guarded(void (*body)(void*), void* arg) {
  enter_launch();
  int code = run_slot(0, body, arg);
  leave_launch();
  return code;
}

int run_guarded_worker(int worker, void (*body)(void*), void* arg) { return run_slot(worker, body, arg); }

void jump_out(int code) {
  int me = my_slot();
  siglongjmp(slots[me < 0 ? 0 : me].jump, code);
}

bool launching() { return in_launch != 0; }

void after_fork() {
  // A child made by fork() while another thread of its parent ran a launch inherits that launch's state but
  // none of its threads: the handlers installed for it (Ctrl-C would go to a launch that is not there) and the
  // workers' slots. It starts as a process that never launched; its own launches install what they need.
  if (in_launch) {
    in_launch = 0;
    restore_handlers();
  }
  for (int i = 0; i < MAX_WORKERS; ++i) slots[i].active = 0;
}

void interrupt_launch() {
  if (in_launch) kick_others(-1);
}

void* reserve(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void* reserve_inaccessible(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

bool set_accessible(void* p, size_t bytes, bool accessible) {
  return !bytes || mprotect(p, bytes, accessible ? PROT_READ | PROT_WRITE : PROT_NONE) == 0;
}

size_t page_bytes() {
  static size_t page;   // (two threads may both ask the system first: the same answer)
  if (!page) page = (size_t)sysconf(_SC_PAGESIZE);
  return page;
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
  void* current = __atomic_load_n(&heap->blocks, __ATOMIC_ACQUIRE);
  if (!current) {   // the first allocation of the process (several workers may race to it)
    Blocks* made = new Blocks;
    if (__atomic_compare_exchange_n(&heap->blocks, &current, (void*)made, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      current = made;
    else
      delete made;
  }
  return (Blocks*)current;
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

// ---- the worker pool ---------------------------------------------------------------------------------
// Threads kept for the process, parked on a condition variable between launches. A launch hands them a job
// and a generation number; each runs its share and counts itself out.
#include <cstdlib>

namespace __gpuedu {
namespace host {
namespace {
struct Pool {
  pid_t owner = getpid();           // the process whose threads these are (a fork's child has none of them)
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t start = PTHREAD_COND_INITIALIZER;
  pthread_cond_t finished = PTHREAD_COND_INITIALIZER;
  int threads = 0;                  // started so far (workers 1 .. threads)
  unsigned long long generation = 0;
  int wanted = 0;                   // workers 1 .. wanted-1 take part in this generation's job
  int running = 0;                  // of them, not yet finished
  void (*job)(void*, int) = nullptr;
  void* arg = nullptr;
};
struct Started {
  Pool* pool;
  int worker;
  unsigned long long generation;   // the pool's when the thread was made: the next job is its first
};
Workers* workers;

void* worker_main(void* p) {
  Started s = *(Started*)p;
  delete (Started*)p;
  // The fault handler runs on an alternate stack (a fiber that overflows its stack cannot run it): one per thread.
  stack_t ss;
  ss.ss_size = 64 * 1024;
  ss.ss_sp = malloc(ss.ss_size);
  ss.ss_flags = 0;
  if (ss.ss_sp) sigaltstack(&ss, nullptr);
  Pool& pool = *s.pool;
  unsigned long long seen = s.generation;
  pthread_mutex_lock(&pool.lock);
  for (;;) {
    while (pool.generation == seen) pthread_cond_wait(&pool.start, &pool.lock);
    seen = pool.generation;
    if (s.worker >= pool.wanted) continue;
    void (*job)(void*, int) = pool.job;
    void* arg = pool.arg;
    pthread_mutex_unlock(&pool.lock);
    job(arg, s.worker);
    pthread_mutex_lock(&pool.lock);
    if (--pool.running == 0) pthread_cond_signal(&pool.finished);
  }
  return nullptr;
}
}  // namespace

void use_workers(Workers* w) { workers = w; }

Workers* workers_of_process() { return workers; }

bool run_parallel(int n, void (*job)(void*, int), void* arg) {
  if (!workers || n < 1 || n > MAX_WORKERS) return false;
  // (Launches run one at a time: no race here.) A child made by fork() inherits the pool's memory but none of its
  // threads, and perhaps a lock one of them held: it starts a pool of its own.
  if (!workers->impl || ((Pool*)workers->impl)->owner != getpid()) workers->impl = new Pool;
  Pool& pool = *(Pool*)workers->impl;
  pthread_mutex_lock(&pool.lock);
  while (pool.threads < n - 1) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 20);   // the blocks run on stacks of their own (gpuedu_launch.h)
    pthread_t t;
    Started* s = new Started{&pool, pool.threads + 1, pool.generation};
    int failed = pthread_create(&t, &attr, worker_main, s);
    pthread_attr_destroy(&attr);
    if (failed) {
      delete s;
      pthread_mutex_unlock(&pool.lock);
      return false;
    }
    pthread_detach(t);
    ++pool.threads;
  }
  pool.job = job;
  pool.arg = arg;
  pool.wanted = n;
  pool.running = n - 1;
  ++pool.generation;
  pthread_cond_broadcast(&pool.start);
  pthread_mutex_unlock(&pool.lock);
  job(arg, 0);
  pthread_mutex_lock(&pool.lock);
  while (pool.running) pthread_cond_wait(&pool.finished, &pool.lock);
  pthread_mutex_unlock(&pool.lock);
  return true;
}

// ---- printf's records, per worker ----------------------------------------------------------------------
namespace {
struct Record {
  unsigned grid;
  unsigned long long block;
  size_t start, length;
};
struct Printed {
  std::vector<char> text;
  std::vector<Record> records;
};
Printed printed[MAX_WORKERS];
std::vector<char> collected;
}  // namespace

void printf_add(int worker, unsigned grid, unsigned long long block, const char* text, size_t n) {
  Printed& p = printed[worker];
  p.records.push_back(Record{grid, block, p.text.size(), n});
  p.text.insert(p.text.end(), text, text + n);
}

const char* printf_collect(size_t limit, size_t* length, size_t* dropped) {
  // Each worker's records are in its own order, its blocks rising: merge them by grid and block.
  std::vector<std::pair<const Printed*, const Record*>> all;
  for (const Printed& p : printed)
    for (const Record& r : p.records) all.push_back({&p, &r});
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.second->grid != b.second->grid ? a.second->grid < b.second->grid : a.second->block < b.second->block;
  });
  collected.clear();
  size_t lost = 0;
  for (const auto& [p, r] : all) {
    if (collected.size() + r->length > limit) {   // a whole record is kept or dropped, as a GPU's are
      lost += r->length;
      continue;
    }
    collected.insert(collected.end(), p->text.begin() + r->start, p->text.begin() + r->start + r->length);
  }
  for (Printed& p : printed) {
    p.text.clear();
    p.records.clear();
  }
  *length = collected.size();
  *dropped = lost;
  collected.push_back(0);
  return collected.data();
}
}  // namespace host
}  // namespace __gpuedu
