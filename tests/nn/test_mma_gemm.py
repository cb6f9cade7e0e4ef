"""The PTX tensor-core GEMMs (``ops.fp16.matmul`` versions 6-10, mma_gemm.cu) against float64 sums of their
float16 inputs: every rung at sizes that are and are not multiples of its tiles, alpha, FP16 and FP32 outputs,
rows that take the 16-byte copies and rows that do not (K = 37, a base pointer 2 bytes off), empty products;
every layout for version 10; a rerun gives the same bits; small integers, whose sums FP32 holds exactly, give
the exact product; the refusals say what to use instead."""
import shutil
import subprocess

import numpy as np
import pytest

import gpuedu
from gpuedu.ops import fp16
from gemm_helpers import SLACK, assert_close_to_exact

backend = gpuedu.setup(verbose=False)
ga = backend.gpuarray

MMA_VERSIONS = sorted(fp16.MMA_GEMMS)          # 6, 7, 8, 9, 10
LAYOUTS = fp16.MMA_LAYOUTS_VERSION             # 10: every transpose


def operands(m, n, k, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16))


def stored(m, n, k, transpose_a, transpose_b, seed):
    """Operands as stored (a^T is stored K x M, b^T N x K) and the logical op(a), op(b)."""
    a, b = operands(m, n, k, seed)
    return (np.ascontiguousarray(a.T) if transpose_a else a, np.ascontiguousarray(b.T) if transpose_b else b, a, b)


def test_the_ladder_lists_the_ptx_rungs_as_tensor_core_versions():
    assert MMA_VERSIONS == [6, 7, 8, 9, 10]
    assert set(MMA_VERSIONS) <= set(fp16.TENSOR_VERSIONS) and set(MMA_VERSIONS) <= set(fp16.GEMM_VERSIONS)
    assert "ldmatrix" in fp16.GEMM_VERSIONS[7] and "swizzled" in fp16.GEMM_VERSIONS[8]
    assert "cp.async" in fp16.GEMM_VERSIONS[9] and "every layout" in fp16.GEMM_VERSIONS[10]


@pytest.mark.parametrize("version", MMA_VERSIONS)
@pytest.mark.parametrize("m, n, k", [(128, 128, 64), (64, 256, 96), (130, 136, 40), (33, 17, 37), (1, 300, 3)])
def test_every_rung_matches_the_exact_sums(m, n, k, version):
    # 128/64/256/96/136/40: whole 16-byte chunks; 130 and 33 rows past a tile, 17, 37, 3, 300: rows of a and b
    # that are not a multiple of 8 halves (read element by element) and edge chunks cut by N or K
    a, b = operands(m, n, k, seed=m + 7 * n + k)
    got = fp16.matmul(a, b, out_dtype=np.float32, version=version).get()
    assert_close_to_exact(got, a, b, 1.0, np.float32)


@pytest.mark.parametrize("version", MMA_VERSIONS)
@pytest.mark.parametrize("out_dtype", [np.float16, np.float32])
@pytest.mark.parametrize("alpha", [1.0, -0.375])
def test_every_rung_scales_by_alpha_into_either_output(out_dtype, alpha, version):
    a, b = operands(72, 136, 56, seed=5)
    got = fp16.matmul(a, b, alpha=alpha, out_dtype=out_dtype, version=version).get()
    assert_close_to_exact(got, a, b, alpha, out_dtype)


@pytest.mark.parametrize("version", MMA_VERSIONS)
def test_a_rerun_gives_the_same_bits(version):
    a, b = operands(96, 144, 160, seed=21)
    first = fp16.matmul(a, b, out_dtype=np.float32, version=version).get()
    again = fp16.matmul(a, b, out_dtype=np.float32, version=version).get()
    assert first.tobytes() == again.tobytes()


@pytest.mark.parametrize("version", MMA_VERSIONS)
@pytest.mark.parametrize("m, n, k", [(64, 72, 64), (37, 50, 61), (130, 9, 16)])
def test_small_integers_give_the_exact_product(m, n, k, version):
    # values in -4..4 and K <= 64: every partial sum is an integer below 2**11, exact in FP32 and in FP16,
    # whatever the order of the additions: the kernel must give the product bit for bit
    rng = np.random.default_rng(m * n * k)
    a = rng.integers(-4, 5, (m, k)).astype(np.float16)
    b = rng.integers(-4, 5, (k, n)).astype(np.float16)
    exact = a.astype(np.int64) @ b.astype(np.int64)
    for out_dtype in (np.float16, np.float32):
        got = fp16.matmul(a, b, out_dtype=out_dtype, version=version).get()
        np.testing.assert_array_equal(got, exact.astype(out_dtype))


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("m, n, k", [(128, 264, 64), (40, 24, 48), (130, 129, 100), (33, 17, 37)])
def test_version_10_takes_every_layout(m, n, k, transpose_a, transpose_b):
    # 128/264/40/24/48/64: rows of 8 halves, the cp.async path; 130/129/100/37 mix it with the element path
    a_st, b_st, a, b = stored(m, n, k, transpose_a, transpose_b, seed=m + n + k)
    got = fp16.matmul(a_st, b_st, transpose_a=transpose_a, transpose_b=transpose_b, out_dtype=np.float32,
                      version=LAYOUTS).get()
    assert_close_to_exact(got, a, b, 1.0, np.float32)


@pytest.mark.parametrize("transpose_a, transpose_b", [(False, True), (True, False), (True, True)])
def test_version_10_gives_small_integers_exactly_in_every_layout(transpose_a, transpose_b):
    rng = np.random.default_rng(3)
    a = rng.integers(-4, 5, (70, 64)).astype(np.float16)
    b = rng.integers(-4, 5, (64, 90)).astype(np.float16)
    a_st = np.ascontiguousarray(a.T) if transpose_a else a
    b_st = np.ascontiguousarray(b.T) if transpose_b else b
    got = fp16.matmul(a_st, b_st, transpose_a=transpose_a, transpose_b=transpose_b, alpha=0.5, version=LAYOUTS).get()
    np.testing.assert_array_equal(got, (0.5 * (a.astype(np.int64) @ b.astype(np.int64))).astype(np.float16))


@pytest.mark.parametrize("version", MMA_VERSIONS)
def test_every_rung_agrees_with_the_wmma_gemm(version):
    # Both sum in FP32; they differ only in the order of the additions.
    a, b = operands(96, 80, 200, seed=3)
    mma = fp16.matmul(a, b, out_dtype=np.float32, version=version).get()
    wmma = fp16.matmul(a, b, out_dtype=np.float32, version=4).get()
    magnitude = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert np.all(np.abs(mma - wmma) <= SLACK * 2 * 200 * 2.0 ** -24 * magnitude + 1e-30)


@pytest.mark.parametrize("version", MMA_VERSIONS)
@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (150, 1, 40), (16, 16, 0)])
def test_every_rung_takes_tiny_and_empty_k(m, n, k, version):
    a, b = operands(m, n, k, seed=11)
    got = fp16.matmul(a, b, out_dtype=np.float32, version=version).get()
    assert_close_to_exact(got, a, b, 1.0, np.float32)   # K = 0: a sum of nothing, zeros


@pytest.mark.parametrize("version", MMA_VERSIONS)
@pytest.mark.parametrize("m, n", [(0, 5), (5, 0)])
def test_every_rung_takes_an_empty_output(m, n, version):
    a, b = operands(m, n, 8, seed=2)
    assert fp16.matmul(a, b, version=version).get().shape == (m, n)


@pytest.mark.parametrize("version", MMA_VERSIONS)
def test_every_rung_reads_an_unaligned_operand_element_by_element(version):
    # a starts 2 bytes into its buffer: not 16-byte aligned, so the kernel must not copy 16-byte chunks of it
    # (a GPU, and the emulator, fail a misaligned 16-byte access) and still get every element.
    m, n, k = 24, 32, 40
    a, b = operands(m, n, k, seed=8)
    whole = ga.to_gpu(np.concatenate([np.zeros(1, np.float16), a.ravel()]))
    got = fp16.matmul(whole[1:].reshape(m, k), b, out_dtype=np.float32, version=version).get()
    assert_close_to_exact(got, a, b, 1.0, np.float32)


@pytest.mark.parametrize("version", MMA_VERSIONS)
@pytest.mark.parametrize("out_dtype", [np.float16, np.float32])
def test_every_rung_writes_nothing_outside_c(out_dtype, version):
    # 131 x 9: the edge tiles' padded rows and columns are computed, and must not be written; an odd N also
    # puts every other row's pair of columns off the alignment of a half2 / float2 store
    m, n, k = 131, 9, 21
    a, b = operands(m, n, k, seed=4)
    whole = ga.to_gpu(np.full(m * n + 64, 7.0, out_dtype))
    fp16.matmul(a, b, out=whole[:m * n].reshape(m, n), out_dtype=out_dtype, version=version)
    host = whole.get()
    assert np.all(host[m * n:] == 7.0)
    assert_close_to_exact(host[:m * n].reshape(m, n), a, b, 1.0, out_dtype)


@pytest.mark.skipif(not backend.is_emulator, reason="choosing the order of a block's threads is the emulator's")
@pytest.mark.parametrize("version", MMA_VERSIONS)
@pytest.mark.parametrize("schedule", ["reverse", "random"])
def test_the_barriers_hold_in_any_thread_order(schedule, version):
    # A missing __syncthreads or cp.async wait (a stage overwritten while a warp still reads it, or read before
    # its copies land) shows up when the threads run in another order; K = 224 runs version 9's and 10's
    # 4-stage ring round more than once.
    a, b = operands(64, 48, 224, seed=12)
    try:
        backend.compiler.set_schedule(schedule, seed=7)
        got = fp16.matmul(a, b, out_dtype=np.float32, version=version).get()
    finally:
        backend.compiler.set_schedule("forward")
    assert_close_to_exact(got, a, b, 1.0, np.float32)


@pytest.mark.skipif(not backend.is_emulator, reason="racecheck without a GPU is the emulator's")
@pytest.mark.parametrize("version", MMA_VERSIONS)
def test_racecheck_finds_no_hazard(version):
    # Two warps touching one shared address with no barrier between (a slice refilled while a warp still reads
    # it); a thread order that hides it from the values does not hide it from racecheck. (Its shadow does not
    # see cp.async's copies yet, so for versions 9 and 10 it checks the ldmatrix reads and the element path.)
    a, b = operands(64, 48, 100, seed=14)   # K = 100: four slices, and rows of 100 halves: version 9 and 10's
    with gpuedu.racecheck() as rc:          # copies through registers too
        got = fp16.matmul(a, b, out_dtype=np.float32, version=version).get()
    assert rc.hazards == []
    assert_close_to_exact(got, a, b, 1.0, np.float32)


@pytest.mark.parametrize("version", [6, 7, 8, 9])
@pytest.mark.parametrize("transpose_a, transpose_b, named", [(True, False, "transpose_a was"),
                                                             (False, True, "transpose_b was"),
                                                             (True, True, "transpose_a and transpose_b were")])
def test_rungs_6_to_9_refuse_a_transpose_and_name_version_10(transpose_a, transpose_b, named, version):
    a, b = np.zeros((4, 4), np.float16), np.zeros((4, 4), np.float16)
    with pytest.raises(ValueError, match=rf"version {version} multiplies the plain layout only .*but {named} asked "
                                         r"for: use version 10, which reads either operand transposed"):
        fp16.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b, version=version)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"a": np.zeros((4, 5), np.float16), "b": np.zeros((4, 2), np.float16)}, ValueError, "inner dimensions"),
    ({"a": np.zeros((4, 5), np.float16), "b": np.zeros((2, 6), np.float16), "transpose_b": True}, ValueError,
     "inner dimensions"),
    ({"a": np.zeros((4, 5), np.float32), "b": np.zeros((5, 2), np.float16)}, TypeError, "float16"),
    ({"a": np.zeros((4, 5), np.float16), "b": np.zeros((5, 2), np.float16), "out_dtype": np.float64}, ValueError,
     "out_dtype must be float16 or float32"),
    ({"a": np.zeros(5, np.float16), "b": np.zeros((5, 2), np.float16)}, ValueError, "2-D"),
])
def test_version_10_checks_its_input(kwargs, error, message):
    with pytest.raises(error, match=message):
        fp16.matmul(version=LAYOUTS, **kwargs)


def test_a_gpu_older_than_sm80_is_refused_with_what_to_use(monkeypatch):
    # mma.sync.m16n8k16 with FP32 sums and cp.async begin with sm_80: on a T4 (sm_75) the launcher says so
    # before nvcc would fail, and the fastest version there is WMMA's
    monkeypatch.setitem(fp16._capability, backend.name, (7, 5))
    with pytest.raises(ValueError, match=r"version 10 runs mma.sync.m16n8k16 and cp.async, which need a GPU of "
                                         r"compute capability 8.0 .* this one is sm_75: use version 4 or 5"):
        fp16.matmul(np.ones((8, 8), np.float16), np.ones((8, 8), np.float16), version=10)
    assert fp16.tensor_gemm_version() == 4
    monkeypatch.setitem(fp16._capability, backend.name, (9, 0))
    assert fp16.tensor_gemm_version() == 10


@pytest.mark.parametrize("version", [9, 10])
def test_the_pipelined_rungs_need_their_shared_memory_limit_raised(version):
    # 64 KB and 96 KB of dynamic shared memory exceed the default 48 KB per block: like a GPU, the emulator
    # refuses the launch until the kernel opts in (the launcher does, once per kernel). A module of its own
    # (an extra define), so that no limit raised by ops.fp16 applies to it.
    from gpuedu import kernels
    module = kernels.load("mma_gemm", options=["-DMMA_GEMM_SEPARATE_MODULE=1"])
    f = module.get_function("mma_gemm_kernel9" if version == 9 else "mma_gemm_kernel10_nn")
    _, threads, shared = fp16.MMA_GEMMS[version]
    assert shared > 48 * 1024
    m = n = k = 16
    a, b = operands(m, n, k, seed=13)
    a_gpu, b_gpu, c = ga.to_gpu(a), ga.to_gpu(b), ga.empty((m, n), np.float32)
    args = (c.gpudata, a_gpu.gpudata, b_gpu.gpudata, np.int32(m), np.int32(n), np.int32(k), np.int32(k),
            np.int32(n), np.float32(1.0), np.int32(0))
    with pytest.raises(backend.driver.Error, match="48 KiB|invalid argument"):
        f(*args, block=(threads, 1, 1), grid=(1, 1), shared=shared)
    f.set_attribute(backend.driver.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
    f(*args, block=(threads, 1, 1), grid=(1, 1), shared=shared)
    assert_close_to_exact(c.get(), a, b, 1.0, np.float32)


# ---- the shared layouts: bank arithmetic on the offsets mma_gemm.cu's own functions compute ---------------
# (The emulator runs ldmatrix and cp.async as the warp's or the copy's whole, outside the counters, so their bank
# conflicts are not counted; the addresses are what decides them, and these are the kernel's.)
OFFSETS_SRC = r'''
#define MMA_GEMM_NO_KERNELS
#include "mma_gemm.cu"

// One tile layout: the offset (halves) of the row each lane gives ldmatrix, for every fragment of the tile
// (a_fragment_row / b_fragment_row, then tile_offset), then where each 16-byte chunk of the tile is stored,
// in the order the block's threads copy them (chunk i by thread i % THREADS).
template <bool IS_A, bool TRANS, int ROWS, int COLS, bool SWIZZLED>
__device__ void tile_offsets(int* out)
{
    int n = 0;
    for (int p = 0; p < (TRANS ? COLS : ROWS); p += MMA_M)         // op(A)'s m, or op(B)'s k
        for (int q = 0; q < (TRANS ? ROWS : COLS); q += MMA_K)     // op(A)'s k, or op(B)'s n (two fragments)
            for (int lane = 0; lane < 32; ++lane) {
                int2 at = IS_A ? a_fragment_row<TRANS>(p, q, lane) : b_fragment_row<TRANS>(p, q, lane);
                out[n++] = tile_offset<COLS, SWIZZLED>(at.x, at.y);
            }
    for (int chunk = 0; chunk < ROWS * COLS / 8; ++chunk)
        out[n++] = tile_offset<COLS, SWIZZLED>(chunk / (COLS / 8), 8 * (chunk % (COLS / 8)));
}

extern "C" __global__ void mma_tile_offsets(int* out, int layout)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    switch (layout) {
        case 0: tile_offsets<true, false, MMA_BM, MMA_BK, true>(out); break;       // As[m][k], v8-v10
        case 1: tile_offsets<true, true, MMA10_BK, MMA10_BM, true>(out); break;    // As[k][m], v10
        case 2: tile_offsets<false, false, MMA_BK, MMA_BN, true>(out); break;      // Bs[k][n], v8-v9
        case 3: tile_offsets<false, false, MMA10_BK, MMA10_BN, true>(out); break;  // Bs[k][n], v10
        case 4: tile_offsets<false, true, MMA10_BN, MMA10_BK, true>(out); break;   // Bs[n][k], v10
        case 5: tile_offsets<true, false, MMA_BM, MMA_BK, false>(out); break;      // As[m][k], v7
        case 6: tile_offsets<false, false, MMA_BK, MMA_BN, false>(out); break;     // Bs[k][n], v7
    }
}
'''


def _define(macro):
    from gpuedu import kernels
    return kernels.define("mma_gemm", macro)


# layout -> (name, rows and columns of the stored tile, fragments' rows are 16-byte reads: ldmatrix's worst
# n-way bank conflict as mma_gemm.cu's header states it)
TILE_LAYOUTS = {
    0: ("As[m][k], swizzled", ("MMA_BM", "MMA_BK"), 1), 1: ("As[k][m], swizzled", ("MMA10_BK", "MMA10_BM"), 1),
    2: ("Bs[k][n] 128 wide, swizzled", ("MMA_BK", "MMA_BN"), 1),
    3: ("Bs[k][n] 256 wide, swizzled", ("MMA10_BK", "MMA10_BN"), 1),
    4: ("Bs[n][k], swizzled", ("MMA10_BN", "MMA10_BK"), 1),
    5: ("As[m][k], plain (version 7)", ("MMA_BM", "MMA_BK"), 4),
    6: ("Bs[k][n], plain (version 7)", ("MMA_BK", "MMA_BN"), 8),
}


def _worst_way(rows):
    """The most 16-byte rows of one access that fall in the same 4 banks (a 128-byte line holds 8 such places)."""
    return max(np.unique((2 * np.asarray(r) // 16) % 8, return_counts=True)[1].max() for r in rows)


@pytest.fixture(scope="module")
def tile_offsets():
    from pycuda.compiler import SourceModule
    from gpuedu import kernels
    f = SourceModule(OFFSETS_SRC, no_extern_c=True, include_dirs=[kernels.DIR]).get_function("mma_tile_offsets")
    found = {}
    for layout, (_, (rows, cols), _) in TILE_LAYOUTS.items():
        rows, cols = _define(rows), _define(cols)
        fragments = (rows // 16) * (cols // 16) * 32
        out = ga.to_gpu(np.full(fragments + rows * cols // 8, -1, np.int32))
        f(out.gpudata, np.int32(layout), block=(1, 1, 1), grid=(1, 1))
        host = out.get()
        found[layout] = (rows, cols, host[:fragments].reshape(-1, 32), host[fragments:])
    return found


@pytest.mark.parametrize("layout", sorted(TILE_LAYOUTS))
def test_ldmatrix_reads_and_tile_copies_are_free_of_bank_conflicts_once_swizzled(tile_offsets, layout):
    name, _, ldmatrix_way = TILE_LAYOUTS[layout]
    rows, cols, fragments, chunks = tile_offsets[layout]
    # every chunk of the tile has a place of its own, in its own row, 16-byte aligned
    assert sorted(chunks) == list(range(0, rows * cols, 8)), name
    assert np.array_equal(chunks // cols, np.arange(len(chunks)) // (cols // 8)), name
    assert np.all(fragments % 8 == 0) and np.all(np.isin(fragments, chunks)), name
    # ldmatrix.x4: 4 matrices, each 8 rows (lanes 8j .. 8j+7) read together
    assert _worst_way(fragments.reshape(-1, 8)) == ldmatrix_way, name
    # the copies that fill the tile: 16 bytes a thread, 8 consecutive threads' chunks written together
    assert _worst_way(chunks.reshape(-1, 8)) == 1, name


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.nvcc
def test_the_offsets_kernel_is_cuda(tmp_path):
    from gpuedu import kernels
    path = tmp_path / "offsets.cu"
    path.write_text(OFFSETS_SRC)
    for arch in ("sm_80", "sm_90"):
        proc = subprocess.run(["nvcc", "-cubin", f"-arch={arch}", "-I", kernels.DIR, "-o", str(tmp_path / "o.cubin"),
                               str(path)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
