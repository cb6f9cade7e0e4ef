"""Launching kernels: indexing in 1D/2D/3D grids, arguments (In/Out/InOut, device memory,
NumPy scalars, structs), prepared calls, attributes and device limits."""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

from gpuedu.emulator import _device
from gpuedu.emulator._alloc import DeviceAllocation
from gpuedu.emulator._args import In, InOut, Out
from gpuedu.emulator._errors import LogicError
from gpuedu.emulator.compiler import SourceModule

INDEX_SRC = r"""
__global__ void add(float* c, const float* a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];          // guard: the last block may be partial
}
// Each thread writes its global (x, y, z) coordinates, flattened row-major.
__global__ void coords(int* out, int nx, int ny, int nz) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x < nx && y < ny && z < nz) {
    int i = (z * ny + y) * nx + x;
    out[3 * i] = x; out[3 * i + 1] = y; out[3 * i + 2] = z;
  }
}
__global__ void dims(unsigned* out) {
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0 && blockIdx.x == 0 && blockIdx.y == 0) {
    out[0] = blockDim.x; out[1] = blockDim.y; out[2] = blockDim.z;
    out[3] = gridDim.x; out[4] = gridDim.y; out[5] = gridDim.z; out[6] = warpSize;
  }
}
__global__ void axpy(double* y, const double* x, double a, char flag, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i] + flag;
}
struct Pair { float scale; int offset; };
__global__ void with_struct(int* out, Pair p) { out[threadIdx.x] = (int)(threadIdx.x * p.scale) + p.offset; }
__global__ void scale_inplace(float* x, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= s;
}
"""


@pytest.fixture(scope="module")
def mod():
    return SourceModule(INDEX_SRC)


def test_vector_add_with_in_out(mod):
    n = 1000
    rng = np.random.default_rng(0)
    a = rng.random(n, dtype=np.float32)
    b = rng.random(n, dtype=np.float32)
    c = np.zeros_like(a)
    mod.get_function("add")(Out(c), In(a), In(b), np.int32(n), block=(256, 1, 1), grid=(4, 1))
    np.testing.assert_array_equal(c, a + b)


def test_device_allocation_arguments(mod):
    n = 300
    x = np.arange(n, dtype=np.float32)
    d = DeviceAllocation(x.nbytes)
    ctypes.memmove(int(d), x.ctypes.data, x.nbytes)
    mod.get_function("scale_inplace")(d, np.float32(2.5), np.int32(n), block=(128, 1, 1), grid=(3, 1))
    out = np.empty_like(x)
    ctypes.memmove(out.ctypes.data, int(d), x.nbytes)
    np.testing.assert_array_equal(out, x * np.float32(2.5))


@pytest.mark.parametrize("shape,block", [((37, 1, 1), (8, 1, 1)), ((19, 13, 1), (8, 4, 1)), ((9, 7, 5), (4, 2, 2))])
def test_coordinates_in_1d_2d_3d_grids(mod, shape, block):
    nx, ny, nz = shape
    grid = tuple(-(-s // b) for s, b in zip(shape, block))
    out = np.full(nx * ny * nz * 3, -1, np.int32)
    mod.get_function("coords")(InOut(out), np.int32(nx), np.int32(ny), np.int32(nz), block=block, grid=grid)
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    expected = np.stack([x, y, z], axis=-1).reshape(-1)
    np.testing.assert_array_equal(out, expected)


def test_block_and_grid_dims_visible(mod):
    out = np.zeros(7, np.uint32)
    mod.get_function("dims")(Out(out), block=(4, 3, 2), grid=(5, 6, 7))
    assert out.tolist() == [4, 3, 2, 5, 6, 7, 32]


def test_mixed_scalar_types_are_aligned(mod):
    n = 100
    x = np.linspace(0, 1, n)
    y = np.ones(n)
    mod.get_function("axpy")(InOut(y), In(x), np.float64(3.0), np.int8(2), np.int64(n), block=(64, 1, 1), grid=(2, 1))
    np.testing.assert_allclose(y, 3.0 * x + 1.0 + 2)


def test_struct_argument(mod):
    pair = np.zeros((), dtype=np.dtype([("scale", np.float32), ("offset", np.int32)]))
    pair["scale"], pair["offset"] = 2.0, 7
    out = np.zeros(16, np.int32)
    mod.get_function("with_struct")(Out(out), pair[()], block=(16, 1, 1))
    np.testing.assert_array_equal(out, np.arange(16) * 2 + 7)


def test_prepared_call_and_timed_call(mod):
    n = 513
    x = np.arange(n, dtype=np.float32)
    d = DeviceAllocation(x.nbytes)
    ctypes.memmove(int(d), x.ctypes.data, x.nbytes)
    f = mod.get_function("scale_inplace").prepare("Pfi")
    f.prepared_call((3, 1), (256, 1, 1), d, np.float32(2), np.int32(n))
    seconds = f.prepared_timed_call((3, 1), (256, 1, 1), d, np.float32(2), np.int32(n))()
    assert seconds >= 0
    f.prepared_async_call((3, 1), (256, 1, 1), None, d, np.float32(0.5), np.int32(n))
    out = np.empty_like(x)
    ctypes.memmove(out.ctypes.data, int(d), x.nbytes)
    np.testing.assert_array_equal(out, x * 2)
    g = mod.get_function("scale_inplace").prepare([np.intp, np.float32, np.int32])
    g.prepared_call((3, 1), (256, 1, 1), d, 4.0, n)
    ctypes.memmove(out.ctypes.data, int(d), x.nbytes)
    np.testing.assert_array_equal(out, x * 8)


def test_time_kernel_returns_seconds(mod):
    x = np.ones(64, np.float32)
    t = mod.get_function("scale_inplace")(InOut(x), np.float32(3), np.int32(64), block=(64, 1, 1), time_kernel=True)
    assert isinstance(t, float) and t >= 0
    assert (x == 3).all()


def test_attributes(mod):
    f = mod.get_function("add")
    assert f.get_attribute("MAX_THREADS_PER_BLOCK") == _device.MAX_THREADS_PER_BLOCK
    assert f.max_threads_per_block == 1024 and f.num_regs > 0
    f.set_attribute("MAX_DYNAMIC_SHARED_SIZE_BYTES", 64 * 1024)
    assert f.get_attribute("MAX_DYNAMIC_SHARED_SIZE_BYTES") == 64 * 1024
    with pytest.raises(LogicError, match="at most"):
        f.set_attribute("MAX_DYNAMIC_SHARED_SIZE_BYTES", 1 << 20)


def test_missing_kernel_lists_the_kernels(mod):
    with pytest.raises(LogicError, match=r"no kernel 'ad'.*add.*axpy"):
        mod.get_function("ad")


def test_block_shapes_of_length_one_to_three(mod):
    x = np.zeros(8, np.float32)
    for block in [(8,), (8, 1), (8, 1, 1), 8]:
        mod.get_function("scale_inplace")(InOut(x), np.float32(1), np.int32(8), block=block, grid=(1,))


NAMESPACE_SRC = r"""
namespace layers {
namespace detail { __device__ float relu(float v) { return v > 0.0f ? v : 0.0f; } }
extern "C" __global__ void relu_forward(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = detail::relu(x[i]);
}
}
"""


def test_kernel_inside_a_namespace():
    mod = SourceModule(NAMESPACE_SRC, no_extern_c=True)
    x = np.linspace(-1, 1, 11).astype(np.float32)
    y = np.zeros_like(x)
    mod.get_function("relu_forward")(In(x), Out(y), np.int32(11), block=(16, 1, 1))
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_launches_from_several_threads(mod):
    import threading
    results = []

    def worker(k):
        x = np.full(256, k, np.float32)
        mod.get_function("scale_inplace")(InOut(x), np.float32(2), np.int32(256), block=(64, 1, 1), grid=(4, 1))
        results.append(bool((x == 2 * k).all()))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4


@pytest.mark.parametrize("name, value, says", [
    ("GPUEDU_KERNEL_TIMEOUT", "abc", "must be a number of seconds"),
    ("GPUEDU_KERNEL_TIMEOUT", "-1", "must be positive"),
    ("GPUEDU_SCHEDULE", "sideways", "unknown schedule 'sideways'"),
    ("GPUEDU_FIBERS", "sometimes", "takes 'always'"),
    ("GPUEDU_FIBER_IMPL", "threads", "takes 'ucontext'"),
])
def test_an_unusable_environment_variable_is_named_in_the_error(name, value, says, tmp_path):
    env = dict(os.environ, GPUEDU_CACHE_DIR=str(tmp_path / "cache"), **{name: value})
    code = ("import gpuedu.emulator._module\n"      # the fiber switch is read when a module is built
            "from gpuedu.emulator.compiler import SourceModule\n"
            "SourceModule('__global__ void k() {}')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0
    assert f"the environment variable {name}='{value}' cannot be used" in done.stderr and says in done.stderr
