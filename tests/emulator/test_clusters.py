"""Hopper's thread-block clusters in the emulator (gpuedu_cluster.h): a kernel declared with __cluster_dims__ runs its
grid as clusters whose blocks run together; cooperative_groups' this_cluster() (ranks, map_shared_rank, sync) and
PTX's cluster instructions (the special registers, mapa, ld/st.shared::cluster, barrier.cluster, an arrival on
another block's mbarrier, TMA multicast) with the PTX ISA's semantics; the deadlock report of a cluster barrier; and
what is refused. Every kernel here is valid CUDA for sm_90a (test_compile_nvcc.py compiles them with nvcc)."""
import numpy as np
import pytest

from gpuedu import tma
from gpuedu.emulator import compiler, driver as drv, gpuarray
from gpuedu.emulator._errors import CompileError, LaunchError, LogicError

pytestmark = pytest.mark.usefixtures("context")

CLUSTER_SRC = r"""
#include <cooperative_groups.h>
#include <cuda.h>
namespace cg = cooperative_groups;

__device__ inline unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

// Each thread reads its neighbour block's word (rank ^ 1) through distributed shared memory, and records what the
// cluster says of itself: out[block][t] = the neighbour's word; about[block] = {rank, num_blocks, block_index.x,
// block_index.y, dim_blocks.x, dim_blocks.y, thread_rank of thread 0}.
extern "C" __global__ void __cluster_dims__(2, 2, 1) swap_2x2(int* out, unsigned* about)
{
    __shared__ int word[64];
    cg::cluster_group cluster = cg::this_cluster();
    const unsigned block = blockIdx.y * gridDim.x + blockIdx.x, t = threadIdx.x;
    word[t] = (int)(block * 1000 + t);
    cluster.sync();
    const int* theirs = cluster.map_shared_rank(word, cluster.block_rank() ^ 1u);
    out[block * 64 + t] = theirs[t];
    if (t == 0) {
        unsigned* a = about + block * 7;
        a[0] = cluster.block_rank(); a[1] = cluster.num_blocks();
        a[2] = cluster.block_index().x; a[3] = cluster.block_index().y;
        a[4] = cluster.dim_blocks().x; a[5] = cluster.dim_blocks().y; a[6] = (unsigned)cluster.thread_rank();
    }
    cluster.sync();   // (no block exits while another still reads its shared memory)
}

// A sum over the cluster's blocks: each sums its part in its own shared memory, then rank 0 adds the others' through
// distributed shared memory. out[cluster] = the sum of in over the cluster's blocks.
extern "C" __global__ void __cluster_dims__(4, 1, 1) cluster_sum(const float* in, float* out)
{
    __shared__ float part[128];
    cg::cluster_group cluster = cg::this_cluster();
    const unsigned t = threadIdx.x;
    part[t] = in[blockIdx.x * 128 + t];
    for (unsigned s = 64; s > 0; s >>= 1) {
        __syncthreads();
        if (t < s) part[t] += part[t + s];
    }
    cluster.sync();
    if (cluster.block_rank() == 0 && t == 0) {
        float sum = 0.0f;
        for (unsigned r = 0; r < cluster.num_blocks(); ++r) sum += *cluster.map_shared_rank(&part[0], r);
        out[blockIdx.x / 4] = sum;
    }
    cluster.sync();
}

// The cluster's special registers (PTX mov), per block: {%cluster_ctarank, %cluster_nctarank, %clusterid.x,
// %nclusterid.x, %cluster_ctaid.x, %cluster_nctaid.x}.
extern "C" __global__ void __cluster_dims__(4, 1, 1) registers(unsigned* out)
{
    unsigned v[6];
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(v[0]));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(v[1]));
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(v[2]));
    asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(v[3]));
    asm volatile("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(v[4]));
    asm volatile("mov.b32 %0, %%cluster_nctaid.x;" : "=r"(v[5]));
    if (threadIdx.x == 0)
        for (int i = 0; i < 6; ++i) out[blockIdx.x * 6 + i] = v[i];
}

// A ring in PTX: each block stores its words into the next block's slots (mapa, st.shared::cluster), arrives on that
// block's mbarrier (.shared::cluster), waits on its own, then reads its slots (ld.shared::cluster on its own address).
extern "C" __global__ void __cluster_dims__(4, 1, 1) ptx_ring(int* out)
{
    __shared__ int slot[32];
    __shared__ __align__(8) unsigned long long bar;
    unsigned rank, n;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    const unsigned b = smem_addr(&bar), here = smem_addr(&slot[threadIdx.x]);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(32) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
    unsigned there, their_bar;
    const unsigned next = (rank + 1) % n;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(there) : "r"(here), "r"(next));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(their_bar) : "r"(b), "r"(next));
    const int v = (int)(blockIdx.x * 1000 + threadIdx.x);
    asm volatile("st.shared::cluster.u32 [%0], %1;" :: "r"(there), "r"(v) : "memory");
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" :: "r"(their_bar) : "memory");
    asm volatile("{ .reg .pred P; WAIT: mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1; @P bra DONE; "
                 "bra WAIT; DONE: }" :: "r"(b), "r"(0) : "memory");
    int got;
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(got) : "r"(here) : "memory");
    out[blockIdx.x * 32 + threadIdx.x] = got;
    asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory");
}

// barrier.cluster split: every block writes its word, arrives, does work of its own, then waits; after the wait
// each reads every block's word (generic pointers from mapa.u64). out[block][r] = block r's word.
extern "C" __global__ void __cluster_dims__(2, 1, 1) split_barrier(unsigned* out, unsigned* own_work)
{
    __shared__ unsigned word;
    if (threadIdx.x == 0) word = 100 + blockIdx.x;
    asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
    own_work[blockIdx.x * blockDim.x + threadIdx.x] = threadIdx.x * 3;   // (between arrive and wait)
    asm volatile("barrier.cluster.wait;" ::: "memory");
    if (threadIdx.x < 2) {
        unsigned long long theirs;
        asm volatile("mapa.u64 %0, %1, %2;" : "=l"(theirs) : "l"(&word), "r"(threadIdx.x));
        out[blockIdx.x * 2 + threadIdx.x] = *reinterpret_cast<const unsigned*>(theirs);
    }
    cg::this_cluster().sync();
}

// TMA multicast: rank 0 loads the box at (x, y) into every block of the cluster (ctaMask 0b11), each completing its
// own mbarrier; every block copies its tile out. out[block] = the box.
extern "C" __global__ void __cluster_dims__(2, 1, 1) multicast_box(const __grid_constant__ CUtensorMap map,
                                                                  float* out, int x, int y, unsigned bytes)
{
    __shared__ __align__(128) float tile[16 * 16];
    __shared__ __align__(8) unsigned long long bar;
    const unsigned b = smem_addr(&bar);
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(1) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(bytes) : "memory");
    }
    cg::this_cluster().sync();   // (every block's mbarrier expects its bytes before the copy lands)
    if (rank == 0 && threadIdx.x == 0) {
        const unsigned short mask = 0x3;
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                     " [%0], [%1, {%2, %3}], [%4], %5;"
                     :: "r"(smem_addr(tile)), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(x), "r"(y),
                        "r"(b), "h"(mask) : "memory");
    }
    asm volatile("{ .reg .pred P; WAIT: mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1; @P bra DONE; "
                 "bra WAIT; DONE: }" :: "r"(b), "r"(0) : "memory");
    for (unsigned i = threadIdx.x; i < 256; i += blockDim.x) out[blockIdx.x * 256 + i] = tile[i];
    cg::this_cluster().sync();
}

// Without __cluster_dims__ a block is a cluster of one: rank 0 of 1, and sync() waits for the block's threads.
extern "C" __global__ void cluster_of_one(unsigned* out)
{
    __shared__ unsigned seen[64];
    cg::cluster_group cluster = cg::this_cluster();
    seen[threadIdx.x] = threadIdx.x + 1;
    cluster.sync();
    unsigned sum = 0;
    for (unsigned i = 0; i < blockDim.x; ++i) sum += seen[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum + 1000 * cluster.block_rank() + 100000 * (cluster.num_blocks() - 1);
}

// What goes wrong, by `mode`: 1 the rank-1 block waits on an mbarrier no one arrives on while rank 0 syncs the
// cluster (a deadlock); 2 a wait without an arrival; 3 two arrivals without a wait; 4 a rank past the cluster;
// 5 rank 0 reads rank 1's shared memory after rank 1 has exited; 6 ld.shared::cluster of a rank past the cluster.
extern "C" __global__ void __cluster_dims__(2, 1, 1) misuse(int mode, int* out)
{
    __shared__ int word;
    __shared__ __align__(8) unsigned long long bar;
    cg::cluster_group cluster = cg::this_cluster();
    const unsigned rank = cluster.block_rank();
    word = (int)rank;
    if (mode == 1) {
        if (rank == 1) {
            if (threadIdx.x == 0)
                asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_addr(&bar)), "r"(1) : "memory");
            __syncthreads();
            asm volatile("{ .reg .pred P; WAIT: mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1; @P bra DONE; "
                         "bra WAIT; DONE: }" :: "r"(smem_addr(&bar)), "r"(0) : "memory");
        }
        cluster.sync();
    } else if (mode == 2) {
        cluster.barrier_wait();
    } else if (mode == 3) {
        cluster.barrier_arrive();
        cluster.barrier_arrive();
    } else if (mode == 4) {
        out[threadIdx.x] = *cluster.map_shared_rank(&word, 2u);
    } else if (mode == 5) {
        if (rank == 1) return;
        cluster.sync();
        out[threadIdx.x] = *cluster.map_shared_rank(&word, 1u);
    } else if (mode == 6) {
        int v;
        const unsigned far = (5u << 24) | smem_addr(&word);
        asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(far) : "memory");
        out[threadIdx.x] = v;
    }
}

// A cluster of more blocks than the portable 8.
extern "C" __global__ void __cluster_dims__(16, 1, 1) too_big(int* out) { out[blockIdx.x] = 1; }
"""


@pytest.fixture(scope="module")
def cluster_module():
    return compiler.SourceModule(CLUSTER_SRC, arch="sm_90a", no_extern_c=True)


def test_a_kernel_knows_its_cluster_dims_from_its_declaration(cluster_module):
    assert cluster_module.get_function("swap_2x2").cluster_dims == (2, 2, 1)
    assert cluster_module.get_function("cluster_sum").cluster_dims == (4, 1, 1)
    assert cluster_module.get_function("cluster_of_one").cluster_dims is None


@pytest.mark.parametrize("schedule", ["forward", "reverse", "random"])
def test_blocks_of_a_2x2_cluster_read_each_others_shared_memory(cluster_module, schedule):
    compiler.set_schedule(schedule, seed=11)
    try:
        out = np.zeros((8, 64), np.int32)
        about = np.zeros((8, 7), np.uint32)
        cluster_module.get_function("swap_2x2")(drv.Out(out), drv.Out(about), block=(64, 1, 1), grid=(4, 2))
    finally:
        compiler.set_schedule("forward")
    for by in range(2):
        for bx in range(4):
            block = by * 4 + bx
            rank = (bx % 2) + 2 * (by % 2)           # x fastest within the cluster
            partner_x, partner_y = bx ^ 1, by       # rank ^ 1 flips the x bit
            assert list(out[block]) == [(partner_y * 4 + partner_x) * 1000 + t for t in range(64)]
            assert list(about[block]) == [rank, 4, bx % 2, by % 2, 2, 2, rank * 64]


def test_a_cluster_sums_its_blocks_through_distributed_shared_memory(cluster_module):
    values = np.random.default_rng(4).standard_normal(8 * 128).astype(np.float32)
    out = np.zeros(2, np.float32)
    cluster_module.get_function("cluster_sum")(drv.In(values), drv.Out(out), block=(128, 1, 1), grid=(8, 1))
    np.testing.assert_allclose(out, values.reshape(2, 512).astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_the_special_registers_give_the_rank_and_the_cluster(cluster_module):
    out = np.zeros((8, 6), np.uint32)
    cluster_module.get_function("registers")(drv.Out(out), block=(32, 1, 1), grid=(8, 1))
    expected = [[b % 4, 4, b // 4, 2, b % 4, 4] for b in range(8)]
    assert out.tolist() == expected


@pytest.mark.parametrize("schedule", ["forward", "reverse", "random"])
def test_a_ring_of_remote_stores_and_remote_mbarrier_arrivals(cluster_module, schedule):
    compiler.set_schedule(schedule, seed=7)
    try:
        out = np.zeros((8, 32), np.int32)
        cluster_module.get_function("ptx_ring")(drv.Out(out), block=(32, 1, 1), grid=(8, 1))
    finally:
        compiler.set_schedule("forward")
    for b in range(8):
        previous = (b // 4) * 4 + (b % 4 - 1) % 4
        assert list(out[b]) == [previous * 1000 + t for t in range(32)]


def test_a_split_cluster_barrier_and_generic_mapa(cluster_module):
    out = np.zeros((4, 2), np.uint32)
    work = np.zeros(4 * 64, np.uint32)
    cluster_module.get_function("split_barrier")(drv.Out(out), drv.Out(work), block=(64, 1, 1), grid=(4, 1))
    assert out.tolist() == [[100, 101], [100, 101], [102, 103], [102, 103]]
    assert work.tolist() == [3 * (i % 64) for i in range(4 * 64)]


def test_a_tma_multicast_lands_the_box_in_every_block_of_the_mask(cluster_module):
    matrix = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    dev = gpuarray.to_gpu(matrix)
    tmap = tma.tensor_map(dev, box=(16, 16))
    out = np.zeros((4, 256), np.float32)
    cluster_module.get_function("multicast_box")(tmap, drv.Out(out), np.int32(16), np.int32(32),
                                                 np.uint32(16 * 16 * 4), block=(64, 1, 1), grid=(4, 1))
    box = matrix[32:48, 16:32].ravel()
    for b in range(4):
        np.testing.assert_array_equal(out[b], box)


def test_a_launch_without_clusters_is_a_cluster_of_one_block_per_worker(cluster_module):
    drv_threads = compiler.set_threads(2)
    try:
        out = np.zeros((6, 64), np.uint32)
        cluster_module.get_function("cluster_of_one")(drv.Out(out), block=(64, 1, 1), grid=(6, 1))
    finally:
        compiler.set_threads(drv_threads)
    assert (out == 64 * 65 // 2).all()


@pytest.mark.parametrize("mode,pattern", [
    (1, r"deadlock at barrier\.cluster \(cluster\.sync\(\)\): 64 of the cluster's 128 live threads arrived .*block "
        r"rank 1 of the cluster\) has not arrived and waits on an mbarrier"),
    (2, r"ran barrier\.cluster\.wait \(line \d+\) without barrier\.cluster\.arrive before it"),
    (3, r"ran barrier\.cluster\.arrive \(line \d+\) a second time without barrier\.cluster\.wait in between"),
    (4, r"ran cluster\.map_shared_rank \(line \d+\) for block rank 2 of a cluster of 2 blocks \(ranks 0 to 1\)"),
    (5, r"on the shared memory of block rank 1 of the cluster, whose threads have all exited.*end the kernel with "
        r"cluster\.sync\(\)"),
    (6, r"ran ld\.shared::cluster \(line \d+\): 0x5\w+ is no shared::cluster address of this cluster of 2 blocks"),
])
def test_misuse_of_a_cluster_stops_the_launch_with_the_reason(cluster_module, mode, pattern):
    out = np.zeros(64, np.int32)
    with pytest.raises(LaunchError, match=pattern):
        cluster_module.get_function("misuse")(np.int32(mode), drv.Out(out), block=(64, 1, 1), grid=(2, 1))
    # the process and the module carry on
    ok = np.zeros((4, 32), np.int32)
    cluster_module.get_function("ptx_ring")(drv.Out(ok), block=(32, 1, 1), grid=(4, 1))


def test_a_grid_that_is_not_whole_clusters_is_refused(cluster_module):
    with pytest.raises(LogicError, match=r"cluster misconfiguration: kernel 'swap_2x2' declares __cluster_dims__"
                                         r"\(2, 2, 1\), and the grid's y \(3\) is not a multiple of the cluster's \(2\)"):
        cluster_module.get_function("swap_2x2")(drv.Out(np.zeros(1, np.int32)), drv.Out(np.zeros(1, np.uint32)),
                                                block=(64, 1, 1), grid=(4, 3))
    with pytest.raises(LogicError, match=r"__cluster_dims__\(16, 1, 1\), 16 blocks a cluster; at most 8"):
        cluster_module.get_function("too_big")(drv.Out(np.zeros(16, np.int32)), block=(32, 1, 1), grid=(16, 1))


def test_clusters_need_sm_90():
    with pytest.raises(CompileError, match=r"__cluster_dims__ is not supported for this GPU architecture \(kernel k; "
                                           r"the module is built for sm_80\)"):
        compiler.SourceModule('__global__ void __cluster_dims__(2, 1, 1) k(int* p) { *p = 1; }', arch="sm_80")
    with pytest.raises(CompileError, match=r"the cluster's special registers need sm_90 or later"):
        compiler.SourceModule('__global__ void k(unsigned* p) { unsigned r; '
                              'asm("mov.b32 %0, %%cluster_ctarank;" : "=r"(r)); *p = r; }', arch="sm_80")


@pytest.mark.parametrize("statement,pattern", [
    ('asm volatile("mbarrier.arrive.shared::cluster.b64 %0, [%1];" : "=l"(s) : "r"(a));',
     r"an arrival on another block's mbarrier \(\.shared::cluster\) returns no state: write _"),
    ('asm volatile("mov.u32 %0, %%laneid;" : "=r"(r));',
     r"the emulator does not run the PTX instruction 'mov\.u32' with '%0, %%laneid': it reads the cluster's special "
     r"registers with mov"),
    ('asm volatile("mov.u32 %0, %%clusterid;" : "=r"(r));',
     r"the emulator does not run the PTX instruction 'mov\.u32' with '%0, %%clusterid'"),
    ('asm volatile("barrier.cluster.arrive %0;" :: "r"(a));', r"barrier\.cluster\.arrive takes no operands"),
])
def test_cluster_ptx_the_emulator_cannot_run_is_refused(statement, pattern):
    source = ("__global__ void k(unsigned* p) { unsigned long long s = 0; unsigned a = 0, r = 0; "
              + statement + " p[0] = r + (unsigned)s + a; }")
    with pytest.raises(CompileError, match=pattern):
        compiler.SourceModule(source, arch="sm_90a")
