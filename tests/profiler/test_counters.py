"""The profiler's counts against values that follow from the memory model alone.

A request is one warp-level memory instruction with an active lane; a sector 32 aligned bytes
(counted from the allocation's start, which cudaMalloc aligns to 256 bytes); a shared request
takes as many wavefronts as its busiest bank has distinct words; a branch is divergent when the
active lanes of a warp go on to different blocks.
"""
import numpy as np
import pytest

import gpuedu

SOURCE = r"""
__global__ void read_strided(float* out, const float* in, int n, int stride) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[(long)i * stride];
}
__global__ void read_float4(float4* out, const float4* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}
__global__ void broadcast(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[0];
}
__global__ void shared_stride(float* out, int stride) {
  __shared__ float s[32 * 33];
  int t = threadIdx.x;
  s[t * stride] = (float)t;
  __syncthreads();
  out[t] = s[t * stride];
}
__global__ void shared_same_word(float* out) {
  __shared__ float s[32];
  if (threadIdx.x == 0) s[5] = 3.0f;
  __syncthreads();
  out[threadIdx.x] = s[5];
}
__global__ void uniform_branch(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if ((i / 32) % 2) out[i] = 1.0f; else out[i] = 2.0f;
}
__global__ void lane_branch(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i % 2) out[i] = 1.0f; else out[i] = 2.0f;
}
__global__ void count_atomics(unsigned int* global_counter, const unsigned char* x, int n) {
  __shared__ unsigned int local[4];
  if (threadIdx.x < 4) local[threadIdx.x] = 0;
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&local[x[i] & 3], 1u);
  __syncthreads();
  if (threadIdx.x < 4) atomicAdd(&global_counter[threadIdx.x], local[threadIdx.x]);
}
__global__ void skip_first_turn_unrolled(float* out) {
  int lane = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    if (i < lane % 2) continue;   // odd lanes skip turn 0
    out[i * 32 + lane] = 1.0f;
  }
}
__global__ void skip_first_turn(float* out) {
  int lane = threadIdx.x;
  for (int i = 0; i < 4; i++) {
    if (i < lane % 2) continue;
    out[i * 32 + lane] = 1.0f;
  }
}
__global__ void transpose_naive(float* out, const float* in, int n) {
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
  out[x * n + y] = in[y * n + x];
}
__global__ void transpose_tiled(float* out, const float* in, int n) {
  __shared__ float tile[32][33];
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
  tile[threadIdx.y][threadIdx.x] = in[y * n + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  y = blockIdx.x * 32 + threadIdx.y;
  out[y * n + x] = tile[threadIdx.x][threadIdx.y];
}
"""

LD_REQ = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
LD_SECT = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
ST_REQ = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"
ST_SECT = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
SH_LD_WAVES = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
SH_LD_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
SH_ST_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
DIVERGENT = "smsp__sass_branch_targets_threads_divergent.sum"


@pytest.fixture(scope="module")
def emu(emulator_module):
    return emulator_module(SOURCE)


def profiled(fn, *args, **launch):
    with gpuedu.profile() as prof:
        fn(*args, **launch)
    assert len(prof.kernels) == 1
    return prof.kernels[0].metrics


@pytest.mark.parametrize("stride, sectors_per_request", [(1, 4), (2, 8), (4, 16), (8, 32), (32, 32), (1000, 32)])
def test_strided_reads_touch_one_sector_per_lane_once_lanes_are_32_bytes_apart(emu, stride, sectors_per_request):
    mod, gpuarray = emu
    n = 1024
    x = gpuarray.to_gpu(np.arange(n * stride, dtype=np.float32))
    y = gpuarray.empty(n, np.float32)
    m = profiled(mod.get_function("read_strided"), y, x, np.int32(n), np.int32(stride), block=(256, 1, 1), grid=(4, 1))
    assert m[LD_REQ] == n // 32
    assert m[LD_SECT] == n // 32 * sectors_per_request
    assert m[ST_SECT] == n // 32 * 4          # the writes stay coalesced: 128 bytes a warp
    np.testing.assert_array_equal(y.get(), x.get()[::stride])


@pytest.mark.parametrize("stride, lines_per_read", [(1, 1), (2, 2), (4, 4), (8, 8), (32, 32), (1000, 32)])
def test_each_request_counts_the_128_byte_lines_it_touches(emu, stride, lines_per_read):
    mod, gpuarray = emu
    n = 1024
    x = gpuarray.to_gpu(np.arange(n * stride, dtype=np.float32))
    y = gpuarray.empty(n, np.float32)
    with gpuedu.profile() as prof:
        mod.get_function("read_strided")(y, x, np.int32(n), np.int32(stride), block=(256, 1, 1), grid=(4, 1))
    (rec,) = prof.kernels
    # a warp's read spans 32 x stride floats (one line per 32 floats, at most one per lane); its store one line
    assert rec._counts["global_lines"] == n // 32 * (lines_per_read + 1)


def test_results_are_the_same_with_and_without_profiling(emu):
    mod, gpuarray = emu
    n = 500
    x = gpuarray.to_gpu(np.random.default_rng(0).random(n * 3, dtype=np.float32))
    plain, counted = gpuarray.empty(n, np.float32), gpuarray.empty(n, np.float32)
    fn = mod.get_function("read_strided")
    fn(plain, x, np.int32(n), np.int32(3), block=(128, 1, 1), grid=(4, 1))
    profiled(fn, counted, x, np.int32(n), np.int32(3), block=(128, 1, 1), grid=(4, 1))
    np.testing.assert_array_equal(plain.get(), counted.get())


def test_float4_loads_take_16_sectors_a_request(emu):
    mod, gpuarray = emu
    n = 256
    x = gpuarray.to_gpu(np.arange(4 * n, dtype=np.float32))
    y = gpuarray.empty(4 * n, np.float32)
    m = profiled(mod.get_function("read_float4"), y, x, np.int32(n), block=(128, 1, 1), grid=(2, 1))
    assert m[LD_REQ] == n // 32 and m[LD_SECT] == n // 32 * 16


def test_a_broadcast_read_is_one_sector(emu):
    mod, gpuarray = emu
    x = gpuarray.to_gpu(np.ones(8, np.float32))
    y = gpuarray.empty(256, np.float32)
    m = profiled(mod.get_function("broadcast"), y, x, np.int32(256), block=(256, 1, 1), grid=(1, 1))
    assert m[LD_REQ] == 8 and m[LD_SECT] == 8


def test_a_partial_last_warp_behind_a_bounds_guard(emu):
    mod, gpuarray = emu
    n = 100                                   # warps of 32, 32, 32 and 4 active lanes
    x = gpuarray.to_gpu(np.arange(n, dtype=np.float32))
    y = gpuarray.empty(n, np.float32)
    m = profiled(mod.get_function("read_strided"), y, x, np.int32(n), np.int32(1), block=(128, 1, 1), grid=(1, 1))
    assert m[LD_REQ] == 4
    assert m[LD_SECT] == 3 * 4 + 1            # 4 floats = 16 bytes: one sector
    assert m["smsp__threads_launched.sum"] == 128 and m["smsp__warps_launched.sum"] == 4
    # the last warp's lanes split at `if (i < n)`, but those past n just end: nvcc makes that a predicated
    # EXIT, no branch, so Nsight Compute counts no divergent branch
    assert m[DIVERGENT] == 0


def test_relu_v1_reads_each_element_in_one_request_a_warp_in_every_block(emu):
    # lesson 02's kernel: 2^16 floats, 256 blocks of 256 threads, one coalesced 128-byte read a warp. A host
    # compiler that copies the load onto a path of its own (g++ 13's jump threader did, for each block's first
    # thread) would count each block's warp 0 twice: 2,304 requests and 8,448 sectors
    _, gpuarray = emu
    from gpuedu import ops
    n = 1 << 16
    x = gpuarray.to_gpu(np.random.default_rng(3).standard_normal(n).astype(np.float32))
    with gpuedu.profile() as prof:
        y = ops.relu(x, version=1)
    (rec,) = prof.kernels
    m = rec.metrics
    assert m[LD_REQ] == n // 32 and m[LD_SECT] == n * 4 // 32
    assert m[ST_REQ] == n // 32 and m[ST_SECT] == n * 4 // 32
    assert m["smsp__sass_thread_inst_executed_op_global_ld.sum"] == n
    np.testing.assert_array_equal(y.get(), np.maximum(x.get(), 0))


def test_sectors_count_from_the_allocation_start_as_cudamalloc_aligns_it(emu):
    mod, gpuarray = emu
    n = 64
    x = gpuarray.to_gpu(np.arange(n + 4, dtype=np.float32))
    y = gpuarray.empty(n, np.float32)
    # A view 16 bytes into the allocation: each warp's 128 bytes straddle 5 sectors.
    m = profiled(mod.get_function("read_strided"), y, x[4:], np.int32(n), np.int32(1), block=(64, 1, 1), grid=(1, 1))
    assert m[LD_REQ] == 2 and m[LD_SECT] == 10


@pytest.mark.parametrize("stride, wavefronts", [(1, 1), (2, 2), (4, 4), (32, 32), (33, 1)])
def test_shared_accesses_take_as_many_wavefronts_as_the_busiest_bank_has_words(emu, stride, wavefronts):
    mod, gpuarray = emu
    y = gpuarray.empty(32, np.float32)
    m = profiled(mod.get_function("shared_stride"), y, np.int32(stride), block=(32, 1, 1), grid=(1, 1))
    assert m[SH_LD_WAVES] == wavefronts
    assert m[SH_LD_CONFLICTS] == wavefronts - 1
    assert m[SH_ST_CONFLICTS] == wavefronts - 1
    np.testing.assert_array_equal(y.get(), np.arange(32, dtype=np.float32))


def test_one_word_read_by_every_lane_is_a_broadcast(emu):
    mod, gpuarray = emu
    y = gpuarray.empty(64, np.float32)
    m = profiled(mod.get_function("shared_same_word"), y, block=(64, 1, 1), grid=(1, 1))
    assert m["smsp__sass_inst_executed_op_shared_ld.sum"] == 2 and m[SH_LD_WAVES] == 2 and m[SH_LD_CONFLICTS] == 0


def test_warp_uniform_branches_do_not_diverge_and_lane_dependent_ones_do(emu):
    mod, gpuarray = emu
    y = gpuarray.empty(256, np.float32)
    uniform = profiled(mod.get_function("uniform_branch"), y, np.int32(256), block=(256, 1, 1), grid=(1, 1))
    split = profiled(mod.get_function("lane_branch"), y, np.int32(256), block=(256, 1, 1), grid=(1, 1))
    assert uniform[DIVERGENT] == 0 and uniform[ST_REQ] == 8
    # every warp splits at `if (i % 2)`, but each side is one store: nvcc predicates both (no branch), so
    # the GPU counts no divergent branch; the lanes each store keeps show the split instead
    assert split[DIVERGENT] == 0
    assert split[ST_REQ] == 16                # each side of the branch is its own request, half the lanes active
    assert split["smsp__sass_thread_inst_executed_op_global_st.sum"] == 256    # 16 lanes a store


def test_shared_and_global_atomics_are_counted_where_they_happen(emu):
    mod, gpuarray = emu
    n = 1000
    x = gpuarray.to_gpu(np.random.default_rng(1).integers(0, 256, n).astype(np.uint8))
    counts = gpuarray.zeros(4, np.uint32)
    m = profiled(mod.get_function("count_atomics"), counts, x, np.int32(n), block=(256, 1, 1), grid=(4, 1))
    assert m["smsp__sass_thread_inst_executed_op_shared_atom.sum"] == n
    assert m["smsp__sass_inst_executed_op_shared_atom.sum"] == 32   # n = 1000: 31 full warps and one of 8 lanes
    # `atomicAdd(&global_counter[t], local[t]);` discards its result: a RED on the GPU, not an ATOM
    assert m["smsp__sass_thread_inst_executed_op_global_red.sum"] == 4 * 4
    assert m["l1tex__t_requests_pipe_lsu_mem_global_op_red.sum"] == 4
    assert m["l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum"] == 0
    assert int(counts.get().sum()) == n


def test_each_block_s_released_barriers_are_counted_and_charged_by_the_model(emu):
    from gpuedu.profiler.time_model import BARRIER_CYCLES, SHARED_LATENCY_CYCLES
    mod, gpuarray = emu
    n = 1000
    x = gpuarray.to_gpu(np.zeros(n, np.uint8))
    counts = gpuarray.zeros(4, np.uint32)
    with gpuedu.profile() as prof:   # count_atomics has two __syncthreads; 4 blocks release 8
        mod.get_function("count_atomics")(counts, x, np.int32(n), block=(256, 1, 1), grid=(4, 1))
    (rec,) = prof.kernels
    assert rec._counts["barriers"] == 8
    text = "\n".join(rec.predict("H200").assumptions)
    assert f"2 barrier(s) of {BARRIER_CYCLES} clocks with a {SHARED_LATENCY_CYCLES}-clock" in text
    assert "barriers unknown" not in text


MMA_SOURCE = r"""
#include <mma.h>
using namespace nvcuda;
// Warp w of each block multiplies its tiles w + 1 times: a block of 3 warps makes 1 + 2 + 3 = 6 mma_syncs.
extern "C" __global__ void uneven_mma(float* out, const half* tile) {
  int warp = threadIdx.x / 32;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(a, tile, 16);
  wmma::load_matrix_sync(b, tile, 16);
  for (int k = 0; k <= warp; ++k) wmma::mma_sync(acc, a, b, acc);
  wmma::store_matrix_sync(out + (blockIdx.x * (blockDim.x / 32) + warp) * 256, acc, 16, wmma::mem_row_major);
}
"""


@pytest.fixture(scope="module")
def mma_emu():
    if gpuedu.setup(verbose=False).name != "cpu":
        pytest.skip("the counters are the emulator's")
    from pycuda.compiler import SourceModule
    import pycuda.gpuarray as gpuarray
    return SourceModule(MMA_SOURCE, no_extern_c=True), gpuarray


def test_each_warp_s_mma_sync_is_counted_once_with_one_worker_or_several(mma_emu):
    from gpuedu.emulator import _module
    mod, gpuarray = mma_emu
    tile = gpuarray.to_gpu(np.ones(256, np.float16))
    out = gpuarray.zeros(5 * 3 * 256, np.float32)
    before = _module.get_threads()
    counted = []
    try:
        for workers in (1, 4):
            _module.set_threads(workers)
            with gpuedu.profile() as prof:
                mod.get_function("uneven_mma")(out, tile, block=(96, 1, 1), grid=(5, 1))
            counted.append(prof.kernels[0])
    finally:
        _module.set_threads(before)
    # 5 blocks of 6: 30, the same with either; each warp's product is 16 (ones) times its w + 1 steps.
    assert [rec._counts["mma_sync"] for rec in counted] == [30, 30]
    assert dict(counted[0].metrics) == dict(counted[1].metrics)
    assert np.array_equal(out.get().reshape(5, 3, 256), np.broadcast_to(16.0 * np.arange(1, 4)[None, :, None],
                                                                        (5, 3, 256)))
    text = "\n".join(counted[0].predict("H200").assumptions)
    assert "30 WMMA mma_sync counted, 2 a warp, one after another on its chain at 59 clocks each" in text
    # On the tensor pipe each is two HMMA.16816, as nvcc compiles a 16 x 16 x 16 mma_sync for sm_80 and later; the
    # time model charges them once, as WMMA's (no HMMA of inline PTX beside them).
    from gpuedu.profiler import metrics
    assert counted[0].metrics[metrics.TENSOR_HMMA] == 60
    assert counted[0].reasons[metrics.TENSOR_HMMA].endswith("and 30 WMMA mma_sync, each two HMMA.16816 as nvcc "
                                                            "compiles it for sm_80 and later: 0 + 2 x 30")
    assert "inline PTX mma.sync) counted" not in text


def test_a_kernel_without_wmma_counts_no_mma_sync(emu):
    mod, gpuarray = emu
    x, y = gpuarray.to_gpu(np.ones(1024, np.float32)), gpuarray.empty(1024, np.float32)
    with gpuedu.profile() as prof:
        mod.get_function("read_strided")(y, x, np.int32(1024), np.int32(1), block=(256, 1, 1), grid=(4, 1))
    (rec,) = prof.kernels
    assert rec._counts["mma_sync"] == 0
    assert not any("mma_sync" in note for note in rec.predict("H200").assumptions)


def test_a_warm_l2_is_refused_for_a_launch_whose_lines_do_not_fit(emu):
    mod, gpuarray = emu
    x, y = gpuarray.to_gpu(np.ones(1024, np.float32)), gpuarray.empty(1024, np.float32)
    with gpuedu.profile() as prof:
        mod.get_function("read_strided")(y, x, np.int32(1024), np.int32(1), block=(256, 1, 1), grid=(4, 1))
    (rec,) = prof.kernels
    assert rec.predict("H100", l2_warm=True).terms["DRAM"] == 0
    rec._counts["l2_lines"] = 2 * 60 * 2**20 // 128        # as if it touched 120 MB
    with pytest.raises(ValueError, match="touches 120.0 MB and the H200 SXM's L2 holds 60 MB: model it cold"):
        rec.predict("H200", l2_warm=True)


def test_a_tiled_transpose_stores_coalesced_where_the_naive_one_scatters(emu):
    mod, gpuarray = emu
    n = 64
    a = np.arange(n * n, dtype=np.float32).reshape(n, n)
    x = gpuarray.to_gpu(a)
    y = gpuarray.empty((n, n), np.float32)
    naive = profiled(mod.get_function("transpose_naive"), y, x, np.int32(n), block=(32, 32, 1), grid=(2, 2))
    np.testing.assert_array_equal(y.get(), a.T)
    tiled = profiled(mod.get_function("transpose_tiled"), y, x, np.int32(n), block=(32, 32, 1), grid=(2, 2))
    np.testing.assert_array_equal(y.get(), a.T)
    warps = n * n // 32
    assert naive[ST_REQ] == tiled[ST_REQ] == warps
    assert naive[ST_SECT] == warps * 32       # each lane writes its own row
    assert tiled[ST_SECT] == warps * 4
    assert naive[LD_SECT] == tiled[LD_SECT] == warps * 4
    assert tiled[SH_LD_CONFLICTS] == 0        # the padding column keeps a tile column on 32 banks
    # 16 KB in, 16 KB out: both stay in the H100's 50 MB L2, so DRAM reads the input once (64-byte pairs of
    # whole lines) and the output is not written back by the end of the launch
    assert naive["dram__bytes_read.sum"] == tiled["dram__bytes_read.sum"] == n * n * 4
    assert naive["dram__bytes_write.sum"] == tiled["dram__bytes_write.sum"] == 0


def test_a_tiled_matmul_loads_each_element_once_a_tile_instead_of_once_a_product():
    backend = gpuedu.setup(verbose=False)
    if backend.name != "cpu":
        pytest.skip("the counters are the emulator's")
    import pycuda.gpuarray as gpuarray

    from gpuedu import ops
    n = 64
    a = gpuarray.to_gpu(np.random.default_rng(2).random((n, n), dtype=np.float32))
    with gpuedu.profile() as prof:
        ops.matmul(a, a, version=2, block_size=16)   # coalesced, untiled
        ops.matmul(a, a, version=3, tile=16)         # 16 x 16 shared-memory tiles
    untiled, tiled = (k.metrics for k in prof.kernels)
    warps = n * n // 32
    assert untiled[LD_REQ] == warps * 2 * n   # every thread loads one A and one B value per k
    assert tiled[LD_REQ] == warps * 2 * (n // 16)
    assert untiled[LD_REQ] // tiled[LD_REQ] == 16


def test_a_tile_column_in_one_bank_conflicts_31_times_a_request_and_padding_removes_it():
    # transpose v2 reads a column of an unpadded 32 x 32 tile: 32 words in one bank. Its tile sits
    # next to other module data in the same cache line, which must not hide any lane's access.
    backend = gpuedu.setup(verbose=False)
    if backend.name != "cpu":
        pytest.skip("the counters are the emulator's")
    import pycuda.gpuarray as gpuarray

    from gpuedu import ops
    x = gpuarray.to_gpu(np.arange(64 * 64, dtype=np.float32).reshape(64, 64))
    with gpuedu.profile() as prof:
        ops.transpose(x, version=2)
        ops.transpose(x, version=3)
    unpadded, padded = (k.metrics for k in prof.kernels)
    requests = 64 * 64 // 32
    assert unpadded["smsp__sass_inst_executed_op_shared_ld.sum"] == requests
    assert unpadded[SH_LD_WAVES] == requests * 32 and unpadded[SH_LD_CONFLICTS] == requests * 31
    assert padded[SH_LD_WAVES] == requests and padded[SH_LD_CONFLICTS] == 0


def test_a_float4_load_whose_parts_are_used_one_by_one_is_still_one_request():
    # matmul v6 loads float4s and uses .x .y .z .w separately: the host compiler must not split the
    # load into four scalar ones (four requests), since a GPU's vector load is one instruction.
    backend = gpuedu.setup(verbose=False)
    if backend.name != "cpu":
        pytest.skip("the counters are the emulator's")
    import pycuda.gpuarray as gpuarray

    from gpuedu import ops
    a = gpuarray.to_gpu(np.ones((128, 128), np.float32))
    with gpuedu.profile() as prof:
        ops.matmul(a, a, version=5)
        ops.matmul(a, a, version=6)
    scalar, vector = (k.metrics for k in prof.kernels)
    assert scalar[LD_REQ] == 4 * vector[LD_REQ]
    assert scalar[LD_SECT] == vector[LD_SECT]          # the same bytes, in a quarter of the requests
    assert vector[LD_SECT] == 16 * vector[LD_REQ]


def test_an_unrolled_loop_counts_each_turn_s_store_as_an_instruction_of_its_own(emu):
    # nvcc unrolls a `#pragma unroll` loop: four store instructions, one per turn. Turn 0's is made by the 16
    # even lanes (16 words of one 128-byte row: 4 sectors), turns 1-3's by all 32 lanes (4 sectors each).
    mod, gpuarray = emu
    out = gpuarray.zeros(128, np.float32)
    m = profiled(mod.get_function("skip_first_turn_unrolled"), out, block=(32, 1, 1), grid=(1, 1))
    assert m[ST_REQ] == 4 and m[ST_SECT] == 16
    assert m["smsp__sass_inst_executed_op_global_st.sum"] == 4
    expected = np.ones((4, 32), np.float32)
    expected[0, 1::2] = 0
    np.testing.assert_array_equal(out.get().reshape(4, 32), expected)
    # Without the pragma the host compiler keeps the loop, one store instruction, and a lane's k-th store is
    # paired with the other lanes' k-th: an odd lane's first store (row 1) with an even lane's (row 0), so
    # each of the first three requests spans two rows (8 sectors), the last only the even lanes' row 3.
    out.fill(0)
    m = profiled(mod.get_function("skip_first_turn"), out, block=(32, 1, 1), grid=(1, 1))
    assert m[ST_REQ] == 4 and m[ST_SECT] == 3 * 8 + 4
    np.testing.assert_array_equal(out.get().reshape(4, 32), expected)


SHUFFLE_SOURCE = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
// Warp w of each block shuffles w + 1 times down (the loop), then once by xor, once by lane, once up, once through
// a tile of cooperative groups; a ballot is a warp intrinsic but no shuffle. A block of 3 warps: 6 + 3 * 4 = 18.
extern "C" __global__ void uneven_shuffles(float* out) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float v = (float)lane;
  for (int k = 0; k <= warp; ++k) v += __shfl_down_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 16);
  v += __shfl_sync(0xffffffffu, v, 0);
  v += __shfl_up_sync(0xffffffffu, v, 1);
  v += cg::tiled_partition<32>(cg::this_thread_block()).shfl(v, 3);
  if (__ballot_sync(0xffffffffu, v > 0.0f)) out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
"""


def test_each_warp_s_shuffle_is_counted_once_as_the_shfl_of_sass_inst_executed_per_opcode(emu):
    from pycuda.compiler import SourceModule
    from gpuedu.emulator import _module
    from gpuedu.profiler import metrics
    _, gpuarray = emu
    mod = SourceModule(SHUFFLE_SOURCE, no_extern_c=True)
    out = gpuarray.zeros(5 * 96, np.float32)
    before = _module.get_threads()
    counted = []
    try:
        for workers in (1, 4):
            _module.set_threads(workers)
            with gpuedu.profile() as prof:
                mod.get_function("uneven_shuffles")(out, block=(96, 1, 1), grid=(5, 1))
            counted.append(prof.kernels[0])
    finally:
        _module.set_threads(before)
    assert [rec.metrics[metrics.SHUFFLES] for rec in counted] == [5 * 18, 5 * 18]
    assert metrics.kind(metrics.SHUFFLES) == "counted"
    assert "sass__inst_executed_per_opcode," in metrics.ncu_command() + ","   # asked for without the instance
    assert "[SHFL]" not in metrics.ncu_command()


def test_a_kernel_without_shuffles_counts_none(emu):
    from gpuedu.profiler import metrics
    mod, gpuarray = emu
    x, y = gpuarray.to_gpu(np.ones(1024, np.float32)), gpuarray.empty(1024, np.float32)
    with gpuedu.profile() as prof:
        mod.get_function("read_strided")(y, x, np.int32(1024), np.int32(1), block=(256, 1, 1), grid=(4, 1))
    assert prof.kernels[0].metrics[metrics.SHUFFLES] == 0
