"""How a kernel exercise is judged: compile the learner's source, run every case, compare with the NumPy
spec, then, once the values are right, how the kernel got them (races, counters); the most telling failure
is the one reported. ``gpuedu.exercises.check`` calls ``check_kernel`` for every ``Exercise``.
"""
import re

from .. import backend as _backend
from ..profiler.metrics import COUNTED as _COUNTED
from . import _diagnose, _runner
from ._result import CheckResult, Failure


def check_kernel(ex, source, seed):
    """Judge ``source`` against the kernel exercise ``ex``; a ``CheckResult`` (never raises for a wrong kernel)."""
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
        function = _runner.compile_kernel(source, ex.kernel, ex.options, ex.no_extern_c, arch=ex.arch)
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

    side = _runner.active_side()
    counted = bool(ex.races or ex.requirements)   # how the kernel gets its values: races, counters
    judged = []   # (case, expected) of every case run
    # The values, on the active backend (a GPU's, or the emulator's), with the threads in reverse order too on
    # the emulator when the exercise is about shared memory.
    cases = list(ex.make_cases(seed))
    result.total = len(cases)
    for case in cases:
        result.cases.append(case.describe())
        expected = ex.expected(case)
        judged.append((case, expected))
        failure = _judge_values(ex, function, case, expected, side)
        if failure is not None and _record(result, case, failure):
            break
    # How the kernel gets its values is judged once they are right in every case (so a wrong kernel's report is
    # about its values, and it never waits for an instrumented build), always on the emulator: on a GPU, the
    # same source is built there too, and judged with the same counters and bounds as on a laptop.
    where = None
    if counted and result.failure is None:
        method_side, method_function, where = side, function, "on the emulator"
        if side.name != "cpu":
            method_side, method_function, why = _emulator_build(ex, source)
            where = "on the emulator, after the values on the GPU"
            if method_function is None:
                result.method_unchecked = why
                where = None
        for case, expected in judged if method_function is not None else ():
            failure = None
            if side.name != "cpu":     # the reverse order the GPU run could not choose
                failure = _judge_values(ex, method_function, case, expected, method_side, reverse_only=True)
            if failure is None:
                failure = _judge_counters(ex, method_function, case, expected, result.notes, method_side)
            if failure is not None:
                failure.message += " (judged on the emulator)" if side.name != "cpu" else ""
                if _record(result, case, failure):
                    break
    result.passed = result.failure is None
    # What was checked beyond the values is said once the values are right: until then a report is about
    # the values, and it reads the same on the emulator and on a GPU.
    if result.passed and ex.races and where:
        result.notes.append("(each case also passed with the threads of every block in reverse order"
                            + ("" if side.name == "cpu" else ", on the emulator") + ")")
    if result.passed and result.method_unchecked:
        result.notes.append(f"(only the values were checked, on the GPU: {_counted_checks(ex)} need the emulator, "
                            f"which cannot build kernels here: {result.method_unchecked}. Install a C++ compiler "
                            f"(gpuedu doctor says how) to have the method checked)")
    if result.passed and where and not any(n.startswith("(no counters") for n in result.notes):
        result.notes.append(f"(each case also passed {_counted_checks(ex)} {where})")
    return result


def _judge_values(ex, function, case, expected, side, reverse_only=False):
    """A case's values on ``side``: in the default order (unless ``reverse_only``), then, for an exercise about
    shared memory on the emulator, with the threads of every block in reverse order; the first failure."""
    threads = _prod(case.block)
    if not reverse_only:
        failure = _run_and_judge(ex, function, case, expected, threads, None, side)
        if failure is not None:
            return failure
    if not (ex.races and _runner.emulator_scheduler(side) is not None):
        return None
    failure = _run_and_judge(ex, function, case, expected, threads, "reverse", side)
    if failure is not None and failure.kind not in ("launch_error",):
        failure.kind = "race"
        failure.message += " (only when the threads run in reverse order)"
        failure.hint = ("the result depends on the order threads run in: a thread reads "
                        "shared memory before the thread that writes it has done so. Put "
                        "`__syncthreads()` between writing shared memory and reading what "
                        "other threads wrote (and before overwriting it again).")
    return failure


def _emulator_build(ex, source):
    """``(side, function, None)``: the learner's source built on the emulator, for its method; or
    ``(None, None, why)`` when the emulator cannot build it here."""
    try:
        side = _runner.emulator_side()
        return side, _runner.compile_kernel(source, ex.kernel, ex.options, ex.no_extern_c, side=side,
                                           arch=ex.arch), None
    except _runner.EmulatorUnavailable as exc:
        return None, None, str(exc)
    except _runner.CompileFailed as exc:   # nvcc took it, the emulator's C++ compiler does not
        first = exc.log.strip().splitlines()[:1]
        return None, None, "the emulator's C++ compiler refused the source: " + (first[0] if first else "")
    except _runner.MissingKernel as exc:
        return None, None, f"the emulator's build has no kernel {ex.kernel!r} ({exc})"


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
        looks.append("the bounds on " + ", ".join(sorted({r.label for r in ex.requirements})))
    return " and ".join(looks)


# Lower is more telling; among equals the first failing case is reported.
_SEVERITY = {kind: rank for rank, kind in enumerate([
    "launch_error", "out_of_bounds", "input_modified", "race", "untouched", "wrong_index", "tail",
    "block_edges", "wrong_values", "requirement"])}


def _rank(failure):
    """Lower is more telling: the kind first, then a hint from the exercise over a generic one."""
    return _SEVERITY[failure.kind], not failure.specific


def _run_and_judge(ex, function, case, expected, block_threads, order, side):
    drv = side.driver
    try:
        with _runner.schedule(order, side), _runner.time_limit(KERNEL_TIME_LIMIT_S, side):
            outcome = _runner.run_case(ex, function, case, expected, side)
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
        diagnosable = finding.n_total >= _DIAGNOSIS_MIN_ELEMENTS or ex.diagnose_small_outputs
        for diagnosis in ex.diagnoses if diagnosable else ():
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


def _judge_counters(ex, function, case, expected, notes, side):
    """Once the values are right: run the case again under ``gpuedu.profile()`` on the emulator (with racecheck
    for exercises about shared memory) and fail a race, then a counter out of its Requirement's bounds."""
    drv = side.driver
    try:
        with _runner.counters(racecheck=ex.races, side=side) as prof, _runner.time_limit(KERNEL_TIME_LIMIT_S, side):
            _runner.run_case(ex, function, case, expected, side)
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
    if "more threads arrive than the barrier counts" in text:
        return ("an mbarrier phase got more arrivals than mbarrier.init asked for: a thread arrived again before the "
                "phase completed. In a ring, that is the producer refilling a stage (its expect_tx on the stage's "
                "full barrier) before the consumers have freed it: its wait on the empty barrier passed too early "
                "(a wrong parity, or no wait), or the consumers arrived on empty without first waiting for the "
                "stage's full phase.")
    if "of the mbarrier at" in text:
        return ("threads wait on an mbarrier phase that never completes: each side of a ring counts its passes "
                "over the stages (pass i / STAGES at iteration i) and waits on that pass's parity, (i / STAGES) & 1 for "
                "the readers of a full stage, one pass less for the writer that refills it (from its second pass on); "
                "every phase needs all the arrivals (and the transaction bytes) mbarrier.init and expect_tx asked for.")
    if "every lane named in the mask" in text or "deadlock: warp" in text:
        return ("lanes of a warp missed a warp-wide call (__shfl_sync, wmma's load_matrix_sync, mma_sync, "
                "store_matrix_sync, ...): every lane the call names must reach it, so do not put it inside a "
                "branch some lanes of the warp skip, or after a return some of them take.")
    if "barrier" in text or "deadlock" in text or "exited" in text:
        return ("threads wait at a barrier that others never reach: every thread of the block must "
                "reach each __syncthreads(), so do not put it inside a branch or a guard some skip.")
    return ("an out-of-bounds access or a bad argument: check the bounds guard and the index "
            "arithmetic; pass sizes as np.int32(n) and arrays as device pointers.")


# Below this many elements a wrong pattern matches by chance (with n = 1, "min(x, 0)" is 0 half the time),
# unless the exercise says its small outputs are counts or sums whose cases make each mistake's value distinct.
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
