"""gpuedu: GPU programming for deep learning from first principles, with PyCUDA.

A lesson starts with ``backend = gpuedu.setup()``: real PyCUDA on a usable NVIDIA GPU, else the
CPU emulator, which runs the same CUDA C.  ``python -m gpuedu doctor`` reports on the machine.
"""

__version__ = "0.1.0"


def setup(backend=None, verbose=True):
    """Choose real PyCUDA or the CPU emulator for this process; see ``gpuedu.backend.setup``."""
    from .backend import setup as _setup
    return _setup(backend=backend, verbose=verbose)
