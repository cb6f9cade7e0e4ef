"""Hopper's TMA copies and thread-block clusters as the counters see them: a tensor load is one UTMALDG whatever its
box (its bytes and the mbarrier waits are the emulator's own counts), a store one UTMASTG, and a multicast one load
whose global bytes are read once however many blocks it lands in (lesson 15 counts what a multicast saves). A
profiled build runs a cluster's blocks as the plain build does (same results); memcheck and racecheck report nothing
false on distributed shared memory, and racecheck takes the cluster's barrier as the barrier it is."""
import numpy as np
import pytest

import gpuedu
from gpuedu import tma
from gpuedu.profiler import metrics

SOURCE = r"""
#include <cooperative_groups.h>
#include <cuda.h>
namespace cg = cooperative_groups;

__device__ inline unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ inline unsigned long long map_addr(const CUtensorMap* m) { return reinterpret_cast<unsigned long long>(m); }
__device__ inline void wait_parity(unsigned bar, unsigned parity) {
    asm volatile("{ .reg .pred P; WAIT: mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1; @P bra DONE; "
                 "bra WAIT; DONE: }" :: "r"(bar), "r"(parity) : "memory");
}

// Both blocks of a cluster take the same 64 x 64 tile of FP32 (`half`'s boxes: 32 rows of it). multicast 0: each
// block loads both halves itself (2 loads a block); 1: block rank r loads half r into both blocks (1 load a block).
// Then each block stores its tile back to `dst` (block b at rows 64 b), one TMA store a block.
extern "C" __global__ void __cluster_dims__(2, 1, 1) shared_tile(const __grid_constant__ CUtensorMap half,
                                                                const __grid_constant__ CUtensorMap dst,
                                                                int multicast)
{
    __shared__ __align__(128) float tile[64 * 64];
    __shared__ __align__(8) unsigned long long full;
    cg::cluster_group cluster = cg::this_cluster();
    const unsigned rank = cluster.block_rank(), bar = smem_addr(&full);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(1) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(64 * 64 * 4)
                     : "memory");
    }
    cluster.sync();
    if (threadIdx.x == 0) {
        if (multicast) {
            const unsigned short both = 0x3;
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                         ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;"
                         :: "r"(smem_addr(tile + rank * 32 * 64)), "l"(map_addr(&half)), "r"(0), "r"((int)rank * 32),
                            "r"(bar), "h"(both) : "memory");
        } else {
            for (int h = 0; h < 2; ++h)
                asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                             " [%0], [%1, {%2, %3}], [%4];"
                             :: "r"(smem_addr(tile + h * 32 * 64)), "l"(map_addr(&half)), "r"(0), "r"(h * 32),
                                "r"(bar) : "memory");
        }
    }
    wait_parity(bar, 0);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                     :: "l"(map_addr(&dst)), "r"(0), "r"((int)blockIdx.x * 64), "r"(smem_addr(tile)) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
    cluster.sync();
}

// A sum a cluster of 4 blocks, pushed: thread 0 of each block sums its block's 128 values and stores the sum in slot
// `rank` of block rank 0's shared array (a store through distributed shared memory); thread 1 of rank 0 adds the four
// slots, after the cluster's barrier (`synced` 0 leaves it out: a race with thread 0's store, which racecheck names).
extern "C" __global__ void __cluster_dims__(4, 1, 1) cluster_push_sum(const float* in, float* out, int synced)
{
    __shared__ float slots[4];
    cg::cluster_group cluster = cg::this_cluster();
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (int i = 0; i < 128; ++i) s += in[blockIdx.x * 128 + i];
        cluster.map_shared_rank(slots, 0u)[cluster.block_rank()] = s;
    }
    if (synced) cluster.sync();   // (every slot written before rank 0 reads them; rank 0 alone reads, its own memory)
    if (cluster.block_rank() == 0 && threadIdx.x == 1) out[blockIdx.x / 4] = ((slots[0] + slots[1]) + slots[2]) + slots[3];
    cluster.sync();               // (no block exits while another may still store into its shared memory)
}
"""


@pytest.fixture(scope="module")
def module():
    if gpuedu.setup(verbose=False).name != "cpu":
        pytest.skip("the counters are the emulator's")
    from pycuda.compiler import SourceModule
    import pycuda.gpuarray as gpuarray
    return SourceModule(SOURCE, no_extern_c=True, arch="sm_90a"), gpuarray


@pytest.mark.parametrize("multicast, loads, read", [(0, 8, 8 * 32 * 64 * 4), (1, 4, 4 * 32 * 64 * 4)])
def test_a_tma_load_is_one_utmaldg_and_a_multicast_reads_its_bytes_once(module, multicast, loads, read):
    mod, gpuarray = module
    src = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    src_gpu, dst = gpuarray.to_gpu(src), gpuarray.zeros((4 * 64, 64), np.float32)
    half, whole = tma.tensor_map(src_gpu, box=(32, 64)), tma.tensor_map(dst, box=(64, 64))
    with gpuedu.profile() as prof:
        mod.get_function("shared_tile")(half, whole, np.int32(multicast), block=(128, 1, 1), grid=(4, 1))
    (rec,) = prof.kernels
    np.testing.assert_array_equal(dst.get(), np.tile(src, (4, 1)))   # every block held the whole tile
    # 4 blocks (2 clusters): 2 loads a block without multicast, 1 with it; 1 store a block
    assert rec.metrics[metrics.TMA_LOADS] == loads
    assert rec.counts["tma_load_bytes"] == read
    assert rec.metrics[metrics.TMA_STORES] == 4
    assert rec.counts["tma_store_bytes"] == 4 * 64 * 64 * 4
    assert rec.counts["mbarrier_waits"] >= 4 * 128     # every thread of every block waits on its block's phase


def test_a_profiled_cluster_runs_as_the_plain_build_and_racecheck_orders_accesses_by_the_cluster_barrier(module):
    mod, _ = module
    from pycuda import driver as drv
    values = np.random.default_rng(9).standard_normal(8 * 128).astype(np.float32)
    plain = np.zeros(2, np.float32)
    push_sum = mod.get_function("cluster_push_sum")
    push_sum(drv.In(values), drv.Out(plain), np.int32(1), block=(128, 1, 1), grid=(8, 1))
    for check in (gpuedu.profile, gpuedu.memcheck, gpuedu.racecheck):
        out = np.zeros(2, np.float32)
        with check() as prof:
            push_sum(drv.In(values), drv.Out(out), np.int32(1), block=(128, 1, 1), grid=(8, 1))
        np.testing.assert_array_equal(out, plain)
        assert prof.errors == [] and prof.hazards == []
        assert [k.name for k in prof.kernels] == ["cluster_push_sum"]
    np.testing.assert_allclose(plain, values.reshape(2, 512).astype(np.float64).sum(axis=1), atol=1e-4)
    # without the cluster's barrier, thread 1 reads the slot thread 0 of its block writes: racecheck names the race
    with gpuedu.racecheck() as rc:
        push_sum(drv.In(values), drv.Out(np.zeros(2, np.float32)), np.int32(0), block=(128, 1, 1), grid=(8, 1))
    assert [(h["kind"], h["first"]["thread"], h["second"]["thread"]) for h in rc.hazards] == [
        ("read-after-write", (0, 0, 0), (1, 0, 0))]


@pytest.mark.nvcc
def test_the_kernels_here_are_cuda_that_nvcc_compiles_for_sm_90a(tmp_path):
    import shutil
    import subprocess
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    path = tmp_path / "kernel.cu"
    path.write_text(SOURCE)     # (its kernels say extern "C" themselves: SourceModule's no_extern_c=True)
    proc = subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-o", str(tmp_path / "k.cubin"), str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
