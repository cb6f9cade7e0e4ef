"""``pycuda.characterize`` on the CPU: what the emulated device and this platform support."""
import sys

import numpy as np

from . import driver as drv
from .tools import context_dependent_memoize


def platform_bits():
    """The width of a host pointer, in bits."""
    return 64 if sys.maxsize > 2 ** 32 else 32


def has_stack():
    """Whether device code may call functions with a stack (compute capability 2.0 on)."""
    return drv.Context.get_device().compute_capability() >= (2, 0)


def has_double_support():
    """Whether device code may use double precision (compute capability 1.3 on)."""
    return drv.Context.get_device().compute_capability() >= (1, 3)


@context_dependent_memoize
def sizeof(type_name, preamble=""):
    """``sizeof(type_name)`` as device code sees it, measured by a kernel."""
    from . import gpuarray
    from .compiler import SourceModule

    mod = SourceModule(f"""
    {preamble}
    extern "C" __global__ void write_size(size_t *output) {{ *output = sizeof({type_name}); }}
    """, no_extern_c=True)
    output = gpuarray.empty((), dtype=np.uintp)
    mod.get_function("write_size")(output, block=(1, 1, 1), grid=(1, 1))
    return int(output.get())
