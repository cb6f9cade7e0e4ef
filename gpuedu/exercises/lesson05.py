"""Exercises of lessons/05_layers_from_kernels.ipynb: a layer's local backward and the update rule."""
import numpy as np

from . import Case, Exercise, ceil_div, register, sizes_1d

BLOCK = 256

# ---------------------------------------------------------------------------------------------
# 05.relu_backward: the chain rule through ReLU, dx = dy * [x > 0]


def relu_backward_spec(dy, x, n):
    return np.where(x > 0, dy, np.float32(0)).astype(np.float32)


def relu_backward_cases(rng):
    for label, n in sizes_1d(rng, BLOCK):
        x = rng.standard_normal(n).astype(np.float32)
        dy = rng.standard_normal(n).astype(np.float32)
        yield Case(label, {"dy": dy, "x": x, "n": np.int32(n)}, block=(BLOCK, 1, 1), grid=(ceil_div(n, BLOCK), 1))


def _relu_passed_gradient_through(case, expected, got):
    if np.array_equal(got["dx"], case.inputs["dy"]):
        return "dx is dy unchanged: ReLU's derivative is 0 where x <= 0, so those gradients must be 0."
    return None


def _relu_multiplied_by_x(case, expected, got):
    x, dy = case.inputs["x"], case.inputs["dy"]
    if np.allclose(got["dx"], dy * np.maximum(x, 0), rtol=1e-6):
        return "dx = dy * relu(x): the derivative of ReLU is the step [x > 0] (0 or 1), not relu(x) itself."
    return None


register(Exercise(
    id="05.relu_backward",
    title="ReLU backward: dx = dy * [x > 0]",
    text="Backpropagation through an activation multiplies the incoming gradient dy = dL/dy by the "
         "activation's local derivative. For ReLU that derivative is 1 where the input was positive and "
         "0 elsewhere, so the kernel keeps dy where x > 0 and writes 0 elsewhere. One thread per element.",
    kernel="relu_backward", params=("dx", "dy", "x", "n"), outputs=("dx",),
    reference=relu_backward_spec, cases=relu_backward_cases,
    stub=r"""
// dx[i] = dy[i] if x[i] > 0, else 0; one thread per element, n elements.
__global__ void relu_backward(float* dx, const float* dy, const float* x, int n) {
    // FILL ME IN (roughly 3 lines)
}
""",
    solution=r"""
__global__ void relu_backward(float* dx, const float* dy, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)                                   // the last block runs past n
        dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}
""",
    launch=f"block = ({BLOCK}, 1, 1), grid = (ceil_div(n, {BLOCK}), 1)",
    diagnoses=(_relu_passed_gradient_through, _relu_multiplied_by_x),
))

# ---------------------------------------------------------------------------------------------
# 05.bias_grad: db[j] = sum over the batch of dz[b, j]

ROWS_BLOCK = 128


def bias_grad_spec(dz, rows, cols):
    return dz.astype(np.float64).sum(axis=0).astype(np.float32)


def bias_grad_cases(rng):
    for label, rows, cols in [("1 x 1", 1, 1), ("32 x 10 (a digits batch)", 32, 10),
                              (f"7 x {ROWS_BLOCK + 1} (one column more than a block)", 7, ROWS_BLOCK + 1),
                              ("300 x 257", 300, 257)]:
        dz = rng.standard_normal((rows, cols)).astype(np.float32)
        yield Case(label, {"dz": dz, "rows": np.int32(rows), "cols": np.int32(cols)},
                   block=(ROWS_BLOCK, 1, 1), grid=(ceil_div(cols, ROWS_BLOCK), 1))


def _bias_summed_rows(case, expected, got):
    dz = case.inputs["dz"]
    rows, cols = dz.shape
    by_row = dz.sum(axis=1)
    k = min(rows, cols)
    if k > 1 and np.allclose(got["db"][:k], by_row[:k], rtol=1e-4, atol=1e-5):
        return "db looks like the sums of rows: the bias gradient sums over the batch, down each column (dz[b * cols + j] for b = 0..rows-1)."
    return None


register(Exercise(
    id="05.bias_grad",
    title="The bias gradient: a column sum over the batch",
    text="The bias b[j] is added to every row of the batch, so its gradient is the sum of dz[b, j] over "
         "all rows b. Give each thread one column j and let it walk down the batch: neighbouring threads "
         "read neighbouring columns of a row, so the loads are coalesced, and no two threads write the "
         "same db[j], so no atomics are needed. dz is row-major [rows, cols].",
    kernel="bias_grad", params=("db", "dz", "rows", "cols"), outputs=("db",),
    reference=bias_grad_spec, cases=bias_grad_cases,
    stub=r"""
// db[j] = sum_b dz[b * cols + j], one thread per column j < cols.
__global__ void bias_grad(float* db, const float* dz, int rows, int cols) {
    // FILL ME IN (roughly 6 lines)
}
""",
    solution=r"""
__global__ void bias_grad(float* db, const float* dz, int rows, int cols) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;   // this thread's column
    if (j >= cols) return;                            // the last block runs past the last column
    float sum = 0.0f;
    for (int b = 0; b < rows; ++b)
        sum += dz[b * cols + j];
    db[j] = sum;
}
""",
    launch=f"block = ({ROWS_BLOCK}, 1, 1), grid = (ceil_div(cols, {ROWS_BLOCK}), 1)",
    rtol=1e-5, atol=1e-5,
    diagnoses=(_bias_summed_rows,),
))

# ---------------------------------------------------------------------------------------------
# 05.sgd_step: the update rule w = w - lr * dL/dw


def sgd_step_spec(w, g, n, lr):
    return (w - lr * g).astype(np.float32)


def sgd_step_cases(rng):
    for label, n in sizes_1d(rng, BLOCK):
        yield Case(label, {"w": rng.standard_normal(n).astype(np.float32),
                           "g": rng.standard_normal(n).astype(np.float32),
                           "lr": np.float32(rng.uniform(0.01, 0.5)), "n": np.int32(n)},
                   block=(BLOCK, 1, 1), grid=(ceil_div(n, BLOCK), 1))


def _sgd_climbed(case, expected, got):
    w, g, lr = case.inputs["w"], case.inputs["g"], case.inputs["lr"]
    if np.allclose(got["w"], w + lr * g, rtol=1e-5, atol=1e-6):
        return "w moved up the gradient (w + lr * g): descent subtracts, dW = -lr * dL/dW."
    return None


register(Exercise(
    id="05.sgd_step",
    title="The update rule: w = w - lr * dL/dw",
    text="Gradient descent moves every weight a small step against its gradient: "
         "Delta W = -eta * dL/dW. The kernel updates w in place from the gradient g and the learning "
         "rate lr (a np.float32). One thread per weight.",
    kernel="sgd_step", params=("w", "g", "n", "lr"), outputs=("w",),
    reference=sgd_step_spec, cases=sgd_step_cases,
    stub=r"""
// w[i] = w[i] - lr * g[i] for every i < n, in place.
__global__ void sgd_step(float* w, const float* g, int n, float lr) {
    // FILL ME IN (roughly 3 lines)
}
""",
    solution=r"""
__global__ void sgd_step(float* w, const float* g, int n, float lr) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        w[i] -= lr * g[i];
}
""",
    launch=f"block = ({BLOCK}, 1, 1), grid = (ceil_div(n, {BLOCK}), 1)",
    rtol=1e-5, atol=1e-6,      # a GPU may fuse the multiply-add into one FMA
    diagnoses=(_sgd_climbed,),
))
