"""ReductionKernel: a two-stage shared-memory reduction in generated CUDA C, against NumPy."""
import numpy as np
import pytest

import gpuedu.emulator.driver as drv
import gpuedu.emulator.gpuarray as gpuarray
from gpuedu.emulator.reduction import ReductionKernel, get_dot_kernel, get_sum_kernel


pytestmark = pytest.mark.usefixtures("context")


@pytest.fixture(scope="module")
def dot():
    return ReductionKernel(np.float32, neutral="0", reduce_expr="a+b", map_expr="x[i]*y[i]",
                           arguments="float *x, float *y", name="dot")


def test_source_has_a_shared_memory_tree(dot):
    assert "__shared__ out_type sdata[BLOCK_SIZE];" in dot.stage1_source
    assert dot.stage1_source.count("__syncthreads()") == 2
    assert "#define READ_AND_MAP(i) (x[i]*y[i])" in dot.stage1_source


# n spans one partial block, exactly one block, several blocks, and more than
# MAX_BLOCKS * BLOCK_SIZE elements (threads fold several elements before the tree).
@pytest.mark.parametrize("n", [1, 100, 512, 513, 40_000, 100_003])
def test_dot_matches_numpy(dot, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    result = dot(gpuarray.to_gpu(x), gpuarray.to_gpu(y))
    assert isinstance(result, gpuarray.GPUArray) and result.shape == () and result.dtype == np.float32
    expected = x.astype(np.float64) @ y.astype(np.float64)
    assert float(result.get()) == pytest.approx(expected, rel=1e-4, abs=1e-3)


def test_max_with_a_neutral_and_a_scalar_argument():
    krnl = ReductionKernel(np.int32, neutral="-2147483647 - 1", reduce_expr="max(a, b)",
                           map_expr="x[i] * scale", arguments="int *x, int scale", name="scaled_max")
    x = np.random.default_rng(3).integers(-1000, 1000, 9999).astype(np.int32)
    assert int(krnl(gpuarray.to_gpu(x), 3).get()) == 3 * x.max()


def test_sum_and_dot_helpers():
    x = np.arange(1, 2001, dtype=np.float64)
    gx = gpuarray.to_gpu(x)
    assert float(get_sum_kernel(None, np.float64)(gx).get()) == x.sum()
    assert float(get_dot_kernel(np.float64)(gx, gx).get()) == pytest.approx(x @ x)


def test_empty_input_gives_the_neutral(dot):
    e = gpuarray.empty(0, np.float32)
    assert float(dot(e, e).get()) == 0.0


def test_bad_calls(dot):
    x = gpuarray.to_gpu(np.ones(10, np.float32))
    with pytest.raises(ValueError, match="differ in size"):
        dot(x, gpuarray.to_gpu(np.ones(11, np.float32)))
    with pytest.raises(TypeError, match="float64"):
        dot(x, gpuarray.to_gpu(np.ones(10)))
    with pytest.raises(TypeError, match="takes 2 arguments"):
        dot(x)
    with pytest.raises(TypeError, match="pass a GPUArray"):
        dot(x, np.ones(10, np.float32))
    with pytest.raises(ValueError, match="map_expr is required"):
        ReductionKernel(np.float32, "0", "a+b", arguments="float *x, float *y")


def test_out_may_be_a_view_into_a_larger_array():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((10, 200)).astype(np.float32)
    a_gpu = gpuarray.to_gpu(a)
    row_max = ReductionKernel(np.float32, neutral="-1e38f", reduce_expr="max(a, b)", arguments="float *in")
    out = gpuarray.zeros(10, np.float32)
    for i in range(10):
        assert row_max(a_gpu[i], out=out[i]).get() == a[i].max()
    np.testing.assert_array_equal(out.get(), a.max(axis=1))


def test_a_view_is_an_elementwise_argument_too():
    from gpuedu.emulator.elementwise import ElementwiseKernel
    a = gpuarray.to_gpu(np.arange(24, dtype=np.float32).reshape(4, 6))
    ElementwiseKernel("float *row", "row[i] = -row[i]")(a[2])
    expected = np.arange(24, dtype=np.float32).reshape(4, 6)
    expected[2] *= -1
    np.testing.assert_array_equal(a.get(), expected)


@pytest.mark.slow
def test_more_than_two_to_the_32_elements_use_64_bit_indices():
    # map_expr reads nothing, so the 4 GiB input is never touched; only i's range matters
    n = 2**32 + 11
    count = ReductionKernel(np.uint8, neutral="0", reduce_expr="(a + b) & 255", map_expr="1",
                            arguments="unsigned char *x")
    x = gpuarray.empty(n, np.uint8)
    assert count(x).get() == n % 256
