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
import ast
import os
import re

from .. import backend as _backend

#: The folder that holds the ``.cu`` and ``.cuh`` files (also the include directory).
DIR = os.path.dirname(os.path.abspath(__file__))

_loaded = {}


_defines = {}   # file name -> {macro: its text}, each file read once


def _file_defines(name):
    """{macro: replacement text} of the object-like ``#define``s of one file, comments removed."""
    filename = os.path.basename(path(name))
    found = _defines.get(filename)
    if found is None:
        text = re.sub(r"/\*.*?\*/", " ", source(filename), flags=re.S)
        text = re.sub(r"//[^\n]*", "", text).replace("\\\n", " ")
        found = {}
        for macro, value in re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(?![\w(])[ \t]*([^\n]*)$", text, re.M):
            value = " ".join(value.split())
            if found.setdefault(macro, value) != value:
                found[macro] = ValueError(f"{filename} defines {macro} twice, as {found[macro]!r} and {value!r}")
        _defines[filename] = found
    return filename, found


_ARITHMETIC = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Add, ast.Sub, ast.Mult,
               ast.Div, ast.FloorDiv, ast.Mod, ast.USub, ast.UAdd, ast.Load)


def define(name, macro):
    """The integer a ``#define`` of ``<name>.cu`` (or of a header, named with its suffix) gives ``macro``,
    as the file compiles without options: a number, or integer arithmetic on other macros of that file.

    >>> define("conv2d", "TILE_H")
    16

    The file is read once; a macro that is not there, or not a number, is a LookupError (ValueError)
    that names the file and the macro."""
    filename, found = _file_defines(name)
    return _evaluate(filename, found, macro, ())


def _evaluate(filename, found, macro, seen):
    if macro not in found:
        raise LookupError(f"{filename} has no #define {macro}: Python reads it from there, so define it "
                          f"(or read another name)")
    value = found[macro]
    if isinstance(value, Exception):
        raise value
    if macro in seen:
        raise ValueError(f"{filename}: #define {macro} refers to itself")
    try:
        tree = ast.parse(re.sub(r"\b(\d+)[uUlL]+\b", r"\1", value), mode="eval")
    except SyntaxError:
        tree = None
    if tree is None or not all(isinstance(node, _ARITHMETIC) for node in ast.walk(tree)):
        raise ValueError(f"{filename}: #define {macro} {value} is not integer arithmetic Python can read")
    return _integer(filename, found, macro, tree.body, seen + (macro,))


def _integer(filename, found, macro, node, seen):
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int):
            raise ValueError(f"{filename}: #define {macro} holds {node.value!r}, not an integer")
        return node.value
    if isinstance(node, ast.Name):
        return _evaluate(filename, found, node.id, seen)
    if isinstance(node, ast.UnaryOp):
        value = _integer(filename, found, macro, node.operand, seen)
        return -value if isinstance(node.op, ast.USub) else value
    left = _integer(filename, found, macro, node.left, seen)
    right = _integer(filename, found, macro, node.right, seen)
    if isinstance(node.op, ast.Add):
        return left + right
    if isinstance(node.op, ast.Sub):
        return left - right
    if isinstance(node.op, ast.Mult):
        return left * right
    quotient = abs(left) // abs(right)            # C's integer division truncates towards zero
    quotient = quotient if (left < 0) == (right < 0) else -quotient
    return quotient if isinstance(node.op, (ast.Div, ast.FloorDiv)) else left - right * quotient


_templates = {}


def template_arguments(name, alias):
    """The integer template arguments of ``using <alias> = Template<...>;`` in ``name`` (a header with
    its suffix, or ``<name>.cu``), e.g. ``template_arguments("gemm_warptile.cuh", "Tile128x128")``
    -> (128, 128, 16, 64, 32, 2, 2); read once per file, a LookupError naming the file and alias if absent."""
    filename = os.path.basename(path(name))
    found = _templates.get(filename)
    if found is None:
        found = {a: tuple(int(v) for v in args.split(","))
                 for a, args in re.findall(r"^\s*using\s+(\w+)\s*=\s*\w+\s*<([\d\s,]+)>\s*;", source(filename), re.M)}
        _templates[filename] = found
    if alias not in found:
        raise LookupError(f"{filename} has no `using {alias} = ...<...>;` with integer arguments")
    return found[alias]


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


def load(name, options=(), arch=None):
    """Compile ``<name>.cu`` with the active backend's ``SourceModule`` and return the module.

    Memoised per (backend, name, options, arch): compiling is slow (nvcc or g++), loading twice is not needed.
    ``options`` are extra compiler flags, e.g. ``("-DBLOCK=128",)``. ``arch`` (e.g. ``"sm_90a"``) builds for that
    architecture instead of the device's (PyCUDA's ``SourceModule(arch=...)``; the emulator takes it too).
    """
    if isinstance(options, str):
        raise TypeError(f"options must be a list or tuple of flags, got the string {options!r}; "
                        f"write options=[{options!r}]")
    options = tuple(options)
    active = _backend.active()
    stem = name[:-3] if isinstance(name, str) and name.endswith(".cu") else name
    key = (active.name, stem, options, arch)
    module = _loaded.get(key)
    if module is None:
        src = source(stem)
        extra = {"arch": arch} if arch else {}
        module = active.compiler.SourceModule(
            src, no_extern_c=True, include_dirs=[DIR], options=list(options), **extra)
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
        # the name is the word before the parameters' "(" (a __launch_bounds__(...) before it is skipped)
        head = re.sub(r"__launch_bounds__\s*\([^)]*\)", "", line).split("(")[0].split()
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


def _activation_codes():
    """{name: code} from the ``ACT_*`` #defines of activations.cuh, the kernels' one table ("none": 0, "relu": 1, ...),
    read as every constant Python takes from the kernels is (``define``)."""
    _, found = _file_defines("activations.cuh")
    codes = {macro[4:].lower(): define("activations.cuh", macro) for macro in found if macro.startswith("ACT_")}
    if len(set(codes.values())) != len(codes):
        raise RuntimeError(f"activations.cuh gives two activations the same code: {codes}")
    return codes


#: The activation codes every kernel shares, read from activations.cuh.
ACTIVATIONS = _activation_codes()
