"""The course's CUDA kernels: one ``<op>.cu`` file per op, compiled through the active backend.

Every ``.cu`` here follows one convention, so the same file compiles with nvcc, with real PyCUDA
and with the CPU emulator:

- kernels are declared ``extern "C" __global__`` and the file is compiled with ``no_extern_c=True``,
  so kernel names stay plain (``get_function("matmul_kernel1")``) and C++ headers such as
  ``<cuda_fp16.h>`` can still be included;
- helpers shared between files (``ceil_div``, warp sums) live in ``common.cuh``; this folder is on
  the include path, so ``#include "common.cuh"`` works from any of them.

>>> from gpuedu import kernels
>>> mod = kernels.load("reduction")                # compiled once per backend and options
>>> reduce1 = mod.get_function("reduce_kernel1")
"""
import os

from .. import backend as _backend

#: The folder that holds the ``.cu`` and ``.cuh`` files (also the include directory).
DIR = os.path.dirname(os.path.abspath(__file__))

_loaded = {}


def names():
    """The kernel files in the folder, without the ``.cu`` suffix, sorted."""
    return sorted(f[:-3] for f in os.listdir(DIR) if f.endswith(".cu"))


def path(name):
    """The path of ``<name>.cu``; a clear error if there is no such file."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"kernel file name must be a non-empty string, got {name!r}")
    stem = name[:-3] if name.endswith(".cu") else name
    full = os.path.join(DIR, stem + ".cu")
    if not os.path.isfile(full):
        raise FileNotFoundError(
            f"no kernel file {stem + '.cu'!r} in {DIR}; available: {', '.join(names()) or '(none)'}")
    return full


def source(name):
    """The CUDA C source of ``<name>.cu`` as a string."""
    with open(path(name), encoding="utf-8") as f:
        return f.read()


def load(name, options=()):
    """Compile ``<name>.cu`` with the active backend's ``SourceModule`` and return the module.

    Memoised per (backend, name, options): compiling is slow (nvcc or g++), loading twice is not needed.
    ``options`` are extra compiler flags, e.g. ``("-DBLOCK=128",)``.
    """
    if isinstance(options, str):
        raise TypeError(f"options must be a list or tuple of flags, got the string {options!r}; "
                        f"write options=[{options!r}]")
    options = tuple(options)
    active = _backend.active()
    stem = name[:-3] if isinstance(name, str) and name.endswith(".cu") else name
    key = (active.name, stem, options)
    module = _loaded.get(key)
    if module is None:
        src = source(stem)
        module = active.compiler.SourceModule(
            src, no_extern_c=True, include_dirs=[DIR], options=list(options))
        _loaded[key] = module
    return module
