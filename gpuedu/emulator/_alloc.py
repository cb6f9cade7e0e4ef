"""``DeviceAllocation``: the handle ``mem_alloc`` returns, as in PyCUDA; ``PointerHolderBase``, for one's own.

``int(alloc)`` is the device address (a host address in the emulator), which is
what a kernel receives for a pointer parameter.
"""
from . import _memory
from ._errors import LogicError, learner_frame


def _caller():
    """``file:line`` of the innermost frame outside gpuedu (the learner's line), for an error to name later."""
    frame, _ = learner_frame(2)
    return "a line of gpuedu's own" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


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
        _memory.release(alloc, f"by .free() at {_caller()}")

    def __del__(self):
        if getattr(self, "_alloc", None) is not None:
            try:
                _memory.release_dropped(self._alloc, f"when its last reference was dropped, at {_caller()}")
            except Exception:  # interpreter shutdown
                pass
            self._alloc = None

    def __repr__(self):
        if self._alloc is None:
            return "<DeviceAllocation (freed)>"
        return f"<DeviceAllocation 0x{self._alloc.address:x}, {self._alloc.size} bytes>"


class PointerHolderBase:
    """Base class of objects that hold device memory of their own (PyCUDA's name).

    A subclass defines ``get_pointer()``, the device address it holds; its objects may then stand
    wherever a ``DeviceAllocation`` may: a kernel argument, a ``GPUArray``'s ``gpudata``, a copy.
    """

    def get_pointer(self):
        raise NotImplementedError(f"{type(self).__name__} subclasses PointerHolderBase but does not define "
                                  "get_pointer(), which must return the device address it holds")

    def __int__(self):
        return int(self.get_pointer())

    __index__ = __int__

    def as_buffer(self, size, offset=0):
        """``size`` bytes from ``offset`` as a writeable memoryview (device memory is host memory here)."""
        import ctypes
        return memoryview((ctypes.c_char * size).from_address(int(self) + offset)).cast("B")


def device_pointer(arg):
    """The device address ``arg`` stands for, or None: device memory, a GPUArray-like (``gpudata``),
    a ``PointerHolderBase``, or an object with ``__cuda_array_interface__`` (its ``data`` pointer)."""
    if isinstance(arg, (DeviceAllocation, PointerHolderBase)):
        return int(arg)
    if hasattr(arg, "gpudata"):
        return 0 if arg.gpudata is None else int(arg.gpudata)
    interface = getattr(arg, "__cuda_array_interface__", None)
    if isinstance(interface, dict) and "data" in interface:
        return int(interface["data"][0])
    return None
