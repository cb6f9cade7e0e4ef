"""gpuedu: GPU programming for deep learning from first principles, with PyCUDA.

A lesson starts with ``backend = gpuedu.setup()``: real PyCUDA on a usable NVIDIA GPU, else the
CPU emulator, which runs the same CUDA C.  ``python -m gpuedu doctor`` reports on the machine.
"""

from ._version import __version__  # noqa: F401


def profile(racecheck=False, arch=None, gpu=None):
    """Record every kernel launch in a ``with`` block: Nsight Compute's counters, counted by the emulator,
    races, and a modelled GPU time; ``gpu`` names the GPU whose L2 and occupancy rules the figures follow
    (default H100); see ``gpuedu.profiler.session.profile``."""
    from .profiler.session import profile as _profile
    return _profile(racecheck=racecheck, arch=arch, gpu=gpu)


def racecheck(arch=None):
    """compute-sanitizer's racecheck without a GPU: ``with gpuedu.racecheck() as rc: ...; rc.hazards``."""
    from .profiler.session import racecheck as _racecheck
    return _racecheck(arch=arch)


def memcheck(arch=None):
    """compute-sanitizer's memcheck without a GPU: ``with gpuedu.memcheck() as mc: ...; mc.errors``."""
    from .profiler.session import memcheck as _memcheck
    return _memcheck(arch=arch)


def trace(path=None, gpu="H100", l2_warm=False):
    """Record copies, kernels, events and synchronisations in a ``with`` block and lay them out as the
    streams of ``gpu`` would run them (modelled; ``l2_warm``: each kernel's data already in L2); see
    ``gpuedu.profiler.trace``."""
    from .profiler.trace import trace as _trace
    return _trace(path=path, gpu=gpu, l2_warm=l2_warm)


def range(name):  # noqa: A001 - named as NVTX's ranges are
    """``with gpuedu.range("forward"):`` marks a span of host work: on ``gpuedu.trace()``'s host row on the
    emulator, as an NVTX range (Nsight Systems) on a GPU when the ``nvtx`` package is installed."""
    from .profiler.trace import nvtx_range
    return nvtx_range(name)


def setup(backend=None, verbose=True):
    """Choose real PyCUDA or the CPU emulator for this process; see ``gpuedu.backend.setup``."""
    from .backend import setup as _setup
    return _setup(backend=backend, verbose=verbose)
