"""cuda_pipeline.h: __pipeline_memcpy_async copies (4, 8, 16 bytes, with zero-filled tails) into static and
dynamic shared memory, commit / wait_prior in a double-buffered loop, and the errors a GPU raises for a
misaligned copy, a bad size or a destination outside shared memory."""
import numpy as np
import pytest

from gpuedu.emulator._args import In, Out
from gpuedu.emulator._errors import LaunchError
from gpuedu.emulator.compiler import SourceModule, set_schedule

PIPELINE_SRC = r"""
#include <cuda_pipeline.h>
// Each thread copies one chunk of `size` bytes of src + shift into shared memory, keeping only
// the first size - zfill bytes (the rest zeros), then the block writes the shared copy to dst.
extern "C" __global__ void chunk_copy(const unsigned char* src, unsigned char* dst, int size, int zfill,
                                      int shift) {
  __shared__ __align__(16) unsigned char tile[64 * 16];
  int off = threadIdx.x * size;
  __pipeline_memcpy_async(tile + off, src + shift + off, size, zfill);
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();   // every thread's copy is visible to the whole block
  for (int i = threadIdx.x; i < blockDim.x * size; i += blockDim.x) dst[i] = tile[i];
}
// The same into dynamic shared memory (extern __shared__).
extern "C" __global__ void chunk_copy_dynamic(const float* src, float* dst) {
  extern __shared__ __align__(16) float buf[];
  __pipeline_memcpy_async(buf + 4 * threadIdx.x, src + 4 * threadIdx.x, 16);
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  for (int i = 0; i < 4; ++i) dst[4 * threadIdx.x + i] = buf[4 * threadIdx.x + i];
}
// Double buffering: sum n tiles of 64 floats, loading tile t+1 while tile t is summed.
extern "C" __global__ void pipelined_sum(const float* src, float* out, int n) {
  __shared__ __align__(16) float stage[2][64];
  float acc = 0.0f;
  if (threadIdx.x < 16) __pipeline_memcpy_async(&stage[0][4 * threadIdx.x], src + 4 * threadIdx.x, 16);
  __pipeline_commit();
  for (int t = 0; t < n; ++t) {
    if (t + 1 < n && threadIdx.x < 16)
      __pipeline_memcpy_async(&stage[(t + 1) % 2][4 * threadIdx.x], src + (t + 1) * 64 + 4 * threadIdx.x, 16);
    __pipeline_commit();          // one batch per step, empty or not, so that wait_prior(1) counts steps
    __pipeline_wait_prior(1);     // tile t has landed; tile t+1 may still be in flight
    __syncthreads();
    acc += stage[t % 2][threadIdx.x];
    __syncthreads();              // tile t is read before step t+1 overwrites its buffer
  }
  out[threadIdx.x] = acc;
}
extern "C" __global__ void copy_to_global(const float* src, float* dst) {
  __pipeline_memcpy_async(dst, src, 16);
}
"""


@pytest.fixture(scope="module")
def mod(context):
    return SourceModule(PIPELINE_SRC, no_extern_c=True)


@pytest.mark.parametrize("size", [4, 8, 16])
@pytest.mark.parametrize("zfill", [0, 1, 3])
def test_copies_with_zero_filled_tails(mod, size, zfill):
    threads = 64
    src = np.arange(1, threads * size + 1, dtype=np.uint8)
    dst = np.full(threads * size, 0xAB, np.uint8)
    mod.get_function("chunk_copy")(In(src), Out(dst), np.int32(size), np.int32(zfill), np.int32(0),
                                    block=(threads, 1, 1))
    want = src.reshape(threads, size).copy()
    want[:, size - zfill:] = 0
    np.testing.assert_array_equal(dst, want.ravel())


def test_zfill_of_the_whole_size_writes_only_zeros(mod):
    src = np.arange(1, 64 * 16 + 1, dtype=np.uint8)
    dst = np.full(64 * 16, 0xAB, np.uint8)
    mod.get_function("chunk_copy")(In(src), Out(dst), np.int32(16), np.int32(16), np.int32(0), block=(64, 1, 1))
    assert not dst.any()


def test_copies_into_dynamic_shared_memory(mod):
    src = np.arange(128, dtype=np.float32)
    dst = np.zeros(128, np.float32)
    mod.get_function("chunk_copy_dynamic")(In(src), Out(dst), block=(32, 1, 1), shared=512)
    np.testing.assert_array_equal(dst, src)


@pytest.mark.parametrize("schedule", ["forward", "reverse", "random"])
def test_double_buffered_loop(mod, schedule):
    n = 5
    src = np.random.default_rng(0).standard_normal((n, 64)).astype(np.float32)
    out = np.zeros(64, np.float32)
    try:
        set_schedule(schedule, seed=4)
        mod.get_function("pipelined_sum")(In(src), Out(out), np.int32(n), block=(64, 1, 1))
    finally:
        set_schedule("forward")
    np.testing.assert_allclose(out, src.sum(axis=0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("size, zfill, shift, message", [
    (16, 0, 8, "misaligned address"),     # 16-byte copy from a source 8 bytes off
    (12, 0, 0, "4, 8 or 16 bytes"),
    (8, 9, 0, "zfill may not exceed"),
])
def test_bad_copies_fail_the_launch(mod, size, zfill, shift, message):
    src = np.zeros(64 * 16 + 16, np.uint8)
    dst = np.zeros(64 * 16, np.uint8)
    f = mod.get_function("chunk_copy")
    with pytest.raises(LaunchError, match=message):
        f(In(src), Out(dst), np.int32(size), np.int32(zfill), np.int32(shift), block=(64, 1, 1))
    # the process lives on and the module still works
    f(In(src), Out(dst), np.int32(16), np.int32(0), np.int32(0), block=(64, 1, 1))


def test_destination_outside_shared_memory_fails(mod):
    src = np.zeros(4, np.float32)
    dst = np.zeros(4, np.float32)
    with pytest.raises(LaunchError, match="not in the block's shared memory"):
        mod.get_function("copy_to_global")(In(src), Out(dst), block=(1, 1, 1))


def test_inside_extern_c_it_is_refused_as_nvcc_does(context):
    # SourceModule wraps the source in extern "C" { } unless no_extern_c=True; nvcc refuses
    # NVIDIA's cuda_pipeline.h there (its helpers are templates), and the emulator says how to fix it.
    from gpuedu.emulator._errors import CompileError
    src = "#include <cuda_pipeline.h>\n__global__ void k(float* x) { __pipeline_commit(); }\n"
    with pytest.raises(CompileError, match="no_extern_c=True"):
        SourceModule(src)
