import ctypes

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
