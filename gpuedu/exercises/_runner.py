"""Compile the learner's source through the active backend and run one case with canaries."""
import contextlib
import importlib
import os
import re
from dataclasses import dataclass

import numpy as np

from .. import backend as _backend
from .. import kernels as _kernels
from . import _canary

FILENAME = "exercise.cu"
# SourceModule wraps the source in extern "C" { } (kernel names stay plain) by adding a line before
# it; `#line 1` makes the learner's first line line 1 of "exercise.cu", for g++ and nvcc alike, so
# compiler messages carry the learner's own line numbers.
_PREFIX = '#line 1 "' + FILENAME + '"\n'


class CompileFailed(Exception):
    """The source did not compile; ``log`` is the compiler's message, ``lines`` the learner's lines."""

    def __init__(self, log, lines):
        super().__init__(log)
        self.log = log
        self.lines = lines


class MissingKernel(Exception):
    pass


@dataclass(frozen=True)
class Side:
    """Where a kernel is built and run: ``name`` "cuda" or "cpu", and that side's driver and compiler modules."""

    name: str
    driver: object
    compiler: object


def active_side():
    """The active backend's side: a kernel's values are checked there."""
    active = _backend.active()
    return Side(active.name, active.driver, active.compiler)


class EmulatorUnavailable(Exception):
    """The emulator cannot build kernels here (no C++ compiler, say); the message says why."""


def emulator_side():
    """The CPU emulator, used directly whatever the backend: on a GPU, an exercise's method (counters,
    racecheck, threads in reverse order) is judged there, with the same counters and bounds as on a laptop."""
    from ..emulator.hooks import compiler, driver
    try:
        compiler.find_cxx()
    except driver.CompileError as exc:
        raise EmulatorUnavailable(str(exc).splitlines()[0]) from None
    driver.init()
    if driver.Context.get_current() is None:
        importlib.import_module("gpuedu.emulator.autoprimaryctx")
    return Side("cpu", driver, compiler)


REFUSED_INCLUDE = ("exercise answers are your own code: #include of the course's kernel files (gpuedu/kernels/...) "
                   "is refused")

# A preprocessor line that includes a file: #include, and the compilers' #include_next and #import.
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*(include_next|include|import)\b[ \t]*(.*)$', re.M)
_COMMENT = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.S)


def refused_includes(source):
    """``[(line, what)]``: the learner's lines that include one of the course's kernel files (``gpuedu/kernels``:
    by its name on any path, or by a path that reaches the folder), or include a file named by a macro, which could
    be one. Headers of the compiler and of CUDA (``<cuda_fp16.h>``, ``<mma.h>``, ...) stay allowed."""
    # Comments go (a string literal stays: a quoted header name is one), line continuations join the line.
    text = _COMMENT.sub(lambda m: m.group(0) if m.group(0).startswith('"') else
                        re.sub(r"[^\n]", " ", m.group(0)), source)
    course = os.path.realpath(_kernels.DIR)
    names = set(os.listdir(course))
    found, text = [], text.replace("\\\n", "")
    for match in _INCLUDE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        target = match.group(2).strip()
        quoted = re.match(r'"([^"]*)"|<([^>]*)>', target)
        if not quoted:
            found.append((line, f"#{match.group(1)} {target}: a file named by a macro (write the header's name)"))
            continue
        name = quoted.group(1) if quoted.group(1) is not None else quoted.group(2)
        reached = [os.path.realpath(os.path.join(base, name)) for base in (course, os.getcwd(), "/")]
        if os.path.basename(name) in names or any(os.path.exists(r) and os.path.commonpath([course, r]) == course
                                                  for r in reached):
            found.append((line, f"#{match.group(1)} {target}"))
    return found


def compile_kernel(source, kernel, options=(), no_extern_c=False, side=None, arch=None):
    """Compile ``source`` and return the ``__global__`` function named ``kernel`` (on ``side``, by default
    the active backend's), for ``arch`` ("sm_90a" for Hopper's wgmma, TMA and their mbarriers) or the device's.

    With ``no_extern_c`` the source declares its kernels ``extern "C"`` itself (needed when it
    includes C++ headers such as cuda_fp16.h), as with SourceModule.
    """
    refused = refused_includes(source)
    if refused:
        raise CompileFailed("\n".join(f"{FILENAME}:{line}: error: {REFUSED_INCLUDE} ({what})" for line, what in refused),
                            [line for line, _ in refused])
    side = side or active_side()
    drv = side.driver
    _ensure_context(drv)
    try:
        extra = {"arch": arch} if arch else {}
        module = side.compiler.SourceModule(_PREFIX + source, no_extern_c=no_extern_c, options=list(options), **extra)
    except drv.CompileError as exc:
        log = getattr(exc, "stderr", None) or str(exc)
        raise CompileFailed(log, error_lines(log)) from None
    try:
        return module.get_function(kernel)
    except drv.Error as exc:
        raise MissingKernel(str(exc)) from None


def _ensure_context(drv):
    """Use the lesson's current context; retain the device's primary context (as ``gpuedu.setup()``
    does) only if none is current."""
    try:
        current = drv.Context.get_current()
    except Exception:  # before cuInit, asking for the current context is itself an error
        current = None
    if current is None:
        importlib.import_module("gpuedu.emulator.autoprimaryctx" if drv.__name__.startswith("gpuedu.emulator")
                                else "pycuda.autoprimaryctx")


_LINE = re.compile(re.escape(FILENAME) + r"(?::(\d+)|\((\d+)\))")


def error_lines(log):
    """Line numbers in the learner's source that the compiler log names, in order of appearance."""
    found = []
    for match in _LINE.finditer(log):
        number = int(match.group(1) or match.group(2))
        if number not in found:
            found.append(number)
    return found


@contextlib.contextmanager
def schedule(order, side=None):
    """Run the enclosed launches with the emulator's thread order ``order`` ("reverse"); a no-op
    (yielding False) on a real GPU, whose scheduler nobody chooses, or when ``order`` is None."""
    compiler = emulator_scheduler(side)
    if compiler is None or order is None:
        yield False
        return
    previous = compiler.get_schedule()
    compiler.set_schedule(order)
    try:
        yield True
    finally:
        compiler.set_schedule(previous)


@contextlib.contextmanager
def time_limit(seconds, side=None):
    """Stop an endless kernel after ``seconds`` (or the user's shorter limit) with a LaunchError,
    through the emulator's kernel timeout; nothing on a real GPU."""
    compiler = _emulator_compiler(side)
    if compiler is None:
        yield
        return
    previous = compiler.get_kernel_timeout()   # the user's limit, restored afterwards
    compiler.set_kernel_timeout(seconds if previous is None else min(float(seconds), previous))
    try:
        yield
    finally:
        compiler.set_kernel_timeout(previous)


@contextlib.contextmanager
def counters(racecheck=False, side=None):
    """Record the enclosed launches with the emulator's counters (and its racecheck): yields the
    ``gpuedu.profile()`` Profile, or None on a real GPU, whose counters only Nsight Compute reads."""
    if _emulator_compiler(side) is None:
        yield None
        return
    from ..profiler.session import Profile
    with Profile(racecheck=racecheck, emulator=True) as prof:
        yield prof


def _emulator_compiler(side=None):
    """The emulator's compiler module (its teaching knobs live there), or None on a real GPU."""
    side = side or active_side()
    return side.compiler if side.name == "cpu" else None


def emulator_scheduler(side=None):
    """The emulator's compiler module if it can set the thread order, else None (e.g. on a GPU)."""
    compiler = _emulator_compiler(side)
    knobs = ("set_schedule", "get_schedule")
    return compiler if all(callable(getattr(compiler, k, None)) for k in knobs) else None


@dataclass
class Outcome:
    """What one launch left behind: for each output its body, and out-of-bounds writes."""

    outputs: dict        # name -> array with the expected shape
    out_of_bounds: dict  # name -> (indices before the start, indices past the end)
    inputs_changed: list  # input names whose contents the kernel changed (workspaces may change)


def run_case(exercise, function, case, expected, side=None):
    """Launch ``function`` (built on ``side``, by default the active backend's) for ``case`` with every array
    padded by canaries; return an Outcome.

    Launch errors (``drv.Error``) propagate to the caller, which reports them.
    """
    drv = (side or active_side()).driver
    buffers = {}   # name -> (allocation, padded host array, pad, shape, role)
    args = []
    try:
        for name in exercise.params:
            if name in exercise.outputs:
                want = expected[name]
                if name in case.inputs:   # updated in place: starts from the input's values
                    body = np.asarray(case.inputs[name], dtype=want.dtype).reshape(want.shape)
                else:                     # pure output: starts as "never written"
                    body = _canary.sentinel_filled(want.shape, want.dtype)
            else:
                if name not in case.inputs:
                    raise KeyError(f"{exercise.id}: case {case.label!r} gives no value for "
                                   f"kernel parameter {name!r}")
                value = case.inputs[name]
                if not isinstance(value, np.ndarray):
                    args.append(value)    # a NumPy scalar, passed by value
                    continue
                body = value
            role = "output" if name in exercise.outputs else "input"
            pad = _canary.pad_length(body.size)
            host = _canary.padded(body, pad, role)
            alloc = drv.mem_alloc(host.nbytes)
            drv.memcpy_htod(alloc, host)
            buffers[name] = (alloc, host, pad, body.shape, role)
            args.append(np.uintp(int(alloc) + pad * host.itemsize))
        runner = exercise.run or _launch_once
        runner(function, args, case)
        outputs, out_of_bounds, changed = {}, {}, []
        for name, (alloc, host, pad, shape, role) in buffers.items():
            after = np.empty_like(host)
            drv.memcpy_dtoh(after, alloc)
            before, past = _canary.changed_padding(after, pad, role)
            if len(before) or len(past):
                out_of_bounds[name] = (before, past)
            body = after[pad:pad + int(np.prod(shape, dtype=np.int64))].reshape(shape)
            if name in exercise.outputs:
                outputs[name] = body
            elif name not in exercise.workspaces and not np.array_equal(_canary.bits(body), _canary.bits(host[pad:pad + body.size].reshape(shape))):
                changed.append(name)
        return Outcome(outputs, out_of_bounds, changed)
    finally:
        for alloc, *_ in buffers.values():
            try:
                alloc.free()
            except Exception:  # a context broken by a launch error cannot free; nothing to do
                pass


def _launch_once(function, args, case):
    block = tuple(int(b) for b in case.block) + (1,) * (3 - len(case.block))
    grid = tuple(int(g) for g in case.grid)
    function(*args, block=block, grid=grid, shared=int(case.shared))
