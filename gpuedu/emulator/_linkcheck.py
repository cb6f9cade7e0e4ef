"""What a kernel's own object file calls outside itself, checked against what device code may call.

nvcc refuses a kernel that calls a host function (``exit``, ``fopen``, ``rand``...) or throws an exception:
"calling a __host__ function from a __global__ function is not allowed". The emulator compiles the same
source as host code, where such a call links and then, at run time, ends the notebook's process (``exit``)
or unwinds through the launch (``throw``). So the module's object file (the learner's source with the
prelude, before linking) is read: every name it needs from outside, less what the emulator's runtime objects
define, must be something device code has: the math library, ``printf``, ``malloc``/``free``,
``memcpy``/``memset`` and the compiler's own helpers. Anything else is refused at compile time with nvcc's
reason.

The object file, not the linked library: what the toolchain links in on the module's behalf (a static
libstdc++ with its unwinder and demangler, as one Ubuntu 24.04 machine's g++ did) is not the learner's code.
And names as the C library spells them are read back to the C names written in the source: glibc's C23
redirections (``__isoc23_strtol`` for ``strtol``) and fortified wrappers (``__memcpy_chk`` for ``memcpy``).
"""
import functools
import os
import re
import shutil
import subprocess
import sys

from ._errors import CompileError

_C99_MATH = """
    acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh erf erfc exp exp10 exp2 expm1 fabs fdim
    floor fma fmax fmin fmod frexp hypot ilogb j0 j1 jn ldexp lgamma llrint llround log log10 log1p log2 logb
    lrint lround modf nan nearbyint nextafter nexttoward pow remainder remquo rint round scalbln scalbn sin
    sincos sinh sqrt tan tanh tgamma trunc y0 y1 yn
""".split()
#: The math library in float, double and long double; what every CUDA math function lowers to on the CPU.
MATH = frozenset(name + suffix for name in _C99_MATH for suffix in ("", "f", "l"))

#: Everything else device code may call (CUDA provides each in device code), and the compiler's and the
#: linker's own machinery that any object file may reference: the unwinder's cleanups (a local object with a
#: destructor), static initialisation guards, thread-local storage, the stack protector, the vtables of the
#: type information every class with virtual functions has (device code has virtual functions).
DEVICE_CALLABLE = frozenset("""
    printf vprintf puts putchar snprintf vsnprintf
    malloc free calloc realloc aligned_alloc
    memcpy memmove memset memcmp
    clock_gettime
    _Znwm _Znam _ZdlPv _ZdaPv _ZdlPvm _ZdaPvm _ZnwmRKSt9nothrow_t _ZnamRKSt9nothrow_t
    _ZnwmSt11align_val_t _ZnamSt11align_val_t _ZdlPvSt11align_val_t _ZdaPvSt11align_val_t
    _ZdlPvmSt11align_val_t _ZdaPvmSt11align_val_t
    __cxa_guard_acquire __cxa_guard_release __cxa_guard_abort __cxa_pure_virtual __cxa_deleted_virtual
    __cxa_finalize __cxa_atexit __cxa_thread_atexit __dso_handle __gmon_start__
    _ITM_registerTMCloneTable _ITM_deregisterTMCloneTable
    _Unwind_Resume __gxx_personality_v0 __gcc_personality_v0 __cxa_call_terminate
    __tls_get_addr __emutls_get_address __stack_chk_fail __stack_chk_guard __chk_fail
    _GLOBAL_OFFSET_TABLE_ _DYNAMIC __gpuedu_worker
    _ZTVN10__cxxabiv117__class_type_infoE _ZTVN10__cxxabiv120__si_class_type_infoE
    _ZTVN10__cxxabiv121__vmi_class_type_infoE
""".split()) | frozenset((
    "getcontext", "makecontext", "swapcontext",      # the prelude's portable fibers (GPUEDU_FIBER_IMPL=ucontext)
))

#: Host functions learners reach for in a kernel, named as such in the refusal.
HOST_ONLY = frozenset("""
    abort exit _exit _Exit quick_exit atexit at_quick_exit system getenv secure_getenv setenv fork execv execve
    execvp popen fopen fclose fread fwrite fprintf vfprintf fputs fputc fgets fflush fscanf scanf sscanf perror
    sprintf vsprintf strtol strtoul strtoll strtoull strtof strtod atoi atol atof
    rand srand random srandom drand48 time clock sleep usleep nanosleep raise signal kill
    pthread_create pthread_join pthread_mutex_lock pthread_mutex_unlock
""".split())

#: Exceptions and run-time type information: nvcc supports neither in device code. (The unwinder's own
#: names, _Unwind_Resume and the personality routine, are not here: any local object with a destructor
#: references them, throw or no throw.)
_EXCEPTIONS = re.compile(r"^(__cxa_(throw|rethrow|allocate_exception|free_exception|begin_catch|end_catch|"
                         r"call_unexpected|bad_cast|bad_typeid|get_exception_ptr|current_exception_type)|"
                         r"__dynamic_cast|_ZSt9terminatev|_ZSt\d+__throw_\w+|_ZTI\w+|_ZTS\w+)$")
# The compiler's arithmetic helpers (libgcc's __popcountdi2, __divti3, __extendhfsf2, compiler-rt's
# __mulodi4...) and its CPU-feature tests (__builtin_cpu_supports).
_COMPILER_HELPER = re.compile(r"^(__[a-z]+[0-9]|__cpu_model|__cpu_features2|__cpu_indicator_init)$")

# aarch64's outline atomics: g++ (10 and later) and clang lower every atomic operation on aarch64 to a call into
# a helper that libgcc (or compiler-rt) links into the module, __aarch64_<op><bytes>_<memory order>; the helper
# uses the CPU's LSE instructions when it has them (ARMv8.1 and later) and a load-exclusive/store-exclusive loop
# when it does not (a Raspberry Pi 4's Cortex-A72). The compiler's lowering of an atomicAdd, never a learner's
# host call: accepted on every target, as only an aarch64 compiler emits them.
_OUTLINE_ATOMIC = re.compile(r"^__aarch64_(cas|swp|ldadd|ldclr|ldeor|ldset)(1|2|4|8|16)_(relax|acq|rel|acq_rel|sync)$")

# How a C library or a compiler may spell a C name in an object file: glibc's C23 (and C99) redirections
# (__isoc23_strtoul), _FORTIFY_SOURCE's checking wrappers (__memcpy_chk), the finite-math entry points
# of older glibc (__expf_finite) and libmvec's vector variants of math functions (_ZGVbN4v_sinf).
_SPELLINGS = (re.compile(r"^__isoc(?:99|23)_(\w+)$"), re.compile(r"^__(\w+?)_chk$"),
              re.compile(r"^__(\w+)_finite$"), re.compile(r"^_ZGV[a-zA-Z]+\d*[a-z]*_(\w+)$"))


def source_name(symbol):
    """The name the source wrote for ``symbol``: ``__isoc23_strtol`` -> ``strtol``, ``__printf_chk`` ->
    ``printf``; any other name is itself."""
    for spelling in _SPELLINGS:
        m = spelling.match(symbol)
        if m:
            return m.group(1)
    return symbol


@functools.lru_cache(maxsize=None)
def _nm():
    return shutil.which("nm")


@functools.lru_cache(maxsize=64)
def _symbols_cached(path, mtime, defined):
    nm = _nm()
    if nm is None:
        return None
    which = "--defined-only" if defined else "--undefined-only"
    if sys.platform == "darwin":
        command = [nm, "-U" if defined else "-u", path]
    else:
        command = [nm, "-D", which, path] if path.endswith(".so") else [nm, which, path]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return None
    names = set()
    for line in done.stdout.splitlines():
        name = line.split()[-1] if line.split() else ""
        if line.rstrip().endswith(":") or not name:
            continue                  # an archive member's heading, or an empty line
        name = name.split("@")[0]     # a versioned reference (memcpy@GLIBC_2.14)
        if sys.platform == "darwin" and name.startswith("_"):
            name = name[1:]           # Mach-O prefixes every C symbol with an underscore
        if name:
            names.add(name)
    return frozenset(names)


def undefined_symbols(path):
    """The names ``path`` (an object file or a shared library) needs from elsewhere; None if ``nm`` is missing."""
    return _symbols_cached(path, os.path.getmtime(path), False)


def defined_symbols(path):
    """The names ``path`` (an object file or a shared library) defines; None if ``nm`` is missing."""
    return _symbols_cached(path, os.path.getmtime(path), True)


def _demangle(names):
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return dict(zip(names, names))
    done = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True)
    readable = done.stdout.splitlines() if done.returncode == 0 else names
    return dict(zip(names, readable if len(readable) == len(names) else names))


def allowed(name):
    """Whether device code may refer to ``name``, as the source wrote it (see ``source_name``)."""
    return (name in MATH or name in DEVICE_CALLABLE or bool(_COMPILER_HELPER.match(name))
            or bool(_OUTLINE_ATOMIC.match(name)))


def check(obj, runtime_objects=()):
    """Raise CompileError if the object file ``obj`` calls what device code cannot; no-op without ``nm``.

    ``runtime_objects``: the emulator's objects linked with it, whose definitions it may use.
    """
    undefined = undefined_symbols(obj)
    if undefined is None:
        return
    provided = set()
    for runtime in runtime_objects:
        defined = defined_symbols(runtime)
        if defined is None:
            return
        provided |= defined
    needed = undefined - provided
    defined = defined_symbols(obj) or frozenset()
    if "__clang_call_terminate" in defined:
        # clang++'s own helper for a noexcept function whose callee might throw (a destructor that calls
        # atomicAdd): it catches and calls std::terminate. A learner's catch would need __cxa_end_catch too.
        needed = needed - {"__cxa_begin_catch", "_ZSt9terminatev"}
    found = problems(needed)
    if found:
        raise CompileError("error: " + "\nerror: ".join(found))


def problems(needed):
    """What is wrong with referring to the names ``needed`` from device code: one sentence per kind, or [].

    Each name is judged as the source wrote it (``source_name``): ``__fprintf_chk`` as ``fprintf``.
    """
    needed = {source_name(n) for n in needed}
    throws = sorted(n for n in needed if _EXCEPTIONS.match(n))
    host = sorted(n for n in needed if not allowed(n) and not _EXCEPTIONS.match(n))
    found = []
    if throws:
        found.append("kernel code uses C++ exceptions or run-time type information (throw, try/catch, typeid, "
                     "dynamic_cast, or a standard-library call that throws): nvcc does not support them in device "
                     "code. Report errors through an output flag, or stop the kernel with assert() or __trap()")
    if host:
        readable = _demangle(host)
        known = [readable[n] for n in host if n in HOST_ONLY]
        unknown = [readable[n] for n in host if n not in HOST_ONLY]
        if known:
            found.append(f"kernel code calls the host function{'s' if len(known) > 1 else ''} {', '.join(known)}: "
                         f"device code cannot call functions that run on the CPU, and nvcc refuses it too "
                         f"(\"calling a __host__ function from a __global__ function is not allowed\"). "
                         f"To stop a kernel use assert() or __trap(); device code can call printf, malloc/free, "
                         f"memcpy/memset and the math functions")
        if unknown:
            found.append(f"kernel code refers to {', '.join(unknown)}, which device code does not have: a "
                         f"__device__ function or variable declared but never defined, or a host function "
                         f"(nvcc refuses both). Define it in the source, or call a function device code has "
                         f"(printf, malloc/free, memcpy/memset, the math functions, your own __device__ functions)")
    return found
