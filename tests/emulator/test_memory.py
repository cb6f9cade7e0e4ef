import ctypes
import os
import subprocess
import sys

import pytest

from gpuedu.emulator import _memory as memory
from gpuedu.emulator._errors import LogicError


def test_allocation_is_zeroed_aligned_and_found():
    a = memory.allocate(1000)
    try:
        assert a.address % memory.ALIGN == 0
        buf = (ctypes.c_ubyte * 1000).from_address(a.address)
        assert bytes(buf) == b"\0" * 1000
        assert memory.find(a.address + 10) == (a, 10)
        # the guard page right after the rounded-up end is reported with its offset
        assert memory.find(a.guard_start) == (a, 1008)
    finally:
        memory.release(a)
    assert memory.find(a.address) is None


def test_double_release_is_a_logic_error():
    a = memory.allocate(16)
    memory.release(a)
    with pytest.raises(LogicError, match="already freed"):
        memory.release(a)


def test_negative_size_is_rejected():
    with pytest.raises(LogicError, match="negative"):
        memory.allocate(-1)


@pytest.mark.parametrize("size", [1, 20, 396, 4095, 4096 - 16, 4096])
def test_the_bytes_around_an_allocation_are_watched_and_reported_once(size):
    a = memory.allocate(size)
    try:
        assert memory.watched_writes(a.address) is None
        body = (size + memory.ALIGN - 1) // memory.ALIGN * memory.ALIGN
        if body > size:                                   # slack after the end: a write there shows
            ctypes.memset(a.address + size, 0x3F, 1)
            assert memory.watched_writes(a.address + 8) == (a, size, size)   # found from an inner pointer too
            assert memory.watched_writes(a.address) is None                   # the pattern was put back
        if a._front:                                      # the 16 bytes before the start
            ctypes.memset(a.address - 3, 0, 2)
            assert memory.watched_writes(a.address) == (a, -3, -2)
        data = (ctypes.c_ubyte * size).from_address(a.address)
        ctypes.memset(a.address, 0xA5 ^ 0xFF, size)       # the buffer itself is the kernel's
        assert memory.watched_writes(a.address) is None and bytes(data) == bytes([0xA5 ^ 0xFF]) * size
    finally:
        memory.release(a)


def test_a_page_sized_allocation_has_no_front_slack_its_start_touches_the_guard_page():
    a = memory.allocate(memory.PAGE)
    try:
        assert a._front == 0 and a._back == 0 and memory.find(a.address - 1) == (a, -1)
    finally:
        memory.release(a)


def test_buffers_are_carved_from_one_reserved_region_with_wide_gaps_between_them():
    a, b = memory.allocate(100), memory.allocate(100)
    try:
        if not memory._region:
            pytest.skip("this process could not reserve the region (an address-space limit)")
        base, end, _ = memory._region
        assert base <= a.address < end and base <= b.address < end
        assert abs(b.address - a.address) >= memory.GAP + memory.PAGE
        # a few pages past the end: still named as past the end of the buffer, not a stranger's memory
        assert memory.find(a.address + 5 * memory.PAGE) == (a, 5 * memory.PAGE)
    finally:
        memory.release(a)
        memory.release(b)


def test_a_freed_slot_is_reused_for_the_same_size_zeroed_and_inaccessible_while_free():
    a = memory.allocate(3000)
    if not memory._region:
        memory.release(a)
        pytest.skip("this process could not reserve the region (an address-space limit)")
    ctypes.memset(a.address, 0x7F, 3000)
    address = a.address
    memory.release(a)
    assert memory.find(address) is None
    b = memory.allocate(3000)
    try:
        assert b.address == address
        assert bytes((ctypes.c_ubyte * 3000).from_address(b.address)) == b"\0" * 3000
    finally:
        memory.release(b)


LIMITED = r"""
import resource, numpy as np
resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
from gpuedu.emulator import _memory, driver as drv, gpuarray
from gpuedu.emulator.compiler import SourceModule
drv.init(); ctx = drv.Device(0).make_context()
x = gpuarray.to_gpu(np.arange(5, dtype=np.float32))
k = SourceModule("__global__ void k(float* x, int i) { x[i] = 1.0f; }").get_function("k")
try:
    k(x, np.int32(1030), block=(1, 1, 1))
except drv.LaunchError as e:
    print("LaunchError:", e)
k(x, np.int32(0), block=(1, 1, 1))
print("region:", _memory._region, "values:", x.get().tolist())
"""


def test_under_an_address_space_limit_each_buffer_is_its_own_mapping_with_guard_pages(tmp_path, address_space_limit):
    env = dict(os.environ, GPUEDU_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", LIMITED], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "wrote past the end of a 20-byte allocation (at byte offset 4120" in done.stdout
    assert "region: False values: [1.0, 1.0, 2.0, 3.0, 4.0]" in done.stdout


WILD = r"""
import numpy as np
from gpuedu.emulator import driver as drv, gpuarray
from gpuedu.emulator.compiler import SourceModule
drv.init(); ctx = drv.Device(0).make_context()
x = gpuarray.zeros(5, np.float32)
host = np.ones(1 << 20, np.float32)          # host data a wild write must never reach
k = SourceModule("__global__ void k(float* x, int i) { x[i] = 9.0f; }").get_function("k")
for i in (1030, 20000, 60000):               # 4 KiB, 80 KiB and 240 KiB past a 20-byte buffer
    try:
        k(x, np.int32(i), block=(1, 1, 1))
        print("NO ERROR")
    except drv.LaunchError as e:
        print("LaunchError:", e)
print("host intact:", bool((host == 1).all()))
"""


def test_a_write_pages_past_a_buffer_faults_and_is_named_as_past_that_buffer(tmp_path):
    env = dict(os.environ, GPUEDU_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", WILD], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    for offset in (4120, 80000, 240000):
        assert f"wrote past the end of a 20-byte allocation (at byte offset {offset}," in done.stdout, done.stdout
    assert "NO ERROR" not in done.stdout and "host intact: True" in done.stdout


CHUNKS = r"""
import numpy as np
from gpuedu.emulator import _memory, driver as drv
from gpuedu.emulator.compiler import SourceModule
drv.init(); ctx = drv.Device(0).make_context()
first = _memory.CHUNK_BYTES // (_memory.GAP + _memory.PAGE)      # the small buffers one chunk holds
bufs = [drv.mem_alloc(256) for _ in range(first + 50)]
print("reserved chunks:", _memory._reserved_bytes // _memory.CHUNK_BYTES)
k = SourceModule("__global__ void k(float* x, int i) { x[i] = 1.0f; }").get_function("k")
try:
    k(bufs[-1], np.int32(1 << 20), block=(1, 1, 1))           # 4 MiB past the last buffer: in its gap
except drv.LaunchError as e:
    print("LaunchError:", e)
k(bufs[-1], np.int32(3), block=(1, 1, 1))
out = np.zeros(64, np.float32); drv.memcpy_dtoh(out, bufs[-1]); print("value:", out[3])
"""


def test_the_region_is_reserved_a_chunk_at_a_time_as_buffers_need_it(tmp_path):
    """A process reserves 64 GiB of address space for its first buffers, and the next 64 GiB only when a chunk is
    full: the gaps hold across chunks."""
    env = dict(os.environ, GPUEDU_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", CHUNKS], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "reserved chunks: 2" in done.stdout, done.stdout
    assert "wrote past the end of a 256-byte allocation" in done.stdout and "value: 1.0" in done.stdout, done.stdout


def test_a_finaliser_the_collector_runs_inside_the_memory_lock_releases_after_it():
    # The collector may run a dropped allocation's finaliser on a thread that holds the memory lock (a tuple made
    # inside it starts a collection): the release waits for the lock to be let go, and the thread does not wait
    # for the lock it holds (a launch's arguments once hung there, for ever)
    from gpuedu.emulator import _memory
    from gpuedu.emulator.driver import DeviceAllocation
    dropped = DeviceAllocation(64)
    alloc = dropped._alloc
    with _memory._lock:
        dropped.__del__()                       # as the collector would run it here
        assert _memory._by_start.get(alloc.address) is alloc   # not yet: the holder is halfway through a change
    other = DeviceAllocation(64)                # the next allocation (or release) releases it
    assert _memory._by_start.get(alloc.address) is not alloc and not _memory._dropped
    other.free()
