"""pycuda.scan: inclusive and exclusive scans with a C operator, against NumPy."""
import numpy as np
import pytest

import gpuedu.emulator.gpuarray as gpuarray
from gpuedu.emulator.scan import ExclusiveScanKernel, InclusiveScanKernel

pytestmark = pytest.mark.usefixtures("context")


@pytest.mark.parametrize("n", [1, 10, 1023, 1024, 1025, 70_001, 2**20 + 5])
def test_sums_match_cumsum_in_place(n):
    rng = np.random.default_rng(n)
    host = rng.integers(-50, 50, n).astype(np.int32)
    inclusive, exclusive = gpuarray.to_gpu(host), gpuarray.to_gpu(host)
    assert InclusiveScanKernel(np.int32, "a+b")(inclusive) is inclusive
    ExclusiveScanKernel(np.int32, "a+b", "0")(exclusive)
    np.testing.assert_array_equal(inclusive.get(), np.cumsum(host))
    np.testing.assert_array_equal(exclusive.get(), np.cumsum(host) - host)


def test_any_associative_operator_and_a_separate_output():
    rng = np.random.default_rng(0)
    host = rng.standard_normal(50_000)
    src = gpuarray.to_gpu(host)
    running_max = InclusiveScanKernel(np.float64, "fmax(a, b)")
    out = running_max(src, "new")
    assert out is not src
    np.testing.assert_array_equal(out.get(), np.maximum.accumulate(host))
    np.testing.assert_array_equal(src.get(), host)          # the input is left as it was
    given = gpuarray.empty_like(src)
    assert ExclusiveScanKernel(np.float64, "a*b", "1.0")(gpuarray.to_gpu(host[:40]), given[:40]) is not None
    expected = np.concatenate([[1.0], np.cumprod(host[:39])])
    np.testing.assert_allclose(given[:40].get(), expected, rtol=1e-12)


def test_bad_calls_say_what_is_wrong():
    with pytest.raises(ValueError, match="neutral element is required"):
        ExclusiveScanKernel(np.int32, "a+b")
    knl = InclusiveScanKernel(np.int32, "a+b")
    with pytest.raises(ValueError, match="same shape"):
        knl(gpuarray.zeros(5, np.int32), gpuarray.zeros(6, np.int32))
    with pytest.raises(TypeError, match="int32"):
        knl(gpuarray.zeros(5, np.float32))
    with pytest.raises(RuntimeError, match="non-contiguous"):
        knl(gpuarray.zeros(10, np.int32)[::2])
