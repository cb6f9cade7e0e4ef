"""Exercises of lessons/13_libraries_and_profiling.ipynb: a fused epilogue whose loads the profiler judges."""
import math

import numpy as np

from . import Case, Exercise, FunctionExercise, Requirement, ceil_div, register
from ._exercise import global_reads

BX, BY = 32, 8
LOAD_SECTORS = global_reads("sectors")   # loads (local ones too), and atomics and reductions, which read too
SECTORS_PER_WARP = 10     # x's 128 bytes span at most 5 sectors when unaligned, b's another 5


def bias_relu_spec(x, b, rows, cols):
    return np.maximum(x + b[None, :], 0).astype(np.float32)


def bias_relu_cases(rng):
    for label, rows, cols in [("1 x 1", 1, 1), (f"{BY} x {BX} (one block)", BY, BX),
                              ("9 x 33 (edges on both sides)", 9, 33), ("128 x 784 (an MNIST layer)", 128, 784),
                              ("300 x 1000", 300, 1000)]:
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        b = rng.standard_normal(cols).astype(np.float32)
        yield Case(label, {"x": x, "b": b, "rows": np.int32(rows), "cols": np.int32(cols)},
                   block=(BX, BY, 1), grid=(ceil_div(cols, BX), ceil_div(rows, BY)))


def coalesced_sectors(case):
    return SECTORS_PER_WARP * math.prod(case.grid) * math.prod(case.block) // 32


def _loads_hint(case, got, limit, metrics):
    warps = math.prod(case.grid) * math.prod(case.block) // 32
    return (f"your loads touched {got / warps:.1f} sectors of 32 bytes per warp; coalesced, a warp reads 32 "
            f"neighbouring floats of x (4 sectors) and of b (4 more). Map threadIdx.x to the column, so the 32 "
            f"threads of a warp read one row's neighbouring elements, and threadIdx.y to the row.")


def _bias_mixups(case, expected, got):
    rows, cols = int(case.inputs["rows"]), int(case.inputs["cols"])
    x, b, out = case.inputs["x"], case.inputs["b"], got["out"]
    if np.allclose(out, np.maximum(x, 0)):
        return "out is max(x, 0): the bias was never added (out = max(x + b[c], 0))"
    if 1 < rows <= cols and np.allclose(out, np.maximum(x + b[:rows, None], 0)):
        return "b is added per row (b[r]): the bias has one value per column, b[c]"
    return None


register(Exercise(
    id="13.bias_relu",
    title="A fused epilogue: out = max(x + b, 0) in one pass",
    text="Frameworks fuse the bias and the activation into the GEMM (cuBLASLt's epilogues) or into one "
         "elementwise kernel, so the matrix crosses memory once instead of twice. Write the fused kernel for a "
         "row-major [rows, cols] matrix x and a bias b of cols floats. The check also counts your loads: "
         "neighbouring threads must read neighbouring addresses.",
    kernel="bias_relu", params=("out", "x", "b", "rows", "cols"), outputs=("out",),
    reference=bias_relu_spec, cases=bias_relu_cases,
    stub=r"""
// out[r * cols + c] = max(x[r * cols + c] + b[c], 0) for r < rows, c < cols.
__global__ void bias_relu(float* out, const float* x, const float* b, int rows, int cols) {
    // FILL ME IN (roughly 4 lines)
}
""",
    solution=r"""
__global__ void bias_relu(float* out, const float* x, const float* b, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;   // column: a warp reads 32 neighbouring floats
    int r = blockIdx.y * blockDim.y + threadIdx.y;   // row
    if (r < rows && c < cols)
        out[r * cols + c] = fmaxf(x[r * cols + c] + b[c], 0.0f);
}
""",
    launch=f"block = ({BX}, {BY}, 1), grid = (ceil_div(cols, {BX}), ceil_div(rows, {BY}))",
    atol=0, rtol=0,
    diagnoses=(_bias_mixups,),
    requirements=(Requirement(LOAD_SECTORS, at_most=coalesced_sectors, hint=_loads_hint),),
))


# ---- occupancy: how many blocks of a kernel an H100 SM holds ---------------------------------------------

def resident_blocks_reference(threads, registers, shared):
    from ..profiler.occupancy import theoretical_occupancy
    return theoretical_occupancy("H100", threads, registers, shared).blocks_per_sm


def resident_blocks_cases(rng):
    yield "256 threads, 32 registers, no shared memory", dict(threads=256, registers=32, shared=0)
    yield "256 threads, 128 registers (the register file decides)", dict(threads=256, registers=128, shared=0)
    yield "96 threads, 33 registers (1,056 a warp, allocated as 1,280)", dict(threads=96, registers=33, shared=0)
    yield "96 threads, 40 registers (whole warps per quarter of the file)", dict(threads=96, registers=40, shared=0)
    yield "256 threads, 32 registers, 48 KB shared (a 96 x 128 tile)", dict(threads=256, registers=32, shared=49152)
    yield "96 threads, 36 registers, 32 KB shared (the reserved 1 KB)", dict(threads=96, registers=36, shared=32768)
    yield ("64 threads, 24 registers, 20,000 bytes shared (128-byte units: 11 blocks, where 256-byte units give 10)",
           dict(threads=64, registers=24, shared=20000))
    yield "32 threads, 8 registers (the block slots)", dict(threads=32, registers=8, shared=0)
    yield "1024 threads, 64 registers", dict(threads=1024, registers=64, shared=0)
    for _ in range(6):
        threads = int(rng.choice([64, 128, 192, 256, 384, 512]))
        registers = int(rng.choice([24, 32, 48, 56, 64, 72, 96]))
        shared = int(rng.choice([0, 2048, 8192, 20000, 40000]))
        yield f"{threads} threads, {registers} registers, {shared} bytes shared", \
            dict(threads=threads, registers=registers, shared=shared)


def _limits(threads, registers, shared, register_rule=True, shared_unit=128, reserved=1024, warp_units=True):
    """resident_blocks_reference's four limits, or one of the mistakes they can be made with: registers counted
    over the whole file instead of per quarter (``register_rule=False``), a warp's registers not rounded up
    (``warp_units=False``), shared memory in 256-byte units (the rule before compute capability 8.0), or
    without the reserved kilobyte (``reserved=0``)."""
    warps = -(-threads // 32)
    limits = [64 // warps, 32]
    if registers:
        per_warp = -(-registers * 32 // 256) * 256 if warp_units else registers * 32
        limits.append((4 * (16384 // per_warp) if register_rule else 65536 // per_warp) // warps)
    if shared + reserved:
        limits.append(233472 // (-(-(shared + reserved) // shared_unit) * shared_unit))
    return min(limits)


def _occupancy_mixups(kwargs, expected, got):
    threads, registers, shared = kwargs["threads"], kwargs["registers"], kwargs["shared"]
    warps = -(-threads // 32)
    if registers and got == _limits(threads, registers, shared, register_rule=False):
        return ("registers are allocated per quarter of the SM (16,384 each): a warp lives in one quarter, so count "
                "the whole warps a quarter holds, times 4, then divide by the block's warps")
    if registers and got == _limits(threads, registers, shared, warp_units=False):
        return "a warp's registers are rounded up to a multiple of 256 before they are counted"
    if shared and got == _limits(threads, registers, shared, shared_unit=256):
        return ("on an H100 (compute capability 9.0, as on 8.x) shared memory is allocated in 128-byte units; 256 "
                "bytes was the unit up to compute capability 7.x")
    if shared and got in (_limits(threads, registers, shared, reserved=0), 233472 // shared):
        return ("every block also takes 1 KB of shared memory the system reserves, and shared memory is allocated "
                "in 128-byte units")
    if got == 64 // warps:
        return "the warp slots are only one of four limits: also blocks (32), registers and shared memory"
    return None


register(FunctionExercise(
    id="13.resident_blocks",
    title="Occupancy: how many blocks of a kernel fit on an H100 SM",
    text="An SM hides memory latency by switching among its resident warps, so how many it can hold matters. Four "
         "resources cap the blocks of one kernel on an H100 SM, and the smallest cap wins: (1) warp slots, 64 "
         "warps (a block of t threads takes ceil(t / 32)); (2) block slots, 32 blocks; (3) registers, 65,536 in "
         "4 quarters of 16,384: a warp needs registers x 32 registers rounded up to a multiple of 256, lives in "
         "one quarter, and only whole warps fit in a quarter; (4) shared memory, 233,472 bytes: a block takes "
         "its shared memory plus 1,024 reserved bytes, rounded up to a multiple of 128 (the allocation unit on "
         "compute capability 8.x and 9.x). Return the number of blocks (an int) of (threads, registers per "
         "thread, shared bytes per block) that an SM holds at once; "
         "gpuedu.profiler.occupancy and the CUDA occupancy calculator work it out the same way.",
    function="resident_blocks",
    cases=resident_blocks_cases,
    reference=resident_blocks_reference,
    stub='''def resident_blocks(threads, registers, shared):
    """Blocks of this kernel one H100 SM holds at once (threads per block, registers per thread, shared bytes per block)."""
    MAX_WARPS, MAX_BLOCKS, REGISTERS, QUARTERS, SHARED, RESERVED = 64, 32, 65536, 4, 233472, 1024
    warps = -(-threads // 32)                     # a partial warp takes a whole warp slot
    # FILL ME IN (roughly 6 lines: the four limits, then the smallest)
''',
    solution='''def resident_blocks(threads, registers, shared):
    """Blocks of this kernel one H100 SM holds at once (threads per block, registers per thread, shared bytes per block)."""
    MAX_WARPS, MAX_BLOCKS, REGISTERS, QUARTERS, SHARED, RESERVED = 64, 32, 65536, 4, 233472, 1024
    warps = -(-threads // 32)                     # a partial warp takes a whole warp slot
    limits = [MAX_WARPS // warps, MAX_BLOCKS]
    if registers:
        per_warp = -(-registers * 32 // 256) * 256              # rounded up to the allocation unit
        whole_warps = QUARTERS * (REGISTERS // QUARTERS // per_warp)
        limits.append(whole_warps // warps)
    per_block = -(-(shared + RESERVED) // 128) * 128             # shared memory's unit: 128 bytes
    limits.append(SHARED // per_block)
    return min(limits)
''',
    launch="resident_blocks(threads, registers, shared) is called for 15 kernels' resources and compared with the "
           "occupancy calculator's answer (gpuedu.profiler.occupancy.theoretical_occupancy on an H100)",
    diagnoses=(_occupancy_mixups,),
))
