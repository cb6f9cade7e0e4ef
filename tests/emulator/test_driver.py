"""The emulator's pycuda.driver: devices, contexts, memory, copies and their errors."""
import ctypes
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpuedu.emulator.driver as drv


pytestmark = pytest.mark.usefixtures("context")


def run_fresh(code):
    """Run ``code`` in a new interpreter (the driver's init state is per process)."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_calls_before_init_are_logic_errors_and_the_process_lives_on():
    out = run_fresh("""
        import gpuedu.emulator.driver as drv
        for call in (lambda: drv.Device(0), drv.Device.count, lambda: drv.mem_alloc(4)):
            try:
                call()
            except drv.LogicError as e:
                print("LogicError:", e)
        drv.init()
        print(drv.Device.count(), drv.Device(0).name())
    """)
    lines = out.splitlines()
    assert lines[0].startswith("LogicError: cuDeviceGet failed: initialization error")
    assert "cuInit has not been called" in lines[0]
    assert lines[1].startswith("LogicError: cuDeviceGetCount failed")
    assert lines[2].startswith("LogicError: cuMemAlloc failed")
    assert lines[3] == "1 gpuedu CPU emulator"


def test_memory_needs_a_current_context():
    out = run_fresh("""
        import gpuedu.emulator.driver as drv
        drv.init()
        try:
            drv.mem_alloc(16)
        except drv.LogicError as e:
            print(e)
        ctx = drv.Device(0).make_context()
        print(drv.mem_alloc(16).size)
    """)
    assert "invalid device context" in out and "pycuda.autoinit" in out
    assert out.splitlines()[-1] == "16"


def test_device_identity_and_attributes():
    dev = drv.Device(0)
    assert dev.name() == "gpuedu CPU emulator"
    assert dev.compute_capability() == (8, 0)
    assert dev.total_memory() > 0
    assert dev.pci_bus_id() == "0000:00:00.0"
    assert drv.Device(dev.pci_bus_id()) == dev
    attrs = dev.get_attributes()
    assert attrs[drv.device_attribute.MAX_THREADS_PER_BLOCK] == 1024
    assert attrs[drv.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK] == 49152
    assert attrs[drv.device_attribute.WARP_SIZE] == 32
    assert (attrs[drv.device_attribute.MAX_BLOCK_DIM_X], attrs[drv.device_attribute.MAX_BLOCK_DIM_Z]) == (1024, 64)
    assert attrs[drv.device_attribute.MAX_GRID_DIM_X] == 2**31 - 1
    assert dev.max_threads_per_block == 1024 and dev.warp_size == 32
    assert dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT) == dev.multiprocessor_count
    # attributes print as their names, as PyCUDA's enums do
    assert str(drv.device_attribute.WARP_SIZE) == "WARP_SIZE"
    with pytest.raises(AttributeError):
        dev.no_such_attribute
    with pytest.raises(drv.LogicError, match="device_attribute"):
        dev.get_attribute(12345)


def test_bad_device_ordinal():
    with pytest.raises(drv.LogicError, match="invalid device ordinal"):
        drv.Device(5)
    assert drv.Device(0).name()   # still usable afterwards


def test_versions():
    assert drv.get_version()[0] >= 11
    assert drv.get_driver_version() == 1000 * drv.get_version()[0] + 10 * drv.get_version()[1]


def test_context_stack(context):
    assert drv.Context.get_current() is context
    assert drv.Context.get_device() == drv.Device(0)
    other = drv.Device(0).make_context()
    assert drv.Context.get_current() is other
    assert drv.Context.pop() is other
    assert drv.Context.get_current() is context
    other.push()
    other.detach()
    assert drv.Context.get_current() is context
    with pytest.raises(drv.LogicError, match="detached"):
        other.push()
    drv.Context.synchronize()
    context.synchronize()
    assert drv.Context.get_limit(drv.limit.STACK_SIZE) > 0


def test_mem_get_info():
    free, total = drv.mem_get_info()
    assert 0 < free <= total


def test_htod_dtoh_round_trip_with_offsets():
    host = np.arange(64, dtype=np.float32)
    dev = drv.mem_alloc(host.nbytes)
    drv.memcpy_htod(dev, host)
    back = np.empty_like(host)
    drv.memcpy_dtoh(back, dev)
    np.testing.assert_array_equal(back, host)
    # an int address with an offset, and np.intp, are pointers too
    part = np.empty(8, np.float32)
    drv.memcpy_dtoh(part, np.intp(int(dev) + 4 * 10))
    np.testing.assert_array_equal(part, host[10:18])
    drv.memcpy_htod(int(dev) + 4 * 60, np.full(4, -1, np.float32))
    np.testing.assert_array_equal(drv.from_device(dev, (64,), np.float32)[60:], [-1] * 4)
    np.testing.assert_array_equal(drv.from_device_like(dev, host)[:60], host[:60])


def test_dtod_and_memset():
    a = drv.to_device(np.arange(16, dtype=np.int32))
    b = drv.mem_alloc(64)
    drv.memcpy_dtod(b, a, 64)
    np.testing.assert_array_equal(drv.from_device(b, 16, np.int32), np.arange(16))
    drv.memset_d32(b, 7, 16)
    np.testing.assert_array_equal(drv.from_device(b, 16, np.int32), [7] * 16)
    drv.memset_d8(b, 0xFF, 8)
    assert drv.from_device(b, 16, np.int32)[:3].tolist() == [-1, -1, 7]
    drv.memset_d16(int(b) + 8, 0x0001, 2)
    assert drv.from_device(b, 16, np.int32)[2] == 0x00010001
    drv.memset_d32_async(b, np.float32(1.5).view(np.uint32), 16, stream=drv.Stream())
    np.testing.assert_array_equal(drv.from_device(b, 16, np.float32), [1.5] * 16)


def test_async_copies_complete_in_order():
    stream = drv.Stream()
    host = drv.pagelocked_zeros((4, 8), np.float64)
    host[:] = np.arange(32).reshape(4, 8)
    dev = drv.mem_alloc(host.nbytes)
    drv.memcpy_htod_async(dev, host, stream)
    other = drv.mem_alloc(host.nbytes)
    drv.memcpy_dtod_async(other, dev, host.nbytes, stream=stream)
    out = drv.pagelocked_empty_like(host)
    drv.memcpy_dtoh_async(out, other, stream)
    stream.synchronize()
    assert stream.is_done()
    np.testing.assert_array_equal(out, host)
    with pytest.raises(TypeError, match="Stream"):
        drv.memcpy_htod_async(dev, host, stream="default")


def test_copy_past_the_end_says_how_many_bytes():
    dev = drv.mem_alloc(40)
    with pytest.raises(drv.LogicError, match=r"80 bytes asked for.*holds 40 bytes"):
        drv.memcpy_htod(dev, np.zeros(20, np.float32))
    with pytest.raises(drv.LogicError, match=r"16 bytes asked for at offset 32.*holds 40 bytes"):
        drv.memcpy_dtoh(np.empty(4, np.float32), int(dev) + 32)
    with pytest.raises(drv.LogicError, match="holds 40 bytes"):
        drv.memcpy_dtod(dev, dev, 41)
    with pytest.raises(drv.LogicError, match="holds 40 bytes"):
        drv.memset_d32(dev, 0, 11)
    # nothing was written, and the allocation still works
    drv.memcpy_htod(dev, np.ones(10, np.float32))
    assert drv.from_device(dev, 10, np.float32).sum() == 10


def test_freed_and_foreign_pointers():
    dev = drv.mem_alloc(16)
    address = int(dev)
    dev.free()
    with pytest.raises(drv.LogicError, match="freed"):
        drv.memcpy_htod(dev, np.zeros(4, np.float32))
    with pytest.raises(drv.LogicError, match=r"not device memory: 0x[0-9a-f]+ is 0 bytes into a 16-byte allocation "
                                             r"that was freed by \.free\(\) at .*test_driver\.py:\d+"):
        drv.memcpy_htod(address, np.zeros(4, np.float32))
    host = np.zeros(4, np.float32)
    with pytest.raises(drv.LogicError, match="host address"):
        drv.memcpy_dtoh(host, host.ctypes.data)
    with pytest.raises(drv.LogicError, match="already freed"):
        dev.free()
    with pytest.raises(TypeError, match="device pointer"):
        drv.memcpy_htod("0x1000", host)


def test_host_buffers_must_be_contiguous_and_writeable():
    dev = drv.mem_alloc(64)
    strided = np.zeros(16, np.float32)[::2]
    with pytest.raises(ValueError, match="not contiguous"):
        drv.memcpy_htod(dev, strided)
    with pytest.raises(ValueError, match="not contiguous"):
        drv.memcpy_dtoh(strided, dev)
    frozen = np.zeros(16, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        drv.memcpy_dtoh(frozen, dev)
    with pytest.raises(ValueError, match="read-only"):
        drv.memcpy_dtoh(b"\0" * 8, dev)
    drv.memcpy_htod(dev, frozen)            # reading a read-only array is fine
    drv.memcpy_htod(dev, b"\x01" * 8)       # as is any contiguous buffer
    assert drv.from_device(dev, 8, np.uint8).tolist() == [1] * 8
    with pytest.raises(TypeError, match="numpy array"):
        drv.memcpy_htod(dev, [1.0, 2.0])


def test_bad_allocation_sizes():
    with pytest.raises(drv.LogicError, match="0 bytes"):
        drv.mem_alloc(0)
    with pytest.raises(drv.LogicError, match=">= 0"):
        drv.mem_alloc(-8)
    with pytest.raises(TypeError, match="integer"):
        drv.mem_alloc("big")


def test_mem_alloc_pitch_rows_are_aligned():
    alloc, pitch = drv.mem_alloc_pitch(100, 3, 4)
    assert pitch >= 100 and pitch % 512 == 0
    assert alloc.size == 3 * pitch
    with pytest.raises(drv.LogicError, match="access_size"):
        drv.mem_alloc_pitch(100, 3, 3)


def test_pagelocked_arrays_say_what_they_are():
    a = drv.pagelocked_empty((3, 5), np.float32, order="F", mem_flags=drv.host_alloc_flags.PORTABLE)
    assert a.shape == (3, 5) and a.dtype == np.float32 and a.flags.f_contiguous
    assert isinstance(a.base, drv.PagelockedHostAllocation)
    assert a.base.get_flags() == drv.host_alloc_flags.PORTABLE
    assert a.ctypes.data % 4096 == 0
    z = drv.pagelocked_zeros_like(np.ones((2, 2)))
    assert z.dtype == np.float64 and not z.any()
    assert drv.pagelocked_zeros(0, np.int32).size == 0
    r = np.ones(4)
    assert drv.register_host_memory(r) is r


def test_events_time_with_the_host_clock():
    start, end = drv.Event(), drv.Event()
    with pytest.raises(drv.LogicError, match="never recorded"):
        end.time_since(start)
    start.record()
    x = 0
    for i in range(20000):
        x += i
    end.record(drv.Stream())
    end.synchronize()
    assert end.query()
    ms = end.time_since(start)
    assert ms > 0
    assert start.time_till(end) == pytest.approx(ms)
    untimed = drv.Event(drv.event_flags.DISABLE_TIMING).record()
    with pytest.raises(drv.LogicError, match="DISABLE_TIMING"):
        untimed.time_since(start)


def test_stream_waits_for_events():
    s = drv.Stream()
    e = drv.Event().record(s)
    s.wait_for_event(e)
    with pytest.raises(TypeError):
        s.wait_for_event(s)


def test_argument_wrappers_and_errors_are_pycuda_names():
    assert drv.In is not None and drv.Out is not None and drv.InOut is not None
    assert issubclass(drv.LogicError, drv.Error) and issubclass(drv.LaunchError, drv.Error)
    assert issubclass(drv.CompileError, drv.Error)
    for enum_class in (drv.ctx_flags, drv.event_flags, drv.function_attribute, drv.func_cache,
                       drv.shared_config, drv.limit, drv.mem_host_register_flags):
        assert len(list(enum_class)) > 1


def test_allocation_memory_is_usable_through_ctypes():
    dev = drv.mem_alloc(8)
    ctypes.c_double.from_address(int(dev)).value = 2.5
    assert drv.from_device(dev, 1, np.float64)[0] == 2.5


def test_memcpy2d_between_pitched_device_memory_and_a_host_matrix():
    host = np.arange(5 * 7, dtype=np.float32).reshape(5, 7)
    dev, pitch = drv.mem_alloc_pitch(7 * 4, 5, 4)
    up = drv.Memcpy2D()
    up.set_src_host(host)
    up.set_dst_device(dev)
    up.src_pitch, up.dst_pitch = 7 * 4, pitch
    up.width_in_bytes, up.height = 7 * 4, 5
    up()
    # read back columns 2..5 of rows 1..4 only
    back = np.zeros((4, 4), np.float32)
    down = drv.Memcpy2D()
    down.set_src_device(dev)
    down.set_dst_host(back)
    down.src_pitch, down.dst_pitch = pitch, 4 * 4
    down.src_x_in_bytes, down.src_y = 2 * 4, 1
    down.width_in_bytes, down.height = 4 * 4, 4
    down(aligned=True)
    np.testing.assert_array_equal(back, host[1:5, 2:6])
    down.height = 5      # one row too many for the pitched allocation
    with pytest.raises(drv.LogicError, match="holds"):
        down()


def test_mapped_host_memory_is_visible_to_kernels():
    from gpuedu.emulator.compiler import SourceModule
    host = drv.pagelocked_zeros(8, np.int32, mem_flags=drv.host_alloc_flags.DEVICEMAP)
    ptr = host.base.get_device_pointer()
    assert drv.Device(0).get_attribute(drv.device_attribute.CAN_MAP_HOST_MEMORY) == 1
    kernel = SourceModule("__global__ void iota(int *x) { x[threadIdx.x] = 3 * threadIdx.x; }").get_function("iota")
    kernel(np.intp(ptr), block=(8, 1, 1), grid=(1, 1))
    assert host.tolist() == [3 * k for k in range(8)]
    with pytest.raises(drv.LogicError, match="DEVICEMAP"):
        drv.pagelocked_empty(4, np.int32).base.get_device_pointer()


def test_each_host_thread_has_its_own_current_context(context):
    import threading
    seen = {}

    def worker():
        seen["before"] = drv.Context.get_current()
        try:
            drv.mem_alloc(16)
        except drv.LogicError as e:
            seen["error"] = str(e)
        context.push()       # as in CUDA: push the context to use it from this thread
        seen["alloc"] = drv.mem_alloc(16).size
        drv.Context.pop()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen["before"] is None and "invalid device context" in seen["error"] and seen["alloc"] == 16
    assert drv.Context.get_current() is context


def test_reused_memory_is_zeroed_and_a_freed_pointer_still_faults_in_a_kernel():
    from gpuedu.emulator.compiler import SourceModule
    load = SourceModule("__global__ void load_first(int *p, int *out) { out[0] = p[0]; }").get_function("load_first")
    out = drv.mem_alloc(4)
    size = 3 << 16                          # a size no other test uses, so the reuse is ours
    a = drv.mem_alloc(size)
    drv.memset_d8(a, 0xAB, size)
    stale = int(a)
    a.free()
    # the freed pages are kept for reuse but inaccessible: a kernel that reads them faults
    with pytest.raises(drv.LaunchError):
        load(np.intp(stale), out, block=(1, 1, 1), grid=(1, 1))
    b = drv.mem_alloc(size)                 # reuses a's pages, which must come back zeroed
    assert not drv.from_device(b, size, np.uint8).any()
    load(b, out, block=(1, 1, 1), grid=(1, 1))
    assert drv.from_device(out, 1, np.int32)[0] == 0


def test_mem_get_info_stays_within_the_process_s_address_space_limit(address_space_limit):
    out = run_fresh("""
        import resource
        limit = 3 * 2**30
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        import gpuedu.emulator.driver as drv
        drv.init()
        ctx = drv.Device(0).make_context()
        free, total = drv.mem_get_info()
        print(free, total, drv.Device(0).total_memory(), limit)
        alloc = drv.mem_alloc(free // 2)     # what it reports as free can be had
        print("allocated")
        ctx.detach()
    """)
    free, total, device_total, limit = map(int, out.split()[:4])
    assert total == device_total == limit
    assert 0 < free < limit
    assert out.split()[4] == "allocated"
