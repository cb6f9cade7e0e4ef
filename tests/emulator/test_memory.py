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
