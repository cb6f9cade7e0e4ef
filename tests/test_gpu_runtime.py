"""What only a real GPU shows and the lessons and the bench rely on (the `gpu` tier).

- PyCUDA works in the device's primary context, so memory and kernels mix with PyTorch and CuPy
  (the bench's cuBLAS yardsticks) in one process;
- CUDA events time work on the device; two streams with pinned host memory overlap a copy with a
  kernel (lesson 10's claim); the bench's event timers give sane numbers;
- a kernel may use more than 48 KB of dynamic shared memory once its attribute is raised.

gpuedu's own kernels against the NumPy references are not repeated here: test_ops, test_kernels,
nn/test_fp16_kernels, nn/test_wmma_gemm, the rest of tests/nn and test_train call gpuedu.setup() and so run on
whatever backend the process gets (the GPU under GPUEDU_BACKEND=cuda, as `gpuedu gpu-check` runs them).
Skipped with the reason on a machine without a usable GPU.
"""
import time

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

SPIN_SOURCE = r"""
// One thread per block spins until `cycles` SM clock cycles have passed: work of a chosen length
// that needs no memory traffic, so it can overlap a copy.
__global__ void spin(long long cycles)
{
    long long start = clock64();
    while (clock64() - start < cycles) { }
}

// y[i] = 2 * x[i]: a kernel on memory another library allocated.
__global__ void twice(float *y, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""


@pytest.fixture
def kernels(gpu_context):
    from pycuda.compiler import SourceModule
    return SourceModule(SPIN_SOURCE)


class DeviceView:
    """A float32 vector at a device address, described by the CUDA array interface (version 3)."""

    def __init__(self, pointer, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (int(pointer), False),
                                         "strides": None, "version": 3}


def event_ms(drv, work, stream=None):
    start, end = drv.Event(), drv.Event()
    start.record(stream)
    work()
    end.record(stream)
    end.synchronize()
    return start.time_till(end)


# --------------------------------------------------------------------------------------------
# One context shared with PyTorch and CuPy
# --------------------------------------------------------------------------------------------

def test_setup_made_the_primary_context_current(gpu_context):
    drv = gpu_context
    import sys
    assert "pycuda.autoprimaryctx" in sys.modules and "pycuda.autoinit" not in sys.modules
    primary = drv.Device(0).retain_primary_context()
    assert drv.Context.get_current().handle == primary.handle


def test_torch_reads_and_writes_pycuda_memory_and_pycuda_kernels_run_on_torch_memory(kernels, gpu_context):
    torch = pytest.importorskip("torch")
    drv = gpu_context
    import pycuda.gpuarray as gpuarray
    n = 1 << 20
    x = gpuarray.to_gpu(np.arange(n, dtype=np.float32))
    context_before = drv.Context.get_current().handle
    # torch writes into PyCUDA's allocation: only possible when both use the same context
    as_torch = torch.as_tensor(DeviceView(x.gpudata, n), device="cuda")
    as_torch.mul_(3.0)
    torch.cuda.synchronize()
    assert np.array_equal(x.get(), 3 * np.arange(n, dtype=np.float32))
    # and a PyCUDA kernel works on torch's allocation, interleaved with torch's own kernels
    t = torch.arange(n, dtype=torch.float32, device="cuda")
    out = torch.empty_like(t)
    twice = kernels.get_function("twice")
    for _ in range(3):
        twice(np.intp(out.data_ptr()), np.intp(t.data_ptr()), np.int32(n), block=(256, 1, 1),
              grid=((n + 255) // 256, 1))
        drv.Context.synchronize()                 # PyCUDA's default stream, then torch's
        t = out.clone() + 0.0
    torch.cuda.synchronize()
    assert torch.equal(t.cpu(), torch.arange(n, dtype=torch.float32) * 8)
    # torch's runtime calls made its (primary) context current: still the one PyCUDA uses
    assert drv.Context.get_current().handle == context_before


def test_cupy_shares_the_context_too(gpu_context):
    cupy = pytest.importorskip("cupy")
    import pycuda.gpuarray as gpuarray
    x = gpuarray.to_gpu(np.ones(4096, dtype=np.float32))
    as_cupy = cupy.asarray(DeviceView(x.gpudata, 4096))
    as_cupy += 1.0
    cupy.cuda.Device(0).synchronize()
    assert np.array_equal(x.get(), np.full(4096, 2.0, dtype=np.float32))
    matrix = cupy.ones((256, 256), dtype=cupy.float32)
    assert float((matrix @ matrix)[0, 0]) == 256.0     # cuBLAS through CuPy in the same process


# --------------------------------------------------------------------------------------------
# Timing and overlap
# --------------------------------------------------------------------------------------------

def calibrated_cycles(drv, spin, target_ms):
    """Clock cycles for a spin kernel of about ``target_ms``, measured with events (clocks vary)."""
    probe = 10_000_000
    spin(np.int64(probe), block=(1, 1, 1), grid=(1, 1))   # warm-up: module load
    ms = event_ms(drv, lambda: spin(np.int64(probe), block=(1, 1, 1), grid=(1, 1)))
    return int(probe * target_ms / ms)


def test_events_time_work_on_the_device(kernels, gpu_context):
    drv = gpu_context
    spin = kernels.get_function("spin")
    cycles = calibrated_cycles(drv, spin, 20.0)
    short = event_ms(drv, lambda: spin(np.int64(cycles // 4), block=(1, 1, 1), grid=(1, 1)))
    long = event_ms(drv, lambda: spin(np.int64(cycles), block=(1, 1, 1), grid=(1, 1)))
    assert 0 < short < long
    assert 2.5 < long / short < 6, f"4x the cycles took {long / short:.2f}x the time"
    assert 10 < long < 40, f"a 20 ms spin measured {long:.2f} ms"


def test_pinned_async_copy_overlaps_a_kernel_on_another_stream(kernels, gpu_context):
    drv = gpu_context
    spin = kernels.get_function("spin")
    nbytes = 1 << 30                                   # 1 GiB: tens of ms over PCIe
    host = drv.pagelocked_empty(nbytes // 4, np.float32)
    host[:] = 1.0
    device = drv.mem_alloc(nbytes)
    copy_stream, compute_stream = drv.Stream(), drv.Stream()
    drv.memcpy_htod_async(device, host, copy_stream)   # warm-up: first touch of the pinned pages
    copy_stream.synchronize()
    copy_ms = event_ms(drv, lambda: drv.memcpy_htod_async(device, host, copy_stream), copy_stream)
    cycles = calibrated_cycles(drv, spin, copy_ms)     # a kernel as long as the copy

    def both(kernel_stream):
        t0 = time.perf_counter()
        spin(np.int64(cycles), block=(1, 1, 1), grid=(1, 1), stream=kernel_stream)
        drv.memcpy_htod_async(device, host, copy_stream)
        kernel_stream.synchronize()
        copy_stream.synchronize()
        return (time.perf_counter() - t0) * 1e3

    serial = both(copy_stream)                         # one stream: the copy waits for the kernel
    overlapped = both(compute_stream)
    assert overlapped < 0.75 * serial, (f"copy {copy_ms:.1f} ms, kernel as long: serial {serial:.1f} ms, "
                                        f"two streams {overlapped:.1f} ms (no overlap)")
    assert copy_ms > 0 and nbytes / (copy_ms * 1e-3) / 1e9 > 5, "pinned copies should exceed 5 GB/s"
    device.free()


def test_bench_event_timers_agree_on_the_same_work(kernels, gpu_context):
    from gpuedu.bench.timers import CudaEventTimer, TorchEventTimer
    drv = gpu_context
    spin = kernels.get_function("spin")
    cycles = calibrated_cycles(drv, spin, 5.0)
    l2 = drv.Device(0).get_attribute(drv.device_attribute.L2_CACHE_SIZE)
    pycuda_s = np.median(CudaEventTimer(drv, l2).time(
        lambda: spin(np.int64(cycles), block=(1, 1, 1), grid=(1, 1)), repeats=5))
    assert 0.002 < pycuda_s < 0.02, f"a 5 ms spin timed at {pycuda_s * 1e3:.2f} ms"
    torch = pytest.importorskip("torch")
    a = torch.randn(2048, 2048, device="cuda")
    torch_s = np.median(TorchEventTimer(torch, l2).time(lambda: a @ a, repeats=5))
    tflops = 2 * 2048**3 / torch_s / 1e12
    assert 0.5 < tflops < 2000, f"a 2048^3 matmul through torch timed at {tflops:.1f} TFLOP/s"


# --------------------------------------------------------------------------------------------
# Beyond the 48 KB default of dynamic shared memory
# --------------------------------------------------------------------------------------------

SHARED_SOURCE = r"""
// Every thread fills its stretch of a large dynamic shared buffer, then (after the barrier) reads a
// neighbour's, so the whole buffer must really exist.
__global__ void big_shared(float *out, int floats)
{
    extern __shared__ float buffer[];
    for (int i = threadIdx.x; i < floats; i += blockDim.x)
        buffer[i] = (float)i;
    __syncthreads();   // all writes land before any thread reads another's
    float sum = 0.0f;
    for (int i = threadIdx.x; i < floats; i += blockDim.x)
        sum += buffer[floats - 1 - i];
    out[threadIdx.x] = sum;
}
"""


def test_dynamic_shared_memory_past_48_kb_needs_the_function_attribute(gpu_context):
    drv = gpu_context
    from pycuda.compiler import SourceModule
    kernel = SourceModule(SHARED_SOURCE).get_function("big_shared")
    nbytes = 160 * 1024                                # within an H100/H200's 227 KB opt-in limit
    optin = drv.Device(0).get_attribute(drv.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    if optin < nbytes:
        pytest.skip(f"this device allows {optin} bytes of shared memory per block, not {nbytes}")
    floats = nbytes // 4
    out = np.zeros(256, np.float32)
    with pytest.raises(drv.Error):                     # the default limit is 48 KB
        kernel(drv.Out(out), np.int32(floats), block=(256, 1, 1), grid=(1, 1), shared=nbytes)
        drv.Context.synchronize()
    kernel.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)
    kernel(drv.Out(out), np.int32(floats), block=(256, 1, 1), grid=(1, 1), shared=nbytes)
    values = np.arange(floats, dtype=np.float64)[::-1]
    expected = np.array([values[t::256].sum() for t in range(256)])
    assert np.allclose(out, expected, rtol=1e-5)
