"""``import pycuda.autoinit``: initialise the driver and make a context on device 0 current.

As in PyCUDA, the module exposes ``device`` and ``context``, and pops the context
when the interpreter exits.
"""
import atexit

from . import driver
from .tools import clear_context_caches, make_default_context

driver.init()
context = make_default_context()
device = context.get_device()


def _finish_up():
    global context
    if context is not None:
        context.detach()
        context = None
    clear_context_caches()


atexit.register(_finish_up)
