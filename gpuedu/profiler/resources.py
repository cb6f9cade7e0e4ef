"""Registers, static shared memory and local memory of a kernel, from the real CUDA compiler.

Occupancy depends on how many registers the compiler gives each thread, which no emulator can know:
only ``ptxas`` decides. nvcc compiles for any GPU without one being present, and with ``-Xptxas -v``
it prints, per kernel::

    ptxas info    : Compiling entry function 'tr' for 'sm_90'
    ptxas info    : Function properties for tr
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 12 registers, used 1 barriers, 4224 bytes smem

`resource_usage` compiles the source the way PyCUDA's ``SourceModule`` would (inside ``extern "C"``
unless ``no_extern_c``), reads those lines, and remembers the answer on disk, so each source is
compiled once per architecture and compiler. Without nvcc it raises `ResourcesUnavailable`: a
made-up register count would teach the wrong lesson.

>>> from gpuedu import kernels
>>> resource_usage(kernels.source("copy_transpose"), "transpose_kernel3", no_extern_c=True)  # doctest: +SKIP
{'registers': 26, 'shared_static': 4224, 'local': 0, 'spill_stores': 0, 'spill_loads': 0,
 'arch': 'sm_90', 'function': 'transpose_kernel3'}
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings

from .. import kernels

NVCC_TIMEOUT_S = 300
_PYCUDA_HEADER = "pycuda-complex.hpp"
_HEADER_SUFFIXES = (".h", ".cuh", ".hpp", ".inl")

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGISTERS = re.compile(r"Used (\d+) registers")
_SHARED = re.compile(r"(\d+) bytes smem")

_results = {}          # cache key -> {function symbol: usage}, this process's memory of the disk cache
_nvcc_versions = {}    # nvcc path -> the text of `nvcc --version`


class ResourcesUnavailable(Exception):
    """The real compiler could not say what a kernel uses (nvcc missing, or it failed); says why."""


def plain_name(symbol):
    """The kernel's own name inside a C++ (Itanium-mangled) symbol: ``_Z4tmplILi64EEvPf`` -> ``tmpl``.

    Kernels compiled with C linkage (``extern "C"``) keep their plain name, returned unchanged.
    """
    if not symbol.startswith("_Z"):
        return symbol
    i = 2 + symbol.startswith("L", 2)     # _ZL: a function with internal linkage
    nested = symbol.startswith("N", i)    # _ZN ... E: namespace::name
    i += nested
    while i < len(symbol) and symbol[i] in "rVK":  # qualifiers a nested name may start with
        i += 1
    name = None
    # A name is a run of <length><identifier> parts; the last part before the template
    # arguments (I...E), the end of the nested name (E) or the parameter types is the kernel's.
    while i < len(symbol) and symbol[i].isdigit():
        digits = re.match(r"\d+", symbol[i:]).group()
        start = i + len(digits)
        name, i = symbol[start:start + int(digits)], start + int(digits)
        if not nested:
            break
    return name or symbol


def parse_ptxas(text):
    """{function symbol: usage} from ptxas's verbose output, one entry per kernel (entry function)."""
    found, entry, described = {}, None, None
    for line in text.splitlines():
        if match := _ENTRY.search(line):
            entry = match.group(1)
            found[entry] = {"registers": 0, "shared_static": 0, "local": 0,
                            "spill_stores": 0, "spill_loads": 0, "arch": match.group(2)}
        elif match := _PROPERTIES.search(line):
            described = match.group(1)    # a non-inlined device function gets its own block too
        elif (match := _STACK.search(line)) and entry is not None and described == entry:
            stack, stores, loads = map(int, match.groups())
            found[entry].update(local=stack, spill_stores=stores, spill_loads=loads)
        elif (match := _REGISTERS.search(line)) and entry is not None:
            found[entry]["registers"] = int(match.group(1))
            if shared := _SHARED.search(line):
                found[entry]["shared_static"] = int(shared.group(1))
    return found


def cache_dir():
    """Where results are kept: ``resources/`` in the emulator's kernel cache (``$GPUEDU_CACHE_DIR`` or
    the platform's cache folder), under the same rules of ownership."""
    from gpuedu.emulator.hooks import cache_dir as kernel_cache
    return os.path.join(kernel_cache(), "resources")


def _find_nvcc():
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise ResourcesUnavailable(
            "nvcc is not on PATH: install the CUDA toolkit to get registers and shared memory "
            "from the real compiler (it needs no GPU)")
    return nvcc


def _nvcc_version(nvcc):
    """`nvcc --version`'s text: a new compiler can allocate registers differently, so it is in the key."""
    if nvcc not in _nvcc_versions:
        try:
            proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ResourcesUnavailable(f"nvcc at {nvcc} could not be run: {exc}") from exc
        if proc.returncode != 0:
            raise ResourcesUnavailable(f"`nvcc --version` failed: {proc.stderr.strip() or proc.stdout.strip()}")
        _nvcc_versions[nvcc] = proc.stdout.strip()
    return _nvcc_versions[nvcc]


def _headers_stamp(folders):
    """Name, size and modification time of every header in the include folders: an edited header
    changes what the source compiles to, so it must change the cache key."""
    stamp = []
    for folder in folders:
        names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        for name in names:
            if name.endswith(_HEADER_SUFFIXES):
                st = os.stat(os.path.join(folder, name))
                stamp.append([folder, name, st.st_size, st.st_mtime_ns])
    return stamp


def _compile(nvcc, wrapped, arch, options, folders):
    """Run nvcc on the source; return ptxas's verbose report."""
    with tempfile.TemporaryDirectory(prefix="gpuedu-resources-") as tmp:
        source_path = os.path.join(tmp, "kernel.cu")
        with open(source_path, "w", encoding="utf-8") as f:
            f.write(wrapped)
        command = [nvcc, f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-o", os.path.join(tmp, "kernel.cubin")]
        for folder in folders:
            command += ["-I", folder]
        command += [*options, source_path]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=NVCC_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ResourcesUnavailable(f"nvcc could not compile the source for {arch}: {exc}") from exc
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise ResourcesUnavailable(f"nvcc failed to compile the source for {arch}:\n{output.strip()}")
    return output


def _checksum(functions):
    return hashlib.sha256(json.dumps(functions, sort_keys=True).encode()).hexdigest()


def _write_atomically(path, data):
    # Write a temporary file next to the target, flushed, then rename: a reader never sees half a file,
    # and two processes compiling the same source at once both leave a whole one. The checksum of the
    # figures goes with them, so that a file damaged since is never read as figures.
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({**data, "sha256": _checksum(data["functions"])}, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _load(path):
    """The figures kept at ``path``; None when there are none, or (said in one line) when the file is damaged:
    nvcc then runs again."""
    try:
        with open(path, encoding="utf-8") as f:
            data = f.read()
    except OSError:
        return None
    try:
        record = json.loads(data)
        functions = record["functions"]
        if "sha256" not in record:
            return None      # kept by an earlier gpuedu, which wrote no checksum: nvcc runs again
        if record["sha256"] == _checksum(functions):
            return functions
        why = "its checksum differs from the one recorded when it was written"
    except (ValueError, KeyError, TypeError) as exc:
        why = f"it is not the JSON gpuedu wrote: {exc}"
    from gpuedu.emulator.hooks import CacheDamageWarning
    warnings.warn(f"gpuedu: the cached nvcc resource figures {path} are damaged ({why}); running nvcc again",
                  CacheDamageWarning, stacklevel=4)
    return None


_installed_pycuda = []   # [PyCUDA's header folder, or None], looked up once


def pycuda_include_dir():
    """A folder holding ``pycuda-complex.hpp``, for nvcc.

    PyCUDA's ``SourceModule`` gives nvcc its own header folder (``pycuda/cuda``) with every source, and
    its ``ElementwiseKernel`` and ``ReductionKernel`` include ``<pycuda-complex.hpp>`` in every kernel they
    generate. Where PyCUDA is installed that folder is used; elsewhere ``nvcc-include/`` in the kernel
    cache, holding the emulator's own header and nothing else (the emulator's ``_native`` folder also
    has stand-ins for CUDA's headers, which must not hide nvcc's).
    """
    if not _installed_pycuda:
        folders = [os.path.join(p, "pycuda", "cuda") for p in sys.path if p and os.path.isdir(p)]
        _installed_pycuda.append(next((f for f in folders if os.path.isfile(os.path.join(f, _PYCUDA_HEADER))),
                                      None))
    if _installed_pycuda[0] is not None:
        return _installed_pycuda[0]
    from gpuedu.emulator.hooks import cache_dir as kernel_cache
    from gpuedu.emulator.compiler import NATIVE_DIR
    with open(os.path.join(NATIVE_DIR, _PYCUDA_HEADER), encoding="utf-8") as f:
        ours = f.read()
    folder = os.path.join(kernel_cache(), "nvcc-include")
    target = os.path.join(folder, _PYCUDA_HEADER)
    try:
        with open(target, encoding="utf-8") as f:
            current = f.read()
    except OSError:
        current = None
    if current != ours:     # written only when it changed: its time stamp is part of the cache key
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(ours)
        os.replace(tmp, target)
    return folder


def _functions(source, arch, options, no_extern_c, include_dirs):
    """{symbol: usage} for every kernel the source defines, from memory, disk, or nvcc."""
    nvcc = _find_nvcc()
    wrapped = source if no_extern_c else 'extern "C" {\n' + source + "\n}\n"
    folders = [kernels.DIR, *(os.path.abspath(d) for d in include_dirs), pycuda_include_dir()]
    key_parts = [wrapped, arch, list(options), _nvcc_version(nvcc), _headers_stamp(folders)]
    key = hashlib.sha256(json.dumps(key_parts).encode()).hexdigest()
    if key in _results:
        return _results[key]
    path = os.path.join(cache_dir(), key + ".json")
    functions = _load(path)
    if functions is None:
        functions = parse_ptxas(_compile(nvcc, wrapped, arch, options, folders))
        _write_atomically(path, {"arch": arch, "functions": functions})
    _results[key] = functions
    return functions


def resource_usage(source, kernel, arch="sm_90", options=(), no_extern_c=False, include_dirs=()):
    """What the compiler gives one kernel of `source` on `arch`, as a dict:

    ``registers`` per thread; ``shared_static`` bytes of ``__shared__`` arrays (dynamic shared
    memory is chosen at launch and not included); ``local`` bytes of stack frame per thread (local
    arrays and register spills; ``spill_stores`` and ``spill_loads`` say how much is spilling);
    ``arch``; and ``function``, the kernel's symbol (mangled when it has C++ linkage).

    `kernel` is the plain name (``"tmpl"``) or the mangled symbol (``"_Z4tmplILi64EEvPf"``).
    `options` and `no_extern_c` mean what they mean to ``SourceModule``; `include_dirs` are searched
    after ``gpuedu/kernels``, and PyCUDA's header folder after them (`pycuda_include_dir`). Raises
    `ResourcesUnavailable` when nvcc is missing or fails.
    """
    if isinstance(options, str):
        raise TypeError(f"options is a sequence of flags, e.g. ['-DTILE=32'], not the string {options!r}")
    if not re.fullmatch(r"sm_\d+[af]?", arch):
        raise ValueError(f"arch must name a real GPU architecture such as 'sm_90' or a GPU's .arch, got {arch!r}")
    functions = _functions(source, arch, tuple(options), no_extern_c, tuple(include_dirs))
    if kernel in functions:
        symbol = kernel
    else:
        matches = [s for s in functions if plain_name(s) == kernel]
        if len(matches) != 1:
            known = ", ".join(sorted(functions)) or "(none)"
            why = "several kernels are" if matches else "no kernel is"
            raise ValueError(f"{why} named {kernel!r} in the compiled source; its kernels: {known} "
                             f"(pass the mangled name to choose one)")
        symbol = matches[0]
    return {**functions[symbol], "function": symbol}
