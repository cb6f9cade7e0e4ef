"""The verdict of ``check``: truthy when every case passed, with a readable report otherwise."""
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class Failure:
    kind: str      # compile_error, missing_kernel, launch_error, out_of_bounds, untouched, wrong_index,
                   # tail, block_edges, wrong_values, race, input_modified, requirement (a
                   # counter out of bounds), bad_source, unknown_exercise, internal
    message: str   # what is wrong
    hint: str = ""  # the likely cause and what to do
    case: Optional[str] = None
    output: Optional[str] = None
    index: Optional[tuple] = None
    n_wrong: int = 0
    n_total: int = 0
    specific: bool = False  # the hint came from the exercise's own diagnoses


@dataclass
class CheckResult:
    """``bool(result)`` is True only when every case passed.

    ``failure`` is the first problem found (None when passed), ``failed_cases`` the labels of all
    cases that failed, ``cases`` the labels of all cases run, ``total`` the number of cases the check has
    (None: the cases run are all of them).  A check that stops early (at the first wrong case, or at a launch
    error that leaves the rest not worth running) runs fewer than ``total``, and its report says so: it gives
    every case's verdict only when every case ran.
    """

    exercise: str
    title: str = ""
    passed: bool = False
    cases: list = field(default_factory=list)
    failed_cases: list = field(default_factory=list)
    failure: Optional[Failure] = None
    notes: list = field(default_factory=list)
    total: Optional[int] = None
    method_unchecked: Optional[str] = None   # why the method (counters, racecheck) could not be checked, if so

    def __bool__(self):
        return self.passed

    @property
    def kind(self):
        return None if self.failure is None else self.failure.kind

    def report(self):
        head = f"{self.exercise}" + (f" ({self.title})" if self.title else "")
        if self.passed:
            lines = [f"PASSED {head}: all {len(self.cases)} cases are right."] if not self.method_unchecked else \
                [f"PASSED (values only; the method was not checked) {head}: all {len(self.cases)} cases are right."]
            lines += [f"  - {label}" for label in self.cases]
            lines += [f"  {note}" for note in self.notes]
            return "\n".join(lines)
        f = self.failure
        lines = [f"NOT YET {head}: {f.message}"]
        if f.case:
            lines.append(f"  case: {f.case}")
        if f.hint:
            lines.append(f"  hint: {f.hint}")
        if self.cases:
            lines.append("  " + self.tally())
        lines += [f"  {note}" for note in self.notes]
        return "\n".join(lines)

    def tally(self):
        """How many cases ran and how they went, in words that never claim more than was run."""
        run, wrong = len(self.cases), list(self.failed_cases)
        total = run if self.total is None else max(self.total, run)
        ok = run - len(wrong)
        if run == total:
            return f"{ok} of {total} case{'s' if total != 1 else ''} right" + ("; wrong: " + "; ".join(wrong)
                                                                             if wrong else "")
        left = f"{total - run} not run"
        if len(wrong) == 1:       # a stopped check stops at a wrong case: this one, the last run
            after = f", after {ok} right" if ok else ""
            return f"stopped at the first wrong case of {total}: case {run}{after} ({left})"
        return (f"stopped at case {run} of {total} ({left}): {ok} of the {run} run right; wrong: "
                + "; ".join(wrong))

    def __repr__(self):
        if self.passed:
            return f"<CheckResult {self.exercise}: passed {len(self.cases)} cases>"
        return f"<CheckResult {self.exercise}: not yet ({self.kind})>"
