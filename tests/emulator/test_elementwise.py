"""ElementwiseKernel: generated CUDA C run through the emulator's compiler, checked against NumPy."""
import numpy as np
import pytest

import gpuedu.emulator.driver as drv
import gpuedu.emulator.gpuarray as gpuarray
from gpuedu.emulator.elementwise import (ElementwiseKernel, ScalarArg, VectorArg, get_copy_kernel,
                                         parse_arguments, parse_c_arg)


pytestmark = pytest.mark.usefixtures("context")


@pytest.fixture(scope="module")
def axpbyz():
    return ElementwiseKernel("float a, float *x, float b, float *y, float *z",
                             "z[i] = a*x[i] + b*y[i]", "axpbyz")


def test_parse_c_arguments():
    x = parse_c_arg("const float *__restrict__ x")
    assert isinstance(x, VectorArg) and x.dtype == np.float32 and x.name == "x"
    n = parse_c_arg(" unsigned int n ")
    assert isinstance(n, ScalarArg) and n.dtype == np.uint32 and n.name == "n"
    assert parse_c_arg("double y[]").dtype == np.float64
    assert [a.name for a in parse_arguments("float a, int *idx, double *out")] == ["a", "idx", "out"]
    with pytest.raises(ValueError, match="unknown C type 'flaot'"):
        parse_c_arg("flaot *x")
    with pytest.raises(ValueError, match="cannot parse"):
        parse_c_arg("x")
    with pytest.raises(ValueError, match="empty"):
        parse_arguments("  ")


def test_generated_source_is_a_grid_stride_loop(axpbyz):
    assert "__global__ void axpbyz(float a, float *x, float b, float *y, float *z, unsigned long n)" in axpbyz.source
    assert "i += total_threads" in axpbyz.source
    assert "z[i] = a*x[i] + b*y[i];" in axpbyz.source


@pytest.mark.parametrize("n", [1, 33, 1000, 70_001])
def test_axpbyz_matches_numpy(axpbyz, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    gx, gy = gpuarray.to_gpu(x), gpuarray.to_gpu(y)
    gz = gpuarray.empty_like(gx)
    axpbyz(np.float32(2), gx, 3.0, gy, gz)    # a Python float is converted to the declared float
    np.testing.assert_allclose(gz.get(), 2 * x + 3 * y, rtol=1e-6, atol=1e-6)


def test_range_and_slice_touch_only_those_indices(axpbyz):
    x = gpuarray.to_gpu(np.arange(100, dtype=np.float32))
    y = gpuarray.zeros(100, np.float32)
    z = gpuarray.zeros(100, np.float32)
    axpbyz(np.float32(1), x, np.float32(0), y, z, range=slice(10, 50, 3))
    expected = np.zeros(100, np.float32)
    expected[10:50:3] = np.arange(100)[10:50:3]
    np.testing.assert_array_equal(z.get(), expected)
    z.fill(0)
    axpbyz(np.float32(1), x, np.float32(0), y, z, slice=slice(-5, None))
    assert z.get()[-6:].tolist() == [0, 95, 96, 97, 98, 99]
    z.fill(0)
    axpbyz(np.float32(1), x, np.float32(0), y, z, range=slice(99, 89, -2))
    assert np.flatnonzero(z.get()).tolist() == [91, 93, 95, 97, 99]


def test_preamble_loop_prep_and_other_dtypes():
    kernel = ElementwiseKernel(
        "double *x, int *out, int shift",
        "out[i] = clamp_int(x[i]) + shift",
        "clamp",
        preamble="__device__ int clamp_int(double v) { return v < 0 ? 0 : (v > 9 ? 9 : (int)v); }")
    x = gpuarray.to_gpu(np.array([-3.5, 0.2, 4.9, 12.0]))
    out = gpuarray.empty(4, np.int32)
    kernel(x, out, np.int32(100))
    assert out.get().tolist() == [100, 100, 104, 109]


def test_bad_calls_raise_clear_errors(axpbyz):
    x = gpuarray.to_gpu(np.ones(10, np.float32))
    z = gpuarray.empty(10, np.float32)
    with pytest.raises(TypeError, match=r"takes 5 arguments \(float a, float \*x"):
        axpbyz(np.float32(1), x, np.float32(1), x)
    with pytest.raises(ValueError, match="differ in size: x has 10 elements, y has 11"):
        axpbyz(np.float32(1), x, np.float32(1), gpuarray.empty(11, np.float32), z)
    with pytest.raises(TypeError, match=r"declared float\* \(float32\) but got an array of float64"):
        axpbyz(np.float32(1), x, np.float32(1), gpuarray.zeros(10, np.float64), z)
    with pytest.raises(TypeError, match="not a host numpy array"):
        axpbyz(np.float32(1), np.ones(10, np.float32), np.float32(1), x, z)
    with pytest.raises(TypeError, match="is a scalar"):
        axpbyz(x, x, np.float32(1), x, z)
    with pytest.raises(RuntimeError, match="non-contiguous"):
        big = gpuarray.zeros(20, np.float32)
        axpbyz(np.float32(1), big[::2], np.float32(1), x, z)
    with pytest.raises(ValueError, match="clash"):
        ElementwiseKernel("float *i, float *z", "z[i] = i[i]")
    with pytest.raises(TypeError, match="range="):
        axpbyz(np.float32(1), x, np.float32(1), x, z, ranges=(0, 1, 1))


def test_raw_pointer_skips_the_size_check():
    gather = ElementwiseKernel("int *idx, float *table, float *out", "out[i] = table[idx[i]]", "gather")
    table = gpuarray.to_gpu(np.array([10, 20, 30], np.float32))
    idx = gpuarray.to_gpu(np.array([2, 0, 1, 2, 2], np.int32))
    out = gpuarray.empty(5, np.float32)
    gather(idx, table.gpudata, out)
    assert out.get().tolist() == [30, 10, 20, 30, 30]


def test_ready_made_copy_kernel_converts():
    src = gpuarray.to_gpu(np.array([1.7, -2.2], np.float64))
    dest = gpuarray.empty(2, np.int32)
    get_copy_kernel(np.int32, np.float64)(dest, src)
    assert dest.get().tolist() == [1, -2]
    assert get_copy_kernel(np.int32, np.float64) is get_copy_kernel(np.int32, np.float64)


@pytest.mark.nvcc
def test_generated_sources_are_real_cuda(tmp_path, axpbyz):
    """What ElementwiseKernel and ReductionKernel generate must compile with nvcc too (with PyCUDA's
    header folder on the include path, as PyCUDA's SourceModule puts it there)."""
    import shutil
    import subprocess

    from gpuedu.emulator.reduction import ReductionKernel
    from gpuedu.profiler.resources import pycuda_include_dir

    dot = ReductionKernel(np.float32, "0", "a+b", "x[i]*y[i]", "float *x, float *y", name="dot")
    # stage 2 is stage 1's template with other arguments, so one of them is enough
    sources = [axpbyz.source + axpbyz.range_source, dot.stage1_source]
    for k, source in enumerate(sources):
        path = tmp_path / f"k{k}.cu"
        path.write_text('extern "C" {\n' + source + "\n}\n")   # as SourceModule wraps it
        proc = subprocess.run([shutil.which("nvcc"), "-cubin", "-arch=sm_90", "-I", pycuda_include_dir(),
                               "-o", str(tmp_path / f"k{k}.cubin"), str(path)], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, f"{source}\n{proc.stderr}"


def test_raw_pointers_only_need_a_range():
    iota = ElementwiseKernel("int *out, int base", "out[i] = base + i", "iota")
    out = gpuarray.zeros(10, np.int32)
    with pytest.raises(ValueError, match="pass range="):
        iota(out.gpudata, np.int32(100))
    iota(out.gpudata, np.int32(100), range=slice(2, 8, 2))
    assert out.get().tolist() == [0, 0, 102, 0, 104, 0, 106, 0, 0, 0]
    iota(out.gpudata, np.int32(0), range=(0, 0, 1))    # an empty range launches nothing


def test_get_elwise_kernel_takes_n_last():
    from gpuedu.emulator.elementwise import get_elwise_kernel
    double = get_elwise_kernel("float *x", "x[i] *= 2", "double_it")
    x = gpuarray.to_gpu(np.arange(5, dtype=np.float32))
    double(x, np.uint64(3), block=(32, 1, 1), grid=(1, 1))   # only the first 3 elements
    assert x.get().tolist() == [0, 2, 4, 3, 4]


def test_reading_past_a_raw_pointer_is_a_launch_error_and_the_process_lives_on():
    gather = ElementwiseKernel("int *idx, float *table, float *out", "out[i] = table[idx[i]]", "gather")
    table = gpuarray.to_gpu(np.array([10, 20, 30, 40], np.float32))
    idx = gpuarray.to_gpu(np.array([0, 1, 2, 3 + 1024], np.int32))   # the last one is far past the end
    out = gpuarray.empty(4, np.float32)
    with pytest.raises(drv.LaunchError):
        gather(idx, table.gpudata, out)
    idx.set(np.array([3, 2, 1, 0], np.int32))
    gather(idx, table.gpudata, out)
    assert out.get().tolist() == [40, 30, 20, 10]


def test_a_launch_over_two_to_the_32_elements_keeps_the_grid_stride_from_wrapping():
    # `total_threads` is 32-bit in the generated loop (as in PyCUDA's): 2**32 threads would make it 0
    # and every thread would stay on its first element forever.
    from gpuedu.emulator.elementwise import _launch_shape
    for count in (1, 255, 257, 1 << 31, 1 << 32, (1 << 40) + 3):
        (blocks, _), (threads, _, _) = _launch_shape(count)
        assert blocks * threads <= 1 << 31
        assert blocks * threads >= min(count, 1 << 31)   # one element a thread, up to the cap
        assert blocks >= 1
