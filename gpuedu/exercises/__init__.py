"""Exercises with automatic checks: write a kernel, ``check`` it, get told what is wrong.

For the learner::

    from gpuedu import exercises
    exercises.list()                      # the exercises, by lesson
    exercises.show("01.relu")             # the text, the NumPy spec, the launch rule and the stub
    my_relu = exercises.stub("01.relu")   # the stub as a string, to edit (or paste it in a cell)
    exercises.check("01.relu", my_relu)   # compile, run every case, print the verdict
    exercises.solution("01.relu")         # the reference solution, only when asked

``check`` compiles the source with the active backend (real PyCUDA, or the CPU emulator), runs
every case and prints either ``PASSED`` with the cases run, or ``NOT YET`` with exactly what is
wrong: the compiler's message on your own line numbers; a launch error; a write outside a buffer;
the first bad index with expected vs got and how many elements are wrong; and a hint tied to the
likely cause (missing bounds guard, wrong index, missing barrier...).  It returns a ``CheckResult``
(truthy only when passed) and never raises: a compile error is a failed check, not a traceback.

How a check catches what a GPU would hide.  Every array is allocated with padding on both sides
filled with a sentinel; pure outputs start filled with it too.  Afterwards, a changed padding
element is an out-of-bounds write (on a GPU it would silently corrupt memory), and an output
element still holding the sentinel was never written.  Cases use random values and sizes that are
not multiples of the block (1, block, block + 1, an odd size, a large one).  Exercises about
shared memory set ``races=True``: under the emulator each case then also runs with the threads of
a block in reverse order, which makes a missing ``__syncthreads()`` fail reliably.

Right values are not always the point: a naive matmul computes what a tiled one does.  Once the
values are right in every case, the emulator runs each case again under ``gpuedu.profile()``,
which counts what Nsight Compute's counters count, and fails the check when an exercise's
``Requirement`` on a counter is not kept (the tiled matmul's global load requests, the histogram's shared-memory
atomics), or, with ``races=True``, when ``gpuedu.racecheck()`` finds two threads racing (a `++` on
a shared counter gives right values on the emulator, which runs threads one after another, and
loses counts on a GPU).  The method is judged on the emulator whatever the backend: on a GPU the
values are checked there, then the same source is built by the emulator (always installed with
gpuedu) and judged with the same counters, bounds and thread orders as on a laptop, so the verdict
is the same; the report says where each part ran.  Where the emulator cannot build kernels (no C++
compiler), the report says ``PASSED (values only; the method was not checked)`` and why.

Writing an exercise (in ``gpuedu/exercises/lessonNN.py``; modules named ``lessonNN`` are found and
imported on first use)::

    from gpuedu.exercises import Case, Exercise, ceil_div, register, sizes_1d

    def relu_spec(x, n):                 # NumPy spec: keyword arguments are the case's inputs;
        return np.maximum(x, 0)          # returns the output (or a dict name -> array)

    def relu_cases(rng):                 # rng: a seeded numpy Generator
        for label, n in sizes_1d(rng, 256):
            x = rng.standard_normal(n).astype(np.float32)
            yield Case(label, {"x": x, "n": np.int32(n)}, block=(256, 1, 1), grid=(ceil_div(n, 256), 1))

    register(Exercise(
        id="01.relu", title="ReLU on every element", text="...",
        kernel="relu",                   # the __global__ function's name
        params=("out", "x", "n"),        # its parameters in order: arrays, NumPy scalars
        outputs=("out",),                # parameters the kernel writes (may also be inputs: in place)
        reference=relu_spec, cases=relu_cases,
        stub=STUB,                       # CUDA C with `// FILL ME IN (roughly N lines)`
        solution=SOLUTION,               # hidden until solution() is called
        launch="block = 256 threads, grid = ceil_div(n, 256) blocks",
        rtol=0, atol=0,                  # tolerance of the comparison (0, 0: exact)
        races=False,                     # True: also run under the reversed thread order, and
                                         # under gpuedu.racecheck() (on the emulator, also on a GPU)
        diagnoses=(),                    # callables (case, expected, got) -> hint str or None, tried
                                         # in order when an output of 8+ elements is wrong; the first
                                         # hint replaces the generic one (expected, got: dicts of arrays)
        diagnose_small_outputs=False,    # True: diagnoses also run on outputs of fewer than 8 elements
                                         # (a count or a sum whose cases give each mistake its own value)
        run=None,                        # optional (function, args, case) -> None: custom launches
        options=(),                      # extra compiler flags
        no_extern_c=False,               # True: the source declares `extern "C" __global__` itself
                                         # (for C++ headers such as cuda_fp16.h)
        requirements=(),                 # Requirement(metric, hint, at_most=/at_least=): a counter of
                                         # gpuedu.profile() kept within a bound (judged on the emulator)
        workspaces=(),                   # parameters the kernel may write freely (scratch memory, given
                                         # as a case input): never compared, but checked for overruns
        arch=None,                       # "sm_90a": built for Hopper's wgmma, TMA and mbarrier waits
    ))

A requirement states how the kernel must get its values, in Nsight Compute's words::

    Requirement("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",   # a counted metric
                at_most=lambda case: math.prod(case.grid) * math.prod(case.block) // 32,
                hint="your kernel issued {got} global load requests; one per warp is {limit}: ...")

``at_most``/``at_least`` give the bound for a case; ``hint`` is formatted with ``got`` and
``limit``, or is a function ``(case, got, limit, metrics) -> str``.  The metric is summed over the
case's launches; a value outside the bound fails the case with kind ``"requirement"``.

In a diagnosis, ``never_written(got["out"])`` is the mask of elements the kernel did not write.

Sources are compiled as ``SourceModule`` compiles them, inside ``extern "C" { ... }`` (write plain
``__global__ void name(...)``). An answer is the learner's own code: an ``#include`` of the course's kernel
files (``gpuedu/kernels``, by name or by any path that reaches them) is refused before compiling
(``_runner.refused_includes``); CUDA's and the compiler's headers stay allowed.
"""
import difflib
import importlib
import pkgutil
import re
import traceback

import numpy as np

from . import _canary, _kernel_check
from ._exercise import Case, Exercise, Requirement, ceil_div, sizes_1d
from ._function import FunctionExercise
from ._program import ProgramExercise
from ._result import CheckResult, Failure

__all__ = ["Case", "Exercise", "FunctionExercise", "ProgramExercise", "Requirement", "CheckResult", "ceil_div", "sizes_1d", "never_written",
           "register", "get", "list", "show", "stub", "check", "solution"]

_registry = {}
_loaded_all = False


def never_written(array):
    """Boolean mask of the elements of a pure output that the kernel never wrote (for diagnoses):
    before a launch every element of such an output holds a sentinel no computation produces."""
    return _canary.is_sentinel(np.asarray(array))


def register(exercise):
    """Add an exercise to the registry (an id may be registered once)."""
    if not isinstance(exercise, (Exercise, ProgramExercise, FunctionExercise)):
        raise TypeError(f"register() takes an Exercise, a ProgramExercise or a FunctionExercise, got {type(exercise).__name__}")
    old = _registry.get(exercise.id)
    if old is not None and old is not exercise:
        raise ValueError(f"exercise {exercise.id!r} is already registered")
    _registry[exercise.id] = exercise
    return exercise


def _lesson_modules():
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if re.fullmatch(r"lesson\d\d", m.name))


def _load(lesson):
    name = f"lesson{lesson}"
    if name in _lesson_modules():
        importlib.import_module(f"{__name__}.{name}")


def _load_all():
    global _loaded_all
    if not _loaded_all:
        for name in _lesson_modules():
            importlib.import_module(f"{__name__}.{name}")
        _loaded_all = True


def get(exercise_id):
    """The registered Exercise; a KeyError that names the close matches otherwise."""
    if not isinstance(exercise_id, str):
        raise KeyError(f"exercise ids are strings such as '01.relu', got {exercise_id!r}")
    if exercise_id not in _registry and re.match(r"^\d\d\.", exercise_id):
        _load(exercise_id[:2])
    if exercise_id not in _registry:
        _load_all()
    if exercise_id not in _registry:
        close = difflib.get_close_matches(exercise_id, _registry, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see exercises.list()"
        raise KeyError(f"no exercise {exercise_id!r}{hint}")
    return _registry[exercise_id]


def list(lesson=None):  # noqa: A001 - the name the course uses
    """Print the registered exercises grouped by lesson (optionally one lesson: "01" or 1) and
    return their ids."""
    _load_all()
    if lesson is not None:
        lesson = f"{int(lesson):02d}"
    # by lesson, and within a lesson in the order the lesson registered them (its teaching order)
    ids = sorted((i for i in _registry if lesson is None or i[:2] == lesson), key=lambda i: i[:2])
    current = None
    for i in ids:
        if i[:2] != current:
            current = i[:2]
            print(f"lesson {current}:")
        print(f"  {i:<24} {_registry[i].title}")
    if not ids:
        print("no exercises registered" + (f" for lesson {lesson}" if lesson else ""))
    return ids


def _lookup_or_say(exercise_id):
    try:
        return get(exercise_id)
    except KeyError as exc:
        print(exc.args[0])
        return None


def show(exercise_id):
    """Print the exercise: its text, NumPy spec, launch rule and the stub to fill in."""
    ex = _lookup_or_say(exercise_id)
    if ex is None:
        return
    if isinstance(ex, (ProgramExercise, FunctionExercise)):
        ex.show()
        return
    print(f"{ex.id}: {ex.title}\n")
    print(ex.text.strip() + "\n")
    print("NumPy spec:\n" + _indent(ex.spec_text) + "\n")
    print("Launch: " + ex.launch + "\n")
    print("Your kernel (replace the FILL ME IN line):\n" + _indent(ex.stub.strip("\n")))


def stub(exercise_id):
    """The stub's source as a string, to edit and pass to ``check``."""
    return get(exercise_id).stub


def solution(exercise_id):
    """Print (and return) the hidden reference solution.  Try first: a check's hint is a better teacher."""
    ex = _lookup_or_say(exercise_id)
    if ex is None:
        return None
    print(f"Try first: run exercises.check({ex.id!r}, your_source) and follow its hint; "
          f"the solution teaches most once you have met the problem.\n")
    print(ex.solution.strip("\n"))
    return ex.solution


def _indent(text, prefix="    "):
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def check(exercise_id, source, *, seed=0, verbose=True, isolated=False):
    """Compile ``source``, run every case of the exercise and print the verdict.

    Returns a ``CheckResult``: truthy when every case passed.  Never raises for a wrong or broken
    kernel, or for a wrong id: those are failed checks with a message.  ``isolated``: an answer written in
    Python runs in a process of its own, from which only its return values come back (``gpuedu grade``).
    """
    try:
        result = _check(exercise_id, source, seed, isolated)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # the checker itself failed; the notebook must live on
        last = traceback.extract_tb(exc.__traceback__)[-1]
        result = CheckResult(str(exercise_id), failure=Failure(
            "internal", f"the checker hit an unexpected error: {type(exc).__name__}: {exc}",
            f"(at {last.filename}:{last.lineno}) please report it with your source."))
    if verbose:
        print(result.report())
    return result


def _check(exercise_id, source, seed, isolated=False):
    try:
        ex = get(exercise_id)
    except KeyError as exc:
        return CheckResult(str(exercise_id), failure=Failure("unknown_exercise", exc.args[0]))
    if isinstance(ex, FunctionExercise):      # Python, not a kernel
        return ex.check(source, seed, isolated=isolated)
    if isinstance(ex, ProgramExercise):       # Python on MPI ranks: always in processes of their own
        return ex.check(source, seed)
    return _kernel_check.check_kernel(ex, source, seed)
