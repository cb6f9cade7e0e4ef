// gpuedu_mbarrier.h: the mbarrier objects of the PTX ISA ("Parallel Synchronization and Communication
// Instructions: mbarrier"), for gpuedu_ptx.h: Ampere's init, inval, arrive and test_wait, Hopper's transaction
// counts (arrive.expect_tx, expect_tx, complete_tx) and try_wait.
//
// An mbarrier is a 64-bit object in shared memory. Each phase of it waits for the arrivals mbarrier.init asked
// for and for its transaction count to come back to zero (expect_tx adds the bytes the phase expects, complete_tx
// subtracts the bytes that landed: what a TMA copy reports). When both are zero the phase completes: the phase
// number grows by one (its parity flips) and the next phase waits for the init count of arrivals again. A wait
// on parity P returns true once the phase of parity P, the current one or the one before, has completed: while
// the current phase has parity P it waits, otherwise the phase before it (parity P) has completed.
//
// The emulator keeps each object's state in a table of the block (MBarriers, by shared address) rather than in
// its 8 bytes: the ISA keeps the object opaque (a kernel reads it only through these instructions), and the table
// keeps what a deadlock report names (the phase's number, the threads waiting). An instruction on an address that
// no mbarrier.init of the block initialised, or one invalidated since, stops the launch; a GPU's behaviour there is
// undefined. So do counts outside the ISA's ranges and more arrivals than a phase waits for.
//
// Waiting: threads are fibers, so a thread at try_wait whose phase is incomplete is suspended (AT_MBARRIER) and
// the others run; the arrive or complete_tx that completes the phase makes it ready again (try_wait may return
// false after a time limit of the system's choosing: here it returns once the phase completed, which the ISA
// allows). When no thread can run, the TMA loads in flight land (TensorCopy: gpuedu_tma.h issues them, and they land
// when a thread waits on their mbarrier, or then); if still none can run and some wait on an mbarrier, none will
// ever arrive (cp.async's copies land at a wait of their own thread, not at an mbarrier): the launch stops with a
// deadlock that names
// the barrier (its shared address and __shared__ variable), the parity waited on, its current phase and what that
// phase still waits for. A thread whose test_wait (which returns at once) finds its phase incomplete is suspended
// too, as a poller: when nothing else can run the pollers are made ready and their test_wait returns false, so
// that a loop around it runs on; after POLL_ROUNDS such rounds in a row in which no mbarrier of the block changed,
// they are reported as a deadlock (a loop that polls for ever waits for ever on a GPU too).
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif

#ifndef GPUEDU_SCAN
namespace __gpuedu {
constexpr unsigned MBARRIERS = 256;                  // a block's mbarriers at most (initialised at once)
constexpr long long MBARRIER_LIMIT = (1 << 20) - 1;  // the ISA's range of counts: 1 to 2^20 - 1 arrivals, and a
                                                     // transaction count of -(2^20 - 1) to 2^20 - 1 bytes
constexpr unsigned POLL_ROUNDS = 1000;               // test_wait rounds with no mbarrier change before a deadlock

struct MBarrier {
  unsigned long long addr;    // its shared address
  unsigned expected;          // the arrivals each phase waits for (mbarrier.init's count)
  unsigned pending;           // the arrivals the current phase still waits for
  long long tx;               // the current phase's transaction count, in bytes
  unsigned long long phase;   // the current phase's number: the phases completed so far (its parity: phase & 1)
  unsigned waiting;           // threads suspended on it
  int line;                   // the mbarrier.init that made it
  bool live;                  // initialised and not invalidated since
};
struct MBarrierWait {         // what a suspended thread waits for
  unsigned barrier;           // its index in MBarriers::at
  unsigned long long phase;   // the phase whose completion it waits for
  int parity;                 // the parity it asked for (-1: it gave a state from mbarrier.arrive)
  int line;
  bool poll;                  // a test_wait: made ready again when nothing else can run
};
struct TensorCopy {            // a TMA load in flight (gpuedu_tma.h): the box read at issue, written when it lands
  unsigned long long barrier;   // the mbarrier it completes bytes on (its shared address)
  unsigned long long dst;       // its shared address (the box's start; chunks placed by the swizzle)
  unsigned char* data;          // the box, dense, as read
  unsigned bytes;
  unsigned swizzle;             // CUtensorMapSwizzle: 0 none, 1 32-byte, 2 64-byte, 3 128-byte
  int line;
};
struct MBarriers {
  MBarrier at[MBARRIERS];
  TensorCopy* copies;         // TMA loads in flight, in the order they were issued
  unsigned n_copies, copies_room;
  unsigned n;                 // slots used so far (a slot whose barrier was invalidated is taken again)
  MBarrierWait waits[MAX_THREADS];
  unsigned n_waiting, n_polling;
  unsigned long long changes;       // every arrival, transaction, init and inval of the block's mbarriers
  unsigned long long changes_seen;  // ... when the pollers were last made ready
  unsigned fruitless_rounds;        // rounds of polls in a row in which nothing changed
};

namespace ptx {
// The modifiers _ptx.py packs for the mbarrier ops (keep both in step).
enum : int {
  MB_GENERIC = 1 << 0,     // the address is a generic pointer (no state space): converted as cvta.to.shared does
  MB_COUNT = 1 << 1,       // arrive: with a count operand
  MB_EXPECT_TX = 1 << 2,   // arrive.expect_tx: the third operand is the transaction count
  MB_PARITY = 1 << 3,      // wait: on a phase parity (else on a state from mbarrier.arrive)
  MB_TRY = 1 << 4,         // wait: try_wait, which may suspend the thread (else test_wait, which returns at once)
  MB_LOOP = 1 << 5,        // wait: the loop idiom around it (returns once the phase completed, whichever the wait)
  MB_CLUSTER = 1 << 6,     // arrive: .shared::cluster, a shared::cluster address (another block's, from mapa)
};

GPUEDU_PROF_QUIET inline MBarriers& mbarriers() {
  Runtime& r = rt();
  if (!r.mbar) {
    r.mbar = (MBarriers*)calloc(1, sizeof(MBarriers));
    if (!r.mbar)
      fail(DEVICE_MISUSE, "ran mbarrier: no memory for the block's mbarriers (%zu bytes)", sizeof(MBarriers));
  }
  r.mbar_used = true;
  return *r.mbar;
}

// Where shared address `a` lies, for a message: " ('name')", " ('name' + 8 bytes)", " (the dynamic shared memory +
// 16 bytes)", or nothing where no __shared__ variable of this kernel holds it.
GPUEDU_PROF_QUIET inline void describe_shared(unsigned long long a, char* text, size_t size) {
  text[0] = 0;
  if (a >= DYNAMIC_WINDOW) {
    snprintf(text, size, " (the dynamic shared memory + %llu bytes)", a - DYNAMIC_WINDOW);
    return;
  }
  for (int i = 0, k = shared_count(); i < k; ++i) {
    const SharedVar& v = S.at[i];
    if (v.absolute || (v.kernel && v.kernel != rt().kernel) || a < v.offset || a >= v.offset + v.n) continue;
    unsigned long long into = a - (unsigned long long)v.offset;
    if (!v.name) snprintf(text, size, " (byte %llu of a __shared__ declaration of several names)", into);
    else if (!into) snprintf(text, size, " ('%s')", v.name);
    else snprintf(text, size, " ('%s' + %llu bytes)", v.name, into);
    return;
  }
}

// An mbarrier's shared address from the instruction's operand: 8 bytes in the block's shared memory, aligned to 8.
GPUEDU_PROF_QUIET inline unsigned long long mbarrier_address(unsigned long long a, int mods, int line,
                                                            const char* what) {
  if (mods & MB_GENERIC) a = to_shared((const void*)(uintptr_t)a, line, what);
  from_shared(a, 8, line, what);
  if (a % 8)
    fail(DEVICE_MISUSE,
         "ran %s (line %d): misaligned address: shared 0x%llx is not a multiple of 8 (an mbarrier is a 64-bit "
         "object, aligned to 8 bytes: declare it __shared__ uint64_t, or __align__(8))",
         what, line, a);
  return a;
}

// The live mbarrier at shared address `a`; the launch stops if there is none.
GPUEDU_PROF_QUIET inline unsigned mbarrier_at(MBarriers& m, unsigned long long a, int line, const char* what) {
  for (unsigned i = 0; i < m.n; ++i)
    if (m.at[i].live && m.at[i].addr == a) return i;
  char where[128];
  describe_shared(a, where, sizeof where);
  fail(DEVICE_MISUSE,
       "ran %s (line %d): no mbarrier at shared 0x%llx%s: initialise it with mbarrier.init in this block before "
       "using it (an mbarrier lives as long as its block; one not initialised, or invalidated, is undefined on a "
       "GPU)",
       what, line, a, where);
}

GPUEDU_PROF_QUIET inline void wake(MBarriers& m, unsigned t) {
  Runtime& r = rt();
  MBarrierWait& w = m.waits[t];
  r.state[t] = READY;
  r.n_ready++;
  m.at[w.barrier].waiting--;
  if (w.poll) m.n_polling--;
  else m.n_waiting--;
}

// The phase completes once every arrival it waits for came and its transaction count is back to zero: the next
// phase waits for the init count again, and the threads waiting for this one are made ready.
GPUEDU_PROF_QUIET inline void complete_if_done(MBarriers& m, unsigned b) {
  MBarrier& B = m.at[b];
  if (B.pending || B.tx) return;
  B.phase++;
  B.pending = B.expected;
  if (!B.waiting) return;
  Runtime& r = rt();
  for (unsigned t = 0; t < r.nthreads && B.waiting; ++t)
    if (r.state[t] == AT_MBARRIER && m.waits[t].barrier == b && m.waits[t].phase < B.phase) wake(m, t);
}

// `bytes` more (sign 1: expect_tx) or fewer (sign -1: complete_tx) for the current phase to wait for.
GPUEDU_PROF_QUIET inline void add_transactions(MBarrier& B, long long bytes, int sign, int line, const char* what) {
  if (bytes < 0 || bytes > MBARRIER_LIMIT)
    fail(DEVICE_MISUSE, "ran %s (line %d): a transaction count of %lld bytes is outside the ISA's range, 0 to %lld",
         what, line, bytes, MBARRIER_LIMIT);
  long long tx = B.tx + sign * bytes;
  if (tx > MBARRIER_LIMIT || tx < -MBARRIER_LIMIT)
    fail(DEVICE_MISUSE,
         "ran %s (line %d): the transaction count of the mbarrier at shared 0x%llx (phase %llu) would be %lld bytes, "
         "outside the ISA's range of -%lld to %lld: a phase expects at most %lld bytes",
         what, line, B.addr, B.phase, tx, MBARRIER_LIMIT, MBARRIER_LIMIT, MBARRIER_LIMIT);
  B.tx = tx;
}

GPUEDU_PROF_QUIET inline void mbarrier_init(unsigned long long a, unsigned long long count, int line) {
  MBarriers& m = mbarriers();
  if (count < 1 || count > (unsigned long long)MBARRIER_LIMIT)
    fail(DEVICE_MISUSE, "ran mbarrier.init (line %d): the count %lld is outside the ISA's range, 1 to %lld",
         line, (long long)count, MBARRIER_LIMIT);
  unsigned slot = m.n;
  for (unsigned i = 0; i < m.n; ++i)
    if (m.at[i].addr == a || (!m.at[i].live && slot == m.n)) slot = i;   // (its own slot first, else a free one)
  if (slot < m.n && m.at[slot].live && m.at[slot].waiting)
    fail(DEVICE_MISUSE,
         "ran mbarrier.init (line %d) on the mbarrier at shared 0x%llx while %u of the block's threads wait on it: "
         "they would wait for a phase of the barrier it was; initialise it again once no thread waits",
         line, a, m.at[slot].waiting);
  if (slot == m.n) {
    if (m.n == MBARRIERS)
      fail(DEVICE_MISUSE, "ran mbarrier.init (line %d): this block already has %u mbarriers, the emulator's most",
           line, MBARRIERS);
    m.n++;
  }
  m.at[slot] = MBarrier{a, (unsigned)count, (unsigned)count, 0, 0, 0, line, true};
  m.changes++;
}

GPUEDU_PROF_QUIET inline void mbarrier_inval(unsigned long long a, int line) {
  MBarriers& m = mbarriers();
  MBarrier& B = m.at[mbarrier_at(m, a, line, "mbarrier.inval")];
  if (B.waiting)
    fail(DEVICE_MISUSE,
         "ran mbarrier.inval (line %d) on the mbarrier at shared 0x%llx while %u of the block's threads wait on it "
         "(phase %llu): they would wait for ever; invalidate it once no thread waits",
         line, a, B.waiting, B.phase);
  B.live = false;
  m.changes++;
}

// The state mbarrier.arrive returns (opaque in the ISA): the phase it arrived in, with the barrier's address and a
// tag, so that a wait given another value, or another barrier's, is told rather than waiting on nothing.
constexpr unsigned long long TOKEN_TAG = 0xB7ull << 56, TOKEN_PHASE = (1ull << 40) - 1;
inline unsigned long long token_of(const MBarrier& B) {
  return TOKEN_TAG | ((B.addr >> 3) & 0xFFFF) << 40 | (B.phase & TOKEN_PHASE);
}

// mbarrier.arrive (count times; with expect_tx, after adding `tx` bytes to the phase's transaction count): returns
// the state of the phase it arrived in.
GPUEDU_PROF_QUIET inline unsigned long long mbarrier_arrive(unsigned long long a, unsigned long long count,
                                                           long long tx, bool expect_tx, int line) {
  MBarriers& m = mbarriers();
  const char* what = expect_tx ? "mbarrier.arrive.expect_tx" : "mbarrier.arrive";
  unsigned b = mbarrier_at(m, a, line, what);
  MBarrier& B = m.at[b];
  if (count < 1 || count > (unsigned long long)MBARRIER_LIMIT)
    fail(DEVICE_MISUSE, "ran %s (line %d): the count %lld is outside the ISA's range, 1 to %lld", what, line,
         (long long)count, MBARRIER_LIMIT);
  if (count > B.pending)
    fail(DEVICE_MISUSE,
         "ran %s (line %d): %llu arrival%s at the mbarrier at shared 0x%llx, whose phase %llu waits for %u more (of "
         "the %u mbarrier.init asked for): more threads arrive than the barrier counts, which is undefined on a GPU",
         what, line, count, count == 1 ? "" : "s", a, B.phase, B.pending, B.expected);
  if (expect_tx) add_transactions(B, tx, 1, line, what);
  unsigned long long token = token_of(B);
  B.pending -= (unsigned)count;
  m.changes++;
  complete_if_done(m, b);
  return token;
}

// mbarrier.expect_tx (sign 1) and mbarrier.complete_tx (sign -1): `bytes` more, or fewer, for the current phase
// to wait for.
GPUEDU_PROF_QUIET inline void mbarrier_transactions(unsigned long long a, long long bytes, int sign, int line,
                                                   const char* what) {
  MBarriers& m = mbarriers();
  unsigned b = mbarrier_at(m, a, line, what);
  add_transactions(m.at[b], bytes, sign, line, what);
  m.changes++;
  complete_if_done(m, b);
}

// ---- TMA loads in flight (issued by gpuedu_tma.h) --------------------------------------------------------------
// Where a box's byte at shared address `a` lies under a swizzle mode (CUtensorMapSwizzle: 1 32-byte, 2 64-byte,
// 3 128-byte): its 16-byte chunk (address bits 4..) XORed with the row's bits as many above bit 7, the pattern a
// wgmma matrix descriptor with the same swizzle reads (gpuedu_wgmma.h's wgmma_element_address).
inline unsigned long long tensor_swizzle(unsigned long long a, unsigned mode) {
  return mode ? a ^ (((a >> 7) & ((1ull << mode) - 1)) << 4) : a;
}

// Write a TMA load's box into shared memory, 16 bytes at a time where the swizzle puts them, and complete its bytes
// on its mbarrier.
GPUEDU_PROF_QUIET inline void land_tensor_copy(const TensorCopy& c) {
  for (unsigned o = 0; o < c.bytes; o += 16)
    memcpy(from_shared(tensor_swizzle(c.dst + o, c.swizzle), 16, c.line, "cp.async.bulk.tensor"), c.data + o, 16);
  free(c.data);
  mbarrier_transactions(c.barrier, c.bytes, -1, c.line, "cp.async.bulk.tensor's complete_tx");
}

// Land the TMA loads in flight that complete bytes on the mbarrier at `barrier` (all of them: `all`), in the order
// they were issued: when a thread waits on that barrier, or when no thread can run (a GPU lands every copy in its
// own time; here none lands before a thread waits for it, so a kernel that reads a tile without waiting on its
// mbarrier reads what was there before).
GPUEDU_PROF_QUIET inline void land_tensor_copies(MBarriers& m, unsigned long long barrier, bool all) {
  unsigned kept = 0, n = m.n_copies;
  m.n_copies = 0;   // (mbarrier_transactions may wake threads; nothing here issues copies)
  for (unsigned i = 0; i < n; ++i) {
    if (all || m.copies[i].barrier == barrier) land_tensor_copy(m.copies[i]);
    else m.copies[kept++] = m.copies[i];
  }
  m.n_copies = kept;
}

// The thread waits (suspended, the others running) until woken: by the completion it waits for, or, a poller, by
// a round of polls when nothing else can run.
GPUEDU_PROF_QUIET inline void suspend_on(MBarriers& m, unsigned b, unsigned long long phase, int parity, bool poll,
                                         int line) {
  Runtime& r = rt();
  if (!r.fiber_mode) fail_loop_mode("mbarrier.try_wait/test_wait");
  m.waits[r.cur] = MBarrierWait{b, phase, parity, line, poll};
  m.at[b].waiting++;
  if (poll) m.n_polling++;
  else m.n_waiting++;
  r.state[r.cur] = AT_MBARRIER;
  r.n_ready--;
  GPUEDU_PROF(leave());
  run_next();
  GPUEDU_PROF(enter(r.cur));
  GPUEDU_PROF(suspend());   // (the caller's GPUEDU_PROF_SUSPEND turns counting on again when it returns)
}

// mbarrier.try_wait / test_wait, on a parity or on a state from mbarrier.arrive: whether the phase has completed.
GPUEDU_PROF_QUIET inline bool mbarrier_wait(unsigned long long a, unsigned long long arg, int mods, int line) {
  MBarriers& m = mbarriers();
  const char* what = mods & MB_TRY ? "mbarrier.try_wait" : "mbarrier.test_wait";
  GPUEDU_PROF(mbarrier_waited());
  if (m.n_copies) land_tensor_copies(m, a, false);
  unsigned b = mbarrier_at(m, a, line, what);
  MBarrier& B = m.at[b];
  unsigned long long phase;   // the phase whose completion it asks for
  int parity = -1;
  if (mods & MB_PARITY) {
    if (arg > 1)
      fail(DEVICE_MISUSE, "ran %s.parity (line %d): the phase parity is %llu; it is 0 or 1 (the phase's number & 1)",
           what, line, arg);
    parity = (int)arg;
    if ((B.phase & 1) != arg) return true;   // the phase before the current one has that parity: it completed
    phase = B.phase;
  } else {
    if ((arg & ~(TOKEN_PHASE | 0xFFFFull << 40)) != TOKEN_TAG || ((arg >> 40) & 0xFFFF) != ((a >> 3) & 0xFFFF) ||
        (arg & TOKEN_PHASE) > (B.phase & TOKEN_PHASE))
      fail(DEVICE_MISUSE,
           "ran %s (line %d): the state 0x%llx is not one an mbarrier.arrive on the mbarrier at shared 0x%llx "
           "returned (pass the state its arrive returned, or wait on a phase parity with %s.parity)",
           what, line, arg, a, what);
    phase = (B.phase & ~TOKEN_PHASE) | (arg & TOKEN_PHASE);
  }
  if (B.phase > phase) return true;
  if (!(mods & (MB_TRY | MB_LOOP))) {   // test_wait: a poll
    suspend_on(m, b, phase, parity, true, line);
    return m.at[b].phase > phase;
  }
  while (m.at[b].phase <= phase) suspend_on(m, b, phase, parity, false, line);
  return true;
}
}  // namespace ptx

// (gpuedu_runtime.h's scheduler calls these.)
GPUEDU_PROF_QUIET inline bool wake_mbarrier_pollers() {
  Runtime& r = rt();
  MBarriers& m = *r.mbar;
  if (m.n_copies) {   // the TMA loads in flight land (the waits they complete make threads ready)
    ptx::land_tensor_copies(m, 0, true);
    if (r.n_ready) return true;
  }
  if (!m.n_polling) return false;
  if (m.changes != m.changes_seen) {
    m.changes_seen = m.changes;
    m.fruitless_rounds = 0;
  } else if (++m.fruitless_rounds >= POLL_ROUNDS) {
    return false;
  }
  for (unsigned t = 0; t < r.nthreads && m.n_polling; ++t)
    if (r.state[t] == AT_MBARRIER && m.waits[t].poll) ptx::wake(m, t);
  return true;
}

inline void report_mbarrier_deadlock() {
  Runtime& r = rt();
  MBarriers& m = *r.mbar;
  if (!m.n_waiting && !m.n_polling) return;
  unsigned t = 0;
  while (r.state[t] != AT_MBARRIER) ++t;
  const MBarrierWait& w = m.waits[t];
  const MBarrier& B = m.at[w.barrier];
  char where[128], asked[64];
  ptx::describe_shared(B.addr, where, sizeof where);
  if (w.parity >= 0) snprintf(asked, sizeof asked, "parity %d", w.parity);
  else snprintf(asked, sizeof asked, "the end of phase %llu (a state from mbarrier.arrive)", w.phase);
  char how[80];
  if (w.poll) snprintf(how, sizeof how, "polls (test_wait, line %d, %u rounds unchanged)", w.line, POLL_ROUNDS);
  else snprintf(how, sizeof how, "waits (line %d)", w.line);
  __gpuedu_threadIdx = r.fibers[t].tid;
  fail(DEADLOCK,
       "deadlock: thread (%u,%u,%u) %s on %s of the mbarrier at shared 0x%llx%s (phase %llu pending: %u "
       "arrival%s, %lld bytes), and no thread can complete it: %u wait on mbarriers, %u poll them, %u at "
       "__syncthreads, %u at warp intrinsics, %u exited. A wait on parity P returns once the phase of parity P "
       "completed (phase 0 has parity 0): look for a missing arrive or complete_tx, or a wrong parity",
       threadIdx.x, threadIdx.y, threadIdx.z, how, asked, B.addr, where, B.phase, B.pending,
       B.pending == 1 ? "" : "s", B.tx, m.n_waiting, m.n_polling, r.n_block, r.n_warp, r.n_done);
}

GPUEDU_PROF_QUIET inline void forget_mbarriers() {
  MBarriers& m = *rt().mbar;
  for (unsigned i = 0; i < m.n_copies; ++i) free(m.copies[i].data);   // loads no thread waited for
  m.n_copies = 0;
  m.n = 0;
  m.n_waiting = m.n_polling = 0;
  m.changes = m.changes_seen = 0;
  m.fruitless_rounds = 0;
  rt().mbar_used = false;
}
}  // namespace __gpuedu
#endif  // GPUEDU_SCAN
