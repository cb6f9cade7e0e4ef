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
    cases that failed, ``cases`` the labels of all cases run.
    """

    exercise: str
    title: str = ""
    passed: bool = False
    cases: list = field(default_factory=list)
    failed_cases: list = field(default_factory=list)
    failure: Optional[Failure] = None
    notes: list = field(default_factory=list)
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
            ok = len(self.cases) - len(self.failed_cases)
            lines.append(f"  {ok} of {len(self.cases)} cases right; wrong: " + "; ".join(self.failed_cases))
        lines += [f"  {note}" for note in self.notes]
        return "\n".join(lines)

    def __repr__(self):
        if self.passed:
            return f"<CheckResult {self.exercise}: passed {len(self.cases)} cases>"
        return f"<CheckResult {self.exercise}: not yet ({self.kind})>"
