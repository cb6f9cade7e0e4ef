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
loses counts on a GPU).  A GPU has no such counters here: there the values decide, and the
report says what was not checked.

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
                                         # under gpuedu.racecheck() (the emulator only)
        diagnoses=(),                    # callables (case, expected, got) -> hint str or None, tried
                                         # in order when an output of 8+ elements is wrong; the first
                                         # hint replaces the generic one (expected, got: dicts of arrays)
        run=None,                        # optional (function, args, case) -> None: custom launches
        options=(),                      # extra compiler flags
        no_extern_c=False,               # True: the source declares `extern "C" __global__` itself
                                         # (for C++ headers such as cuda_fp16.h)
        requirements=(),                 # Requirement(metric, hint, at_most=/at_least=): a counter of
    ))                                   # gpuedu.profile() kept within a bound (the emulator only)

A requirement states how the kernel must get its values, in Nsight Compute's words::

    Requirement("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",   # a counted metric
                at_most=lambda case: math.prod(case.grid) * math.prod(case.block) // 32,
                hint="your kernel issued {got} global load requests; one per warp is {limit}: ...")

``at_most``/``at_least`` give the bound for a case; ``hint`` is formatted with ``got`` and
``limit``, or is a function ``(case, got, limit, metrics) -> str``.  The metric is summed over the
case's launches; a value outside the bound fails the case with kind ``"requirement"``.

In a diagnosis, ``never_written(got["out"])`` is the mask of elements the kernel did not write.

Sources are compiled as ``SourceModule`` compiles them, inside ``extern "C" { ... }`` (write plain
``__global__ void name(...)``), with ``gpuedu/kernels`` on the include path (``#include
"common.cuh"`` works).
"""
import difflib
import importlib
import pkgutil
import re
import traceback

import numpy as np

from .. import backend as _backend
from ..profiler.metrics import COUNTED as _COUNTED
from . import _canary, _diagnose, _runner
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


def check(exercise_id, source, *, seed=0, verbose=True):
    """Compile ``source``, run every case of the exercise and print the verdict.

    Returns a ``CheckResult``: truthy when every case passed.  Never raises for a wrong or broken
    kernel, or for a wrong id: those are failed checks with a message.
    """
    try:
        result = _check(exercise_id, source, seed)
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


def _check(exercise_id, source, seed):
    try:
        ex = get(exercise_id)
    except KeyError as exc:
        return CheckResult(str(exercise_id), failure=Failure("unknown_exercise", exc.args[0]))
    if isinstance(ex, (ProgramExercise, FunctionExercise)):   # Python, not a kernel
        return ex.check(source, seed)
    result = CheckResult(ex.id, ex.title)
    if not isinstance(source, str) or not source.strip():
        result.failure = Failure("bad_source", f"check() needs your kernel's CUDA C source as a string, "
                                 f"got {type(source).__name__}",
                                 f"write it in a string: my_kernel = r'''...''' then "
                                 f"check({ex.id!r}, my_kernel)")
        return result
    if "FILL ME IN" in source:
        result.notes.append("note: your source still contains the FILL ME IN marker.")

    try:
        function = _runner.compile_kernel(source, ex.kernel, ex.options, ex.no_extern_c)
    except _runner.CompileFailed as exc:
        result.failure = Failure("compile_error", "your source does not compile.\n" +
                                 _compile_report(source, exc), "fix the first error first: later "
                                 "ones are often its consequences.")
        return result
    except _runner.MissingKernel as exc:
        result.failure = Failure("missing_kernel", f"no __global__ function named `{ex.kernel}` "
                                 f"in your source ({exc})",
                                 f"keep the stub's name and parameters: `{_signature(ex.stub)}`")
        return result

    races = ex.races and _runner.emulator_scheduler() is not None
    counted = bool(ex.races or ex.requirements)   # how the kernel gets its values: races, counters
    values_only = counted and _backend.active().name != "cpu"   # a GPU has neither racecheck nor counters
    counted = counted and not values_only
    judged = []   # (case, expected) of every case run
    for case in ex.make_cases(seed):
        result.cases.append(case.describe())
        expected = ex.expected(case)
        judged.append((case, expected))
        threads = _prod(case.block)
        failure = _run_and_judge(ex, function, case, expected, threads, None)
        if failure is None and races:
            failure = _run_and_judge(ex, function, case, expected, threads, "reverse")
            if failure is not None and failure.kind not in ("launch_error",):
                failure.kind = "race"
                failure.message += " (only when the threads run in reverse order)"
                failure.hint = ("the result depends on the order threads run in: a thread reads "
                                "shared memory before the thread that writes it has done so. Put "
                                "`__syncthreads()` between writing shared memory and reading what "
                                "other threads wrote (and before overwriting it again).")
        if failure is not None and _record(result, case, failure):
            break
    # How the kernel gets its values is judged once they are right in every case (so a wrong
    # kernel's report is about its values, and it never waits for an instrumented build).
    if counted and result.failure is None:
        for case, expected in judged:
            failure = _judge_counters(ex, function, case, expected, result.notes)
            if failure is not None and _record(result, case, failure):
                break
    result.passed = result.failure is None
    # What was checked beyond the values is said once the values are right: until then a report is about
    # the values, and it reads the same on the emulator and on a GPU.
    if result.passed and races:
        result.notes.append("(each case also passed with the threads of every block in reverse order)")
    if result.passed and values_only:
        result.notes.append(f"(only the values were checked here: {_counted_checks(ex)} run on the emulator "
                            f"only; run with GPUEDU_BACKEND=cpu to check them too)")
    if result.passed and counted and not any(n.startswith("(no counters") for n in result.notes):
        result.notes.append(f"(each case also passed {_counted_checks(ex)} on the emulator)")
    return result


def _record(result, case, failure):
    """Add a failed case to ``result``; True when the remaining cases are not worth running."""
    failure.case = case.describe()
    result.failed_cases.append(case.label)
    # Report the most telling failure: an out-of-bounds write in any case says more than
    # a wrong value in the first one (where n = 1 may match a wrong pattern by chance).
    if result.failure is None or _rank(failure) < _rank(result.failure):
        result.failure = failure
    # A fault leaves a GPU context unusable; an endless loop would only repeat.
    return failure.kind == "launch_error" and (_backend.active().name == "cuda"
                                                or "longer than" in failure.message)


def _counted_checks(ex):
    """What the counted checks of ``ex`` look at, in words."""
    looks = ["gpuedu.racecheck()"] if ex.races else []
    if ex.requirements:
        looks.append("the bounds on " + ", ".join(sorted({r.metric for r in ex.requirements})))
    return " and ".join(looks)


# Lower is more telling; among equals the first failing case is reported.
_SEVERITY = {kind: rank for rank, kind in enumerate([
    "launch_error", "out_of_bounds", "input_modified", "race", "untouched", "wrong_index", "tail",
    "block_edges", "wrong_values", "requirement"])}


def _rank(failure):
    """Lower is more telling: the kind first, then a hint from the exercise over a generic one."""
    return _SEVERITY[failure.kind], not failure.specific


def _run_and_judge(ex, function, case, expected, block_threads, order):
    drv = _backend.active().driver
    try:
        with _runner.schedule(order), _runner.time_limit(KERNEL_TIME_LIMIT_S):
            outcome = _runner.run_case(ex, function, case, expected)
    except drv.Error as exc:
        return Failure("launch_error", f"the launch failed: {type(exc).__name__}: {exc}",
                       _launch_error_hint(str(exc)))
    for name, (before, past) in outcome.out_of_bounds.items():
        size = int(expected[name].size) if name in expected else int(case.inputs[name].size)
        f = _diagnose.out_of_bounds(name, before, past, size)
        return Failure(f.kind, f.summary, f.hint, output=name)
    for name in outcome.inputs_changed:
        return Failure("input_modified", f"the kernel changed the input `{name}`",
                       "write only to the output parameter(s); check the order of the parameters.",
                       output=name)
    for name in ex.outputs:
        finding = _diagnose.compare(name, expected[name], outcome.outputs[name], case,
                                    ex.rtol, ex.atol, block_threads, initial=case.inputs.get(name))
        if finding is None:
            continue
        for diagnosis in ex.diagnoses if finding.n_total >= _DIAGNOSIS_MIN_ELEMENTS else ():
            hint = diagnosis(case, expected, outcome.outputs)  # the exercise knows its mistakes best
            if hint:
                finding.hint = hint
                break
        else:
            hint = None
        return Failure(finding.kind, finding.summary, finding.hint, output=name, index=finding.index,
                       n_wrong=finding.n_wrong, n_total=finding.n_total, specific=bool(hint))
    return None


_WARPS = "smsp__warps_launched.sum"   # counted for every launch the emulator could instrument


def _judge_counters(ex, function, case, expected, notes):
    """Once the values are right: run the case again under ``gpuedu.profile()`` (with racecheck for
    exercises about shared memory) and fail a race, then a counter out of its Requirement's bounds."""
    drv = _backend.active().driver
    try:
        with _runner.counters(racecheck=ex.races) as prof, _runner.time_limit(KERNEL_TIME_LIMIT_S):
            _runner.run_case(ex, function, case, expected)
    except drv.Error as exc:
        return Failure("launch_error", f"the launch failed: {type(exc).__name__}: {exc}",
                       _launch_error_hint(str(exc)))
    if prof.hazards:
        f = _diagnose.race(prof.hazards)
        return Failure(f.kind, f.summary, f.hint, specific=True)
    uncounted = [k for k in prof.kernels if k.metrics[_WARPS] is None]
    if uncounted:   # e.g. no instrumented build of this module: say so, and judge the values only
        why = uncounted[0].reasons[_WARPS]
        note = f"(no counters for this kernel, so only its values were checked: {why})"
        if note not in notes:
            notes.append(note)
        return None
    metrics = {name: sum(k.metrics[name] for k in prof.kernels) for name in _COUNTED}
    for requirement in ex.requirements:
        verdict = requirement.judge(case, metrics)
        if verdict is not None:
            return Failure("requirement", verdict[0], verdict[1], specific=True)
    return None


# Exercise cases run in milliseconds; a kernel still running after this long loops forever (the
# emulator stops it; a GPU cannot be stopped from here).
KERNEL_TIME_LIMIT_S = 10


def _launch_error_hint(message):
    text = message.lower()
    if "longer than" in text:
        return ("the kernel never finished: a loop whose condition never becomes false (check the "
                "increment, e.g. `i += step` rather than `i + step`).")
    if "barrier" in text or "deadlock" in text or "exited" in text:
        return ("threads wait at a barrier that others never reach: every thread of the block must "
                "reach each __syncthreads(), so do not put it inside a branch or a guard some skip.")
    return ("an out-of-bounds access or a bad argument: check the bounds guard and the index "
            "arithmetic; pass sizes as np.int32(n) and arrays as device pointers.")


# Below this many elements a wrong pattern matches by chance (with n = 1, "min(x, 0)" is 0 half the time).
_DIAGNOSIS_MIN_ELEMENTS = 8


def _prod(values):
    out = 1
    for v in values:
        out *= int(v)
    return out


def _signature(stub_source):
    match = re.search(r"__global__[^{]*", stub_source)
    return " ".join(match.group(0).split()) if match else "see exercises.show()"


def _compile_report(source, exc, max_lines=12):
    """The compiler's messages about the learner's file, and the first offending line shown."""
    ours = [line for line in exc.log.splitlines() if _runner.FILENAME in line]
    shown = ours[:max_lines] if ours else exc.log.strip().splitlines()[:max_lines]
    text = "\n".join("  " + line for line in shown)
    lines = source.splitlines()
    if exc.lines and 1 <= exc.lines[0] <= len(lines):
        n = exc.lines[0]
        text += f"\n  line {n} of your source:\n    {n:>3} | {lines[n - 1]}"
    return text
