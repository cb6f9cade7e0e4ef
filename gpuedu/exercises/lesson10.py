"""Exercises of lessons/10_data_pipeline.ipynb: gathering a shuffled mini-batch."""
import numpy as np

from . import Case, Exercise, ceil_div, register

TILE = 16


def gather_rows_spec(x, index, rows, features):
    return x[index].astype(np.float32)


def gather_rows_cases(rng):
    for label, n, rows, features in [("1 row of 1", 5, 1, 1), ("32 rows of 64 (a digits batch)", 200, 32, 64),
                                     (f"{TILE + 1} rows of {TILE + 1}", 40, TILE + 1, TILE + 1),
                                     ("100 rows of 784 (an MNIST batch)", 300, 100, 784)]:
        x = rng.standard_normal((n, features)).astype(np.float32)
        index = rng.permutation(n)[:rows].astype(np.int32)
        yield Case(label, {"x": x, "index": index, "rows": np.int32(rows), "features": np.int32(features)},
                   block=(TILE, TILE, 1), grid=(ceil_div(features, TILE), ceil_div(rows, TILE)))


def _gather_ignored_index(case, expected, got):
    rows = int(case.inputs["rows"])
    if np.array_equal(got["out"], case.inputs["x"][:rows]):
        return "out holds the first rows of x in order: read row index[r] of x, not row r."
    return None


register(Exercise(
    id="10.gather_rows",
    title="Gather a shuffled mini-batch: out[r] = x[index[r]]",
    text="A data loader that keeps the whole data set on the device builds each shuffled batch by "
         "gathering rows: out[r, f] = x[index[r], f]. Use a 2-D grid: x over features (adjacent threads "
         "read adjacent floats of one row, so the loads are coalesced), y over the batch's rows.",
    kernel="gather_rows", params=("out", "x", "index", "rows", "features"), outputs=("out",),
    reference=gather_rows_spec, cases=gather_rows_cases,
    stub=r"""
// out[r * features + f] = x[index[r] * features + f] for r < rows, f < features.
__global__ void gather_rows(float* out, const float* x, const int* index, int rows, int features) {
    // FILL ME IN (roughly 4 lines)
}
""",
    solution=r"""
__global__ void gather_rows(float* out, const float* x, const int* index, int rows, int features) {
    int f = blockIdx.x * blockDim.x + threadIdx.x;   // feature: adjacent threads, adjacent addresses
    int r = blockIdx.y * blockDim.y + threadIdx.y;   // row of the batch
    if (r < rows && f < features)                     // edge blocks hang over both dimensions
        out[r * features + f] = x[index[r] * features + f];
}
""",
    launch=f"block = ({TILE}, {TILE}, 1), grid = (ceil_div(features, {TILE}), ceil_div(rows, {TILE}))",
    diagnoses=(_gather_ignored_index,),
))
