"""The emulator's pycuda.tools: dtype names, device data, default contexts, memoisation, pools."""
import gc

import numpy as np
import pytest

import gpuedu.emulator.driver as drv
from gpuedu.emulator import tools


@pytest.fixture(autouse=True, scope="module")
def context():
    drv.init()
    ctx = tools.make_default_context()
    yield ctx
    ctx.detach()


def test_dtype_names_both_ways():
    assert tools.dtype_to_ctype(np.float32) == "float"
    assert tools.dtype_to_ctype(np.dtype(np.uint32)) == "unsigned int"
    assert tools.dtype_to_ctype(np.int64) == "long"
    assert tools.get_or_register_dtype("unsigned int") == np.uint32
    assert tools.get_or_register_dtype(["double"]) == np.float64
    with pytest.raises(ValueError, match="unable to map dtype"):
        tools.dtype_to_ctype(np.dtype("U4"))
    with pytest.raises(TypeError, match="not registered"):
        tools.get_or_register_dtype("my_vec3")
    vec3 = np.dtype([("u", np.float32), ("v", np.float32), ("w", np.float32)])  # not a vec type: a new name
    assert tools.get_or_register_dtype("my_vec3", vec3) == vec3
    assert tools.dtype_to_ctype(vec3) == "my_vec3"
    with pytest.raises(RuntimeError, match="already registered"):
        tools.get_or_register_dtype("my_vec3", np.float64)


def test_default_context_and_device_data(context):
    assert drv.Context.get_current() is context
    data = tools.DeviceData()
    assert data.max_threads == 1024 and data.warp_size == 32
    assert data.shared_memory == 49152
    assert data.align_words(4) == 32 and data.align(100) == 128
    with pytest.raises(ValueError):
        data.align_bytes(3)


def test_context_dependent_memoize_caches_per_context():
    calls = []

    @tools.context_dependent_memoize
    def make(x):
        calls.append(x)
        return object()

    first = make(1)
    assert make(1) is first and calls == [1]
    other = drv.Device(0).make_context()
    try:
        assert make(1) is not first          # another context: built again
    finally:
        other.detach()
    tools.clear_context_caches()
    make(1)
    assert calls == [1, 1, 1]


def test_page_locked_pool_reuses_buffers():
    pool = tools.PageLockedMemoryPool()
    a = pool.allocate((4, 4), np.float32)
    assert a.shape == (4, 4) and a.dtype == np.float32 and pool.active_blocks == 1
    assert _pagelocked_root(a)
    address = a.ctypes.data
    del a
    gc.collect()
    assert pool.active_blocks == 0 and pool.held_blocks == 1
    b = pool.allocate((16,), np.float32)       # the same 64 bytes again
    assert b.ctypes.data == address
    pool.free_held()


def _pagelocked_root(array):
    while array is not None and not isinstance(array, drv.PagelockedHostAllocation):
        array = getattr(array, "base", None)
    return array is not None


def test_device_pool_blocks_go_back_on_free():
    pool = tools.DeviceMemoryPool()
    block = pool.allocate(256)
    address = int(block)
    block.free()
    with pytest.raises(drv.LogicError, match="already freed"):
        block.free()
    with pytest.raises(drv.LogicError, match="freed"):
        int(block)
    again = pool.allocate(256)
    assert int(again) == address and pool.held_blocks == 0
    drv.memcpy_htod(again, np.arange(64, dtype=np.float32))
    assert drv.from_device(again, 64, np.float32)[63] == 63


def test_bitlog2_is_the_highest_set_bit():
    for n in (1, 2, 3, 17, 0xAFFE, 0x3AFFE, 0xCC3AFFE, 2 ** 40 + 5):
        assert tools.bitlog2(n) == int(np.floor(np.log2(n)))


def test_pool_bins_round_up_by_at_most_a_quarter_and_share_blocks_within_a_bin():
    pool = tools.DeviceMemoryPool()
    rng = np.random.default_rng(1)
    for size in list(range(1, 70)) + [int(s) for s in rng.integers(1, 1 << 31, 500)]:
        bin_nr = pool.bin_number(size)
        held = pool.alloc_size(bin_nr)
        assert size <= held <= max(size * 5 // 4, size + 3), size
        assert pool.bin_number(held) == bin_nr
        if size > 4:
            assert pool.bin_number(held + 1) == bin_nr + 1
    first = pool.allocate(1000)
    address, managed = int(first), pool.managed_bytes
    assert managed == pool.alloc_size(pool.bin_number(1000)) >= 1000
    first.free()
    second = pool.allocate(1010)            # the same bin: the idle block serves it
    assert int(second) == address and pool.managed_bytes == managed
    drv.memcpy_htod(second, np.arange(1010, dtype=np.uint8))
    assert drv.from_device(second, 1010, np.uint8)[1009] == 1009 % 256
    second.free()
    pool.free_held()
    assert pool.managed_bytes == 0 and pool.held_blocks == 0


def test_register_dtype_names_a_struct_for_c_and_refuses_a_second_name():
    dtype = np.dtype([("lo", np.float32), ("hi", np.float32), ("tag", np.int32)])
    with pytest.warns(DeprecationWarning, match="get_or_register_dtype"):
        tools.register_dtype(dtype, "lo_hi_tag")
    assert tools.dtype_to_ctype(dtype) == "lo_hi_tag"
    assert tools.get_or_register_dtype("lo_hi_tag") == dtype
    with pytest.warns(DeprecationWarning), pytest.raises(RuntimeError, match="alias_ok"):
        tools.register_dtype(dtype, "other_name")


def test_struct_values_are_kernel_arguments_by_call_and_by_prepared_call():
    from gpuedu.emulator.compiler import SourceModule
    from gpuedu.emulator.gpuarray import empty, vec
    mod = SourceModule("""
    __global__ void scaled(float3 *dest, float3 x, int k)
    { dest[threadIdx.x] = make_float3(x.x * k, x.y * k, x.z * (k + threadIdx.x)); }
    """)
    fn = mod.get_function("scaled")
    value = vec.make_float3(1.5, -2.0, 4.0)
    host = np.empty(3, vec.float3)
    fn(drv.Out(host), value, np.int32(2), block=(3, 1, 1), grid=(1, 1))
    assert host.tolist() == [(3.0, -4.0, 8.0), (3.0, -4.0, 12.0), (3.0, -4.0, 16.0)]
    dest = empty(2, vec.float3)
    fn.prepare(["P", vec.float3, np.int32])
    fn.prepared_call((1, 1), (2, 1, 1), dest, value, 3)
    assert dest.get().tolist() == [(4.5, -6.0, 12.0), (4.5, -6.0, 16.0)]
    with pytest.raises(TypeError, match="host memory"):
        fn(host, value, np.int32(2), block=(3, 1, 1), grid=(1, 1))


def test_pooled_blocks_are_device_allocations_kernels_accept():
    from gpuedu.emulator.compiler import SourceModule
    pool = tools.DeviceMemoryPool()
    block = pool.allocate(4 * 8)
    assert isinstance(block, drv.DeviceAllocation)
    fill = SourceModule("__global__ void fill(float *x) { x[threadIdx.x] = threadIdx.x; }").get_function("fill")
    fill(block, block=(8, 1, 1), grid=(1, 1))
    assert drv.from_device(block, 8, np.float32).tolist() == list(range(8))


def test_occupancy_names_its_limit():
    data = tools.DeviceData()
    full = tools.OccupancyRecord(data, 256)
    assert full.tb_per_mp == 4 and full.limited_by == "warps" and full.occupancy == 1.0
    smem = tools.OccupancyRecord(data, 64, shared_mem=20_000)
    assert smem.limited_by == "smem" and smem.tb_per_mp == 2 and smem.occupancy == pytest.approx(4 / 32)
    regs = tools.OccupancyRecord(data, 128, registers=255)
    assert regs.limited_by == "regs" and regs.tb_per_mp == 2
    with pytest.raises(ValueError, match="more than a block"):
        tools.OccupancyRecord(data, 2048)
