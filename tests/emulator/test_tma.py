"""The Tensor Memory Accelerator (cp.async.bulk.tensor, sm_90) in the emulator, and gpuedu.tma's tensor maps: boxes
at the tensor's edges (the elements outside it zeros), each swizzle mode against the ISA's pattern written out here
(CuTe's Swizzle<B, 4, 3> on the shared address: 16-byte chunk bits 4.. XORed with bits 7..), 3-D boxes, stores that
leave out what lies outside the tensor, the load landing when a thread waits on its mbarrier, a ring of stages, a
TMA tile read by wgmma through a matrix descriptor, and what is refused. Every test kernel is valid CUDA for sm_90a
(test_compile_nvcc.py compiles them with nvcc)."""
import numpy as np
import pytest

from gpuedu import tma
from gpuedu.emulator import compiler, driver as drv, gpuarray
from gpuedu.emulator._errors import CompileError, LaunchError

pytestmark = pytest.mark.usefixtures("context")

TMA_SRC = r"""
#include <cuda.h>
#define TILE_WORDS 4096

__device__ inline unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ inline unsigned long long map_addr(const CUtensorMap* m) { return reinterpret_cast<unsigned long long>(m); }
__device__ inline void bar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ inline void expect_bytes(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ inline void arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ inline void wait_parity(unsigned bar, unsigned parity) {
    asm volatile("{ .reg .pred P; WAIT: mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1; @P bra DONE; "
                 "bra WAIT; DONE: }" :: "r"(bar), "r"(parity) : "memory");
}
__device__ inline void load_2d(unsigned dst, const CUtensorMap* map, int x, int y, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(dst), "l"(map_addr(map)), "r"(x), "r"(y), "r"(bar) : "memory");
}
__device__ inline void load_3d(unsigned dst, const CUtensorMap* map, int x, int y, int z, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];"
                 :: "r"(dst), "l"(map_addr(map)), "r"(x), "r"(y), "r"(z), "r"(bar) : "memory");
}
__device__ inline void store_2d(const CUtensorMap* map, int x, int y, unsigned src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"(map_addr(map)), "r"(x), "r"(y), "r"(src) : "memory");
}

// The box at (x, y[, z]) loaded into a tile that held 0xDEADBEEF words; the tile's words and its shared address out.
// `extra`: bytes the phase expects beyond the box's (a wrong count: the wait never completes).
__global__ void load_box(const __grid_constant__ CUtensorMap map, unsigned* out, unsigned* where, int x, int y,
                         int z, int rank, unsigned bytes, unsigned extra, unsigned offset)
{
    __shared__ __align__(1024) unsigned tile[TILE_WORDS + 32];
    __shared__ __align__(8) unsigned long long bar;
    const unsigned t = smem_addr(tile) + offset, b = smem_addr(&bar);
    for (unsigned i = threadIdx.x; i < TILE_WORDS + 32; i += blockDim.x) tile[i] = 0xDEADBEEFu;
    if (threadIdx.x == 0) {
        bar_init(b, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("prefetch.tensormap [%0];" :: "l"(map_addr(&map)) : "memory");
        expect_bytes(b, bytes + extra);
        if (rank == 2) load_2d(t, &map, x, y, b);
        else load_3d(t, &map, x, y, z, b);
    }
    wait_parity(b, 0);
    for (unsigned i = threadIdx.x; i < TILE_WORDS; i += blockDim.x) out[i] = tile[i];
    if (threadIdx.x == 0) where[0] = t;
}

// The tile's words (in) stored as the box at (x, y).
__global__ void store_box(const __grid_constant__ CUtensorMap map, const unsigned* in, int x, int y)
{
    __shared__ __align__(1024) unsigned tile[TILE_WORDS];
    for (unsigned i = threadIdx.x; i < TILE_WORDS; i += blockDim.x) tile[i] = in[i];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        store_2d(&map, x, y, smem_addr(tile));
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
}

// The tile read before anyone waits on its mbarrier (early), then after the wait (late).
__global__ void read_before_wait(const __grid_constant__ CUtensorMap map, unsigned* early, unsigned* late,
                                 unsigned bytes)
{
    __shared__ __align__(1024) unsigned tile[TILE_WORDS];
    __shared__ __align__(8) unsigned long long bar;
    const unsigned t = smem_addr(tile), b = smem_addr(&bar);
    for (unsigned i = threadIdx.x; i < TILE_WORDS; i += blockDim.x) tile[i] = 0xDEADBEEFu;
    if (threadIdx.x == 0) bar_init(b, 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        expect_bytes(b, bytes);
        load_2d(t, &map, 0, 0, b);
    }
    __syncthreads();
    for (unsigned i = threadIdx.x; i < bytes / 4; i += blockDim.x) early[i] = tile[i];
    __syncthreads();
    wait_parity(b, 0);
    for (unsigned i = threadIdx.x; i < bytes / 4; i += blockDim.x) late[i] = tile[i];
}

// A ring of 2 stages: thread 0 loads box after box of 8 rows x 32 floats; warp 1 sums each column over every box.
__global__ void ring_sum(const __grid_constant__ CUtensorMap map, float* sums, int boxes)
{
    __shared__ __align__(128) float stage[2][8 * 32];
    __shared__ __align__(8) unsigned long long full[2], empty[2];
    if (threadIdx.x == 0) {
        for (int s = 0; s < 2; ++s) {
            bar_init(smem_addr(&full[s]), 1);
            bar_init(smem_addr(&empty[s]), 1);
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {                      // the producer
        for (int i = 0; i < boxes; ++i) {
            const int s = i % 2;
            wait_parity(smem_addr(&empty[s]), ((i / 2) & 1) ^ 1);
            expect_bytes(smem_addr(&full[s]), 8 * 32 * 4);
            load_2d(smem_addr(stage[s]), &map, 0, 8 * i, smem_addr(&full[s]));
        }
    } else if (threadIdx.x >= 32) {              // the consumers: warp 1
        const unsigned lane = threadIdx.x - 32;
        float sum = 0.0f;
        for (int i = 0; i < boxes; ++i) {
            const int s = i % 2;
            wait_parity(smem_addr(&full[s]), (i / 2) & 1);
            for (int r = 0; r < 8; ++r) sum += stage[s][r * 32 + lane];
            __syncwarp();
            if (lane == 0) arrive(smem_addr(&empty[s]));
        }
        sums[lane] = sum;
    }
}

// D (64 x 8, f32) = A (64 x 16, f16, K-major, 32-byte swizzle) B (16 x 8, f16, N-major, no swizzle), both tiles loaded
// by TMA, read by wgmma through descriptors.
__global__ void tma_wgmma(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                          float* d)
{
    __shared__ __align__(1024) unsigned short a[64 * 16];
    __shared__ __align__(1024) unsigned short b[16 * 8];
    __shared__ __align__(8) unsigned long long bar;
    const unsigned sa = smem_addr(a), sb = smem_addr(b), sbar = smem_addr(&bar);
    if (threadIdx.x == 0) bar_init(sbar, 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        expect_bytes(sbar, (64 * 16 + 16 * 8) * 2);
        load_2d(sa, &a_map, 0, 0, sbar);
        load_2d(sb, &b_map, 0, 0, sbar);
    }
    wait_parity(sbar, 0);
    // A: rows of 32 bytes, 8 rows (a core matrix's) 256 bytes apart (SBO); 32-byte swizzle (mode 3).
    const unsigned long long a_desc = ((sa & 0x3FFFF) >> 4) | (1ull << 16) | ((256ull >> 4) << 32) | (3ull << 62);
    // B: k-rows of 8 halves (16 bytes), the next 8 k 128 bytes further (LBO); no swizzle.
    const unsigned long long b_desc = ((sb & 0x3FFFF) >> 4) | ((128ull >> 4) << 16) | (0ull << 32);
    float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, 1, 1, 1, 0, 1;"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(a_desc), "l"(b_desc));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    const unsigned w = threadIdx.x / 32, l = threadIdx.x % 32;
    const float v[4] = {d0, d1, d2, d3};
    for (int j = 0; j < 4; ++j) d[(16 * w + l / 4 + 8 * (j / 2)) * 8 + 2 * (l % 4) + j % 2] = v[j];
}
"""


@pytest.fixture(scope="module")
def tma_module():
    return compiler.SourceModule(TMA_SRC, arch="sm_90a")


def _line(marker):
    return next(k for k, text in enumerate(TMA_SRC.splitlines(), 1) if marker in text)


def _box_image(tensor, start, box, swizzle, address):
    """The bytes a box leaves in shared memory at ``address``, written from the ISA's description: the box's
    elements (zeros outside the tensor) dense, innermost side contiguous, then each 16-byte chunk moved to where
    Swizzle<B, 4, 3> of its shared address puts it (B = 1, 2, 3 for the 32, 64, 128-byte modes)."""
    index = np.ix_(*[np.arange(s, s + b) for s, b in zip(start, box)])
    dense = np.zeros(box, tensor.dtype)
    inside = np.ones(box, bool)
    for axis, ix in enumerate(index):
        inside &= (ix >= 0) & (ix < tensor.shape[axis])
    clipped = tuple(np.clip(ix, 0, n - 1) for ix, n in zip(index, tensor.shape))
    dense[inside] = tensor[clipped][inside]
    raw = dense.reshape(-1).view(np.uint8)
    bits = {0: 0, 32: 1, 64: 2, 128: 3}[swizzle]
    image = np.zeros_like(raw)
    for o in range(0, raw.size, 16):
        a = address + o
        moved = a ^ (((a >> 7) & ((1 << bits) - 1)) << 4)
        image[moved - address:moved - address + 16] = raw[o:o + 16]
    return image


def _load(module, tensor, box, start, swizzle, extra=0, offset=0):
    array = gpuarray.to_gpu(tensor)
    tmap = tma.tensor_map(array, box=box, swizzle=swizzle)
    out, where = np.zeros(4096, np.uint32), np.zeros(1, np.uint32)
    coords = list(start[::-1]) + [0] * (3 - len(start))        # innermost first, as PTX takes them
    nbytes = int(np.prod(box)) * tensor.itemsize
    module.get_function("load_box")(tmap, drv.Out(out), drv.Out(where), *(np.int32(c) for c in coords),
                                    np.int32(len(box)), np.uint32(nbytes), np.uint32(extra), np.uint32(offset),
                                    block=(64, 1, 1))
    return out.view(np.uint8)[:nbytes], int(where[0])


EDGES = [(0, 0), (30, 20), (-3, -5), (36, 17), (-7, 22), (39, 23)]


@pytest.mark.parametrize("swizzle,box", [(0, (16, 8)), (32, (16, 8)), (64, (12, 16)), (128, (24, 32)),
                                         (0, (5, 24))])
@pytest.mark.parametrize("start", EDGES)
def test_a_2d_box_is_the_tensors_elements_zeros_outside_it_placed_by_the_swizzle(tma_module, swizzle, box, start):
    tensor = (np.arange(40 * 24, dtype=np.float32).reshape(40, 24) + 1)
    got, address = _load(tma_module, tensor, box, start, swizzle)
    assert address % 1024 == 0
    np.testing.assert_array_equal(got, _box_image(tensor, start, box, swizzle, address))


@pytest.mark.parametrize("dtype,box", [(np.float16, (8, 64)), (np.uint8, (4, 128))])
def test_the_128_byte_swizzle_with_half_and_byte_elements(tma_module, dtype, box):
    tensor = (np.arange(20 * 208) % 251 + 1).astype(dtype).reshape(20, 208)
    got, address = _load(tma_module, tensor, box, (3, 150), 128)
    np.testing.assert_array_equal(got, _box_image(tensor, (3, 150), box, 128, address))
    assert (got == 0).any() and (got != 0).any()        # past column 207: zeros


@pytest.mark.parametrize("start", [(0, 0, 0), (1, -2, 5), (2, 6, -4)])
def test_a_3d_box(tma_module, start):
    tensor = np.arange(3 * 10 * 16, dtype=np.int32).reshape(3, 10, 16) - 100
    got, address = _load(tma_module, tensor, (2, 6, 8), start, 32)
    np.testing.assert_array_equal(got, _box_image(tensor, start, (2, 6, 8), 32, address))


def test_a_map_of_a_padded_array_reads_its_rows_where_its_strides_put_them(tma_module):
    padded = np.arange(12 * 40, dtype=np.float32).reshape(12, 40)
    array = gpuarray.to_gpu(padded)[:, :28]                 # rows 160 bytes apart, 28 elements each
    tmap = tma.tensor_map(array, box=(4, 8), swizzle=0)
    out, where = np.zeros(4096, np.uint32), np.zeros(1, np.uint32)
    tma_module.get_function("load_box")(tmap, drv.Out(out), drv.Out(where), np.int32(24), np.int32(9), np.int32(0),
                                        np.int32(2), np.uint32(128), np.uint32(0), np.uint32(0), block=(32, 1, 1))
    want = np.zeros((4, 8), np.float32)
    want[:3, :4] = padded[9:12, 24:28]                       # (columns 28 and up are past the view's edge)
    np.testing.assert_array_equal(out[:32].view(np.float32).reshape(4, 8), want)


@pytest.mark.parametrize("swizzle,box", [(0, (16, 8)), (64, (8, 16)), (128, (16, 32))])
@pytest.mark.parametrize("start", [(0, 0), (-4, 10), (30, -8), (35, 20)])
def test_a_store_writes_the_box_and_nothing_outside_the_tensor(tma_module, swizzle, box, start):
    rng = np.random.default_rng(3)
    tensor = np.full((40, 24), -1.0, np.float32)
    array = gpuarray.to_gpu(tensor)
    tmap = tma.tensor_map(array, box=box, swizzle=swizzle)
    values = rng.standard_normal(box).astype(np.float32)
    words = np.zeros(4096, np.uint32)
    image = _box_image(values, (0, 0), box, swizzle, 0)          # the tile as a load of `values` would leave it
    words.view(np.uint8)[:image.size] = image
    tma_module.get_function("store_box")(tmap, drv.In(words), np.int32(start[1]), np.int32(start[0]),
                                         block=(64, 1, 1))
    want = tensor.copy()
    for r in range(box[0]):
        for c in range(box[1]):
            y, x = start[0] + r, start[1] + c
            if 0 <= y < 40 and 0 <= x < 24:
                want[y, x] = values[r, c]
    np.testing.assert_array_equal(array.get(), want)


def test_a_load_lands_when_a_thread_waits_on_its_mbarrier(tma_module):
    tensor = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    array = gpuarray.to_gpu(tensor)                          # (kept: the map holds its address, not the array)
    tmap = tma.tensor_map(array, box=(8, 16))
    early, late = np.zeros(128, np.uint32), np.zeros(128, np.uint32)
    tma_module.get_function("read_before_wait")(tmap, drv.Out(early), drv.Out(late), np.uint32(512),
                                                block=(64, 1, 1))
    assert (early == 0xDEADBEEF).all()                       # read before the wait: what was there before
    np.testing.assert_array_equal(late.view(np.float32), tensor.reshape(-1))


@pytest.mark.parametrize("schedule", ["forward", "reverse", "random"])
def test_a_ring_of_two_stages_under_any_schedule(tma_module, schedule):
    tensor = np.random.default_rng(5).integers(-8, 8, (8 * 13, 32)).astype(np.float32)
    array = gpuarray.to_gpu(tensor)
    tmap = tma.tensor_map(array, box=(8, 32))
    sums = np.zeros(32, np.float32)
    compiler.set_schedule(schedule, seed=11)
    try:
        tma_module.get_function("ring_sum")(tmap, drv.Out(sums), np.int32(13), block=(64, 1, 1))
    finally:
        compiler.set_schedule("forward")
    np.testing.assert_array_equal(sums, tensor.sum(axis=0))


def test_wgmma_reads_tma_tiles_through_descriptors_with_the_same_swizzle(tma_module):
    rng = np.random.default_rng(7)
    a = rng.integers(-4, 5, (64, 16)).astype(np.float16)
    b = rng.integers(-4, 5, (16, 8)).astype(np.float16)
    a_gpu, b_gpu = gpuarray.to_gpu(a), gpuarray.to_gpu(b)
    a_map = tma.tensor_map(a_gpu, box=(64, 16), swizzle=32)
    b_map = tma.tensor_map(b_gpu, box=(16, 8))
    d = np.zeros((64, 8), np.float32)
    tma_module.get_function("tma_wgmma")(a_map, b_map, drv.Out(d), block=(128, 1, 1))
    np.testing.assert_array_equal(d, a.astype(np.float32) @ b.astype(np.float32))


def test_a_phase_expecting_more_bytes_than_its_box_is_a_deadlock(tma_module):
    tensor = np.zeros((16, 16), np.float32)
    with pytest.raises(LaunchError, match=r"deadlock: thread \(0,0,0\) waits \(line %d\) on parity 0 of the mbarrier "
                                          r"at shared 0x[0-9a-f]+ \('bar'\) \(phase 0 pending: 0 arrivals, 16 bytes\)"
                       % _line("WAIT: mbarrier.try_wait")):
        _load(tma_module, tensor, (8, 8), (0, 0), 0, extra=16)


def test_a_misaligned_tile_stops_the_launch(tma_module):
    with pytest.raises(LaunchError, match=r"ran cp\.async\.bulk\.tensor \(line %d\): misaligned address: shared "
                                          r"0x[0-9a-f]+ is not a multiple of 128 \(a tensor copy's shared memory is 128-byte aligned\)"
                                          % _line("cp.async.bulk.tensor.2d.shared::cluster")):
        _load(tma_module, np.zeros((16, 16), np.float32), (8, 8), (0, 0), 0, offset=64)


def test_a_map_of_another_rank_stops_the_launch(tma_module):
    array = gpuarray.to_gpu(np.zeros((4, 16), np.float32))
    tmap = tma.tensor_map(array, box=(4, 8))
    with pytest.raises(LaunchError, match=r"the tensor map has rank 2, and this is a \.3d copy with 3 coordinates"):
        tma_module.get_function("load_box")(tmap, drv.Out(np.zeros(4096, np.uint32)), drv.Out(np.zeros(1, np.uint32)),
                                            np.int32(0), np.int32(0), np.int32(0), np.int32(3), np.uint32(128),
                                            np.uint32(0), np.uint32(0), block=(32, 1, 1))


def test_bytes_that_are_not_a_tensor_map_stop_the_launch(tma_module):
    with pytest.raises(LaunchError, match=r"the tensor map at 0x[0-9a-f]+ was not made by cuTensorMapEncodeTiled"):
        tma_module.get_function("load_box")(np.void(bytes(128)), drv.Out(np.zeros(4096, np.uint32)),
                                            drv.Out(np.zeros(1, np.uint32)), np.int32(0), np.int32(0), np.int32(0),
                                            np.int32(2), np.uint32(128), np.uint32(0), np.uint32(0), block=(32, 1, 1))


# ---- the host side --------------------------------------------------------------------------------------------
def test_a_tensor_map_is_128_bytes_that_say_what_they_map():
    host = np.zeros((64, 40), np.float16)
    array = gpuarray.to_gpu(host)
    tmap = tma.tensor_map(array[:, :32], box=(16, 32), swizzle=64)
    assert isinstance(tmap, np.void) and tmap.itemsize == 128      # what PyCUDA passes to a kernel by value
    assert tma.describe(tmap) == {"address": int(array.gpudata), "shape": (64, 32), "strides": (80, 2),
                                  "itemsize": 2, "box": (16, 32), "swizzle": 64}


def test_describe_says_a_drivers_map_is_opaque():
    with pytest.raises(ValueError, match=r"made by the driver .* whose 128 bytes are opaque"):
        tma.describe(np.void(bytes(128)))


@pytest.mark.parametrize("shape,dtype,box,swizzle,message", [
    ((64, 32), np.float16, (16, 32), 32, r"the box's inner side is 64 bytes, more than the 32-byte swizzle spans: make "
                                         r"it at most 16 elements"),
    ((64, 32), np.float16, (16, 4), 0, r"the box's inner side is 4 elements of 2 bytes = 8 bytes, not a multiple of 16"),
    ((64, 30), np.float16, (16, 8), 0, r"globalStrides\[0\] \(dimension 1's stride\) is 60 bytes; strides are multiples "
                                       r"of 16"),
    ((64, 32), np.float16, (300, 8), 0, r"boxDim\[1\] is 300; each side of a box is 1 to 256 elements"),
    ((64, 32), np.float16, (16,), 0, r"box \(16,\) has 1 sides, and the array 2 dimensions"),
    ((64, 32), np.float16, (16, 8), 16, r"swizzle is 0 \(none\), 32, 64 or 128 bytes, got 16"),
    ((4, 4), np.complex64, (4, 4), 0, r"a tensor map's elements are 1, 2, 4 or 8-byte integers or floats"),
])
def test_what_the_driver_refuses_is_refused_with_the_reason(shape, dtype, box, swizzle, message):
    array = gpuarray.to_gpu(np.zeros(shape, dtype))
    with pytest.raises(ValueError, match=message):
        tma.tensor_map(array, box=box, swizzle=swizzle)


def test_a_transposed_view_and_a_host_array_are_refused():
    with pytest.raises(ValueError, match=r"the array's last dimension must be contiguous"):
        tma.tensor_map(gpuarray.to_gpu(np.zeros((32, 32), np.float32)).T, box=(8, 8))
    with pytest.raises(TypeError, match=r"tensor_map takes a device array \(a GPUArray\), got ndarray"):
        tma.tensor_map(np.zeros((32, 32), np.float32), box=(8, 8))


# ---- what the compiler refuses ----------------------------------------------------------------------------------
def _refused(statement, arch="sm_90a"):
    source = ("__global__ void k(const __grid_constant__ CUtensorMap m, float* p) {\n"
              "  unsigned d = 0, b = 0; int x = 0, y = 0;\n  " + statement + "\n  p[0] = d;\n}\n")
    return lambda: compiler.SourceModule(source, arch=arch)


LOAD = ('asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], '
        '[%1, {%2, %3}], [%4];" :: "r"(d), "l"(&m), "r"(x), "r"(y), "r"(b));')


@pytest.mark.parametrize("statement,arch,message", [
    (LOAD, "sm_80", r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier::complete_tx::bytes needs sm_90 or "
                    r"later; this module is built for sm_80"),
    (LOAD.replace('"l"(&m)', '"r"(d)'), "sm_90a", r"the tensor map %1 is bound with \"r\"; pass the address of the "
                                                  r"kernel's `const __grid_constant__ CUtensorMap` parameter"),
    (LOAD.replace("{%2, %3}", "{%2}"), "sm_90a", r"is a \.2d copy, which takes 2 coordinates, got 1"),
    (LOAD.replace("::bytes", "::bytes.multicast::cluster"), "sm_90a",
     r"takes \[dst\], \[map, \{c0, \.\.\.\}\], \[mbar\], ctaMask, got 3 operands"),
    (LOAD.replace("::bytes", "::bytes.L2::cache_hint"), "sm_90a",
     r"the emulator does not run the PTX instruction 'cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier::"
     r"complete_tx::bytes\.L2::cache_hint'"),
    (LOAD.replace("[%4];", "[%4], %2;"), "sm_90a", r"takes \[dst\], \[map, \{c0, \.\.\.\}\], \[mbar\], got 4 operands"),
    ('asm volatile("cp.async.bulk.wait_group.read %0;" :: "r"(d));', "sm_80",
     r"cp\.async\.bulk\.wait_group\.read needs sm_90 or later"),
])
def test_what_the_emulator_does_not_run_is_refused_before_compiling(statement, arch, message):
    with pytest.raises(CompileError, match=r"kernel\.cu\(3\): error: [^\n]*" + message):
        _refused(statement, arch)()
