"""Exercises of lessons/01_first_kernel.ipynb: one thread per element, 1-D and 2-D indexing."""
import numpy as np

from . import Case, Exercise, ceil_div, register, sizes_1d

BLOCK = 256

# ---------------------------------------------------------------------------------------------
# 01.relu: an activation applied to every element (embarrassingly parallel)


def relu_spec(x, n):
    return np.maximum(x, np.float32(0))


def relu_cases(rng):
    for label, n in sizes_1d(rng, BLOCK):
        x = rng.standard_normal(n).astype(np.float32)
        yield Case(label, {"x": x, "n": np.int32(n)}, block=(BLOCK, 1, 1), grid=(ceil_div(n, BLOCK), 1))


def _relu_copied_input(case, expected, got):
    if np.array_equal(got["out"], case.inputs["x"]):
        return "out is an exact copy of x: apply the activation, max(x[i], 0), before storing."
    return None


def _relu_kept_negative_part(case, expected, got):
    if np.array_equal(got["out"], np.minimum(case.inputs["x"], np.float32(0))):
        return "out holds min(x, 0): ReLU keeps the positive part, max(x[i], 0.0f)."
    return None


RELU_STUB = r"""
// out[i] = max(x[i], 0) for every i < n; one thread per element.
__global__ void relu(float* out, const float* x, int n) {
    // FILL ME IN (roughly 3 lines)
}
"""

RELU_SOLUTION = r"""
__global__ void relu(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // this thread's element
    if (i < n)                                       // the last block runs past n
        out[i] = fmaxf(x[i], 0.0f);
}
"""

register(Exercise(
    id="01.relu",
    title="ReLU on every element",
    text="An activation such as ReLU is applied to every element independently: the textbook "
         "embarrassingly parallel job. Give each thread one element: compute its global index from "
         "blockIdx, blockDim and threadIdx, and remember that the grid is rounded up to whole blocks, "
         "so the last block has threads with no element.",
    kernel="relu", params=("out", "x", "n"), outputs=("out",),
    reference=relu_spec, cases=relu_cases, stub=RELU_STUB, solution=RELU_SOLUTION,
    launch=f"block = ({BLOCK}, 1, 1), grid = (ceil_div(n, {BLOCK}), 1); out and x hold n float32",
    diagnoses=(_relu_copied_input, _relu_kept_negative_part),
))

# ---------------------------------------------------------------------------------------------
# 01.saxpy: y = a * x + y, updated in place


def saxpy_spec(y, x, a, n):
    return a * x + y


def saxpy_cases(rng):
    for label, n in sizes_1d(rng, BLOCK):
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        a = np.float32(rng.uniform(0.5, 3.0))
        yield Case(label, {"y": y, "x": x, "a": a, "n": np.int32(n)},
                   block=(BLOCK, 1, 1), grid=(ceil_div(n, BLOCK), 1))


def _saxpy_forgot_y(case, expected, got):
    a, x = case.inputs["a"], case.inputs["x"]
    if np.allclose(got["y"], a * x, rtol=1e-5, atol=1e-6):
        return "y holds a * x only: SAXPY adds the old y, y[i] = a * x[i] + y[i]."
    return None


def _saxpy_swapped(case, expected, got):
    a, x, y = case.inputs["a"], case.inputs["x"], case.inputs["y"]
    if np.allclose(got["y"], a * y + x, rtol=1e-5, atol=1e-6):
        return "y holds a * y + x: the scalar multiplies x, not y."
    return None


SAXPY_STUB = r"""
// y[i] = a * x[i] + y[i] for every i < n, in place; one thread per element.
__global__ void saxpy(float* y, const float* x, float a, int n) {
    // FILL ME IN (roughly 3 lines)
}
"""

SAXPY_SOLUTION = r"""
__global__ void saxpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)                       // threads of the last block past n do nothing
        y[i] = a * x[i] + y[i];
}
"""

register(Exercise(
    id="01.saxpy",
    title="SAXPY in place: y = a * x + y",
    text="SAXPY (single-precision a times x plus y) is the 'hello world' of BLAS and the shape of an "
         "SGD step, w = w - lr * grad. The kernel reads two arrays and a scalar and updates y in "
         "place. The scalar arrives by value: from Python it must be a np.float32.",
    kernel="saxpy", params=("y", "x", "a", "n"), outputs=("y",),
    reference=saxpy_spec, cases=saxpy_cases, stub=SAXPY_STUB, solution=SAXPY_SOLUTION,
    launch=f"block = ({BLOCK}, 1, 1), grid = (ceil_div(n, {BLOCK}), 1); a = np.float32, n = np.int32",
    # a GPU may fuse a * x + y into one FMA (one rounding instead of two): allow an ulp or so
    rtol=1e-5, atol=1e-6,
    diagnoses=(_saxpy_forgot_y, _saxpy_swapped),
))

# ---------------------------------------------------------------------------------------------
# 01.scale_2d: a 2-D grid over a matrix; every row scaled by its own factor

TILE = 16


def scale_2d_spec(a, s, rows, cols):
    return a * s[:, None]


def scale_2d_cases(rng):
    shapes = [("1 x 1", 1, 1), (f"{TILE} x {TILE} (one block)", TILE, TILE),
              (f"{TILE + 1} x {TILE + 1} (one more than a block)", TILE + 1, TILE + 1),
              ("5 x 300 (wide)", 5, 300), ("300 x 7 (tall)", 300, 7)]
    rows, cols = int(rng.integers(200, 300)), int(rng.integers(200, 300))
    shapes.append((f"{rows} x {cols} (large)", rows, cols))
    for label, rows, cols in shapes:
        a = rng.standard_normal((rows, cols)).astype(np.float32)
        s = rng.uniform(0.5, 2.0, rows).astype(np.float32)
        yield Case(label, {"a": a, "s": s, "rows": np.int32(rows), "cols": np.int32(cols)},
                   block=(TILE, TILE, 1), grid=(ceil_div(cols, TILE), ceil_div(rows, TILE)))


def _scale_by_column(case, expected, got):
    a, s = case.inputs["a"], case.inputs["s"]
    rows, cols = a.shape
    if cols <= rows:
        by_col = a[:, :cols] * s[None, :cols]
        if np.array_equal(got["out"], by_col):
            return "each column was scaled by s[col]: the factor belongs to the row, s[row]."
    return None


def _swapped_axes(case, expected, got):
    a = case.inputs["a"]
    if a.shape[0] == a.shape[1] and np.array_equal(got["out"], expected["out"].T):
        return ("out is the transpose of the answer: row comes from the y axis "
                "(blockIdx.y * blockDim.y + threadIdx.y) and col from the x axis.")
    return None


SCALE_2D_STUB = r"""
// out[row][col] = s[row] * a[row][col] for a row-major rows x cols matrix;
// one thread per element, x for columns and y for rows.
__global__ void scale_2d(float* out, const float* a, const float* s, int rows, int cols) {
    // FILL ME IN (roughly 4 lines)
}
"""

SCALE_2D_SOLUTION = r"""
__global__ void scale_2d(float* out, const float* a, const float* s, int rows, int cols) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;  // x runs along a row: neighbours coalesce
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols)                     // both edges may hold partial blocks
        out[row * cols + col] = s[row] * a[row * cols + col];
}
"""

register(Exercise(
    id="01.scale_2d",
    title="Scale every row of a matrix (2-D indexing)",
    text="Matrices map naturally onto a 2-D grid: threadIdx.x/blockIdx.x pick the column, "
         "threadIdx.y/blockIdx.y the row, and the element of a row-major matrix is at "
         "row * cols + col. Guard both coordinates: the grid is rounded up in both directions. "
         "Scaling each row by its own factor is what a per-sample weight or a normalisation does.",
    kernel="scale_2d", params=("out", "a", "s", "rows", "cols"), outputs=("out",),
    reference=scale_2d_spec, cases=scale_2d_cases, stub=SCALE_2D_STUB, solution=SCALE_2D_SOLUTION,
    launch=f"block = ({TILE}, {TILE}, 1), grid = (ceil_div(cols, {TILE}), ceil_div(rows, {TILE}))",
    diagnoses=(_scale_by_column, _swapped_axes),
))
