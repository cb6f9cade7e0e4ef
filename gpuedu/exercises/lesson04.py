"""Exercises of lessons/04_matmul.ipynb: the naive matmul with its guards, and a tiled one.

The matrices hold small integers stored as float32, so every dot product is exact whatever the
order of the additions: a correct kernel matches NumPy bit for bit.  The tiled one must also load
less: on the emulator its global load requests are counted against what tiling allows.
"""
import numpy as np

from . import Case, Exercise, Requirement, ceil_div, register
from ._exercise import global_reads

BLOCK = 16
TILE = 16


def _small_ints(rng, shape):
    return rng.integers(-4, 5, shape).astype(np.float32)


def matmul_spec(A, B, M, N, K):
    return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)


def _shapes(rng):
    """(label, M, N, K): one element, one block, one more than a block, ragged, flat, and random."""
    m, n, k = (int(v) for v in rng.integers(40, 90, 3))
    return [("1 x 1 x 1", 1, 1, 1),
            (f"M = N = K = {TILE} (one tile)", TILE, TILE, TILE),
            (f"M = N = K = {TILE + 1} (one past a tile)", TILE + 1, TILE + 1, TILE + 1),
            ("M = 5, N = 70, K = 3 (wide, short K)", 5, 70, 3),
            ("M = 70, N = 3, K = 37 (tall, K not a multiple of the tile)", 70, 3, 37),
            (f"M = {m}, N = {n}, K = {k} (random)", m, n, k)]


def matmul_cases(rng):
    for label, M, N, K in _shapes(rng):
        yield Case(label, {"A": _small_ints(rng, (M, K)), "B": _small_ints(rng, (K, N)),
                           "M": np.int32(M), "N": np.int32(N), "K": np.int32(K)},
                   block=(BLOCK, BLOCK, 1), grid=(ceil_div(N, BLOCK), ceil_div(M, BLOCK)))


def _transposed_product(case, expected, got):
    A, B = case.inputs["A"].astype(np.float64), case.inputs["B"].astype(np.float64)
    M, N, K = (int(case.inputs[k]) for k in "MNK")
    if M == N == K and M > 1 and np.array_equal(got["C"], (B @ A).astype(np.float32)):
        return "C holds B @ A: the row of C picks a row of A, the column of C a column of B."
    return None


def _short_k(case, expected, got):
    # The last, partial tile along K left out: C = A[:, :K_full] @ B[:K_full, :].
    A, B = case.inputs["A"].astype(np.float64), case.inputs["B"].astype(np.float64)
    K = int(case.inputs["K"])
    k_full = (K // TILE) * TILE
    if k_full < K and np.array_equal(got["C"], (A[:, :k_full] @ B[:k_full, :]).astype(np.float32)):
        return (f"C misses the last {K - k_full} terms of every dot product: the loop over tiles ran "
                f"K / TILE = {K // TILE} times (rounded down). Use ceil_div(K, TILE) tiles and load 0 "
                f"for the part of the last tile that lies past K.")
    return None


def _tiles_overwritten_or_misindexed(case, expected, got):
    # Tried last, when no specific pattern matched. With several tiles along K, the usual causes
    # are a tile overwritten while other threads still read it, or a tile loaded from the wrong place.
    K = int(case.inputs["K"])
    if K > TILE and not np.isnan(got["C"]).any():
        return (f"wrong with K = {K}, which spans {ceil_div(K, TILE)} tiles. If the one-tile cases pass, "
                f"a tile is overwritten while other threads still read it: put __syncthreads() after "
                f"the accumulation loop as well as after the loads. Otherwise check the tile indices: "
                f"As[ty][tx] = A[row][t*TILE + tx] and Bs[ty][tx] = B[t*TILE + ty][col].")
    return None


MATMUL_NAIVE_STUB = r"""
// C[row][col] = sum over k of A[row][k] * B[k][col]; A is M x K, B is K x N, C is M x N, row-major.
// One thread per element of C; threadIdx.x runs along a row of C (coalesced reads of B).
__global__ void matmul_naive(float* C, const float* A, const float* B, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    // FILL ME IN (roughly 6 lines)
}
"""

MATMUL_NAIVE_SOLUTION = r"""
__global__ void matmul_naive(float* C, const float* A, const float* B, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {            // edge blocks stick out past C in both directions
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}
"""

register(Exercise(
    id="04.matmul_naive",
    title="The naive matmul, with both bounds guards",
    text="One thread computes one element of C as a dot product of a row of A and a column of B. "
         "The grid is rounded up to whole 16 x 16 blocks in both directions, so threads past the "
         "last row or the last column must do nothing: check both, not only one (a wide C and a "
         "tall C catch each).",
    kernel="matmul_naive", params=("C", "A", "B", "M", "N", "K"), outputs=("C",),
    reference=matmul_spec, cases=matmul_cases, stub=MATMUL_NAIVE_STUB, solution=MATMUL_NAIVE_SOLUTION,
    launch=f"block = ({BLOCK}, {BLOCK}, 1), grid = (ceil_div(N, {BLOCK}), ceil_div(M, {BLOCK}))",
    diagnoses=(_transposed_product,),
))


LOAD_REQUESTS = global_reads("requests")   # loads (local ones too), and atomics and reductions, which read too


def naive_load_requests(case):
    """Global load requests of the naive kernel: a warp is two rows of a 16 x 16 block, and each warp
    with a row < M (every block column has a col < N) loads A[row][k] and B[k][col] for each k."""
    M, N, K = (int(case.inputs[k]) for k in "MNK")
    return 2 * K * ceil_div(M, 2) * ceil_div(N, BLOCK)


def tiled_load_requests(case):
    """The most a tiled kernel issues: per tile along K, each of a block's 8 warps loads one element
    of the A tile and one of the B tile (fewer where a whole warp lies past the edge of A or B)."""
    K = int(case.inputs["K"])
    blocks = int(case.grid[0]) * int(case.grid[1])
    return 2 * ceil_div(K, TILE) * (TILE * TILE // 32) * blocks


SHARED_LOADS = "smsp__sass_inst_executed_op_shared_ld.sum"


def tile_reads(case):
    """The fewest shared-memory load instructions the tiled products make: each warp that owns an element of C (a
    warp is two rows of a block's 16 x 16 threads) reads at least one value from the tiles for each k (the course's
    solution has every warp read two, one of As and one of Bs)."""
    M, N, K = (int(case.inputs[k]) for k in "MNK")
    owning = 0
    for by in range(int(case.grid[1])):
        for bx in range(int(case.grid[0])):
            if bx * TILE >= N:
                continue
            owning += sum(1 for w in range(TILE * TILE // 32) if by * TILE + 2 * w < M)
    return K * owning


def _tile_reads_hint(case, got, limit, metrics):
    return (f"your kernel made {got} shared-memory load instructions; the products of a tiled matmul read the A and "
            f"B tiles from shared memory, at least one load a warp for each k ({limit} here). Keep the dot product's "
            f"operands in the shared tiles (As[ty][k] * Bs[k][tx]), not in global memory or in other arrays.")


def _tiled_loads_hint(case, got, limit, metrics):
    return (f"your kernel issued {got} global read requests (loads, local loads, atomics and reductions); a {TILE}x{TILE}-tiled "
            f"kernel issues at most {limit} here, the naive one {naive_load_requests(case)}: each element "
            f"of A and B must be loaded into shared memory once per tile, not once per multiply. Load "
            f"one element of As and of Bs per thread, wait, then read the products from As and Bs.")


MATMUL_TILED_STUB = r"""
#define TILE 16
// C = A @ B as before, but each block stages TILE x TILE tiles of A and B in shared memory:
// every element is read from global memory once per block instead of TILE times.
__global__ void matmul_tiled(float* C, const float* A, const float* B, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    // FILL ME IN (roughly 12 lines): for each tile along K: load one element of As and of Bs
    // (0 past the edges), wait, accumulate TILE products, wait; then write C if in bounds.
}
"""

MATMUL_TILED_SOLUTION = r"""
#define TILE 16
__global__ void matmul_tiled(float* C, const float* A, const float* B, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; t++) {     // ceil_div: the last tile may be partial
        int k = t * TILE;
        As[ty][tx] = (row < M && k + tx < K) ? A[row * K + k + tx] : 0.0f;    // 0 adds nothing
        Bs[ty][tx] = (k + ty < K && col < N) ? B[(k + ty) * N + col] : 0.0f;
        __syncthreads();                  // both tiles complete before anyone reads them
        for (int j = 0; j < TILE; j++)
            acc += As[ty][j] * Bs[j][tx];
        __syncthreads();                  // all reads done before the next tile overwrites them
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}
"""

register(Exercise(
    id="04.matmul_tiled",
    title="A shared-memory tiled matmul (mind the last tile)",
    text="The block walks along K one TILE x TILE tile at a time: each thread loads one element of "
         "the A tile and one of the B tile into shared memory, the block waits, each thread adds "
         "TILE products to its accumulator, and the block waits again before the next tile "
         "overwrites the shared arrays. The trap: K is rarely a multiple of TILE. Loop over "
         "ceil_div(K, TILE) tiles (not K / TILE), and load 0 for elements past the edge of A or "
         "B, which then adds nothing to the dot products. The threads that own no element of C "
         "still load and still reach both barriers. The check counts, on the emulator (on a GPU too: the method "
         "is judged on the emulator), global read requests (loads, atomics and reductions: at most what tiles "
         "take, 2 x ceil_div(K, TILE) x 8 a block) and shared-memory load instructions (at least one for "
         "each k in every warp that owns an element of C, as the products read the tiles from shared memory).",
    kernel="matmul_tiled", params=("C", "A", "B", "M", "N", "K"), outputs=("C",),
    reference=matmul_spec, cases=matmul_cases, stub=MATMUL_TILED_STUB, solution=MATMUL_TILED_SOLUTION,
    launch=f"block = ({TILE}, {TILE}, 1), grid = (ceil_div(N, {TILE}), ceil_div(M, {TILE}))",
    races=True,
    diagnoses=(_short_k, _transposed_product, _tiles_overwritten_or_misindexed),
    requirements=(Requirement(LOAD_REQUESTS, at_most=tiled_load_requests, hint=_tiled_loads_hint),
                  Requirement(SHARED_LOADS, at_least=tile_reads, hint=_tile_reads_hint)),
))
