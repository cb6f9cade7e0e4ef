"""Exercises of lessons/12_libraries_and_profiling.ipynb: a fused epilogue whose loads the profiler judges."""
import math

import numpy as np

from . import Case, Exercise, Requirement, ceil_div, register

BX, BY = 32, 8
LOAD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
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
    id="12.bias_relu",
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
