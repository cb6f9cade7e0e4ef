"""What a built module calls outside itself, checked against what device code may call.

nvcc refuses a kernel that calls a host function (``exit``, ``fopen``, ``rand``...) or throws an exception:
"calling a __host__ function from a __global__ function is not allowed". The emulator compiles the same
source as host code, where such a call links and then, at run time, ends the notebook's process (``exit``)
or unwinds through the launch (``throw``). So after linking, the module's undefined symbols, less those of
the runtime objects linked into it, must all be functions device code has: the math library, ``printf``,
``malloc``/``free``, ``memcpy``/``memset`` and the compiler's own helpers. Anything else is refused at
compile time with nvcc's reason.
"""
import functools
import os
import re
import shutil
import subprocess
import sys

from ._errors import CompileError

#: Part of every cached module's key: a module built before a change here is built (and checked) again.
VERSION = 1

_C99_MATH = """
    acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh erf erfc exp exp10 exp2 expm1 fabs fdim
    floor fma fmax fmin fmod frexp hypot ilogb j0 j1 jn ldexp lgamma llrint llround log log10 log1p log2 logb
    lrint lround modf nan nearbyint nextafter nexttoward pow remainder remquo rint round scalbln scalbn sin
    sincos sinh sqrt tan tanh tgamma trunc y0 y1 yn
""".split()
#: The math library in float, double and long double; what every CUDA math function lowers to on the CPU.
MATH = frozenset(name + suffix for name in _C99_MATH for suffix in ("", "f", "l"))

#: Everything else device code may call (CUDA provides each in device code), and the C library's and the
#: linker's own machinery that any shared library references.
DEVICE_CALLABLE = frozenset("""
    printf vprintf puts putchar snprintf vsnprintf
    malloc free calloc realloc aligned_alloc
    memcpy memmove memset memcmp
    clock_gettime
    _Znwm _Znam _ZdlPv _ZdaPv _ZdlPvm _ZdaPvm _ZnwmRKSt9nothrow_t _ZnamRKSt9nothrow_t
    _ZnwmSt11align_val_t _ZnamSt11align_val_t _ZdlPvSt11align_val_t _ZdaPvSt11align_val_t
    _ZdlPvmSt11align_val_t _ZdaPvmSt11align_val_t
    __cxa_guard_acquire __cxa_guard_release __cxa_guard_abort __cxa_pure_virtual __cxa_deleted_virtual
    __cxa_finalize __cxa_atexit __gmon_start__ _ITM_registerTMCloneTable _ITM_deregisterTMCloneTable
    __tls_get_addr __stack_chk_fail __stack_chk_guard
""".split()) | frozenset((
    "getcontext", "makecontext", "swapcontext",      # the prelude's portable fibers (GPUEDU_FIBER_IMPL=ucontext)
))

#: Host functions learners reach for in a kernel, named as such in the refusal.
HOST_ONLY = frozenset("""
    abort exit _exit _Exit quick_exit atexit at_quick_exit system getenv setenv fork execv execve execvp popen
    fopen fclose fread fwrite fprintf fputs fgets fflush fscanf scanf sscanf perror
    rand srand random srandom drand48 time clock sleep usleep nanosleep raise signal kill
    pthread_create pthread_join pthread_mutex_lock pthread_mutex_unlock
""".split())

#: Exceptions and run-time type information: nvcc supports neither in device code.
_EXCEPTIONS = re.compile(r"^(__cxa_(throw|rethrow|allocate_exception|free_exception|begin_catch|end_catch|"
                         r"call_unexpected|bad_cast|bad_typeid|get_exception_ptr)|_Unwind_Resume|"
                         r"__gxx_personality_v0|_ZSt9terminatev|_ZSt\d+__throw_\w+|_ZTI\w+|_ZTS\w+)$")
# The compiler's arithmetic helpers (libgcc's __popcountdi2, __divti3, compiler-rt's __mulodi4...).
_COMPILER_HELPER = re.compile(r"^__[a-z]+[0-9]$")


@functools.lru_cache(maxsize=None)
def _nm():
    return shutil.which("nm")


@functools.lru_cache(maxsize=64)
def _undefined_cached(path, mtime):
    nm = _nm()
    if nm is None:
        return None
    if sys.platform == "darwin":
        command = [nm, "-u", path]
    else:
        command = [nm, "-D", "--undefined-only", path] if path.endswith(".so") else [nm, "--undefined-only", path]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return None
    names = set()
    for line in done.stdout.splitlines():
        name = line.split()[-1] if line.split() else ""
        name = name.split("@")[0]
        if sys.platform == "darwin" and name.startswith("_"):
            name = name[1:]           # Mach-O prefixes every C symbol with an underscore
        if name:
            names.add(name)
    return frozenset(names)


def undefined_symbols(path):
    """The names ``path`` (a shared library or an object file) needs from elsewhere; None if ``nm`` is missing."""
    return _undefined_cached(path, os.path.getmtime(path))


def _demangle(names):
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return dict(zip(names, names))
    done = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True)
    readable = done.stdout.splitlines() if done.returncode == 0 else names
    return dict(zip(names, readable if len(readable) == len(names) else names))


def allowed(name):
    return name in MATH or name in DEVICE_CALLABLE or bool(_COMPILER_HELPER.match(name))


def check(library, runtime_objects=()):
    """Raise CompileError if the module at ``library`` calls what device code cannot; no-op without ``nm``."""
    needed = undefined_symbols(library)
    if needed is None:
        return
    for obj in runtime_objects:
        from_runtime = undefined_symbols(obj)
        if from_runtime is None:
            return
        needed = needed - from_runtime
    throws = sorted(n for n in needed if _EXCEPTIONS.match(n))
    host = sorted(n for n in needed if not allowed(n) and not _EXCEPTIONS.match(n))
    problems = []
    if throws:
        problems.append("kernel code uses C++ exceptions or run-time type information (throw, try/catch, typeid, or "
                        "a standard-library call that throws): nvcc does not support them in device code. Report "
                        "errors through an output flag, or stop the kernel with assert() or __trap()")
    if host:
        readable = _demangle(host)
        known = [readable[n] for n in host if n in HOST_ONLY]
        unknown = [readable[n] for n in host if n not in HOST_ONLY]
        if known:
            problems.append(f"kernel code calls the host function{'s' if len(known) > 1 else ''} {', '.join(known)}: "
                            f"device code cannot call functions that run on the CPU, and nvcc refuses it too "
                            f"(\"calling a __host__ function from a __global__ function is not allowed\"). "
                            f"To stop a kernel use assert() or __trap(); device code can call printf, malloc/free, "
                            f"memcpy/memset and the math functions")
        if unknown:
            problems.append(f"kernel code refers to {', '.join(unknown)}, which device code does not have: a "
                            f"__device__ function or variable declared but never defined, or a host function "
                            f"(nvcc refuses both). Define it in the source, or call a function device code has "
                            f"(printf, malloc/free, memcpy/memset, the math functions, your own __device__ functions)")
    if problems:
        raise CompileError("error: " + "\nerror: ".join(problems))
