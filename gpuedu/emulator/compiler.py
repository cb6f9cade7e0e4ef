"""``SourceModule`` on the CPU: compile CUDA C as C++ with the system compiler.

The kernel source is wrapped the way PyCUDA wraps it (``extern "C" { ... }``
unless ``no_extern_c=True``), preceded by a prelude header that defines the
CUDA device language (``_native/gpuedu_prelude.h``), followed by one generated
entry point per ``__global__`` function, and built into a shared library that
``_module.Module`` loads with ctypes.

Building happens in three steps:

1. a preprocessing pass (``-E``) with ``__global__`` kept as a marker finds the
   kernels and the functions they call, so that kernels with no barrier or warp
   intrinsic can run their threads as a plain loop (see ``analyse``);
2. the translation unit is compiled (``-O2 -fPIC``) to an object file, whose
   calls outside itself ``_linkcheck`` judges as nvcc would (host functions,
   exceptions, undefined device symbols), then linked with the runtime's host
   side (``_native/gpuedu_host.cpp``: signals, stack mappings), compiled once
   into the cache so that its system headers never meet the user's code;
3. the library is stored in the kernel cache (``cache_dir()``), keyed by the
   source, the options, the compiler and the prelude, so the next
   ``SourceModule`` of the same source only loads it, once its size and
   checksum are found to be those recorded when it was stored (``_cache``).

Teaching aid: ``set_schedule("reverse")`` (or ``GPUEDU_SCHEDULE=reverse``) runs
the threads of a block in another order, so that a missing ``__syncthreads``
shows up as a wrong answer; lessons reach it through ``gpuedu.emulator.compiler``.

Environment variables:

- ``CXX``: the C++ compiler (default: g++, then clang++, then c++ on PATH);
- ``GPUEDU_CACHE_DIR``: the kernel cache (default ``gpuedu/kernels`` in the platform's cache folder:
  ``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS);
- ``GPUEDU_SCHEDULE``: ``forward`` (default), ``reverse`` or ``random``;
- ``GPUEDU_THREADS``: how many worker threads run a launch's blocks at once (default ``auto``, one per core;
  ``1`` runs them one after another, in the grid's order; ``set_threads``/``get_threads`` at run time);
- ``GPUEDU_KERNEL_TIMEOUT``: seconds after which a launch stops with a LaunchError
  (``set_kernel_timeout``/``get_kernel_timeout`` change and read it at run time);
- ``GPUEDU_FIBERS=always`` (or ``auto``, the default): run every kernel's threads as fibers (if the analysis
  missed a barrier, e.g. one called through a function pointer);
- ``GPUEDU_CXXFLAGS``: extra host-compiler flags; ``GPUEDU_FIBER_IMPL=ucontext``
  uses the portable (slower) context switch.
"""
import ctypes
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile

from . import _linkcheck, _ptx, _scanner
from . import _module
from . import _cache
from ._cache import cache_dir, trusted_folder
from ._errors import CompileError, LogicError
from ._module import Module

NATIVE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")

# Undefined behaviour nvcc's code would hide, checked by the compiler at no measurable cost: a function that
# returns a value falling off its end, __builtin_unreachable() reached. The checks call handlers the emulator
# defines (gpuedu_launch.h), which stop the launch naming the line. Array bounds (-fsanitize=bounds) cost
# 25-40% on kernels that index __shared__ arrays by thread, so only profiled launches (memcheck) check them.
UB_CHECKS = ["-fsanitize=return,unreachable"] + (
    # An integer division by zero traps on x86 (SIGFPE, which stops the launch naming the thread); aarch64's
    # gives 0 and goes on. There the compiler checks the divisor (a compare per division), so the same kernel
    # stops the same way on both.
    ["-fsanitize=integer-divide-by-zero"] if platform.machine().lower() == "aarch64" else [])

#: AT_HWCAP's bit for ARMv8.1's LSE atomic instructions on aarch64 Linux (HWCAP_ATOMICS, asm/hwcap.h): what
#: libgcc's outline-atomics helpers test at run time too.
HWCAP_ATOMICS = 1 << 8
_AT_HWCAP = 16


def aarch64_has_lse(auxv_path="/proc/self/auxv", cpuinfo_path="/proc/cpuinfo"):
    """Whether this aarch64 CPU has LSE atomics: AT_HWCAP from the process's auxiliary vector, or the kernel's
    "atomics" feature in /proc/cpuinfo where that cannot be read; False when neither says (the safe answer)."""
    try:
        with open(auxv_path, "rb") as f:
            auxv = f.read()
        for i in range(0, len(auxv) - 15, 16):
            key, value = struct.unpack_from("<QQ", auxv, i)
            if key == _AT_HWCAP:
                return bool(value & HWCAP_ATOMICS)
            if key == 0:
                break
    except OSError:
        pass
    try:
        with open(cpuinfo_path) as f:
            for line in f:
                if line.lower().startswith("features"):
                    return "atomics" in line.split(":", 1)[-1].split()
    except OSError:
        pass
    return False


def atomics_path(machine=None, has_lse=None):
    """``(flags, words)``: how this machine's compiler is told to build atomics, and that path in words; on
    anything but aarch64, ``([], None)`` (x86-64's atomics are single instructions whatever the flags).

    On aarch64, g++ 10+ and clang by default call a libgcc helper for every atomic (outline atomics), which
    picks LSE or a load/store-exclusive loop at run time. Inline is cheaper, measured under qemu
    (benchmarks/atomics_bench.py, benchmarks/README.md "Atomics on aarch64": 2^20 contended int atomicAdds
    21.8 ms through the helpers, 20.3 ms as exclusive loops, 15.5 ms as LSE; uncontended 12.2, 7.0, 6.1 ms; a
    barrier reduction within 3 %): so LSE inline where the CPU has it (every ARMv8.1 and later core: Apple
    silicon, Graviton 2+, a Raspberry Pi 5), exclusive loops inline where it does not (ARMv8.0: a Raspberry Pi
    4). The flag is part of every module's cache key (``CXX_FLAGS``).
    ``-march=armv8-a+lse`` sets the base architecture to Debian's and Ubuntu's default, ARMv8-A.
    """
    machine = (machine or platform.machine()).lower()
    if machine != "aarch64":
        return [], None
    if aarch64_has_lse() if has_lse is None else has_lse:
        return ["-march=armv8-a+lse"], "LSE instructions inline (-march=armv8-a+lse: this CPU has ARMv8.1 atomics)"
    return ["-mno-outline-atomics"], ("load/store-exclusive loops inline (-mno-outline-atomics: this CPU has no "
                                      "LSE atomics)")

BOUNDS_CHECK = "-fsanitize=bounds"
CXX_FLAGS = [
    "-std=c++17", "-O2", "-fPIC", "-shared", "-w", "-pthread",
    "-fno-strict-aliasing",          # CUDA code reinterprets pointers freely (float4 loads, bit casts)
    "-fno-semantic-interposition",   # lets kernels inline into the thread loop although they are exported
    "-fno-threadsafe-statics",       # static __shared__ registration runs on one OS thread
    "-fno-math-errno",
    "-fno-finite-loops",             # a spin loop must spin (and stop on Ctrl-C), not vanish
    "-fno-delete-null-pointer-checks",  # a write through a null pointer faults (and is named), as on a GPU
    "-fstack-clash-protection",      # big frames probe each page, so a fiber's overflow hits its guard page
    "-fstack-protector-strong",      # an overrun local array stops the launch (__stack_chk_fail, gpuedu_launch.h)
    "-U_FORTIFY_SOURCE",             # fortified longjmp refuses to leave a fiber's stack (the sources #undef it too)
    "-fvisibility=default",
    # Functions and loops start on a 64-byte line, so that where a kernel's loops fall does not depend on what the
    # headers put before them: the same barrier-bound kernel's fiber switch measured 4.6 ns or 5.8 ns as the
    # runtime's headers changed around it, and 4.6-4.9 ns aligned (benchmarks/README.md, "Code placement").
    "-falign-functions=64", "-falign-loops=64",
    *UB_CHECKS,
] + ([
    # The fibers switch stacks by hand, which a CET shadow stack would refuse: say so in the module (the
    # default of Ubuntu's compiler, -fcf-protection, would mark it shadow-stack safe).
    "-fcf-protection=none",
] if platform.machine().lower() in ("x86_64", "amd64", "i386", "i686") else []) + atomics_path()[0]

_INSTALL_HINT = (
    "the gpuedu CPU emulator compiles CUDA C with a C++ compiler (C++17). To install one:\n"
    "  Debian/Ubuntu/WSL:  sudo apt install g++\n"
    "  Fedora:             sudo dnf install gcc-c++\n"
    "  macOS (untested):   xcode-select --install (README.md, \"Platforms\")\n"
    "  conda:              conda install -c conda-forge cxx-compiler"
)


# ---- the C++ compiler and the cache ---------------------------------------------------

_cxx = None


def find_cxx():
    """``(path, version_line)`` of the C++ compiler the emulator uses; CompileError if there is none.

    ``$CXX`` wins; otherwise g++, clang++, then c++ on PATH.
    """
    global _cxx
    if _cxx is not None:
        return _cxx
    wanted = os.environ.get("CXX")
    candidates = [wanted] if wanted else ["g++", "clang++", "c++"]
    for name in candidates:
        path = shutil.which(name)
        if not path:
            continue
        try:
            out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0:
            _cxx = (path, (out.stdout.splitlines() or [name])[0].strip())
            return _cxx
    if wanted:
        raise CompileError(f"CXX={wanted!r} is not a working C++ compiler: unset CXX to use g++ or clang++ "
                           f"from PATH, or point it at a compiler.\n" + _INSTALL_HINT)
    raise CompileError("no C++ compiler found (looked for g++, clang++ and c++ on PATH); " + _INSTALL_HINT)


def _cxx_identity():
    """A cheap fingerprint of the compiler binary (path, size, mtime): no subprocess on cache hits."""
    wanted = os.environ.get("CXX")
    for name in ([wanted] if wanted else ["g++", "clang++", "c++"]):
        path = shutil.which(name)
        if path:
            real = os.path.realpath(path)
            st = os.stat(real)
            return f"{real}:{st.st_size}:{st.st_mtime_ns}"
    find_cxx()  # raises the install hint
    return ""


_prelude_hash = None

def _prelude_version():
    global _prelude_hash
    if _prelude_hash is None:
        h = hashlib.sha256()
        for folder, dirs, files in sorted(os.walk(NATIVE_DIR)):
            dirs.sort()
            for name in sorted(files):   # the headers of subfolders too (cooperative_groups/reduce.h)
                rel = os.path.relpath(os.path.join(folder, name), NATIVE_DIR)
                with open(os.path.join(folder, name), "rb") as f:
                    h.update(rel.encode() + b"\0" + f.read())
        h.update(" ".join(CXX_FLAGS).encode())
        # What the scanner writes into each module and what the link check lets through are part of a cached
        # module too: a change to either (a new barrier-like intrinsic in BARRIER_NAMES, say) rebuilds it.
        for rule in (_scanner, _linkcheck):
            with open(rule.__file__, "rb") as f:
                h.update(f.read())
        _prelude_hash = h.hexdigest()
    return _prelude_hash


# ---- teaching aid: the order in which a block's threads run ---------------------------------

def set_schedule(order, seed=0):
    """Run each block's threads ``"forward"``, ``"reverse"`` or in a ``"random"`` order.

    A kernel that is missing a ``__syncthreads`` often still gives the right answer
    in the forward order; ``"reverse"`` or ``"random"`` makes the race show up.
    """
    _module.set_schedule(order, seed)


def get_schedule():
    """The current thread order: ``"forward"``, ``"reverse"`` or ``"random"``."""
    return _module.get_schedule()


def set_kernel_timeout(seconds):
    """Stop launches that run longer than ``seconds`` (None: no limit; env ``GPUEDU_KERNEL_TIMEOUT``)."""
    _module.set_kernel_timeout(seconds)


def get_kernel_timeout():
    """The current kernel timeout in seconds, or None for no limit.

    Code that shortens the limit for a while restores it with this::

        previous = get_kernel_timeout()
        set_kernel_timeout(2.0)
        try:
            ...
        finally:
            set_kernel_timeout(previous)
    """
    return _module.get_kernel_timeout()


def set_threads(count):
    """Run a launch's blocks on ``count`` worker threads at once (None or "auto": one per core; 1: one after another,
    in the grid's order; env ``GPUEDU_THREADS``)."""
    _module.set_threads(count)


def get_threads():
    """How many worker threads a launch's blocks run on."""
    return _module.get_threads()


# ---- options -------------------------------------------------------------------------

def _option_list(options):
    return [str(o) for o in (options.split() if isinstance(options, str) else list(options or []))]


def _relocatable(options):
    """Whether nvcc would compile relocatable device code (-rdc=true, -dc): what launches from device code need."""
    return any(o in ("-rdc=true", "-rdc", "--relocatable-device-code=true", "-dc", "--device-c")
               for o in _option_list(options))


def _refuse(found, message):
    """A CompileError with one nvcc-style line per ``(line, name)`` found (``message`` formatted with ``name``)."""
    if found:
        raise CompileError("\n".join(f"kernel.cu({line}): error: {message.format(name=name)}" for line, name in found))


def _check_source(source, relocatable):
    """What nvcc refuses in device code and the C++ compiler would take: the C++ library's host-only parts, a
    launch from device code without relocatable device code, device-side cudaDeviceSynchronize() (which CUDA 12
    removed)."""
    _refuse(_scanner.host_library_uses(source),
            "{name} is host code, which a kernel cannot use (nvcc: calling a __host__ function from a __global__ "
            "function is not allowed): use a fixed-size local array, shared memory, or device memory the host "
            "allocates (gpuarray, mem_alloc) instead")
    if not relocatable:
        _refuse([(line, None) for line in _scanner.device_launch_lines(source)],
                "kernel launch from __device__ or __global__ functions requires separate compilation mode: compile "
                "with relocatable device code, as pycuda.compiler.DynamicSourceModule(source) does (options "
                "-rdc=true and the device runtime, cudadevrt)")
    _refuse([(source.count("\n", 0, start + m.start()) + 1, None) for start, code in _scanner.code_parts(source)
             for m in re.finditer(r"\bcudaDeviceSynchronize\s*\(", code)],
            "cudaDeviceSynchronize() in device code was removed in CUDA 12: a kernel cannot wait for the grids it "
            "launched. Their results are there when the launching grid has finished: read them in a kernel launched "
            "afterwards (from the host, or as the last grid this one launches)")


def _translate_options(options, include_dirs):
    """nvcc options -> C++ compiler flags: defines and include paths honoured, the rest ignored."""
    flags = []
    opts = options.split() if isinstance(options, str) else list(options or [])
    i = 0
    while i < len(opts):
        opt = str(opts[i])
        if opt in ("-D", "-I", "-U", "--define-macro", "--include-path") and i + 1 < len(opts):
            letter = {"--define-macro": "-D", "--include-path": "-I"}.get(opt, opt)
            flags.append(letter + str(opts[i + 1]))
            i += 2
            continue
        if opt.startswith(("-D", "-U")):
            flags.append(opt)
        elif opt.startswith("-I"):
            flags.append("-I" + os.path.abspath(opt[2:]))
        elif opt.startswith(("--define-macro=", "--include-path=")):
            key, value = opt.split("=", 1)
            flags.append(("-D" if key == "--define-macro" else "-I") + value)
        i += 1
    for d in include_dirs or []:
        flags.append("-I" + os.path.abspath(str(d)))
    return flags


# ---- compiling ---------------------------------------------------------------------------

_C_LINKAGE_HINT = (
    "cuda_fp16.h, cuda_bf16.h, mma.h, cuda_pipeline.h, cooperative_groups.h and curand_kernel.h are C++ headers "
    "and cannot be included inside the extern \"C\" { } block that "
    "SourceModule wraps your code in (nvcc rejects this too). Pass no_extern_c=True to SourceModule and "
    "declare each kernel extern \"C\" __global__ void name(...) so that get_function finds it by its plain name."
)


_OVERLOAD_HINT = (
    "Two functions named '{name}' take different parameters (overloads). SourceModule compiles your code as "
    "extern \"C\" (as PyCUDA does), where a name cannot be overloaded; nvcc refuses this too. Give each its "
    "own name, or pass no_extern_c=True to SourceModule: then overloaded kernels compile, and get_function "
    "takes each one's C++ (mangled) name, which the error for get_function('{name}') lists."
)




_COMPLEX_MIX_HINT = (
    "pycuda::complex<T> takes part in +, -, *, /, == and != with a complex<T> or a T of exactly the same T, "
    "as PyCUDA's header and nvcc have it (its operators are templates, so nothing is converted): write 2.0f, "
    "not 2.0 or 2, beside a complex<float>, and 2.0, not 2, beside a complex<double>; convert a complex<double> "
    "with pycuda::complex<float>(w) before mixing it with a complex<float>."
)
# g++: "no match for 'operator*' (operand types are 'pycuda::complex<float>' and 'double')";
# clang++: "invalid operands to binary expression ('pycuda::complex<float>' and 'double')".
_OPERAND_TYPES = re.compile(r"(?:operand types are|invalid operands to binary expression) ([^\n]*)")


def _clean_log(log, build_dir):
    """The compiler's output in terms of the user's file: drop build paths and include chains."""
    out = []
    for line in log.splitlines():
        if line.startswith("In file included from") or line.lstrip().startswith("from "):
            continue
        out.append(line.replace(build_dir + os.sep, ""))
    return "\n".join(out)


def _run(cmd, cwd):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


def _is_gxx(version):
    """Whether the C++ compiler whose version line this is is g++ (not clang++, nor another)."""
    return "clang" not in version.lower() and bool(re.search(r"g\+\+|gcc|GCC", version))


def _precompiled_prelude(cxx, version, folder):
    """A folder holding ``gpuedu_prelude.h.gch`` for g++, built once per prelude; None if unavailable.

    Parsing the prelude's C++ headers is most of a small module's compile time;
    g++ picks the precompiled header up by itself when its folder comes first on
    the include path (and ignores it if the flags do not match).
    """
    if not _is_gxx(version):
        return None
    key = hashlib.sha256(f"{_prelude_version()}|{_cxx_identity()}".encode()).hexdigest()[:16]
    entry = os.path.join(folder, f"pch-{key}.json")
    found, _ = _cache.lookup(folder, entry, "precompiled prelude")
    if found:
        return found
    tmp_dir = _cache.temporary_name(os.path.join(folder, f"pch-{key}"))
    os.makedirs(tmp_dir, exist_ok=True)
    cmd = [cxx] + [f for f in CXX_FLAGS if f != "-shared"] + [
        "-x", "c++-header", os.path.join(NATIVE_DIR, "gpuedu_prelude.h"), "-o", "gpuedu_prelude.h.gch"]
    proc = _run(cmd, tmp_dir)
    if proc.returncode != 0 or not os.path.isfile(os.path.join(tmp_dir, "gpuedu_prelude.h.gch")):
        shutil.rmtree(tmp_dir, ignore_errors=True)
        return None      # modules compile without it, only slower
    return _cache.publish(tmp_dir, folder, f"pch-{key}", "", entry, "precompiled prelude")


def _host_object(cxx, folder):
    """The emulator's host side (``_native/gpuedu_host.cpp``) compiled once per prelude and compiler.

    Every kernel module links it: it keeps the system headers that signal handling
    and stack mappings need (unistd.h, signal.h, ...) out of the user's translation
    unit, so kernels may be called ``read``, ``write`` or ``signal`` as with nvcc.
    """
    return _runtime_object(cxx, folder, "gpuedu_host.cpp", "host", [], "runtime")


_worker_library_loaded = []


def load_worker_library(folder=None):
    """Load, once per process and before any kernel module, the library that holds the emulator's one
    thread-local variable (``_native/gpuedu_worker.cpp``: the running worker's state, which every module reaches
    at a fixed offset from the thread pointer), built once per prelude and compiler. Linux only: elsewhere a
    module keeps the pointer itself and runs its blocks on one worker."""
    if _worker_library_loaded or not sys.platform.startswith("linux"):
        return
    cxx, _ = find_cxx()
    folder = folder or cache_dir()
    key = hashlib.sha256(f"{_prelude_version()}|{_cxx_identity()}".encode()).hexdigest()[:16]
    entry = os.path.join(folder, f"worker-{key}.json")
    path, _ = _cache.lookup(folder, entry, "worker library")
    if path is None:
        tmp = _cache.temporary_name(os.path.join(folder, f"worker-{key}")) + ".so"
        cmd = [cxx] + [f for f in CXX_FLAGS if f not in UB_CHECKS] + [
            "-I" + NATIVE_DIR, os.path.join(NATIVE_DIR, "gpuedu_worker.cpp"), "-o", tmp]
        proc = _run(cmd, folder)
        if proc.returncode != 0 or not os.path.isfile(tmp):
            _cache.remove_quietly(tmp)
            raise CompileError(_failed_runtime_build("worker library (gpuedu_worker.cpp)", proc),
                               command_line=" ".join(cmd), stdout=proc.stdout, stderr=proc.stderr)
        path = _cache.publish(tmp, folder, f"worker-{key}", ".so", entry, "worker library")
    ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL)   # its symbol is then every later module's
    _worker_library_loaded.append(path)


def _profile_object(cxx, folder):
    """The profiler's counters (``_native/gpuedu_profile.cpp``), compiled once, uninstrumented.

    A profiled module links it: the compiler's instrumentation of the module calls
    into it for every load, store and basic block of the kernels.
    """
    # Its hooks run for every load, store and basic block of a profiled kernel: no stack canary in them.
    return _runtime_object(cxx, folder, "gpuedu_profile.cpp", "profile",
                           ["-O3", "-DGPUEDU_PROFILE=1", "-fno-stack-protector"], "profiler")


def _runtime_object(cxx, folder, source, prefix, extra_flags, what):
    """``_native/<source>`` compiled once per prelude and compiler into ``<folder>/<prefix>-<key>.o``."""
    flags = "|" + " ".join(extra_flags) if extra_flags else ""   # (a change of them builds it again)
    key = hashlib.sha256(f"{_prelude_version()}|{_cxx_identity()}{flags}".encode()).hexdigest()[:16]
    entry = os.path.join(folder, f"{prefix}-{key}.json")
    obj, _ = _cache.lookup(folder, entry, f"emulator {what} object")
    if obj:
        return obj
    tmp = _cache.temporary_name(os.path.join(folder, f"{prefix}-{key}")) + ".o"
    # The runtime is the emulator's own code: no checks for undefined behaviour there (their handlers live in
    # the kernel's module).
    cmd = [cxx] + [f for f in CXX_FLAGS if f != "-shared" and f not in UB_CHECKS] + extra_flags + [
        "-I" + NATIVE_DIR, "-c", os.path.join(NATIVE_DIR, source), "-o", tmp]
    proc = _run(cmd, folder)
    if proc.returncode != 0 or not os.path.isfile(tmp):
        _cache.remove_quietly(tmp)
        raise CompileError(_failed_runtime_build(f"{what} ({source})", proc), command_line=" ".join(cmd),
                           stdout=proc.stdout, stderr=proc.stderr)
    return _cache.publish(tmp, folder, f"{prefix}-{key}", ".o", entry, f"emulator {what} object")


def _failed_runtime_build(what, proc):
    """Why building a part of the emulator's own runtime failed, in words."""
    if (killed := _killed_by(proc)):
        return f"compiling the emulator's {what} was stopped: {killed}"
    return f"compiling the emulator's {what} failed: the C++ compiler may be too old (C++17 is needed)"


def _killed_by(proc):
    """When the compiler was stopped by a signal (out of memory, a kill), what to tell; else None."""
    if proc.returncode >= 0:
        return None
    try:
        name = signal.Signals(-proc.returncode).name
    except ValueError:
        name = f"signal {-proc.returncode}"
    return (f"the C++ compiler was killed by {name} before it finished (on Linux, SIGKILL most often means "
            f"the machine ran out of memory). Nothing it left half-written is kept in the cache; run it again, "
            f"with fewer programs open if memory is short")


def profile_flags(version):
    """The host compiler's flags that make every load, store and basic block call the profiler."""
    # -fno-tree-sra keeps a float4 (an aggregate) one 16-byte access, as the GPU's vector load is one
    # instruction, instead of four scalar loads the counters would see as four requests; no
    # vectorising keeps neighbouring scalar accesses from being merged into one wider access that
    # the source never made (a wrong request count, and a false misaligned access for memcheck).
    flags = ["-DGPUEDU_PROFILE=1", "-g", "-fsanitize=thread", "-fsanitize-coverage=trace-pc", BOUNDS_CHECK]
    if "clang" in version.lower():   # clang's scalar replacement keeps a float4 copy one access by itself
        # Blocks as g++ reports them: clang's default coverage level (edge) adds an empty block on every
        # critical edge (an if without an else gets one where the skipping lanes pass) and leaves out
        # blocks it can infer (pruning); "bb,no-prune" reports each basic block once, every one of them.
        # Nor does clang unroll a loop (g++ -O2 does not): `for (k = 0; k < tid % 4; ++k)` unrolled is three
        # bodies in a row, and the last would read as a short body after a split, not as a loop's next turn.
        return flags + ["-fsanitize-coverage=bb,no-prune", "-fno-unroll-loops", "-fno-vectorize", "-fno-slp-vectorize",
                        "-mllvm", "-tsan-instrument-func-entry-exit=0",
                        "-mllvm", "-tsan-instrument-read-before-write=1"]
    # An access is one instruction site by its return address, and nvcc's code keeps each access where the
    # source puts it, so no pass may copy an access or merge two. -fno-thread-jumps: g++ 13's jump threader
    # gives each block's first thread a copy of ReLU v1's load on a path of its own, so each block's warp 0
    # made two requests (36,864 against ncu's 32,768 at 2^20 floats, with g++ 13 and 14;
    # g++ 12 does not thread that path). -fno-tree-sink: g++ 14 sinks the two stores of
    # `if (c) out[i] = 1; else out[i] = 2;` into one after the branch, where nvcc keeps two (16 requests).
    return flags + ["-fno-tree-sra", "-fno-tree-vectorize", "-fno-tree-slp-vectorize", "-fno-thread-jumps",
                    "-fno-tree-sink",
                    "--param=tsan-instrument-func-entry-exit=0"]


def _architecture(arch, options):
    """The sm number the module is built for (``_ptx.architecture``), or a CompileError that says why not."""
    try:
        return _ptx.architecture(arch, options)
    except ValueError as exc:
        raise CompileError(f"SourceModule: {exc}") from None


def _inline_ptx(source, sm, name="kernel.cu", profile=False):
    """``source`` with its asm() statements rewritten to the emulator's PTX (``_ptx``; ``profile``: with the
    counters' hooks at each statement), or the CompileError ptxas would give, at the statement's line."""
    try:
        return _ptx.rewrite(source, sm, profile)
    except _ptx.Refused as exc:
        raise CompileError(f"{name}({exc.line}): error: {exc}") from None


def _rewrite_headers(files, build_dir, profile, sm):
    """Rewrite the learner's headers as kernel.cu is rewritten, into the build folder.

    ``#include "x.cuh"`` looks in the including file's folder first, so kernel.cu
    (and each copied header) finds these copies: the ``__shared__`` variables they
    declare are each worker thread's own and register themselves too, and the profiler
    counts their accesses as shared.
    """
    for k, fname in enumerate(sorted(files)):
        path = fname if os.path.isabs(fname) else os.path.join(build_dir, fname)
        target = os.path.join(build_dir, os.path.basename(path))
        if os.path.dirname(os.path.abspath(path)) == build_dir or os.path.exists(target) or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        with open(target, "w", encoding="utf-8") as f:
            f.write(_scanner.rewrite_source(_inline_ptx(text, sm, os.path.basename(path), profile), profile=profile,
                                            tag=f"h{k}_"))


def _translation_unit(no_extern_c, sm):
    head = '#include "gpuedu_prelude.h"\n' + _arch_macros(sm)
    if no_extern_c:
        return head + '#include "kernel.cu"\n'
    return head + 'extern "C" {\n#include "kernel.cu"\n}\n'


def _arch_macros(sm):
    """The macros nvcc defines for the architecture a module is built for, where it is not the prelude's sm_80:
    ``__CUDA_ARCH__`` (900 for sm_90), and for an architecture-specific target (sm_90a) its feature macro
    ``__CUDA_ARCH_FEAT_SM90_ALL``, which kernels test before Hopper's wgmma and setmaxnreg."""
    if int(sm) == _ptx.DEFAULT_SM and not getattr(sm, "specific", False):
        return ""
    macros = (f"#undef __CUDA_ARCH__\n#define __CUDA_ARCH__ {int(sm) * 10}\n#undef __CUDA_ARCH_LIST__\n"
              f"#define __CUDA_ARCH_LIST__ {int(sm) * 10}\n")
    if getattr(sm, "specific", False):
        macros += f"#define __CUDA_ARCH_FEAT_SM{int(sm)}_ALL 1\n"
    return macros


def _overloaded_name(log, build_dir):
    """The name of a function defined twice with different parameters under extern "C", from the log.

    g++: "conflicting declaration of C function 'int helper(int)'"; clang++ names no function, only where
    ("kernel.cu:2:16: error: functions that differ only in their return type cannot be overloaded").
    """
    if m := re.search(r"conflicting declaration of C function [‘'`\"](?:[^(]*?)(\w+)\(", log):
        return m.group(1)
    m = re.search(r"kernel\.cu:(\d+):(\d+): error: (?:functions that differ only in their return type cannot be "
                  r"overloaded|conflicting types for)", log)
    if m:
        try:
            with open(os.path.join(build_dir, "kernel.cu"), encoding="utf-8", errors="replace") as f:
                line = f.read().splitlines()[int(m.group(1)) - 1]
        except (OSError, IndexError):
            return None
        name = re.match(r"\w+", line[int(m.group(2)) - 1:])
        return name.group(0) if name else None
    return None


def _compile_error(msg, cmd, proc, build_dir, source, extern_c=True):
    log = _clean_log(proc.stderr, build_dir)
    if (killed := _killed_by(proc)):      # not the learner's code: say so, not what the compiler half-said
        return CompileError(f"{msg.split(' (')[0]}: {killed}", command_line=" ".join(cmd), stdout=proc.stdout,
                            stderr=log)
    # g++: "conflicting declaration of C function"; clang++: "templates must have C++ linkage"
    if re.search(r"C linkage|C\+\+ linkage|conflicting declaration of C function", log) and re.search(
            r"#\s*include\s*[<\"](cuda_fp16|mma|cuda_bf16|cuda_pipeline|cooperative_groups|curand_kernel)\.h", source):
        msg = msg + "\n" + _C_LINKAGE_HINT
    elif extern_c and (name := _overloaded_name(log, build_dir)):
        msg = msg + "\n" + _OVERLOAD_HINT.format(name=name)
    if any("pycuda::complex<" in m.group(1) for m in _OPERAND_TYPES.finditer(log)):
        msg = msg + "\n" + _COMPLEX_MIX_HINT
    return CompileError(msg, command_line=" ".join(cmd), stdout=proc.stdout, stderr=log)


def build(source, options=None, no_extern_c=False, include_dirs=(), cache_dir_=None, profile=False, arch=None):
    """Compile ``source`` (cached) and return the path of the shared library.

    ``profile=True`` builds the instrumented twin that ``gpuedu.profile()`` runs:
    the same kernels, with every load, store and basic block reported to the
    profiler's counters (``_native/gpuedu_profile.cpp``).
    """
    if not isinstance(source, str):
        raise TypeError(f"SourceModule needs the kernel source as a str, got {type(source).__name__}")
    flags = _translate_options(options, include_dirs)
    extra = os.environ.get("GPUEDU_CXXFLAGS", "").split()  # extra host-compiler flags, e.g. -O3 -march=native
    flags += extra
    fiber_impl = os.environ.get("GPUEDU_FIBER_IMPL", "")
    if fiber_impl not in ("", "ucontext", "native"):
        raise CompileError(f"the environment variable GPUEDU_FIBER_IMPL={fiber_impl!r} cannot be used: it takes "
                           f"'ucontext' (the portable fiber switch) or 'native'. Unset it or give it a valid value.")
    if fiber_impl == "ucontext":
        flags.append("-DGPUEDU_UCONTEXT=1")  # the portable (slower) context switch, e.g. to test it
    if _is_gxx(find_cxx()[1]):
        # A static variable of an inline function (the key of a static __shared__ declaration in a __device__
        # helper of a header) is one object for the whole process under g++'s default (STB_GNU_UNIQUE), even across
        # modules loaded apart: each module must keep its own, as clang++'s weak symbols are kept.
        flags.append("-fno-gnu-unique")
    relocatable = _relocatable(options)
    _check_source(source, relocatable)
    sm = _architecture(arch, options)
    rewritten = _scanner.rewrite_source(_inline_ptx(source, sm, profile=profile), profile,
                                        device_launches=relocatable)
    if profile:  # the instrumentation's flags are part of what the cached module is
        flags = flags + profile_flags(find_cxx()[1])
    folder = trusted_folder(os.path.abspath(cache_dir_)) if cache_dir_ else cache_dir()
    load_worker_library(folder)
    key = hashlib.sha256(json.dumps(
        [_prelude_version(), _cxx_identity(), flags, bool(no_extern_c), rewritten, bool(profile)]
        + ([_arch_macros(sm)] if _arch_macros(sm) else [])).encode()
    ).hexdigest()[:40]
    meta_path = os.path.join(folder, f"k{key}.json")
    cached = _cached_library(meta_path)
    if cached:
        return cached

    cxx, version = find_cxx()
    build_dir = tempfile.mkdtemp(prefix=f"gpuedu-build-{os.getpid()}-", dir=folder)
    try:
        with open(os.path.join(build_dir, "kernel.cu"), "w") as f:
            f.write(rewritten)
        tu = os.path.join(build_dir, "module.cpp")
        base = [cxx] + CXX_FLAGS + ["-I" + NATIVE_DIR, "-I" + build_dir] + flags
        pch_dir = None if profile else _precompiled_prelude(cxx, version, folder)
        with open(tu, "w") as f:
            f.write(_translation_unit(no_extern_c, sm))
        scan_cmd = [c for c in base if c != "-shared"] + ["-E", "-DGPUEDU_SCAN", "module.cpp"]
        proc = _run(scan_cmd, build_dir)
        if proc.returncode != 0:
            raise _compile_error("preprocessing the kernel source failed", scan_cmd, proc, build_dir, source,
                                     not no_extern_c)
        user_code, files = _scanner.user_code(proc.stdout, "module.cpp", NATIVE_DIR)
        try:
            analysis = _scanner.analyse(user_code)
        except ValueError as exc:
            raise CompileError(f"kernel.cu: error: {exc}") from None
        if analysis.cluster_dims and int(sm) < 90:
            names = ", ".join(sorted(analysis.cluster_dims))
            raise CompileError(f"kernel.cu: error: __cluster_dims__ is not supported for this GPU architecture (kernel "
                               f"{names}; the module is built for sm_{int(sm)}): thread-block clusters need sm_90 or "
                               f"later, arch='sm_90' or 'sm_90a'")
        if not no_extern_c:
            plain = [name for _, name in analysis.kernels]
            twice = sorted({name for name in plain if plain.count(name) > 1})
            if twice:
                raise CompileError("error: " + " ".join(_OVERLOAD_HINT.format(name=name) for name in twice))
        _rewrite_headers(files, build_dir, profile, sm)
        with open(tu, "a") as f:
            f.write(_scanner.entry_points(analysis))
            if profile:   # what the counters count as global memory besides allocations
                f.write(_scanner.variable_table(analysis))
        unmarked = {}
        if profile:       # the arrays nvcc keeps in local memory report their accesses
            unmarked = _scanner.mark_local_array_files(
                _scanner.local_arrays(proc.stdout, "module.cpp", NATIVE_DIR, analysis), build_dir)
        out = os.path.join(build_dir, "module.so")
        runtime = [_host_object(cxx, folder)] + ([_profile_object(cxx, folder)] if profile else [])
        # Compile, then check the object file (the learner's code and the prelude: not what the toolchain
        # links in), then link. A profiled module is linked without -fsanitize: it brings its own hooks
        # (gpuedu_profile.cpp) instead of the sanitizer's runtime library.
        def compile_cmd(pch_dir):
            return [c for c in base[:1 + len(CXX_FLAGS)] if c != "-shared"] + (["-I" + pch_dir] if pch_dir else []) \
                + base[1 + len(CXX_FLAGS):] + ["-c", "module.cpp", "-o", "module.o"]
        cmd = compile_cmd(pch_dir)
        proc = _run(cmd, build_dir)
        if proc.returncode != 0 and pch_dir and "PCH file" in proc.stderr:
            # A damaged precompiled prelude (cut short by a full disk, say): g++ cannot read it and stops.
            # Build it again and compile once more; the learner's code was never the problem.
            shutil.rmtree(pch_dir, ignore_errors=True)
            cmd = compile_cmd(_precompiled_prelude(cxx, version, folder))
            proc = _run(cmd, build_dir)
        if proc.returncode != 0 and unmarked and not _killed_by(proc):
            # The scan of local arrays is no parser: a declaration it rewrote wrongly must not cost the launch its
            # counts. Compiled as written, the module counts everything but those arrays' accesses.
            for path, text in unmarked.items():
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            proc = _run(cmd, build_dir)
        if proc.returncode != 0:
            raise _compile_error("compiling the kernel source failed (line numbers refer to your source, kernel.cu)",
                                 cmd, proc, build_dir, source, not no_extern_c)
        _linkcheck.check(os.path.join(build_dir, "module.o"), runtime)  # refused as nvcc refuses them
        # A kernel's address must be the module's own even when the C library exports the same name
        # (a kernel called write): -Bsymbolic binds the module's references to its own definitions.
        cmd = [cxx, "-shared", "-pthread"] + extra + ["module.o", *runtime, "-o", out, "-Wl,-Bsymbolic"]
        proc = _run(cmd, build_dir)
        if proc.returncode != 0:
            raise _compile_error("linking the kernel module failed", cmd, proc, build_dir, source, not no_extern_c)
        deps = {}
        for fname in files:
            path = fname if os.path.isabs(fname) else os.path.join(build_dir, fname)
            if os.path.basename(path) == "kernel.cu" or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                deps[os.path.abspath(path)] = hashlib.sha256(f.read()).hexdigest()
        # The library's name carries its own checksum: a name always holds the same bytes, so a process that
        # loaded an older build (dlopen returns the loaded library for a known path) never meets new ones.
        lib_path = _cache.publish(out, folder, f"k{key}", ".so", meta_path, "kernel module", extra={
            "compiler": version, "deps": deps,
            "kernels": [[e, p, analysis.needs_fibers[p]] for e, p in analysis.kernels]})
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)
    return lib_path


def _cached_library(meta_path):
    """The cached library for this key, if its user headers are unchanged and it is whole; else None."""
    folder = os.path.dirname(meta_path)
    meta = _cache.read_entry(meta_path, "kernel module")
    if meta is None:
        return None
    deps = meta.get("deps", {})
    for path, digest in (deps.items() if isinstance(deps, dict) else ()):
        try:
            with open(path, "rb") as f:
                if hashlib.sha256(f.read()).hexdigest() != digest:
                    return None
        except OSError:
            return None
    # A truncated or damaged library would crash the process that loads it (and every later one): load only
    # what has the size and checksum it had when it was built; anything else is said and built again.
    return _cache.lookup(folder, meta_path, "kernel module", entry=meta)[0]


def compile(source, nvcc="nvcc", options=None, keep=False, no_extern_c=False, arch=None, code=None,  # noqa: A001
            cache_dir=None, target="cubin", include_dirs=[]):  # noqa: B006 - PyCUDA's signature
    """Compile like ``pycuda.compiler.compile``; returns the module's binary (a shared library's bytes)."""
    path = build(source, options, no_extern_c, include_dirs, cache_dir if isinstance(cache_dir, str) else None,
                 arch=arch)
    with open(path, "rb") as f:
        return f.read()


class SourceModule(Module):
    """``pycuda.compiler.SourceModule``: compile CUDA C source and load it."""

    def __init__(self, source, nvcc="nvcc", options=None, keep=False, no_extern_c=False, arch=None, code=None,
                 cache_dir=None, include_dirs=[]):  # noqa: B006 - PyCUDA's signature
        path = build(source, options, no_extern_c, include_dirs, cache_dir if isinstance(cache_dir, str) else None,
                     arch=arch)
        super().__init__(path)
        self.source = source
        # What building it again, instrumented, takes (gpuedu.profile() does so when it first runs it).
        self._build_args = (source, options, no_extern_c, tuple(include_dirs or ()),
                            cache_dir if isinstance(cache_dir, str) else None)
        self._arch = arch


# nvcc flags every PyCUDA compile adds ($PYCUDA_DEFAULT_NVCC_FLAGS), as pycuda.compiler has them.
DEFAULT_NVCC_FLAGS = [flag.strip() for flag in os.environ.get("PYCUDA_DEFAULT_NVCC_FLAGS", "").split() if flag.strip()]


class DynamicModule:
    """``pycuda.compiler.DynamicModule``: several CUDA C sources linked into one module with the device runtime
    (``cudadevrt``), so that kernels launch kernels (``child<<<grid, block>>>(...)`` in device code) and call
    each other across sources. ``add_source`` each source (with ``-rdc=true`` among its options for launches
    from device code), ``add_stdlib("cudadevrt")``, ``link()``, then ``get_function`` as for a SourceModule.

    The emulator links the sources themselves (CUDA C, each wrapped in ``extern "C"`` unless ``no_extern_c``):
    PTX, cubins and libraries other than the device runtime are a GPU's, so ``add_data``/``add_file`` of those
    raise with the reason. A grid launched from device code runs when the grid that launched it has finished."""

    def __init__(self, nvcc="nvcc", link_options=None, keep=False, no_extern_c=False, arch=None, code=None,
                 cache_dir=None, include_dirs=None, message_handler=None, log_verbose=False, cuda_libdir=None):
        self.no_extern_c = no_extern_c
        self.cache_dir = cache_dir if isinstance(cache_dir, str) else None
        self.include_dirs = list(include_dirs or [])
        self._sources = []            # (source, options, name)
        self.module = None

    def add_source(self, source, nvcc_options=None, name="kernel.ptx"):
        if self.module is not None:
            raise LogicError("this DynamicModule is linked already: add sources before link()")
        if not isinstance(source, str):
            raise TypeError(f"add_source needs CUDA C source as a str, got {type(source).__name__}")
        self._sources.append((source, _option_list(nvcc_options), name))
        return self

    def add_data(self, data, input_type, name="unknown"):
        raise LogicError(f"add_data({name!r}): the emulator links CUDA C sources (add_source), not PTX, cubins or "
                         f"object code, which are a GPU's machine code; give it the CUDA C they were built from")

    def add_file(self, filename, input_type):
        raise LogicError(f"add_file({filename!r}): the emulator links CUDA C sources (add_source), not PTX, cubins "
                         f"or libraries built for a GPU; read the CUDA C and add_source it")

    def add_stdlib(self, libname):
        if libname != "cudadevrt":
            raise LogicError(f"add_stdlib({libname!r}): the emulator has the device runtime (cudadevrt) only; "
                             f"{libname} is host or GPU code it cannot link")
        return self

    def link(self):
        if not self._sources:
            raise LogicError("link(): this DynamicModule has no source; add_source(cuda_c) first")
        options = []
        for _, opts, _ in self._sources:
            options += [o for o in opts if o not in options]
        for text, opts, _ in self._sources:     # each source's own line numbers in what is refused
            _check_source(text, _relocatable(opts))
        # One translation unit; #line 1 before each source keeps its own line numbers in the compiler's messages.
        wrap = (lambda text: f"#line 1\n{text}\n") if self.no_extern_c else \
            (lambda text: f'extern "C" {{\n#line 1\n{text}\n}}\n')
        source = "".join(wrap(text) for text, _, _ in self._sources)
        path = build(source, options, True, self.include_dirs, self.cache_dir)
        self.module = Module(path)
        self.module.source = source
        self.module._build_args = (source, options, True, tuple(self.include_dirs), self.cache_dir)
        return self

    def _linked(self):
        if self.module is None:
            raise LogicError("call link() before using the module")
        return self.module

    def get_function(self, name):
        return self._linked().get_function(name)

    def get_global(self, name):
        return self._linked().get_global(name)

    def get_texref(self, name):
        return self._linked().get_texref(name)

    def get_surfref(self, name):
        return self._linked().get_surfref(name)


class DynamicSourceModule(DynamicModule):
    """``pycuda.compiler.DynamicSourceModule``: one source compiled with relocatable device code (``-rdc=true``)
    and linked with the device runtime, so its kernels may launch kernels."""

    def __init__(self, source, nvcc="nvcc", options=None, keep=False, no_extern_c=False, arch=None, code=None,
                 cache_dir=None, include_dirs=None, cuda_libdir=None):
        super().__init__(nvcc=nvcc, keep=keep, no_extern_c=no_extern_c, arch=arch, code=code, cache_dir=cache_dir,
                         include_dirs=include_dirs, cuda_libdir=cuda_libdir)
        options = list(DEFAULT_NVCC_FLAGS if options is None else _option_list(options))
        for flag in ("-rdc=true", "-lcudadevrt"):
            if flag not in options:
                options.append(flag)
        self.add_source(source, nvcc_options=options)
        self.add_stdlib("cudadevrt")
        self.link()


# ---- the toolchain's own check ------------------------------------------------------------
# A block that reduces through shared memory with barriers (fibers), an atomic, CUDA math functions that a
# C library may also declare, and a plain kernel (threads as a loop): what every lesson needs of the C++
# compiler, its C library and the emulator's runtime, in one small module.
_CANARY = r"""
extern "C" __global__ void gpuedu_canary_reduce(float* total, const float* x) {
    __shared__ float tile[64];
    unsigned t = threadIdx.x;
    tile[t] = x[blockIdx.x * blockDim.x + t] * rsqrtf(4.0f);
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) tile[t] += tile[t + s];
        __syncthreads();
    }
    if (t == 0) atomicAdd(total, tile[0] * sinpif(0.5f));
}
extern "C" __global__ void gpuedu_canary_scale(float* y, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 3.0f * x[i];
}
"""


def toolchain():
    """One line naming what the emulator builds kernels with: compiler, C library and system."""
    try:
        path, version = find_cxx()
        compiler = f"{version} ({path})"
    except CompileError:
        compiler = "no C++ compiler"
    libc, libc_version = platform.libc_ver()
    try:
        system = platform.freedesktop_os_release().get("PRETTY_NAME")
    except (OSError, AttributeError):
        system = None
    system = system or f"{platform.system()} {platform.release()}"
    extra = os.environ.get("GPUEDU_CXXFLAGS", "").strip()
    return (f"{compiler}, {libc or 'C library'} {libc_version or '(version unknown)'}, {system}"
            + (f", GPUEDU_CXXFLAGS={extra!r}" if extra else ""))


def check_toolchain():
    """Build and run a small kernel module on the emulator: None if it works, else what failed and what to do.

    ``gpuedu.setup()`` and ``gpuedu doctor`` call it, so that a toolchain the emulator cannot use is named
    at set-up, not at the first kernel of a lesson. Uses the current context, or a context of its own.
    """
    import numpy as np
    from . import driver

    advice = ("The C++ compilers the course is tested with are listed in README.md (\"Platforms\"). Try another "
              "compiler (CXX=clang++ or CXX=g++ before starting Python), check that GPUEDU_CXXFLAGS is unset, and "
              "if it persists report this message with the output of `gpuedu doctor`.")
    driver.init()
    own = driver.Context.get_current() is None
    context = driver.Device(0).make_context() if own else None
    try:
        module = SourceModule(_CANARY, no_extern_c=True)
        x = np.arange(128, dtype=np.float32)
        total, y = np.zeros(1, np.float32), np.zeros(128, np.float32)
        module.get_function("gpuedu_canary_reduce")(driver.InOut(total), driver.In(x), block=(64, 1, 1),
                                                     grid=(2, 1))
        module.get_function("gpuedu_canary_scale")(driver.Out(y), driver.In(x), np.int32(128), block=(32, 1, 1),
                                                    grid=(4, 1))
    except driver.Error as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        # the compiler's first error, rather than the heading above it
        first = next((line for line in lines[1:] if re.search(r"\berror\b", line, re.I)),
                     lines[0] if lines else type(e).__name__)
        stage = "build" if isinstance(e, CompileError) else "run"
        return (f"the emulator cannot {stage} a test kernel with this toolchain ({toolchain()}): {first}. "
                + advice)
    finally:
        if context is not None:
            context.detach()
    if total[0] != x.sum() * 0.5 or not np.array_equal(y, 3 * x):
        return (f"a test kernel built with this toolchain ({toolchain()}) gave wrong results "
                f"(a reduction of 0..127 gave {total[0]:g}, not {x.sum() * 0.5:g}). " + advice)
    return None
