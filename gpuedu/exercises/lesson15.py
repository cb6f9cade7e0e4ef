"""Exercises of lessons/15_hopper_tensor_cores.ipynb: the phase bookkeeping of an mbarrier ring that TMA fills."""
import numpy as np

from . import Case, Exercise, _runner, register

ROW = 32                 # floats a row of src, a stage of the ring, a consumer lane each (128 bytes: one TMA box)
MAX_STAGES = 4
BLOCK = 64               # warp 0: the producer (its thread 0), warp 1: the 32 consumers
STALE = -1.0             # what a stage holds before any copy lands in it (src's values lie in [0, 1))

# ---------------------------------------------------------------------------------------------
# 15.ring_phases: which stage, and which phase parity, each side of a ring waits on at iteration i


class RingCase(Case):
    """A case that also names the emulator's thread order for its launch (forward, reverse or random)."""

    def __init__(self, label, inputs, order):
        super().__init__(label, inputs, block=(BLOCK, 1, 1), grid=(1, 1))
        self.order = order


def ring_phases_spec(src, iterations, stages):
    # Every row of src goes through the ring once, in order, and the consumers copy it out unchanged. At the end,
    # stage s holds the last row that went through it (row i goes to stage i % stages); a stage no row reached
    # still holds -1.
    last = np.full((MAX_STAGES, ROW), -1.0, np.float32)
    for i in range(max(0, iterations - stages), iterations):
        last[i % stages] = src[i]
    return {"out": src.copy(), "last": last}


def ring_phases_cases(rng):
    # Iteration counts that are not multiples of the ring (the last pass is partial), fewer iterations than stages,
    # and each ring under the three thread orders: a wait that holds only in one order is found in another.
    for stages, iterations, order in ((1, 5, "forward"), (2, 7, "forward"), (2, 7, "reverse"), (2, 9, "random"),
                                      (3, 10, "forward"), (3, 10, "reverse"), (3, 11, "random"), (3, 2, "forward"),
                                      (4, 9, "forward"), (4, 13, "reverse"), (4, 14, "random")):
        src = rng.uniform(0, 1, (iterations, ROW)).astype(np.float32)
        label = (f"{stages} stage{'s' if stages > 1 else ''}, {iterations} iterations, threads in {order} order")
        yield RingCase(label, {"src": src, "iterations": np.int32(iterations), "stages": np.int32(stages)}, order)


def _launch_with_map(function, args, case):
    """The kernel takes src's tensor map first (boxes of one 128-byte row), then out, last, src, iterations, stages;
    the launch runs under the case's thread order (on the emulator; a GPU's order is its own)."""
    from .. import tma
    iterations = int(case.inputs["iterations"])
    src_view = _DeviceRows(int(args[2]), (iterations, ROW))
    src_map = tma.tensor_map(src_view, box=(1, ROW), swizzle=0)
    with _runner.schedule(case.order):
        function(src_map, *args, block=case.block, grid=case.grid)


class _DeviceRows:
    """What tma.tensor_map reads of a device array: the address of the case's padded buffer body, its shape."""

    dtype = np.dtype(np.float32)

    def __init__(self, address, shape):
        self.gpudata, self.shape = address, shape
        self.strides = (shape[1] * 4, 4)


def _rows_from(case, got):
    """For each row of out, the iteration of src it holds (-1: none, -2: the stale ring's value, STALE)."""
    src, out = case.inputs["src"], got["out"]
    found = np.full(len(src), -1)
    for i, row in enumerate(out):
        if np.all(row == STALE):
            found[i] = -2
            continue
        same = np.flatnonzero(np.all(src == row, axis=1))
        if len(same):
            found[i] = same[0]
    return found


def _stale_reads(case, expected, got):
    if np.array_equal(got["out"], expected["out"]):
        return None
    found = _rows_from(case, got)
    wrong = np.flatnonzero(found != np.arange(len(found)))
    if not len(wrong):
        return None
    i = int(wrong[0])
    stages = int(case.inputs["stages"])
    if found[i] == -2 or (0 <= found[i] < i):
        what = ("the ring's value from before any copy" if found[i] == -2 else f"row {found[i]}, an earlier pass's")
        return (f"at iteration {i} the consumers read {what}: they read stage {i % stages} before its copy had "
                f"landed. A TMA load lands when its mbarrier's phase completes; wait on the stage's full barrier, "
                f"for the parity of this pass ((i / stages) & 1), before reading it.")
    if found[i] > i:
        return (f"at iteration {i} the consumers read row {found[i]}, a later pass's: the producer refilled stage "
                f"{i % stages} before they had read it. Before refilling a stage (from its second pass on, i >= "
                f"stages) the producer waits on that stage's empty barrier for the consumers' previous pass over it: "
                f"parity (i / stages - 1) & 1; and the consumers arrive on empty once they have read the stage.")
    return None


def _ring_unused(case, expected, got):
    # The rows came through right, but not through the ring asked for: a ring of fewer stages is a right program
    # (a ring of one stage serialises the copies and the reads), and not the one the exercise asks for.
    if not np.array_equal(got["out"], expected["out"]):
        return None
    src, stages = case.inputs["src"], int(case.inputs["stages"])
    used = [s for s in range(MAX_STAGES) if not np.all(got["last"][s] == STALE)]
    held = {s: np.flatnonzero(np.all(src == got["last"][s], axis=1)) for s in used}
    where = ", ".join(f"stage {s} row {held[s][0]}" if len(held[s]) else f"stage {s} none of src's rows"
                      for s in used) or "no stage holds a row"
    ring = f"{stages} stage{'s' if stages != 1 else ''}"
    return (f"the rows came through in order, but not through a ring of {ring}: at the end {where}, where row i "
            f"should have gone to stage i % stages (stages 0 to {min(stages, len(src)) - 1} used). Compute the stage from "
            f"`stages`, on both sides, and the parities from the pass i / stages.")


RING_HELPERS = r"""
#include <cuda.h>
#define ROW 32            // floats a row of src and a stage: one 128-byte TMA box
#define MAX_STAGES 4

// The PTX the kernel needs, one wrapper each (given: do not change). Shared addresses are 32-bit (smem_u32).
__device__ inline unsigned smem_u32(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
// One arrival on the barrier's current phase.
__device__ inline void arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
// Return once the phase of parity `parity` (0 or 1) of the barrier has completed.
__device__ inline void wait_parity(unsigned bar, unsigned parity) {
    asm volatile("{\n\t.reg .pred P;\n\tWAIT:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n\t"
                 "@P bra DONE;\n\tbra WAIT;\n\tDONE:\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
// The producer's arrival on `full` for this phase, expecting 128 bytes, and the TMA copy of row i of src into
// `stage`, which completes those bytes when it lands.
__device__ inline void load_row(float* stage, const CUtensorMap& src_map, int i, unsigned full) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(full), "r"(ROW * 4) : "memory");
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(smem_u32(stage)), "l"(reinterpret_cast<unsigned long long>(&src_map)), "r"(0), "r"(i),
                    "r"(full) : "memory");
}
"""

RING_KERNEL_HEAD = r"""
// out[i] = row i of src, carried through a ring of `stages` stages (1 .. MAX_STAGES): thread 0 (the producer) asks TMA
// for row i into stage i % stages, the 32 threads of warp 1 (the consumers) copy it out. full[s]: the producer's
// expect_tx and the copy's bytes (the stage holds its row); empty[s]: the 32 consumers' arrivals (it may be refilled).
// At the end, last[s] is what stage s holds.
extern "C" __global__ void ring_phases(const __grid_constant__ CUtensorMap src_map, float* out, float* last,
                                       const float* src, int iterations, int stages) {
    __shared__ __align__(128) float ring[MAX_STAGES][ROW];
    __shared__ __align__(8) unsigned long long full_bar[MAX_STAGES], empty_bar[MAX_STAGES];
    if (threadIdx.x < ROW)
        for (int s = 0; s < MAX_STAGES; ++s) ring[s][threadIdx.x] = -1.0f;   // what a stage holds before a copy
    if (threadIdx.x == 0) {
        for (int s = 0; s < MAX_STAGES; ++s) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(smem_u32(&full_bar[s])) : "memory");
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 32;\n" :: "r"(smem_u32(&empty_bar[s])) : "memory");
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
"""

RING_PHASES_STUB = RING_HELPERS + RING_KERNEL_HEAD + r"""
    if (threadIdx.x == 0) {                       // the producer
        for (int i = 0; i < iterations; ++i) {
            // FILL ME IN (roughly 3 lines): the stage of iteration i, and, before refilling a stage the consumers
            // have used, the wait on its empty barrier. This placeholder is right for a ring of one stage only.
            const int s = 0;
            if (i >= 1) wait_parity(smem_u32(&empty_bar[s]), (i - 1) & 1);
            load_row(ring[s], src_map, i, smem_u32(&full_bar[s]));
        }
    } else if (threadIdx.x >= 32) {               // the consumers
        const int lane = threadIdx.x - 32;
        for (int i = 0; i < iterations; ++i) {
            // FILL ME IN (roughly 4 lines): the stage, the wait on its full barrier, the copy out, the arrival on
            // its empty barrier. Again right for one stage only.
            const int s = 0;
            wait_parity(smem_u32(&full_bar[s]), i & 1);
            out[i * ROW + lane] = ring[s][lane];
            arrive(smem_u32(&empty_bar[s]));
        }
    }
    __syncthreads();
    if (threadIdx.x < ROW)
        for (int s = 0; s < MAX_STAGES; ++s) last[s * ROW + threadIdx.x] = ring[s][threadIdx.x];
}
"""

RING_PHASES_SOLUTION = RING_HELPERS + RING_KERNEL_HEAD + r"""
    if (threadIdx.x == 0) {                       // the producer
        for (int i = 0; i < iterations; ++i) {
            const int s = i % stages, pass = i / stages;   // pass: how many times the ring has wrapped
            // from its second pass on, the stage was read in the pass before: wait for that phase of empty
            if (pass > 0) wait_parity(smem_u32(&empty_bar[s]), (pass - 1) & 1);
            load_row(ring[s], src_map, i, smem_u32(&full_bar[s]));
        }
    } else if (threadIdx.x >= 32) {               // the consumers
        const int lane = threadIdx.x - 32;
        for (int i = 0; i < iterations; ++i) {
            const int s = i % stages, pass = i / stages;
            wait_parity(smem_u32(&full_bar[s]), pass & 1);   // phase `pass` of full[s]: row i has landed
            out[i * ROW + lane] = ring[s][lane];
            arrive(smem_u32(&empty_bar[s]));                 // this lane has read stage s
        }
    }
    __syncthreads();
    if (threadIdx.x < ROW)
        for (int s = 0; s < MAX_STAGES; ++s) last[s * ROW + threadIdx.x] = ring[s][threadIdx.x];
}
"""

register(Exercise(
    id="15.ring_phases",
    title="An mbarrier ring's bookkeeping: the stage and the phase parity each side waits on",
    text="A ring of `stages` stages carries the rows of src from a producer (thread 0, which asks TMA for row i) to "
         "32 consumers (warp 1, which copy it out), as versions 12 and 13 of the GEMM carry their slices. Each stage "
         "s has two mbarriers: full_bar[s] (one arrival, the producer's expect_tx, and the copy's 128 bytes: the "
         "stage holds its row) and empty_bar[s] (32 arrivals, one a consumer: the stage may be refilled). Every "
         "phase that completes flips a barrier's parity, and wait_parity(bar, p) returns once the phase of parity p "
         "has completed. Write both loops' bookkeeping: the stage of iteration i, the wait each side makes (the "
         "consumers on full before reading, the producer on empty before refilling a stage they have read) with "
         "the parity of the right phase, and the consumers' arrival on empty. The check runs rings of 1 to 4 stages "
         "for iteration counts that are not multiples of them, with the threads in forward, reverse and random "
         "order (on the emulator): an answer right for one ring size or one order only is refused, a read before "
         "the wait reads what the stage held before (a TMA load lands when its phase completes), and a wrong "
         "parity either lets a side through too early or never (a deadlock, which the emulator reports).",
    kernel="ring_phases", params=("out", "last", "src", "iterations", "stages"), outputs=("out", "last"),
    reference=ring_phases_spec, cases=ring_phases_cases, stub=RING_PHASES_STUB, solution=RING_PHASES_SOLUTION,
    launch=f"block = ({BLOCK}, 1, 1), grid = (1, 1); the kernel takes src's tensor map first "
           f"(gpuedu.tma.tensor_map(src, box=(1, {ROW}))), then out, last, src, iterations and stages (np.int32)",
    diagnoses=(_stale_reads, _ring_unused),
    run=_launch_with_map,
    no_extern_c=True,
    arch="sm_90a",
))
