"""``import pycuda.autoprimaryctx``: initialise the driver and make device 0's primary context current.

As in PyCUDA, the module exposes ``device`` and ``context``.  The primary context is the one the
CUDA runtime (PyTorch, CuPy) uses, so on a GPU this is how PyCUDA shares a process with them; here
it is the emulated device's primary context, retained and pushed, and popped when the interpreter
exits (it is not destroyed: the device keeps it for whoever retains it next).
"""
import atexit

from . import driver
from .tools import clear_context_caches, make_default_context


def _retain_and_push(dev):
    primary = dev.retain_primary_context()
    primary.push()
    return primary


driver.init()
context = make_default_context(_retain_and_push)
device = context.get_device()


def _finish_up():
    global context
    if context is not None and driver.Context.get_current() is context:
        driver.Context.pop()
    context = None
    clear_context_caches()


atexit.register(_finish_up)
