"""Exercises of lessons/02_memory_and_transfers.ipynb: access patterns and loops over memory."""
import numpy as np

from . import Case, Exercise, Requirement, ceil_div, never_written, register, sizes_1d
from ._exercise import global_reads, global_writes

# ---------------------------------------------------------------------------------------------
# 02.strided_read: gather every stride-th element (the uncoalesced read of the lesson's ladder)

BLOCK = 256


def strided_read_spec(x, stride, n):
    return x[::int(stride)][:int(n)].copy()


def strided_read_cases(rng):
    strides = [2, 3, 32, 7, 5]
    for (label, n), stride in zip(sizes_1d(rng, BLOCK, large=40_000), strides):
        x = rng.standard_normal(n * stride).astype(np.float32)
        yield Case(f"{label}, stride {stride}", {"x": x, "stride": np.int32(stride), "n": np.int32(n)},
                   block=(BLOCK, 1, 1), grid=(ceil_div(n, BLOCK), 1))


def _forgot_stride(case, expected, got):
    n = int(case.inputs["n"])
    if np.array_equal(got["out"], case.inputs["x"][:n]):
        return "out[i] holds x[i]: read x[i * stride], the element `stride` places further each step."
    return None


STRIDED_READ_STUB = r"""
// out[i] = x[i * stride] for every i < n (x holds n * stride floats).
__global__ void strided_read(float* out, const float* x, int stride, int n) {
    // FILL ME IN (roughly 3 lines)
}
"""

STRIDED_READ_SOLUTION = r"""
__global__ void strided_read(float* out, const float* x, int stride, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = x[(long long)i * stride];  // neighbouring threads read `stride` floats apart
}
"""

register(Exercise(
    id="02.strided_read",
    title="Read with a stride (gather every stride-th element)",
    text="Thread i reads x[i * stride] and writes out[i]. The writes of a warp are contiguous "
         "(coalesced); the reads are `stride` floats apart, so each warp touches up to 32 "
         "different memory segments: the slow half of the lesson's strided-copy ladder.",
    kernel="strided_read", params=("out", "x", "stride", "n"), outputs=("out",),
    reference=strided_read_spec, cases=strided_read_cases, stub=STRIDED_READ_STUB,
    solution=STRIDED_READ_SOLUTION,
    launch=f"block = ({BLOCK}, 1, 1), grid = (ceil_div(n, {BLOCK}), 1); stride and n are np.int32",
    diagnoses=(_forgot_stride,),
))

# ---------------------------------------------------------------------------------------------
# 02.grid_stride_copy: a fixed, small grid that must still cover any n

COPY_BLOCK = 128
COPY_GRID = 4


def grid_stride_copy_spec(x, n):
    return x.copy()


def grid_stride_copy_cases(rng):
    threads = COPY_BLOCK * COPY_GRID
    sizes = [("n = 1", 1), (f"n = block = {COPY_BLOCK}", COPY_BLOCK),
             (f"n = grid threads = {threads}", threads), (f"n = grid threads + 1 = {threads + 1}", threads + 1)]
    odd = int(rng.integers(3, 9)) * threads + int(rng.integers(1, threads))
    sizes += [(f"n = {odd}", odd), ("n = 100003 (large)", 100_003)]
    for label, n in sizes:
        x = rng.standard_normal(n).astype(np.float32)
        yield Case(label, {"x": x, "n": np.int32(n)}, block=(COPY_BLOCK, 1, 1), grid=(COPY_GRID, 1))


def _no_loop(case, expected, got):
    threads = COPY_BLOCK * COPY_GRID
    n = int(case.inputs["n"])
    written = ~never_written(got["out"])
    if n > threads and written[:threads].all() and not written[threads:].any():
        return (f"only the first {threads} elements (one per thread of the grid) were copied: loop, "
                f"stepping i by blockDim.x * gridDim.x, until i reaches n.")
    return None


def coalesced_copy_sectors(case):
    """The most sectors a coalesced copy of n floats takes on each side: every 32 consecutive floats a warp moves
    in one request lie in 4 sectors (128 bytes), 5 where the array does not start on a 128-byte boundary (the
    last, shorter, piece in fewer). Each thread copying a contiguous chunk instead sends a warp's 32 lanes to 32
    places a chunk apart: up to 32 sectors a request."""
    n = int(case.inputs["n"])
    return 5 * ceil_div(n, 32)


def _coalesced_hint(side):
    def hint(case, got, limit, metrics):
        return (f"your kernel's global {side} took {got} sectors; a copy whose every round is coalesced (thread t "
                f"of the grid at t, t + T, t + 2T, ...) takes at most {limit} here, 4 or 5 for each 32 neighbouring "
                f"floats. Neighbouring threads must touch neighbouring elements in each round: a thread that "
                f"copies a contiguous chunk of its own sends the 32 lanes of a warp 32 chunks apart.")
    return hint


GRID_STRIDE_COPY_COALESCED = (
    Requirement(global_reads("sectors"), at_most=coalesced_copy_sectors, hint=_coalesced_hint("reads")),
    Requirement(global_writes("sectors"), at_most=coalesced_copy_sectors, hint=_coalesced_hint("writes")),
)

GRID_STRIDE_COPY_STUB = r"""
// out[i] = x[i] for every i < n, with a grid that is smaller than n: each thread copies
// several elements, stepping by the total number of threads in the grid.
__global__ void grid_stride_copy(float* out, const float* x, int n) {
    // FILL ME IN (roughly 3 lines)
}
"""

GRID_STRIDE_COPY_SOLUTION = r"""
__global__ void grid_stride_copy(float* out, const float* x, int n) {
    int step = blockDim.x * gridDim.x;  // threads in the whole grid
    // consecutive threads copy consecutive elements in every round: coalesced
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        out[i] = x[i];
}
"""

register(Exercise(
    id="02.grid_stride_copy",
    title="Grid-stride loop: a small grid covering any size",
    text=f"Launch configurations do not have to grow with the data. With a fixed grid of "
         f"{COPY_GRID} blocks of {COPY_BLOCK} threads, thread t copies elements t, t + T, t + 2T, ... "
         f"where T = blockDim.x * gridDim.x. Every round stays coalesced, and the same kernel works "
         f"for any n, including n smaller than the grid. The check counts, on the emulator (on a GPU too: the "
         f"method is judged on the emulator), the sectors of the global reads (loads, atomics and reductions) and "
         f"of the global writes (stores, atomics and reductions): at most 5 for every 32 floats on each side, "
         f"4 of a coalesced warp's 128 bytes and one more where they do not start on a 128-byte boundary.",
    kernel="grid_stride_copy", params=("out", "x", "n"), outputs=("out",),
    reference=grid_stride_copy_spec, cases=grid_stride_copy_cases, stub=GRID_STRIDE_COPY_STUB,
    solution=GRID_STRIDE_COPY_SOLUTION,
    launch=f"block = ({COPY_BLOCK}, 1, 1), grid = ({COPY_GRID}, 1) whatever n is",
    diagnoses=(_no_loop,),
    requirements=GRID_STRIDE_COPY_COALESCED,
))

# ---------------------------------------------------------------------------------------------
# 02.transpose_naive: out = a^T with one thread per element

TILE = 16


def transpose_spec(a, rows, cols):
    return np.ascontiguousarray(a.T)


def transpose_cases(rng):
    shapes = [("1 x 1", 1, 1), (f"{TILE} x {TILE}", TILE, TILE), (f"{TILE + 1} x {TILE - 1}", TILE + 1, TILE - 1),
              ("3 x 200 (wide)", 3, 200), ("150 x 37 (tall)", 150, 37)]
    rows, cols = int(rng.integers(200, 260)), int(rng.integers(200, 260))
    shapes.append((f"{rows} x {cols} (large)", rows, cols))
    for label, rows, cols in shapes:
        a = rng.standard_normal((rows, cols)).astype(np.float32)
        yield Case(label, {"a": a, "rows": np.int32(rows), "cols": np.int32(cols)},
                   block=(TILE, TILE, 1), grid=(ceil_div(cols, TILE), ceil_div(rows, TILE)))


def _copied_not_transposed(case, expected, got):
    a = case.inputs["a"]
    if np.array_equal(got["out"].reshape(-1), a.reshape(-1)):
        return ("out is a plain copy of a: element (row, col) of a goes to (col, row) of out, "
                "at col * rows + row.")
    return None


def _wrong_output_pitch(case, expected, got):
    a = case.inputs["a"]
    rows, cols = a.shape
    if rows != cols and np.isin(got["out"], a).all():
        return ("every value is one of a's, but in the wrong place: out has `rows` columns, so "
                "out[col][row] is at col * rows + row (not col * cols + row).")
    return None


def _pieces(case):
    """``[(rows of a warp, columns of a warp)]`` for every warp with an element: a 16 x 16 block's warp is two
    of its rows of 16 threads; at the edges fewer rows and columns lie inside a."""
    rows, cols = int(case.inputs["rows"]), int(case.inputs["cols"])
    out = []
    for by in range(ceil_div(rows, TILE)):
        block_rows = min(TILE, rows - by * TILE)
        for bx in range(ceil_div(cols, TILE)):
            block_cols = min(TILE, cols - bx * TILE)
            out += [(min(2, block_rows - r), block_cols) for r in range(0, block_rows, 2)]
    return out


def coalesced_read_sectors(case):
    """The most sectors the reads of a take with x over a's columns: each warp reads two pieces of a row, of up to
    16 neighbouring floats (64 bytes) each: 2 sectors a piece, 3 where it does not start on a 32-byte boundary.
    Reading a column instead (x over a's rows), each lane reads its own sector."""
    return sum(r * (ceil_div(c, 8) + 1) for r, c in _pieces(case))


def strided_write_sectors(case):
    """The fewest sectors the writes of out take with x over a's columns: each of a warp's columns is a row of out
    of its own, `rows` floats from the next, so when rows >= 8 (32 bytes) no two columns share a sector; a
    warp's lanes then write at least as many sectors as it has columns (0 asked of narrower outputs)."""
    if int(case.inputs["rows"]) < 8:
        return 0
    return sum(c for _, c in _pieces(case))


TRANSPOSE_READ_COALESCED_WRITE_STRIDED = (
    Requirement(global_reads("sectors"), at_most=coalesced_read_sectors,
                hint="your kernel's reads of a took {got} sectors; with x over a's columns, so that a warp reads "
                     "neighbouring floats of a row, they take at most {limit} here. This exercise reads coalesced "
                     "and writes strided: col = blockIdx.x * blockDim.x + threadIdx.x indexes a's columns, and "
                     "out[col * rows + row] = a[row * cols + col]."),
    Requirement(global_writes("sectors"), at_least=strided_write_sectors,
                hint="your kernel's writes of out took {got} sectors, fewer than the {limit} of the naive "
                     "transpose, whose warps write a column of out (a sector for each of their columns): this "
                     "exercise is the naive one, reads coalesced and writes strided; staging a tile in shared "
                     "memory to coalesce both comes later."),
)

TRANSPOSE_STUB = r"""
// out = a^T: a is rows x cols (row-major), out is cols x rows; one thread per element of a.
__global__ void transpose_naive(float* out, const float* a, int rows, int cols) {
    // FILL ME IN (roughly 4 lines)
}
"""

TRANSPOSE_SOLUTION = r"""
__global__ void transpose_naive(float* out, const float* a, int rows, int cols) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols)
        out[col * rows + row] = a[row * cols + col];  // read coalesced, write `rows` floats apart
}
"""

register(Exercise(
    id="02.transpose_naive",
    title="Naive transpose (coalesced reads, strided writes)",
    text="A transpose moves element (row, col) of a to (col, row) of out. With x over columns, a "
         "warp reads a contiguous piece of a row (coalesced) but writes a column of out, one float "
         "every `rows` floats (strided). Staging a tile in shared memory fixes that (see "
         "gpuedu/kernels/copy_transpose.cu); here, get the indices and both guards right. The check counts, on "
         "the emulator (on a GPU too: the method is judged on the emulator), the sectors of the global reads "
         "(loads, atomics and reductions: at most what coalesced reads of a take, 2 or 3 for each 16 floats of a "
         "row a warp reads) and of the global writes (stores, atomics and reductions: at least one for each column "
         "a warp writes, as strided writes take, when out's rows are 8 floats or longer).",
    kernel="transpose_naive", params=("out", "a", "rows", "cols"), outputs=("out",),
    reference=transpose_spec, cases=transpose_cases, stub=TRANSPOSE_STUB, solution=TRANSPOSE_SOLUTION,
    launch=f"block = ({TILE}, {TILE}, 1), grid = (ceil_div(cols, {TILE}), ceil_div(rows, {TILE}))",
    diagnoses=(_copied_not_transposed, _wrong_output_pitch),
    requirements=TRANSPOSE_READ_COALESCED_WRITE_STRIDED,
))
