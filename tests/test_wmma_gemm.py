"""The WMMA tensor-core GEMM against float64 sums of its float16 inputs, at sizes that are and are
not multiples of the 16x16x16 tile (the kernel pads the edges with zeros and guards its writes)."""
import numpy as np
import pytest

import gpuedu
from gpuedu.nn import fp16_ops as ops
from gpuedu.nn import fp16_reference as ref

backend = gpuedu.setup(verbose=False)
ga = backend.gpuarray


def operands(m, n, k, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16))


@pytest.mark.parametrize("m, n, k", [(16, 16, 16), (32, 32, 32), (1, 1, 1), (33, 17, 50), (48, 80, 7),
                                     (100, 70, 129)])
def test_wmma_gemm_matches_exact_sums(m, n, k):
    a, b = operands(m, n, k, seed=m * n + k)
    got = ops.wmma_matmul(a, b).get()
    assert got.dtype == np.float32 and got.shape == (m, n)
    exact = ref.matmul(a, b, out_dtype=np.float64)
    # Products of halves are exact in FP32; the sums are FP32 (tensor cores may align the
    # addends with truncation, hence the factor 4 over round-to-nearest's bound).
    bound = 4 * ref.matmul_tolerance(a, b, out_dtype=np.float32)
    assert np.all(np.abs(got - exact) <= bound)


def test_wmma_gemm_agrees_with_the_tiled_fp32_output_gemm():
    a, b = operands(40, 56, 72, seed=9)
    wmma = ops.wmma_matmul(a, b).get()
    tiled = ops.matmul(a, b, out_dtype=np.float32).get()
    assert np.max(np.abs(wmma - tiled)) <= 1e-4 * np.max(np.abs(tiled))


def test_wmma_gemm_writes_nothing_outside_c():
    # C is allocated inside a larger buffer filled with a sentinel: the padded edge tiles
    # computed by the kernel must not leak past row m / column n.
    m, n, k = 19, 23, 21
    a, b = operands(m, n, k, seed=1)
    whole = ga.to_gpu(np.full(m * n + 64, 7.0, np.float32))
    c = whole[:m * n].reshape(m, n)
    ops.wmma_matmul(a, b, out=c)
    host = whole.get()
    assert np.all(host[m * n:] == 7.0)
    assert np.allclose(host[:m * n].reshape(m, n), ref.matmul(a, b, out_dtype=np.float64), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("a, b, error, message", [
    (np.zeros((4, 5), np.float16), np.zeros((6, 2), np.float16), ValueError, "inner dimensions"),
    (np.zeros((4, 5), np.float32), np.zeros((5, 2), np.float16), TypeError, "float16"),
    (np.zeros(5, np.float16), np.zeros((5, 2), np.float16), ValueError, "2-D"),
])
def test_bad_operands_are_refused(a, b, error, message):
    with pytest.raises(error, match=message):
        ops.wmma_matmul(a, b)
