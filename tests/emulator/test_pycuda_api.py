"""Parts of PyCUDA's API that code outside the lessons leans on: pointer holders, the CUDA Array Interface,
PyCUDA's test helpers, ``pycuda.characterize``."""
import numpy as np
import pytest

import gpuedu.emulator.characterize as characterize
import gpuedu.emulator.driver as drv
import gpuedu.emulator.gpuarray as gpuarray
import gpuedu.emulator.tools as tools
from gpuedu.emulator.compiler import SourceModule

pytestmark = pytest.mark.usefixtures("context")

SQUARE = """
__global__ void square(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * x[i];
}
"""


class Holder(drv.PointerHolderBase):
    def __init__(self, alloc):
        super().__init__()
        self.alloc = alloc

    def get_pointer(self):
        return int(self.alloc)


class CudaArray:
    """An array from another library: only ``__cuda_array_interface__`` says where its data is."""

    def __init__(self, alloc, n):
        self.alloc, self.n = alloc, n

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.n,), "typestr": "<f4", "data": (int(self.alloc), False), "version": 3,
                "strides": None, "stream": None}


def test_a_pointer_holder_is_a_kernel_argument_a_gpuarray_s_memory_and_a_copy_target():
    a = np.arange(100, dtype=np.float32)
    holder = Holder(drv.mem_alloc(a.nbytes))
    drv.memcpy_htod(holder, a)
    fn = SourceModule(SQUARE).get_function("square")
    fn(holder, np.int32(100), block=(64, 1, 1), grid=(2, 1))
    np.testing.assert_array_equal(gpuarray.GPUArray((100,), np.float32, gpudata=holder).get(), a * a)
    fn.prepare("Pi")
    fn.prepared_call((2, 1), (64, 1, 1), holder, 100)
    np.testing.assert_array_equal(gpuarray.GPUArray((100,), np.float32, gpudata=holder).get(), (a * a) * (a * a))


def test_a_pointer_holder_s_memory_reads_as_a_buffer():
    a = np.arange(16, dtype=np.int32)
    holder = Holder(drv.mem_alloc(a.nbytes))
    drv.memcpy_htod(holder, a)
    view = holder.as_buffer(8 * 4, offset=4 * 4)
    np.testing.assert_array_equal(np.frombuffer(view, np.int32), a[4:12])


def test_a_pointer_holder_without_get_pointer_says_so():
    class Bare(drv.PointerHolderBase):
        pass
    with pytest.raises(NotImplementedError, match="get_pointer"):
        int(Bare())


def test_an_object_with_the_cuda_array_interface_is_a_kernel_argument():
    a = np.linspace(-3, 3, 50, dtype=np.float32)
    alloc = drv.mem_alloc(a.nbytes)
    drv.memcpy_htod(alloc, a)
    SourceModule(SQUARE).get_function("square")(CudaArray(alloc, 50), np.int32(50), block=(64, 1, 1), grid=(1, 1))
    out = np.empty_like(a)
    drv.memcpy_dtoh(out, alloc)
    np.testing.assert_array_equal(out, a * a)


def test_mem_alloc_like_holds_the_array_s_bytes():
    a = np.arange(37, dtype=np.float64)
    alloc = drv.mem_alloc_like(a)
    assert alloc.size == a.nbytes
    drv.memcpy_htod(alloc, a)
    out = np.zeros_like(a)
    drv.memcpy_dtoh(out, alloc)
    np.testing.assert_array_equal(out, a)


def test_mark_cuda_test_runs_the_test_in_a_fresh_context_and_pops_it():
    outer = drv.Context.get_current()
    seen = []

    @tools.mark_cuda_test
    def body(x):
        seen.append((drv.Context.get_current(), x))
        return gpuarray.to_gpu(np.array([x], np.float32)).get()[0]

    assert body(2.5) == 2.5
    assert seen[0][0] is not None and seen[0][0] is not outer
    assert drv.Context.get_current() is outer
    assert any(mark.name == "cuda" for mark in body.pytestmark)


def test_init_cuda_context_fixture_holds_a_context_until_resumed():
    outer = drv.Context.get_current()
    gen = tools.init_cuda_context_fixture()
    next(gen)
    inner = drv.Context.get_current()
    assert inner is not outer
    with pytest.raises(StopIteration):
        next(gen)
    assert drv.Context.get_current() is outer


def test_characterize_measures_sizes_in_device_code():
    assert characterize.sizeof("float4") == 16
    assert characterize.sizeof("double2") == 16
    assert characterize.sizeof("short") == 2
    assert characterize.has_double_support() and characterize.has_stack()
    assert characterize.platform_bits() == 64
