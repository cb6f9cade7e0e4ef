"""The course's CUDA kernels: one ``<op>.cu`` file per op, compiled through the active backend.

Every ``.cu`` here follows one convention, so the same file compiles with nvcc, with real PyCUDA
and with the CPU emulator:

- kernels are declared ``extern "C" __global__`` and the file is compiled with ``no_extern_c=True``,
  so kernel names stay plain (``get_function("matmul_kernel1")``) and C++ headers such as
  ``<cuda_fp16.h>`` can still be included;
- helpers shared between files (``ceil_div``, warp sums) live in ``common.cuh``; this folder is on
  the include path, so ``#include "common.cuh"`` works from any of them;
- every kernel takes its parameters in one order, written at the top of ``common.cuh``: the pointers
  it writes, then those it only reads, then sizes, then other scalars and flags
  (``matmul_kernel1(C, A, B, M, N, K)``), and every launcher passes them so.

>>> from gpuedu import kernels
>>> mod = kernels.load("reduction")                # compiled once per backend and options
>>> reduce1 = mod.get_function("reduce_kernel1")
"""
import os
import re

from .. import backend as _backend

#: The folder that holds the ``.cu`` and ``.cuh`` files (also the include directory).
DIR = os.path.dirname(os.path.abspath(__file__))

_loaded = {}


def _activation_codes():
    """{name: code} from the #defines of activations.cuh, the kernels' one table ("none": 0, "relu": 1, ...)."""
    with open(os.path.join(DIR, "activations.cuh"), encoding="utf-8") as f:
        codes = {m.group(1).lower(): int(m.group(2)) for m in re.finditer(r"^#define ACT_([A-Z_]+) +(\d+)", f.read(), re.M)}
    if len(set(codes.values())) != len(codes):
        raise RuntimeError(f"activations.cuh gives two activations the same code: {codes}")
    return codes


#: The activation codes every kernel shares, read from activations.cuh.
ACTIVATIONS = _activation_codes()


def names():
    """The kernel files in the folder, without the ``.cu`` suffix, sorted."""
    return sorted(f[:-3] for f in os.listdir(DIR) if f.endswith(".cu"))


def path(name):
    """The path of ``<name>.cu`` (or of a header, named with its suffix: ``"common.cuh"``);
    a clear error if there is no such file."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"kernel file name must be a non-empty string, got {name!r}")
    filename = name if name.endswith((".cu", ".cuh")) else name + ".cu"
    full = os.path.join(DIR, filename)
    if not os.path.isfile(full):
        raise FileNotFoundError(
            f"no kernel file {filename!r} in {DIR}; available: {', '.join(names()) or '(none)'}")
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


def function_source(name, function):
    """The text of one function in ``<name>.cu`` (a kernel or a device helper), with the comment
    lines just above it: what a lesson prints to show one version of a ladder.

    >>> print(function_source("reduction", "reduce_kernel3"))   # doctest: +SKIP
    """
    text = source(name)
    lines = text.splitlines()
    start = None
    for i, line in enumerate(lines):
        head = line.split("(")[0].split()
        if line and not line[0].isspace() and head and head[-1] == function and "(" in line:
            start = i
            break
    if start is None:
        raise KeyError(f"no function {function!r} in {os.path.basename(path(name))}")
    while start > 0 and lines[start - 1].lstrip().startswith("//"):
        start -= 1   # keep the comment that introduces the function
    depth, seen_brace = 0, False
    for end in range(start, len(lines)):
        depth += lines[end].count("{") - lines[end].count("}")
        seen_brace = seen_brace or "{" in lines[end]
        if seen_brace and depth == 0:
            return "\n".join(lines[start:end + 1])
    raise ValueError(f"{os.path.basename(path(name))}: the body of {function!r} is not closed")
