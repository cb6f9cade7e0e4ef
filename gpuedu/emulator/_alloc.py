"""``DeviceAllocation``: the handle ``mem_alloc`` returns, as in PyCUDA.

``int(alloc)`` is the device address (a host address in the emulator), which is
what a kernel receives for a pointer parameter.
"""
from . import _memory
from ._errors import LogicError


class DeviceAllocation:
    __slots__ = ("_alloc", "__weakref__")

    def __init__(self, nbytes):
        self._alloc = _memory.allocate(nbytes)

    def __int__(self):
        if self._alloc is None:
            raise LogicError("this device allocation has been freed")
        return self._alloc.address

    __index__ = __int__

    @property
    def size(self):
        """Bytes asked for (not a PyCUDA attribute; handy for error messages)."""
        return 0 if self._alloc is None else self._alloc.size

    def free(self):
        """Release the memory now rather than when the object is collected."""
        if self._alloc is None:
            raise LogicError("cuMemFree failed: this allocation was already freed")
        alloc, self._alloc = self._alloc, None
        _memory.release(alloc)

    def __del__(self):
        if getattr(self, "_alloc", None) is not None:
            try:
                _memory.release(self._alloc)
            except Exception:  # interpreter shutdown
                pass
            self._alloc = None

    def __repr__(self):
        if self._alloc is None:
            return "<DeviceAllocation (freed)>"
        return f"<DeviceAllocation 0x{self._alloc.address:x}, {self._alloc.size} bytes>"
