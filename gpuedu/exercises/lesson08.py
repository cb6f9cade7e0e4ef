"""Exercises of lessons/08_tensor_cores_bf16_tf32.ipynb: a tensor-core GEMM with WMMA, and rounding to BF16."""
import numpy as np

from . import Case, Exercise, Requirement, ceil_div, never_written, register

# mma.h is a C++ header (templates in namespace nvcuda::wmma), so the WMMA source includes it and
# declares its kernel `extern "C"` itself (no_extern_c=True), as gpuedu/kernels/wmma_gemm.cu does.
TILE = 16          # WMMA's 16x16x16 shape: one warp computes one 16x16 tile of C
WARP = 32

# ---------------------------------------------------------------------------------------------
# 08.wmma_tile: one warp per 16x16 tile of C, stepping along K


def wmma_tile_spec(A, B, M, N, K):
    # A (M x K) and B (K x N) are float16; a product of two halves is exact in float32 and a tensor
    # core sums in float32. Here: float64 sums, rounded once (the tolerance allows float32 sums).
    return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)


def wmma_tile_cases(rng):
    # Every size is a multiple of 16 (no edge tiles); M, N and K differ so that a swapped index shows.
    for label, M, N, K in (("M = N = K = 16 (one tile, one step along K)", 16, 16, 16),
                           ("M = 32, N = 48, K = 16 (6 tiles, one step along K)", 32, 48, 16),
                           ("M = N = 16, K = 64 (one tile, four steps along K)", 16, 16, 64),
                           ("M = 48, N = 32, K = 80 (6 tiles, five steps along K)", 48, 32, 80)):
        A = rng.uniform(-1, 1, (M, K)).astype(np.float16)
        B = rng.uniform(-1, 1, (K, N)).astype(np.float16)
        yield Case(label, {"A": A, "B": B, "M": np.int32(M), "N": np.int32(N), "K": np.int32(K)},
                   block=(WARP, 1, 1), grid=(N // TILE, M // TILE))


def _close(got, want):
    return np.allclose(got, want, rtol=0, atol=1e-3)


def _tiles(matrix):
    """The 16x16 tiles of a matrix whose sides are multiples of 16: {(first row, first column): tile}."""
    rows, cols = matrix.shape
    return {(i, j): matrix[i:i + TILE, j:j + TILE] for i in range(0, rows, TILE) for j in range(0, cols, TILE)}


def _one_step_along_k(case, expected, got):
    A, B = case.inputs["A"].astype(np.float64), case.inputs["B"].astype(np.float64)
    K = int(case.inputs["K"])
    if K <= TILE:
        return None
    if _close(got["C"], A[:, :TILE] @ B[:TILE]):
        return (f"C holds only the first 16 terms of each dot product, K = {K} has {K // TILE} steps: loop "
                f"k0 = 0, 16, ... < K, load the A and B tiles at k0 each time and mma_sync them into the same "
                f"accumulator.")
    if _close(got["C"], A[:, K - TILE:] @ B[K - TILE:]):
        return ("C holds only the last 16 terms of each dot product: the accumulator was reset at every step. "
                "Fill it with 0 once, before the loop; mma_sync(acc, a, b, acc) then adds each step into it.")
    return None


def _tiles_transposed(case, expected, got):
    want, have = _tiles(expected["C"]), _tiles(got["C"])
    if all(_close(have[key], want[key].T) for key in want) and not _close(got["C"], expected["C"]):
        return ("every 16x16 tile of C is transposed: store the accumulator with wmma::mem_row_major "
                "(C is row-major) and a leading dimension of N.")
    return None


def _fragment_read_as_col_major(case, expected, got):
    # A row_major tile read through a col_major fragment (or the reverse) is the tile transposed.
    A, B = case.inputs["A"].astype(np.float64), case.inputs["B"].astype(np.float64)
    M, N, K = (int(case.inputs[k]) for k in "MNK")
    for name in ("A", "B"):
        C = np.zeros((M, N))
        for i in range(0, M, TILE):
            for j in range(0, N, TILE):
                for k in range(0, K, TILE):
                    a, b = A[i:i + TILE, k:k + TILE], B[k:k + TILE, j:j + TILE]
                    C[i:i + TILE, j:j + TILE] += (a.T @ b) if name == "A" else (a @ b.T)
        if _close(got["C"], C):
            return (f"every tile of {name} was multiplied transposed: {name} is row-major, so its fragment is "
                    f"declared with wmma::row_major and loaded with the length of a row of {name} "
                    f"({'K' if name == 'A' else 'N'}) as the leading dimension.")
    return None


def _only_the_first_tile(case, expected, got):
    have, want = _tiles(got["C"]), _tiles(expected["C"])
    unwritten = _tiles(never_written(got["C"]))
    if len(have) > 1 and _close(have[0, 0], want[0, 0]) and all(unwritten[key].all() for key in have if key != (0, 0)):
        return ("only the top-left tile of C was written: every warp computed that one. Each warp starts its loads "
                "and its store at its own tile, row 16 * blockIdx.y and column 16 * blockIdx.x.")
    return None


def _pointers_or_leading_dimensions(case, expected, got):
    # Tried last, when no pattern matched and every element was written (the generic hints cover the rest):
    # the values are wrong, and a WMMA kernel has few places to go wrong.
    if never_written(got["C"]).any():
        return None
    return ("check where each tile starts and how its rows are spaced: the tile of A at step k0 starts at "
            "A + row0 * K + k0 with leading dimension K, the tile of B at B + k0 * N + col0 with leading "
            "dimension N, and the tile of C at C + row0 * N + col0 with leading dimension N.")


WMMA_TILE_STUB = r"""
#include <mma.h>
using namespace nvcuda;

// C = A B: A is M x K, B is K x N (half, row-major), C is M x N (float, row-major); M, N, K are multiples
// of 16. One warp (the block's 32 threads) computes the 16x16 tile of C at row 16 * blockIdx.y, column
// 16 * blockIdx.x, stepping along K 16 at a time with fragments of A and B and one FP32 accumulator.
extern "C" __global__ void wmma_tile(float* C, const __half* A, const __half* B, int M, int N, int K) {
    // FILL ME IN (roughly 10 lines)
}
"""

WMMA_TILE_SOLUTION = r"""
#include <mma.h>
using namespace nvcuda;

extern "C" __global__ void wmma_tile(float* C, const __half* A, const __half* B, int M, int N, int K) {
    const int row0 = 16 * blockIdx.y, col0 = 16 * blockIdx.x;      // this warp's tile of C
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k0 = 0; k0 < K; k0 += 16) {
        wmma::load_matrix_sync(a, A + row0 * K + k0, K);        // leading dimension: a row of A is K long
        wmma::load_matrix_sync(b, B + k0 * N + col0, N);        // a row of B is N long
        wmma::mma_sync(acc, a, b, acc);                         // acc += a b, FP32 sums
    }
    wmma::store_matrix_sync(C + row0 * N + col0, acc, N, wmma::mem_row_major);
}
"""

register(Exercise(
    id="08.wmma_tile",
    title="A tensor-core GEMM with WMMA: one warp per 16x16 tile",
    text="C = A B with A and B in half precision and C in float, on tensor cores through nvcuda::wmma. Each "
         "block is one warp and computes one 16x16 tile of C: declare fragments of A (matrix_a) and B "
         "(matrix_b), both row_major, and an accumulator of float; fill the accumulator with 0; for each "
         "16-wide step along K load the two tiles (load_matrix_sync takes a pointer to the tile's first "
         "element and the matrix's leading dimension, the length of one of its rows) and mma_sync them into "
         "the accumulator; then store it into C (store_matrix_sync, wmma::mem_row_major). Every lane of the "
         "warp makes every call. The sizes are multiples of 16, so no tile needs padding.",
    kernel="wmma_tile", params=("C", "A", "B", "M", "N", "K"), outputs=("C",),
    reference=wmma_tile_spec, cases=wmma_tile_cases, stub=WMMA_TILE_STUB, solution=WMMA_TILE_SOLUTION,
    launch=f"block = ({WARP}, 1, 1), grid = (N / {TILE}, M / {TILE}); M, N, K are np.int32",
    rtol=0, atol=1e-3,   # float32 sums in any order; a missing or repeated step is off by far more
    diagnoses=(_one_step_along_k, _tiles_transposed, _fragment_read_as_col_major, _only_the_first_tile,
               _pointers_or_leading_dimensions),
    no_extern_c=True,
))

# ---------------------------------------------------------------------------------------------
# 08.float_to_bf16: round a float to bfloat16 with integer operations

BLOCK = 256
CANONICAL_NAN = 0x7FFF     # the NaN NVIDIA's cuda_bf16.h returns for any NaN input


def float_to_bf16_spec(x, n):
    bits = x.view(np.uint32).astype(np.uint64)
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    # bfloat16 is the upper half of a float32: add 0x7fff plus the lowest bit kept (ties to even), shift
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return np.where(nan, 0x7FFF, rounded & 0xFFFF).astype(np.uint16)     # every NaN: 0x7fff


def _special_values():
    """Ties (halfway between two bfloat16s) with even and odd last kept bits, their neighbours, NaNs
    (one whose bits would carry into the sign), infinities, the largest float (it rounds to Inf),
    zeros and subnormals."""
    ties = 0x3F808000 + 0x10000 * np.arange(16, dtype=np.uint32)        # 1 + (2j + 1) * 2**-8
    bits = np.concatenate([ties, ties | 0x80000000, ties + 1, ties - 1, np.array([
        0x00000000, 0x80000000, 0x7F800000, 0xFF800000,                  # zeros and infinities
        0x7FC00000, 0xFFC00000, 0x7FFFFFFF, 0x7FC0FFFF,                  # NaNs: 0x7fffffff + 0x8000 carries
        0x7F7FFFFF, 0x7F7F7FFF, 0x7F7F8000,                              # the largest float rounds to Inf
        0x00000001, 0x00008000, 0x00018000, 0x807F8000,                  # subnormals, ties among them
    ], dtype=np.uint32)])
    return bits.view(np.float32)


def float_to_bf16_cases(rng):
    special = _special_values()
    random_bits = rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32)
    nan = (random_bits & 0x7FFFFFFF) > 0x7F800000
    random_bits[nan] |= 0x00400000           # quiet NaNs only: a signalling NaN may be quietened in transit
    for label, x in (("n = 1", np.array([1 / 3], np.float32)),
                     (f"n = {special.size} (ties, NaNs, infinities, the largest float, subnormals)", special),
                     (f"n = {BLOCK + 1}", (rng.standard_normal(BLOCK + 1) * 100).astype(np.float32)),
                     ("n = 5000 (random bit patterns)", random_bits.view(np.float32))):
        n = x.size
        yield Case(label, {"x": x, "n": np.int32(n)}, block=(BLOCK, 1, 1), grid=(ceil_div(n, BLOCK), 1))


def _bits_and_masks(case, got, expected):
    """The inputs' bits (as uint64: room for a carry), the mask of wrong outputs and the mask of NaN inputs."""
    bits = case.inputs["x"].view(np.uint32)
    wrong = got["out"] != expected["out"]
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    return bits.astype(np.uint64), wrong, nan


def _nan_mishandled(case, expected, got):
    bits, wrong, nan = _bits_and_masks(case, got, expected)
    if wrong.any() and np.all(nan[wrong]):
        first = int(np.flatnonzero(wrong)[0])
        return (f"only NaNs are wrong (input 0x{int(bits[first]):08x} gave 0x{int(got['out'][first]):04x}): "
                f"adding the rounding increment to a NaN's bits can carry into the exponent and the sign "
                f"(0x7fffffff becomes -0.0). Test for NaN first, (bits & 0x7fffffff) > 0x7f800000, and "
                f"write 0x{CANONICAL_NAN:04x}.")
    return None


def _truncated(case, expected, got):
    bits, wrong, nan = _bits_and_masks(case, got, expected)
    finite_wrong = wrong & ~nan
    if finite_wrong.any() and np.all(got["out"][finite_wrong] == (bits[finite_wrong] >> 16)):
        return ("the wrong results are the upper 16 bits as they are: that rounds toward zero. Round to "
                "nearest first: add 0x7fff plus the lowest bit you keep (bit 16), then shift right by 16.")
    return None


def _ties_up(case, expected, got):
    bits, wrong, nan = _bits_and_masks(case, got, expected)
    finite_wrong = wrong & ~nan
    if finite_wrong.any() and np.all(got["out"][finite_wrong] == ((bits[finite_wrong] + 0x8000) >> 16) & 0xFFFF):
        return ("values exactly halfway between two bfloat16s are rounded away from zero: ties go to the "
                "neighbour whose last bit is 0, so add 0x7fff + ((bits >> 16) & 1), not 0x8000.")
    return None


FLOAT_TO_BF16_STUB = r"""
// out[i] = the bit pattern of the bfloat16 nearest to x[i] (ties to even); every NaN gives 0x7fff.
__global__ void float_to_bf16(unsigned short* out, const float* x, int n) {
    // FILL ME IN (roughly 8 lines)
}
"""

FLOAT_TO_BF16_SOLUTION = r"""
__global__ void float_to_bf16(unsigned short* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned int bits = __float_as_uint(x[i]);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {      // NaN: rounding its bits could carry into the sign
        out[i] = 0x7fff;
        return;
    }
    bits += 0x7fffu + ((bits >> 16) & 1u);          // round to nearest, ties to even (a carry bumps the exponent)
    out[i] = (unsigned short)(bits >> 16);
}
"""

register(Exercise(
    id="08.float_to_bf16",
    title="Round float to bfloat16 with integer operations",
    text="bfloat16 is the upper 16 bits of a float32 (sign, the same 8 exponent bits, 7 fraction bits), so "
         "converting drops the lower 16 bits, rounding to nearest with ties to even: add 0x7fff plus the "
         "lowest bit kept (bit 16) to the bits and shift right by 16. A carry out of the fraction bumps the "
         "exponent, which also turns the largest floats into Inf, as rounding should. NaNs need a test of "
         "their own, before the addition: every NaN gives the canonical pattern 0x7fff. cuda_bf16.h's "
         "__float2bfloat16_rn does all of this in one call; here you write it yourself, so the output is the "
         "bit pattern (unsigned short); __float_as_uint(x) gives a float's bits.",
    kernel="float_to_bf16", params=("out", "x", "n"), outputs=("out",),
    reference=float_to_bf16_spec, cases=float_to_bf16_cases, stub=FLOAT_TO_BF16_STUB,
    solution=FLOAT_TO_BF16_SOLUTION,
    launch=f"block = ({BLOCK}, 1, 1), grid = (ceil_div(n, {BLOCK}), 1); n is np.int32",
    diagnoses=(_nan_mishandled, _truncated, _ties_up),
))

# ---------------------------------------------------------------------------------------------
# 08.swizzled_rows: where each row of a tile lies in shared memory, so that ldmatrix reads it without conflicts

ROWS, CHUNKS = 16, 8         # the tile: 16 rows of 64 halves, each row 8 chunks of 16 bytes (128 bytes)
LDMATRIX_X4 = CHUNKS // 2    # the kernel's ldmatrix.x4 instructions: two chunks (4 matrices of 8 rows) each
LDSM = "smsp__inst_executed_op_ldsm.sum"
LDSM_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum"


def swizzled_rows_spec(src):
    """What the four ldmatrix.x4 give each lane, whatever the placement (as long as it is one to one): step s reads
    chunks 2s and 2s + 1 of the tile's 16 rows as 4 matrices of 8 x 8 halves (rows 0-7 then 8-15 of chunk 2s, then
    of 2s + 1); lane l receives row l / 4 of each, halves 2 (l % 4) and the next, packed low half first."""
    halves = np.asarray(src).view(np.uint16).reshape(ROWS, CHUNKS, 8)
    out = np.zeros((LDMATRIX_X4, 4, 32), np.uint32)
    for step in range(LDMATRIX_X4):
        for j in range(4):
            matrix = halves[8 * (j % 2):8 * (j % 2) + 8, 2 * step + j // 2]
            for lane in range(32):
                pair = matrix[lane // 4, 2 * (lane % 4):2 * (lane % 4) + 2].astype(np.uint32)
                out[step, j, lane] = pair[0] | pair[1] << 16
    return out.ravel()


def swizzled_rows_cases(rng):
    for label in ("a tile of random halves", "another tile of random halves"):
        src = rng.integers(0, 1 << 16, ROWS * CHUNKS * 8, dtype=np.uint16).view(np.uint32)   # 16-byte chunks
        yield Case(label, {"src": src}, block=(32, 1, 1), grid=(1, 1))


def _not_one_to_one(case, expected, got):
    if np.array_equal(got["out"], expected["out"]):
        return None
    return ("the values are wrong: row_address must give each (row, chunk) a 16-byte slot of its own inside the "
            "tile's 2,048 bytes (base + 128 * row plus a chunk position 0..7 times 16), so that what the kernel "
            "stores through it, ldmatrix reads back. Two pairs on one slot overwrite each other.")


SWIZZLED_ROWS_KERNEL = r"""
// The kernel (do not change it): one warp stores the 16 x 64 halves of src into shared memory, chunk by chunk,
// through row_address, and reads them back with four ldmatrix.x4, each lane naming the row it brings through
// row_address too. out[(step * 4 + j) * 32 + lane] is register j of lane `lane` at step `step`.
extern "C" __global__ void swizzled_rows(unsigned* out, const uint4* src) {
    __shared__ __align__(128) uint4 tile[16 * 8];
    const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(tile));
    const int lane = threadIdx.x;
    for (int i = lane; i < 16 * 8; i += 32)                      // chunk i % 8 of row i / 8: 16 bytes a lane
        *static_cast<uint4*>(__cvta_shared_to_generic(row_address(base, i / 8, i % 8))) = src[i];
    __syncwarp();
    for (int step = 0; step < 4; ++step) {
        // lanes 0-7: rows 0-7 of chunk 2 step, 8-15: rows 8-15; lanes 16-31: the same rows of chunk 2 step + 1
        unsigned r0, r1, r2, r3;
        const unsigned row = row_address(base, lane % 16, 2 * step + lane / 16);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(row));
        out[(step * 4 + 0) * 32 + lane] = r0;
        out[(step * 4 + 1) * 32 + lane] = r1;
        out[(step * 4 + 2) * 32 + lane] = r2;
        out[(step * 4 + 3) * 32 + lane] = r3;
    }
}
"""

SWIZZLED_ROWS_STUB = r"""
// The shared-memory address of 16-byte chunk `chunk` (0..7) of row `row` (0..15) of a 16 x 128-byte tile that
// starts at shared address `base` (a multiple of 128). Rows lie 128 bytes apart; within its row, put the chunk
// where the 8 rows an ldmatrix matrix reads (one chunk of 8 consecutive rows) fall in 8 different groups of
// 4 banks.
__device__ unsigned row_address(unsigned base, int row, int chunk) {
    // FILL ME IN (one line). This placeholder puts rows 8-15 where rows 0-7 are: half the tile is lost.
    return base + 128 * (row % 8) + 16 * chunk;
}
""" + SWIZZLED_ROWS_KERNEL

SWIZZLED_ROWS_SOLUTION = r"""
__device__ unsigned row_address(unsigned base, int row, int chunk) {
    // Chunk c of row r goes to position c ^ (r % 8): the 8 rows of one chunk land on 8 different positions,
    // 16 bytes each, so the 32 banks of each 128-byte row are covered once by them.
    return base + 128 * row + 16 * (chunk ^ (row % 8));
}
""" + SWIZZLED_ROWS_KERNEL


def _swizzle_hint(case, got, limit, metrics):
    return (f"the values are right, and ldmatrix met {got} bank conflicts: chunk c of rows r, r + 1, ..., r + 7 "
            f"lies 128 bytes apart, in the same 4 banks, so each 8-row matrix takes 8 wavefronts instead of 1. "
            f"Place the chunk at position c ^ (r % 8) within its row (an XOR swizzle): the 8 rows then hit 8 "
            f"different groups of 4 banks, and the store loop, which writes whole rows, stays conflict-free too.")


register(Exercise(
    id="08.swizzled_rows",
    title="An XOR-swizzled tile: ldmatrix's row addresses without bank conflicts",
    text="ldmatrix.x4 reads four 8 x 8 matrices of halves from shared memory: each lane gives the address of one "
         "16-byte row, and the 8 rows of a matrix are read together. Stored plainly (chunk c of row r at "
         "base + 128 r + 16 c), the 8 rows of one chunk lie 128 bytes apart, in the same 4 of the 32 banks: 8 "
         "wavefronts for a matrix that 1 could read. Write row_address, used both to store the tile and to give "
         "ldmatrix its rows, so that each matrix is read without conflicts: rows stay 128 bytes apart, and the "
         "chunk moves within its row, to position c ^ (r % 8). The check compares every lane's registers, and "
         "counts, on the emulator (on a GPU too: the method is judged on the emulator), the LDSM instructions "
         f"({LDMATRIX_X4}: the kernel's four ldmatrix.x4) and their bank conflicts (0: a plain layout, whose "
         "values are right too, meets 28 an instruction).",
    kernel="swizzled_rows", params=("out", "src"), outputs=("out",),
    reference=swizzled_rows_spec, cases=swizzled_rows_cases, stub=SWIZZLED_ROWS_STUB, solution=SWIZZLED_ROWS_SOLUTION,
    launch="block = (32, 1, 1), grid = (1, 1); src holds the tile's 16 x 64 halves as uint32 pairs",
    diagnoses=(_not_one_to_one,),
    requirements=(
        Requirement(LDSM, at_least=lambda case: LDMATRIX_X4,
                    hint="the kernel made {got} ldmatrix instructions, fewer than its {limit}: keep the kernel as "
                         "given and write only row_address."),
        Requirement(LDSM_CONFLICTS, at_most=lambda case: 0, hint=_swizzle_hint),
    ),
    no_extern_c=True,
))
