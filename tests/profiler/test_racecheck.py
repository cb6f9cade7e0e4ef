"""gpuedu.racecheck(): hazards between threads with no barrier between them, with both threads and lines."""
import numpy as np
import pytest

import gpuedu

SOURCE = r"""
__global__ void racy_count(unsigned int* out, const unsigned char* x, int n) {
  __shared__ unsigned int local[4];
  if (threadIdx.x < 4) local[threadIdx.x] = 0;
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) local[x[i] & 3]++;
  __syncthreads();
  if (threadIdx.x < 4) out[threadIdx.x] = local[threadIdx.x];
}
__global__ void atomic_count(unsigned int* out, const unsigned char* x, int n) {
  __shared__ unsigned int local[4];
  if (threadIdx.x < 4) local[threadIdx.x] = 0;
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&local[x[i] & 3], 1u);
  __syncthreads();
  if (threadIdx.x < 4) out[threadIdx.x] = local[threadIdx.x];
}
__global__ void missing_barrier(float* out, const float* in) {
  __shared__ float s[64];
  s[threadIdx.x] = in[threadIdx.x];
  out[threadIdx.x] = s[63 - threadIdx.x];
}
__global__ void with_barrier(float* out, const float* in) {
  __shared__ float s[64];
  s[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = s[63 - threadIdx.x];
}
__global__ void warp_exchange(float* out, const float* in, int sync) {
  __shared__ float s[32];
  s[threadIdx.x] = in[threadIdx.x];
  if (sync) __syncwarp();
  out[threadIdx.x] = s[31 - threadIdx.x];
}
__global__ void blocks_share_a_slot(float* out) {
  out[0] = (float)blockIdx.x;
}
"""


@pytest.fixture(scope="module")
def emu(emulator_module):
    return emulator_module(SOURCE)


def checked(fn, *args, **launch):
    with gpuedu.racecheck() as rc:
        fn(*args, **launch)
    return rc


def test_a_racy_increment_of_shared_memory_is_reported_with_both_threads_and_the_line(emu):
    mod, gpuarray = emu
    x = gpuarray.to_gpu(np.zeros(64, np.uint8))
    out = gpuarray.zeros(4, np.uint32)
    rc = checked(mod.get_function("racy_count"), out, x, np.int32(64), block=(64, 1, 1), grid=(1, 1))
    kinds = {h["kind"] for h in rc.hazards}
    assert kinds == {"read-after-write", "write-after-read", "write-after-write"}
    h = rc.hazards[0]
    assert h["space"] == "shared" and h["kernel"] == "racy_count"
    assert h["first"]["line"] == h["second"]["line"] == "kernel.cu:7"
    assert h["first"]["thread"] != h["second"]["thread"]
    assert h["where"]["offset"] == 0          # every x is 0: all threads hit local[0]
    assert "read-after-write hazard in shared memory of kernel 'racy_count'" in str(rc)


def test_atomics_and_barriers_are_not_hazards(emu):
    mod, gpuarray = emu
    x = gpuarray.to_gpu(np.arange(64, dtype=np.uint8))
    out = gpuarray.zeros(4, np.uint32)
    assert checked(mod.get_function("atomic_count"), out, x, np.int32(64), block=(64, 1, 1), grid=(1, 1)).hazards == []
    np.testing.assert_array_equal(out.get(), [16, 16, 16, 16])
    a = gpuarray.to_gpu(np.arange(64, dtype=np.float32))
    b = gpuarray.empty(64, np.float32)
    assert checked(mod.get_function("with_barrier"), b, a, block=(64, 1, 1), grid=(1, 1)).hazards == []
    assert "racecheck: no hazards found" in str(checked(mod.get_function("with_barrier"), b, a, block=(64, 1, 1),
                                                        grid=(1, 1)))


def test_a_missing_syncthreads_is_a_read_after_write_hazard(emu):
    mod, gpuarray = emu
    a = gpuarray.to_gpu(np.arange(64, dtype=np.float32))
    b = gpuarray.empty(64, np.float32)
    rc = checked(mod.get_function("missing_barrier"), b, a, block=(64, 1, 1), grid=(1, 1))
    assert {h["kind"] for h in rc.hazards} == {"read-after-write", "write-after-read"}
    assert {h["first"]["line"] for h in rc.hazards} | {h["second"]["line"] for h in rc.hazards} == {
        "kernel.cu:22", "kernel.cu:23"}


def test_lanes_of_a_warp_need_a_syncwarp_between_them(emu):
    mod, gpuarray = emu
    a = gpuarray.to_gpu(np.arange(32, dtype=np.float32))
    b = gpuarray.empty(32, np.float32)
    fn = mod.get_function("warp_exchange")
    assert checked(fn, b, a, np.int32(0), block=(32, 1, 1), grid=(1, 1)).hazards
    assert checked(fn, b, a, np.int32(1), block=(32, 1, 1), grid=(1, 1)).hazards == []


def test_two_blocks_writing_one_global_address_is_a_hazard(emu):
    mod, gpuarray = emu
    out = gpuarray.zeros(1, np.float32)
    rc = checked(mod.get_function("blocks_share_a_slot"), out, block=(1, 1, 1), grid=(3, 1))
    assert [h["kind"] for h in rc.hazards] == ["write-after-write"]
    h = rc.hazards[0]
    assert h["space"] == "global" and h["count"] == 2
    assert h["where"]["allocation_bytes"] == 4 and h["where"]["offset"] == 0
    assert h["first"]["block"] != h["second"]["block"]


DYNAMIC_RACE = r"""
__global__ void dynamic_no_barrier(float* out, const float* in) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    sdata[tid] = in[tid];
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];      // no barrier between the rounds
    }
    if (tid == 0) out[0] = sdata[0];
}
"""


@pytest.mark.parametrize("first_launch", [True, False])
def test_a_race_in_dynamic_shared_memory_is_found_with_its_wavefronts_counted(emulator_module, first_launch):
    """The dynamic shared memory (extern __shared__, shared= at launch) is where the profiler learns it is: in a
    worker's first launch of a module as in later ones."""
    mod, gpuarray = emulator_module(DYNAMIC_RACE + f"// {first_launch}\n")
    fn = mod.get_function("dynamic_no_barrier")
    x = gpuarray.to_gpu(np.arange(1, 257, dtype=np.float32))
    out = gpuarray.zeros(1, np.float32)
    if not first_launch:
        fn(out, x, block=(256, 1, 1), grid=(1, 1), shared=1024)
    rc = checked(fn, out, x, block=(256, 1, 1), grid=(1, 1), shared=1024)
    assert rc.hazards and all(h["space"] == "shared" for h in rc.hazards), str(rc)
    assert rc.kernels[0].metrics["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"] > 0
