"""``In``, ``Out`` and ``InOut``: NumPy arrays passed straight to a kernel launch.

As in PyCUDA, the launcher copies an ``In`` array to a temporary device buffer
before the launch and an ``Out`` array back after it.
"""
import ctypes

import numpy as np

from . import _memory


class ArgumentHandler:
    def __init__(self, array):
        if not isinstance(array, np.ndarray):
            raise TypeError(f"{type(self).__name__}() takes a numpy.ndarray, got {type(array).__name__}")
        if not array.flags.c_contiguous:
            raise ValueError(f"{type(self).__name__}() needs a C-contiguous array; pass np.ascontiguousarray(a)")
        self.array = array
        self._alloc = None

    def get_device_alloc(self):
        if self._alloc is None:
            self._alloc = _memory.allocate(self.array.nbytes)
        return self._alloc.address

    def pre_call(self, stream=None):
        pass

    def post_call(self, stream=None):
        pass

    def release(self):
        if self._alloc is not None:
            _memory.release(self._alloc, "after the launch it was made for (drv.In, drv.Out and drv.InOut copy "
                                         "for one launch only)")
            self._alloc = None


class In(ArgumentHandler):
    def pre_call(self, stream=None):
        ctypes.memmove(self.get_device_alloc(), self.array.ctypes.data, self.array.nbytes)


class Out(ArgumentHandler):
    def post_call(self, stream=None):
        if not self.array.flags.writeable:
            raise ValueError("Out()/InOut() needs a writeable array")
        ctypes.memmove(self.array.ctypes.data, self.get_device_alloc(), self.array.nbytes)


class InOut(In, Out):
    def pre_call(self, stream=None):
        In.pre_call(self, stream)

    def post_call(self, stream=None):
        Out.post_call(self, stream)
