"""The WMMA tensor-core GEMMs against float64 sums of their float16 inputs, at sizes that are and are
not multiples of the 16x16x16 tile (the kernels pad the edges with zeros and guard their writes).

Version 1 (``wmma_matmul``) is the plain kernel; versions 2 and 3 (``matmul(version=4)``,
``version=5``) are the pipelined ones: every transpose, alpha, FP16 and FP32 outputs, rows that take
the 16-byte cp.async path and rows that do not (K = 37, a base pointer 2 bytes off), empty and 1x1x1
products."""

TENSOR_VERSIONS = [4, 5]
import re

import numpy as np
import pytest

import gpuedu
from gpuedu import kernels
from gpuedu.ops import fp16

backend = gpuedu.setup(verbose=False)
ga = backend.gpuarray


def operands(m, n, k, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16))


@pytest.mark.parametrize("m, n, k", [(16, 16, 16), (32, 32, 32), (1, 1, 1), (33, 17, 50), (48, 80, 7),
                                     (100, 70, 129)])
def test_wmma_gemm_matches_exact_sums(m, n, k):
    a, b = operands(m, n, k, seed=m * n + k)
    got = fp16.wmma_matmul(a, b).get()
    assert got.dtype == np.float32 and got.shape == (m, n)
    exact = fp16.matmul_reference(a, b, out_dtype=np.float64)
    # Products of halves are exact in FP32; the sums are FP32 (tensor cores may align the
    # addends with truncation, hence the factor 4 over round-to-nearest's bound).
    bound = 4 * fp16.matmul_tolerance(a, b, out_dtype=np.float32)
    assert np.all(np.abs(got - exact) <= bound)


def test_wmma_gemm_agrees_with_the_tiled_fp32_output_gemm():
    a, b = operands(40, 56, 72, seed=9)
    wmma = fp16.wmma_matmul(a, b).get()
    tiled = fp16.matmul(a, b, out_dtype=np.float32).get()
    assert np.max(np.abs(wmma - tiled)) <= 1e-4 * np.max(np.abs(tiled))


def test_wmma_gemm_writes_nothing_outside_c():
    # C is allocated inside a larger buffer filled with a sentinel: the padded edge tiles
    # computed by the kernel must not leak past row m / column n.
    m, n, k = 19, 23, 21
    a, b = operands(m, n, k, seed=1)
    whole = ga.to_gpu(np.full(m * n + 64, 7.0, np.float32))
    c = whole[:m * n].reshape(m, n)
    fp16.wmma_matmul(a, b, out=c)
    host = whole.get()
    assert np.all(host[m * n:] == 7.0)
    assert np.allclose(host[:m * n].reshape(m, n), fp16.matmul_reference(a, b, out_dtype=np.float64), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("a, b, error, message", [
    (np.zeros((4, 5), np.float16), np.zeros((6, 2), np.float16), ValueError, "inner dimensions"),
    (np.zeros((4, 5), np.float32), np.zeros((5, 2), np.float16), TypeError, "float16"),
    (np.zeros(5, np.float16), np.zeros((5, 2), np.float16), ValueError, "2-D"),
])
def test_bad_operands_are_refused(a, b, error, message):
    with pytest.raises(error, match=message):
        fp16.wmma_matmul(a, b)


# ---- versions 2 and 3: matmul(version=4 / 5) -----------------------------------------------------
def stored(m, n, k, transpose_a, transpose_b, seed):
    """Operands as stored (a^T is stored K x M, b^T N x K) and the logical op(a), op(b)."""
    a, b = operands(m, n, k, seed)
    a_st = np.ascontiguousarray(a.T) if transpose_a else a
    b_st = np.ascontiguousarray(b.T) if transpose_b else b
    return a_st, b_st, a, b


def assert_close_to_exact(got, a, b, alpha, out_dtype):
    exact = fp16.matmul_reference(a, b, alpha=alpha, out_dtype=np.float64)
    # as for version 1: FP32 sums (tensor cores may truncate when aligning addends: 4x the bound)
    bound = 4 * fp16.matmul_tolerance(a, b, alpha=alpha, out_dtype=out_dtype)
    assert got.dtype == np.dtype(out_dtype) and got.shape == exact.shape
    assert np.all(np.abs(got.astype(np.float64) - exact) <= bound)


@pytest.mark.parametrize("version", TENSOR_VERSIONS)
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("m, n, k", [(128, 264, 64), (40, 24, 48), (130, 129, 100), (33, 17, 37)])
def test_tensor_gemm_every_layout(m, n, k, transpose_a, transpose_b, version):
    # 128/264/40/24/48: rows of 8 halves, the 16-byte path; 130/129/100/37 mix it with the element path.
    a_st, b_st, a, b = stored(m, n, k, transpose_a, transpose_b, seed=m + n + k)
    got = fp16.matmul(a_st, b_st, transpose_a=transpose_a, transpose_b=transpose_b, out_dtype=np.float32,
                     version=version).get()
    assert_close_to_exact(got, a, b, 1.0, np.float32)


@pytest.mark.parametrize("version", TENSOR_VERSIONS)
@pytest.mark.parametrize("out_dtype", [np.float16, np.float32])
@pytest.mark.parametrize("alpha", [1.0, -0.375])
def test_tensor_gemm_alpha_and_output_dtypes(out_dtype, alpha, version):
    a_st, b_st, a, b = stored(72, 136, 56, True, False, seed=5)
    got = fp16.matmul(a_st, b_st, transpose_a=True, alpha=alpha, out_dtype=out_dtype, version=version).get()
    assert_close_to_exact(got, a, b, alpha, out_dtype)


@pytest.mark.parametrize("version", TENSOR_VERSIONS)
@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (1, 300, 3), (150, 1, 40), (16, 16, 0)])
def test_tensor_gemm_tiny_and_empty_k(m, n, k, version):
    a, b = operands(m, n, k, seed=11)
    got = fp16.matmul(a, b, out_dtype=np.float32, version=version).get()
    assert_close_to_exact(got, a, b, 1.0, np.float32)   # K = 0: a sum of nothing, zeros


@pytest.mark.parametrize("version", TENSOR_VERSIONS)
@pytest.mark.parametrize("m, n", [(0, 5), (5, 0), (0, 0)])
def test_tensor_gemm_with_an_empty_output(m, n, version):
    a, b = operands(m, n, 8, seed=2)
    got = fp16.matmul(a, b, version=version).get()
    assert got.shape == (m, n)


@pytest.mark.parametrize("version", TENSOR_VERSIONS)
def test_tensor_gemm_agrees_with_the_tiled_gemm(version):
    # Both sum in FP32; they differ only in the order of the additions.
    a_st, b_st, _, _ = stored(96, 80, 200, False, True, seed=3)
    tensor = fp16.matmul(a_st, b_st, transpose_b=True, out_dtype=np.float32, version=version).get()
    tiled = fp16.matmul(a_st, b_st, transpose_b=True, out_dtype=np.float32, version=3).get()
    magnitude = np.abs(a_st.astype(np.float64)) @ np.abs(b_st.T.astype(np.float64))
    assert np.all(np.abs(tensor - tiled) <= 2 * 200 * 2.0 ** -24 * magnitude + 1e-30)


@pytest.mark.parametrize("version", TENSOR_VERSIONS)
def test_tensor_gemm_reads_unaligned_operands_element_by_element(version):
    # a starts 2 bytes into its buffer: not 16-byte aligned, so the kernel must not use cp.async
    # on it (the emulator, like a GPU, fails a misaligned cp.async) and still get every element.
    m, n, k = 24, 32, 40
    a, b = operands(m, n, k, seed=8)
    whole = ga.to_gpu(np.concatenate([np.zeros(1, np.float16), a.ravel()]))
    a_view = whole[1:].reshape(m, k)
    got = fp16.matmul(a_view, b, out_dtype=np.float32, version=version).get()
    assert_close_to_exact(got, a, b, 1.0, np.float32)


@pytest.mark.parametrize("version", TENSOR_VERSIONS)
@pytest.mark.parametrize("out_dtype", [np.float16, np.float32])
def test_tensor_gemm_writes_nothing_outside_c(out_dtype, version):
    m, n, k = 131, 9, 21
    a, b = operands(m, n, k, seed=4)
    whole = ga.to_gpu(np.full(m * n + 64, 7.0, out_dtype))
    c = whole[:m * n].reshape(m, n)
    fp16.matmul(a, b, out=c, out_dtype=out_dtype, version=version)
    host = whole.get()
    assert np.all(host[m * n:] == 7.0)
    assert_close_to_exact(host[:m * n].reshape(m, n), a, b, 1.0, out_dtype)


def test_wmma_matmul_versions_2_and_3_are_the_tensor_gemms():
    a, b = operands(70, 90, 50, seed=6)
    for version, matmul_version in ((2, 4), (3, 5)):
        got = fp16.wmma_matmul(a, b, version=version).get()
        np.testing.assert_array_equal(got, fp16.matmul(a, b, out_dtype=np.float32, version=matmul_version).get())
        assert_close_to_exact(got, a, b, 1.0, np.float32)
    with pytest.raises(ValueError, match="version must be 1"):
        fp16.wmma_matmul(a, b, version=4)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"a": np.zeros((4, 5), np.float16), "b": np.zeros((4, 2), np.float16)}, ValueError, "inner dimensions"),
    ({"a": np.zeros((5, 4), np.float16), "b": np.zeros((5, 2), np.float16), "transpose_a": True}, None, None),
    ({"a": np.zeros((4, 5), np.float16), "b": np.zeros((2, 6), np.float16), "transpose_b": True}, ValueError,
     "inner dimensions"),
    ({"a": np.zeros((4, 5), np.float32), "b": np.zeros((5, 2), np.float16)}, TypeError, "float16"),
    ({"a": np.zeros((4, 5), np.float16), "b": np.zeros((5, 2), np.float16), "out_dtype": np.float64}, ValueError,
     "out_dtype"),
    ({"a": np.zeros(5, np.float16), "b": np.zeros((5, 2), np.float16)}, ValueError, "2-D"),
])
def test_tensor_gemm_checks_its_input(kwargs, error, message):
    if error is None:
        assert fp16.matmul(version=4, **kwargs).get().shape == (4, 2)
        return
    with pytest.raises(error, match=message):
        fp16.matmul(version=4, **kwargs)


def test_tensor_gemm_refuses_a_non_contiguous_operand():
    b = ga.to_gpu(np.zeros((5, 4), np.float16))[:, ::2]
    with pytest.raises(ValueError, match="not C-contiguous"):
        fp16.matmul(np.zeros((3, 5), np.float16), b, version=4)


def test_tensor_gemm_refuses_a_wrong_output_buffer():
    out = ga.to_gpu(np.zeros((4, 2), np.float16))
    with pytest.raises(ValueError, match="float32 GPUArray of shape"):
        fp16.matmul(np.zeros((4, 5), np.float16), np.zeros((5, 2), np.float16), out=out, out_dtype=np.float32,
                   version=4)


@pytest.mark.skipif(not backend.is_emulator, reason="choosing the order of a block's threads is the emulator's")
@pytest.mark.parametrize("version", TENSOR_VERSIONS)
@pytest.mark.parametrize("schedule", ["reverse", "random"])
def test_tensor_gemm_barriers_hold_in_any_thread_order(schedule, version):
    # A missing __syncthreads (a stage overwritten while a warp still reads it) shows up when
    # the threads run in another order; K = 160 runs the 3-stage ring round more than once.
    a, b = operands(64, 48, 160, seed=12)
    try:
        backend.compiler.set_schedule(schedule, seed=7)
        got = fp16.matmul(a, b, out_dtype=np.float32, version=version).get()
    finally:
        backend.compiler.set_schedule("forward")
    assert_close_to_exact(got, a, b, 1.0, np.float32)


@pytest.mark.parametrize("version", [2, 3])
def test_the_pipelined_versions_need_their_shared_memory_limit_raised(version):
    # 61,440 or 92,160 bytes of dynamic shared memory exceed the default 48 KB per block: like a GPU,
    # the emulator refuses the launch until the kernel opts in (the launcher does, once per kernel).
    # A module of its own (an extra define), so that no limit raised by ops.fp16 applies to it.
    module = kernels.load("wmma_gemm", options=["-DWMMA_GEMM_SEPARATE_MODULE=1"])
    f = module.get_function(f"wmma_gemm_kernel{version}_nn")
    shared = fp16.WMMA_PIPELINED[version][1]
    m = n = k = 16
    a, b = operands(m, n, k, seed=13)
    a_gpu, b_gpu, c = ga.to_gpu(a), ga.to_gpu(b), ga.empty((m, n), np.float32)
    args = (c.gpudata, a_gpu.gpudata, b_gpu.gpudata, np.int32(m), np.int32(n), np.int32(k), np.int32(k),
            np.int32(n), np.float32(1.0), np.int32(0))
    with pytest.raises(backend.driver.Error, match="48 KiB|invalid argument"):
        f(*args, block=fp16.WMMA_PIPELINED_THREADS, grid=(1, 1), shared=shared)
    f.set_attribute(backend.driver.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
    f(*args, block=fp16.WMMA_PIPELINED_THREADS, grid=(1, 1), shared=shared)
    assert_close_to_exact(c.get(), a, b, 1.0, np.float32)


def test_the_launcher_sizes_agree_with_the_kernel_source():
    # ops.fp16 reads wmma_gemm.cu's V2_* / V3_* constants (tiles, K slice, stages, warps, shared memory).
    defines = dict(re.findall(r"^#define (V[23]_\w+) (\d+)\b", kernels.source("wmma_gemm"), re.MULTILINE))
    v = {name: int(value) for name, value in defines.items()}
    assert 32 * v["V2_WARPS_M"] * v["V2_WARPS_N"] == fp16.WMMA_PIPELINED_THREADS[0]

    for version in (2, 3):
        bm, bn, bk = v[f"V{version}_BM"], v[f"V{version}_BN"], v[f"V{version}_BK"]

        def tile_halves(wide):   # V2_TILE_HALVES: rows BK wide, or BK rows `wide` long, padded
            return max(wide * (bk + v["V2_PAD"]), bk * (wide + v["V2_PAD"]))
        threads = 32 * v[f"V{version}_WARPS_M"] * v[f"V{version}_WARPS_N"]
        assert fp16.WMMA_PIPELINED[version] == (
            (bm, bn), v[f"V{version}_STAGES"] * (tile_halves(bm) + tile_halves(bn)) * 2, threads)
