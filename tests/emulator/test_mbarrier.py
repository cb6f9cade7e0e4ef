"""mbarrier objects in the emulator, against the PTX ISA's definition ("Parallel Synchronization and Communication
Instructions: mbarrier"): phases and their parity, arrival counts, transaction counts (expect_tx adds, complete_tx
subtracts), waits that suspend a thread while the others run, the deadlock a wait that can never complete is
reported as, the misuse a GPU leaves undefined, and the refusals (an architecture without the form, forms outside
the emulator's subset). nvcc compiles every kernel here for its architecture (test_compile_nvcc.py)."""
import time

import numpy as np
import pytest

from gpuedu.emulator import compiler, driver as drv, hooks
from gpuedu.emulator._errors import CompileError, LaunchError

# Each instruction wrapped once, as a course's .cuh would; the kernels below call these.
MBARRIER_HELPERS = r"""
__device__ inline unsigned smem(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ inline void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
__device__ inline unsigned long long mbar_arrive(unsigned bar) {
  unsigned long long state;
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 %0, [%1];\n" : "=l"(state) : "r"(bar) : "memory");
  return state;
}
__device__ inline unsigned long long mbar_arrive_count(unsigned bar, unsigned count) {
  unsigned long long state;
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1], %2;\n" : "=l"(state) : "r"(bar), "r"(count) : "memory");
  return state;
}
__device__ inline void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ inline void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ inline void mbar_complete_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ inline unsigned mbar_test_parity(unsigned bar, unsigned parity) {
  unsigned done;
  asm volatile("{\n .reg .pred P;\n mbarrier.test_wait.parity.shared::cta.b64 P, [%1], %2;\n"
               " selp.b32 %0, 1, 0, P;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done;
}
__device__ inline unsigned mbar_test_state(unsigned bar, unsigned long long state) {
  unsigned done;
  asm volatile("{\n .reg .pred P;\n mbarrier.test_wait.shared::cta.b64 P, [%1], %2;\n"
               " selp.u32 %0, 1, 0, P;\n}\n" : "=r"(done) : "r"(bar), "l"(state) : "memory");
  return done;
}
__device__ inline unsigned mbar_try_parity(unsigned bar, unsigned parity) {
  unsigned done;
  asm volatile("{\n\t.reg .pred P1;\n\tmbarrier.try_wait.parity.shared::cta.b64 P1, [%1], %2;\n"
               "\tselp.b32 %0, 1, 0, P1;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done;
}
__device__ inline void mbar_wait(unsigned bar, unsigned parity) {   // the loop: returns once the phase completed
  asm volatile("{\n\t.reg .pred P1;\n\tLAB_WAIT:\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1, %2;\n\t"
               "@P1 bra DONE;\n\tbra LAB_WAIT;\n\tDONE:\n}\n" :: "r"(bar), "r"(parity), "r"(1000000) : "memory");
}
"""

MBARRIER_SRC = MBARRIER_HELPERS + r"""
// One thread through the phases of one barrier; out[k] is the k-th test_wait's answer.
__global__ void phases(unsigned* out) {
  __shared__ unsigned long long bar;
  unsigned b = smem(&bar);
  int k = 0;
  mbar_init(b, 2);
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");   // accepted: no-ops in the emulator
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  out[k++] = mbar_test_parity(b, 0);
  out[k++] = mbar_test_parity(b, 1);
  unsigned long long s0 = mbar_arrive(b);
  out[k++] = mbar_test_parity(b, 0);
  out[k++] = mbar_test_state(b, s0);
  mbar_arrive_expect_tx(b, 4096);
  out[k++] = mbar_test_parity(b, 0);
  mbar_complete_tx(b, 1000);
  out[k++] = mbar_test_parity(b, 0);
  mbar_complete_tx(b, 3096);
  out[k++] = mbar_test_parity(b, 0);
  out[k++] = mbar_test_parity(b, 1);
  out[k++] = mbar_test_state(b, s0);
  out[k++] = mbar_try_parity(b, 0);
  unsigned long long s1 = mbar_arrive_count(b, 2);
  out[k++] = mbar_test_parity(b, 1);
  out[k++] = mbar_test_parity(b, 0);
  mbar_complete_tx(b, 512);
  mbar_arrive_count(b, 2);
  out[k++] = mbar_test_parity(b, 0);
  mbar_expect_tx(b, 512);
  out[k++] = mbar_test_parity(b, 0);
  out[k++] = mbar_test_state(b, s1);
  unsigned long long s3 = mbar_arrive(b);
  out[k++] = mbar_test_state(b, s3);
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" :: "r"(b) : "memory");
  mbar_init(b, 1);
  out[k++] = mbar_test_parity(b, 0);
  out[k++] = mbar_test_parity(b, 1);
}

// A producer warp and a consumer warp through a ring of STAGES buffers: `full` counts the producer's 32 arrivals
// (the stage is written), `empty` the consumer's (it was read). Iteration `it` uses stage it % STAGES in its
// (it / STAGES)-th phase; the producer's first round waits on parity 1 of `empty`, the phase before phase 0, which
// has completed, so it passes.
#define STAGES 2
__global__ void ring(float* out, const float* in, int iterations) {
  __shared__ unsigned long long full[STAGES], empty[STAGES];
  __shared__ float buf[STAGES][32];
  unsigned lane = threadIdx.x % 32;
  if (threadIdx.x == 0)
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem(&full[s]), 32);
      mbar_init(smem(&empty[s]), 32);
    }
  __syncthreads();
  for (int it = 0; it < iterations; ++it) {
    int s = it % STAGES;
    unsigned parity = (it / STAGES) & 1;
    if (threadIdx.x < 32) {
      mbar_wait(smem(&empty[s]), parity ^ 1);
      buf[s][lane] = in[it * 32 + lane];
      mbar_arrive(smem(&full[s]));
    } else {
      while (!mbar_try_parity(smem(&full[s]), parity)) {}
      out[it * 32 + lane] = 2.0f * buf[s][lane];
      mbar_arrive(smem(&empty[s]));
    }
  }
}

// A copy that reports its bytes, as a TMA copy does: thread 0 arrives and expects n * 4 bytes, the producer warp's
// lanes copy 8 floats each and complete 32 bytes each, the consumer warp waits for the phase and reads. The
// barrier is named by a generic pointer here (no state space).
__global__ void tx_copy(float* out, const float* in, int n) {
  __shared__ unsigned long long bar;
  __shared__ float buf[256];
  unsigned long long* p = &bar;
  if (threadIdx.x == 0) asm volatile("mbarrier.init.b64 [%0], %1;\n" :: "l"(p), "r"(1) : "memory");
  __syncthreads();
  if (threadIdx.x < 32) {
    if (threadIdx.x == 0)
      asm volatile("mbarrier.arrive.expect_tx.b64 _, [%0], %1;\n" :: "l"(p), "r"(4 * n) : "memory");
    __syncwarp();   // the copies start once their bytes are expected (a TMA copy is issued after its expect_tx)
    int per = n / 32;
    for (int i = 0; i < per; ++i) buf[threadIdx.x * per + i] = in[threadIdx.x * per + i];
    mbar_complete_tx(smem(&bar), 4 * per);
  } else {
    asm volatile("{\n .reg .pred P;\n WAIT:\n mbarrier.try_wait.parity.acquire.cta.b64 P, [%0], %1;\n"
                 " @!P bra.uni WAIT;\n}\n" :: "l"(p), "r"(0) : "memory");
    for (int i = threadIdx.x - 32; i < n; i += 32) out[i] = buf[i];
  }
}

// Waits that can never complete: 0 the wrong parity (the producer warp's first wait on `empty` asks for phase 0,
// parity 0, where the phase before it, parity 1, was meant: it waits for the consumer warp, which waits for it),
// 1 a missing arrival (the init count is one more than the block), 2 missing bytes (expect_tx with no
// complete_tx), 3 a test_wait loop with a missing arrival.
__global__ void stuck(unsigned* out, int which) {
  __shared__ unsigned long long full;
  __shared__ unsigned long long empty;
  __shared__ unsigned long long bar;
  unsigned b = smem(&bar);
  if (threadIdx.x == 0) {
    mbar_init(b, which == 1 || which == 3 ? blockDim.x + 1 : blockDim.x);
    mbar_init(smem(&full), 32);
    mbar_init(smem(&empty), 32);
  }
  __syncthreads();
  if (which == 0) {
    if (threadIdx.x < 32) {
      mbar_wait(smem(&empty), 0);
      mbar_arrive(smem(&full));
    } else {
      mbar_wait(smem(&full), 0);
      mbar_arrive(smem(&empty));
    }
    return;
  }
  if (which == 2 && threadIdx.x == 0) mbar_expect_tx(b, 4096);
  mbar_arrive(b);
  if (which == 3)
    while (!mbar_test_parity(b, 0)) {}
  mbar_wait(b, 0);
  out[threadIdx.x] = threadIdx.x;
}

// What a GPU leaves undefined: 0 an arrive on a barrier never initialised, 1 more arrivals than the phase waits
// for, 2 a parity that is not 0 or 1, 3 a misaligned barrier, 4 a state no arrive returned, 5 an inval while a
// thread waits (thread 1 waits on `bar` once thread 0 may go on).
__global__ void misuse(unsigned* out, int which) {
  __shared__ unsigned long long bar;
  __shared__ unsigned long long go;
  unsigned b = smem(&bar);
  if (threadIdx.x == 0 && which != 0) mbar_init(b, 1);
  if (threadIdx.x == 0) mbar_init(smem(&go), 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (which == 0) mbar_arrive(b);
    if (which == 1) mbar_arrive_count(b, 2);
    if (which == 2) out[0] = mbar_test_parity(b, 2);
    if (which == 3) mbar_arrive(b + 4);
    if (which == 4) out[0] = mbar_test_state(b, 12345);
    if (which == 5) {
      mbar_wait(smem(&go), 0);
      asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" :: "r"(b) : "memory");
    }
  }
  if (threadIdx.x == 1 && which == 5) {
    mbar_arrive(smem(&go));
    mbar_wait(b, 0);
  }
}

// Two warpgroups give each other registers (Hopper's producer/consumer kernels do): setmaxnreg meets as each
// warp's lanes, and the emulator records the count it asked for. (ptxas needs the registers at entry, from
// __launch_bounds__ or -maxrregcount, or it ignores setmaxnreg.)
__global__ void __launch_bounds__(256, 1) warpgroups(unsigned* out) {
  if (threadIdx.x / 128 == 0) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
  else asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  out[threadIdx.x] = threadIdx.x;
}
"""

# Ampere's forms (sm_80): init, arrive with its state, a test_wait loop on that state, inval.
AMPERE_MBARRIER_SRC = r"""
__global__ void ampere_rounds(unsigned* out, int rounds) {
  __shared__ unsigned long long bar;
  __shared__ int seen[2][64];
  unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
  unsigned t = threadIdx.x;
  if (t == 0) asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" :: "r"(b), "r"(blockDim.x) : "memory");
  __syncthreads();
  for (int round = 0; round < rounds; ++round) {
    seen[round & 1][t] = round;
    unsigned long long state;
    asm volatile("mbarrier.arrive.shared.b64 %0, [%1];\n" : "=l"(state) : "r"(b) : "memory");
    unsigned done = 0;
    while (!done)
      asm volatile("{\n .reg .pred P;\n mbarrier.test_wait.shared.b64 P, [%1], %2;\n selp.b32 %0, 1, 0, P;\n}\n"
                   : "=r"(done) : "r"(b), "l"(state) : "memory");
    unsigned behind = 0;   // threads that had not written this round when the phase completed
    for (unsigned i = 0; i < blockDim.x; ++i) behind += seen[round & 1][i] != round;
    out[round * blockDim.x + t] = behind;
  }
  __syncthreads();
  if (t == 0) asm volatile("mbarrier.inval.shared.b64 [%0];\n" :: "r"(b) : "memory");
}
"""


def _line(src, marker):
    """The line of `marker` in the source."""
    return next(k for k, text in enumerate(src.splitlines(), 1) if marker in text)


@pytest.fixture(scope="module")
def mbar_module():
    return compiler.SourceModule(MBARRIER_SRC, arch="sm_90a")


def test_phases_parity_and_counts_follow_the_isa(mbar_module):
    out = np.full(20, 7, np.uint32)
    mbar_module.get_function("phases")(drv.InOut(out), block=(1, 1, 1))
    # The ISA's rule: a wait on parity P is complete unless the current phase has parity P (then the phase before it,
    # of parity P, has completed); a phase completes when its pending arrivals and its transaction count are both 0.
    want = [0,   # phase 0 waits for 2 arrivals
            1,   # parity 1 names the phase before phase 0
            0,   # 1 arrival to come
            0,   # the state of phase 0, not complete
            0,   # the last arrival came, 4096 bytes expected with it
            0,   # 3096 bytes to come
            1,   # the last bytes: phase 0 completed
            0,   # phase 1 is current
            1,   # phase 0's state: completed
            1,   # try_wait on a completed phase returns at once
            1,   # arrive with count 2: phase 1 completed at once
            0,   # phase 2 is current
            0,   # every arrival came, but the transaction count is -512 (complete_tx before its expect_tx)
            1,   # expect_tx 512 brought it to 0: phase 2 completed
            1,   # phase 1's state
            0,   # phase 3's state, 1 arrival to come
            0,   # invalidated and initialised again: a fresh phase 0
            1]
    np.testing.assert_array_equal(out[:len(want)], want)
    assert (out[len(want):] == 7).all()


@pytest.mark.parametrize("schedule", ["forward", "reverse", "random"])
def test_a_ring_of_stages_goes_through_its_phases_under_any_schedule(mbar_module, schedule):
    compiler.set_schedule(schedule, seed=3)
    try:
        iterations = 10                        # each of the 4 barriers goes through 5 phases
        x = np.random.default_rng(0).standard_normal(iterations * 32).astype(np.float32)
        out = np.zeros_like(x)
        mbar_module.get_function("ring")(drv.Out(out), drv.In(x), np.int32(iterations), block=(64, 1, 1))
    finally:
        compiler.set_schedule("forward")
    np.testing.assert_array_equal(out, 2 * x)


def test_a_counted_launch_waits_as_a_plain_one_does(mbar_module):
    # (the profiled twin: each suspended thread stops counting while the others run, and counts again when woken)
    x = np.random.default_rng(1).standard_normal(8 * 32).astype(np.float32)
    out = np.zeros_like(x)
    heard = []
    with hooks.counting(heard.append):
        mbar_module.get_function("ring")(drv.Out(out), drv.In(x), np.int32(8), block=(64, 1, 1))
    np.testing.assert_array_equal(out, 2 * x)
    (record,) = heard
    assert record.name == "ring" and record.error is None


@pytest.mark.parametrize("schedule", ["forward", "reverse", "random"])
def test_a_phase_waits_for_the_bytes_its_copy_completes(mbar_module, schedule):
    compiler.set_schedule(schedule, seed=5)
    try:
        x = np.arange(256, dtype=np.float32) * 3 + 1
        out = np.zeros_like(x)
        mbar_module.get_function("tx_copy")(drv.Out(out), drv.In(x), np.int32(256), block=(64, 1, 1))
    finally:
        compiler.set_schedule("forward")
    np.testing.assert_array_equal(out, x)


# (the line is the asm statement's, in its helper; the counts: threads waiting, polling, at __syncthreads, at warp
# intrinsics, exited)
STUCK = {
    0: (r"waits \(line {wait}\) on parity 0 of the mbarrier at shared 0x[0-9a-f]+ \('empty'\) \(phase 0 pending: "
        r"32 arrivals, 0 bytes\), and no thread can complete it: 64 wait on mbarriers, 0 poll them, 0 at "
        r"__syncthreads, 0 at warp intrinsics, 0 exited"),
    1: (r"waits \(line {wait}\) on parity 0 of the mbarrier at shared 0x[0-9a-f]+ \('bar'\) \(phase 0 pending: 1 "
        r"arrival, 0 bytes\), and no thread can complete it: 1024 wait on mbarriers"),
    2: (r"waits \(line {wait}\) on parity 0 of the mbarrier at shared 0x[0-9a-f]+ \('bar'\) \(phase 0 pending: 0 "
        r"arrivals, 4096 bytes\), and no thread can complete it: 64 wait on mbarriers"),
    3: (r"polls \(test_wait, line {poll}, 1000 rounds unchanged\) on parity 0 of the mbarrier at shared 0x[0-9a-f]+ "
        r"\('bar'\) \(phase 0 pending: 1 arrival, 0 bytes\), and no thread can complete it: 0 wait on mbarriers, "
        r"64 poll them"),
}


@pytest.mark.parametrize("which", sorted(STUCK))
def test_a_wait_that_can_never_complete_is_reported_as_a_deadlock_at_once(mbar_module, which):
    f = mbar_module.get_function("stuck")
    n = 1024 if which == 1 else 64
    lines = {"wait": _line(MBARRIER_SRC, "inline void mbar_wait(") + 1,
             "poll": _line(MBARRIER_SRC, "inline unsigned mbar_test_parity(") + 2}
    start = time.perf_counter()
    with pytest.raises(LaunchError, match=r"kernel 'stuck' block \(0,0,0\): deadlock: thread \(0,0,0\) "
                                          + STUCK[which].format(**lines)) as caught:
        f(drv.Out(np.zeros(n, np.uint32)), np.int32(which), block=(n, 1, 1))
    assert time.perf_counter() - start < 1.0
    assert str(caught.value).endswith("look for a missing arrive or complete_tx, or a wrong parity")


MISUSE = {
    0: r"ran mbarrier\.arrive \(line {arrive}\): no mbarrier at shared 0x[0-9a-f]+ \('bar'\): initialise it with "
       r"mbarrier\.init in this block before using it",
    1: r"ran mbarrier\.arrive \(line {count}\): 2 arrivals at the mbarrier at shared 0x[0-9a-f]+, whose phase 0 waits "
       r"for 1 more \(of the 1 mbarrier\.init asked for\)",
    2: r"ran mbarrier\.test_wait\.parity \(line {test}\): the phase parity is 2; it is 0 or 1",
    3: r"ran mbarrier\.arrive \(line {arrive}\): misaligned address: shared 0x[0-9a-f]+ is not a multiple of 8",
    4: r"ran mbarrier\.test_wait \(line {state}\): the state 0x3039 is not one an mbarrier\.arrive on the mbarrier at "
       r"shared 0x[0-9a-f]+ returned",
    5: r"ran mbarrier\.inval \(line {inval}\) on the mbarrier at shared 0x[0-9a-f]+ while 1 of the block's threads "
       r"wait on it \(phase 0\)",
}


@pytest.mark.parametrize("which", sorted(MISUSE))
def test_what_a_gpu_leaves_undefined_stops_the_launch(mbar_module, which):
    asm_line = lambda helper: _line(MBARRIER_SRC, helper) + 2   # noqa: E731  (each helper's asm statement)
    lines = {"arrive": asm_line("mbar_arrive(unsigned bar)"), "count": asm_line("mbar_arrive_count(unsigned"),
             "test": asm_line("mbar_test_parity(unsigned"), "state": asm_line("mbar_test_state(unsigned"),
             "inval": [k for k, text in enumerate(MBARRIER_SRC.splitlines(), 1) if "mbarrier.inval" in text][-1]}
    f = mbar_module.get_function("misuse")
    with pytest.raises(LaunchError, match=MISUSE[which].format(**lines)):
        f(drv.Out(np.zeros(32, np.uint32)), np.int32(which), block=(32, 1, 1))


def test_setmaxnreg_meets_as_warpgroups_and_records_its_count(mbar_module):
    f = mbar_module.get_function("warpgroups")
    assert f.registers_requested == 0         # none ran yet
    out = np.zeros(256, np.uint32)
    f(drv.Out(out), block=(256, 1, 1))
    np.testing.assert_array_equal(out, np.arange(256))
    assert f.registers_requested == 232
    with pytest.raises(LaunchError, match=r"setmaxnreg \(line \d+\) is run by every warp of a warpgroup \(4 "
                                          r"consecutive warps, 128 threads\), and this block has 64 threads"):
        f(drv.Out(np.zeros(64, np.uint32)), block=(64, 1, 1))


def test_ampere_forms_run_for_sm80():
    mod = compiler.SourceModule(AMPERE_MBARRIER_SRC, arch="sm_80")
    out = np.full(3 * 64, 9, np.uint32)
    mod.get_function("ampere_rounds")(drv.Out(out), np.int32(3), block=(64, 1, 1))
    np.testing.assert_array_equal(out, 0)     # every thread had arrived when the phase completed


# (statement, architecture, what the refusal says): ptxas's architectures for each form.
ARCH_REFUSALS = [
    ('asm volatile("{ .reg .pred P; mbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2; selp.b32 %0, 1, 0, P; }"'
     ' : "=r"(r) : "r"(r), "r"(r));', "sm_80",
     r"mbarrier\.try_wait\.parity\.shared::cta\.b64 needs sm_90 or later; this module is built for sm_80"),
    ('asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], 2;" :: "r"(r));', "sm_80",
     r"mbarrier\.arrive\.shared::cta\.b64 in this form needs sm_90 or later; this module is built for sm_80"),
    ('asm volatile("mbarrier.arrive.release.cluster.shared::cta.b64 _, [%0];" :: "r"(r));', "sm_80",
     r"mbarrier\.arrive\.release\.cluster\.shared::cta\.b64 in this form needs sm_90 or later"),
    ('asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 16;" :: "r"(r));', "sm_80",
     r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 needs sm_90 or later"),
    ('asm volatile("mbarrier.complete_tx.shared::cta.b64 [%0], 16;" :: "r"(r));', "sm_75",
     r"mbarrier\.complete_tx\.shared::cta\.b64 needs sm_90 or later; this module is built for sm_75"),
    ('asm volatile("fence.proxy.async.shared::cta;");', "sm_80", r"fence\.proxy\.async\.shared::cta needs sm_90"),
    ('asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");', "sm_90",
     r"setmaxnreg\.inc\.sync\.aligned\.u32 needs the architecture-specific target sm_90a; this module is built for "
     r"sm_90 \(ptxas refuses it there\): build with arch='sm_90a'"),
]

# (statement, what the refusal says): forms outside the emulator's subset, or not PTX at all.
FORM_REFUSALS = [
    ('asm volatile("mbarrier.try_wait.parity.shared::cta.b64 %0, [%1], %2;" : "=r"(r) : "r"(r), "r"(r));',
     r"mbarrier\.try_wait\.parity\.shared::cta\.b64 sets a predicate, which inline asm binds to no C\+\+ value: the "
     r"emulator runs it in the forms public code writes it in(.|\n)*selp\.b32 %0, 1, 0, P;(.|\n)*@P bra DONE; bra "
     r"WAIT; DONE:"),
    ('asm volatile("{ .reg .pred P; mbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2; @P mov.u32 %0, 1; }" '
     ': "=r"(r) : "r"(r), "r"(r));',
     r"register declarations and \{ \} scopes in inline PTX are not supported by the emulator, but for an "
     r"mbarrier wait's two forms"),
    ('asm volatile("{ .reg .pred P; L: mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1; @P bra D; bra M; D: }" '
     ':: "r"(r), "r"(r));', r"register declarations and \{ \} scopes in inline PTX are not supported by the "
                              r"emulator, but for an mbarrier wait's two forms"),
    ('asm volatile("mbarrier.init.shared::cluster.b64 [%0], 1;" :: "r"(r));',
     r"the emulator does not run the PTX instruction 'mbarrier\.init\.shared::cluster\.b64'(.|\n)*"
     r"mbarrier\.init"),
    ('asm volatile("mbarrier.arrive_drop.shared::cta.b64 _, [%0];" :: "r"(r));',
     r"the emulator does not run the PTX instruction 'mbarrier\.arrive_drop\.shared::cta\.b64'"),
    ('asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0];" :: "r"(r));',
     r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 takes 3 operands, got 2"),
    ('asm volatile("mbarrier.init.b64 [%0], 1;" :: "r"(r));',
     r"mbarrier\.init\.b64: the address %0 is bound with \"r\" \(32 bits\), and with no state space the instruction "
     r"takes a generic address, a 64-bit pointer \(\"l\"\); for a 32-bit shared address \(__cvta_generic_to_shared\) "
     r"name the space: mbarrier\.init\.shared::cta\.b64"),
    ('asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=r"(r) : "r"(r));',
     r"mbarrier\.arrive\.shared::cta\.b64: operand %0 \(r\) is bound with \"r\", 32 bits, where the instruction "
     r"takes a 64-bit register: use \"l\""),
    ('asm volatile("setmaxnreg.inc.sync.aligned.u32 241;");',
     r"setmaxnreg\.inc\.sync\.aligned\.u32: the register count 241 must be from 24 to 256 and a multiple of 8"),
    ('asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "r"(r));',
     r"setmaxnreg\.dec\.sync\.aligned\.u32 takes its register count as an immediate"),
]


def _refusal_source(statement):
    return ("__global__ void k(float* p) {\n  unsigned r = 0;\n  " + statement + "\n  p[0] = r;\n}\n")


@pytest.mark.parametrize("statement,arch,message", ARCH_REFUSALS, ids=[f"arch{k}" for k in range(len(ARCH_REFUSALS))])
def test_forms_the_architecture_lacks_are_refused_as_ptxas_refuses_them(statement, arch, message):
    with pytest.raises(CompileError, match=r"kernel\.cu\(3\): error: " + message):
        compiler.SourceModule(_refusal_source(statement), arch=arch)


@pytest.mark.parametrize("statement,message", FORM_REFUSALS, ids=[f"form{k}" for k in range(len(FORM_REFUSALS))])
def test_forms_outside_the_subset_are_refused_before_compiling(statement, message):
    with pytest.raises(CompileError, match=r"kernel\.cu\(3\): error: " + message):
        compiler.SourceModule(_refusal_source(statement), arch="sm_90a")
