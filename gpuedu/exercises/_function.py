"""Exercises answered by a plain Python function (napkin math the course asks for, such as occupancy).

``check(id, source)`` runs the learner's source (a string, or a ``.py`` file) in a fresh namespace, calls the
named function on every case, and compares with the exercise's reference; the first wrong case is reported
with the arguments, the expected and the returned value, and a hint from the exercise's diagnoses.
"""
import ast
import os
from dataclasses import dataclass
from typing import Callable

from ._python import PythonExercise
from ._result import CheckResult, Failure


@dataclass
class FunctionExercise(PythonExercise):
    """``function``: the name to define; ``cases(rng)`` yields (label, kwargs); ``reference(**kwargs)`` the answer;
    ``diagnoses``: callables (kwargs, expected, got) -> hint or None."""

    id: str
    title: str
    text: str
    function: str
    cases: Callable
    reference: Callable
    stub: str
    solution: str
    launch: str = "your function is called with each case's arguments and must return the reference's value"
    diagnoses: tuple = ()

    answer = "function"

    def check(self, source, seed=0, isolated=False):
        """``isolated``: run the function in a process of its own (``_function_child.py``), from which only its
        return values come back as plain data (what ``gpuedu grade`` uses); otherwise in this process."""
        import numpy as np
        result = CheckResult(self.id, self.title)
        if isinstance(source, str) and "\n" not in source and source.strip().endswith(".py"):
            if not os.path.isfile(source):
                result.failure = Failure("bad_source", f"no file {source!r} here (in {os.getcwd()})",
                                         "run the %%writefile cell first, or pass the function's source text")
                return result
            with open(source) as f:
                source = f.read()
        if not isinstance(source, str) or not source.strip():
            result.failure = Failure("bad_source", f"check() needs your function's source as a string, got "
                                     f"{type(source).__name__}", f"my_code = '''def {self.function}(...): ...'''")
            return result
        if "FILL ME IN" in source:
            result.notes.append("note: your source still contains the FILL ME IN marker.")
        try:
            compile(ast.parse(source), "<your function>", "exec")       # its syntax, before anything runs
        except SyntaxError as e:
            result.failure = Failure("compile_error", f"your source is not valid Python: {e.msg} (line {e.lineno})",
                                     "fix this line first")
            return result
        cases = list(self.cases(np.random.default_rng(seed)))
        if isolated:
            calls, failure = _run_isolated(source, self.function, [kwargs for _, kwargs in cases])
        else:
            calls, failure = _run_here(source, self.function, [kwargs for _, kwargs in cases])
        if failure is not None:
            result.failure = failure
            return result
        for (label, kwargs), call in zip(cases, calls):
            result.cases.append(label)
            expected = self.reference(**kwargs)
            if "error" in call:
                result.failed_cases.append(label)
                result.failure = Failure("error", call["error"], "", case=label)
                break
            got = call["value"]
            if got != expected:
                hint = next((h for h in (d(kwargs, expected, got) for d in self.diagnoses) if h), "")
                args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
                result.failed_cases.append(label)
                result.failure = Failure("wrong_values", f"{self.function}({args}) returned {call['repr']}, "
                                         f"expected {expected!r}", hint, case=label)
                break
        result.passed = result.failure is None
        return result


def _missing(function):
    return Failure("missing_function", f"your source defines no function `{function}`",
                   f"keep the stub's name and parameters: def {function}(...)")


def _run_here(source, function, calls):
    """Run the learner's code in this process: ([{"value", "repr"} or {"error"}, ...], None) or ([], Failure)."""
    from ._function_child import run_calls
    return _read_results([dict(r, repr=repr(r["value"])) if "value" in r else r
                          for r in run_calls(source, function, calls)], function)


def _read_results(entries, function):
    """The runner's entries as (results, None), or ([], the Failure of a source that did not load)."""
    results = []
    for entry in entries:
        if "load_error" in entry:
            return [], Failure("error", str(entry["load_error"]), "")
        if entry.get("missing"):
            return [], _missing(function)
        results.append(entry)
    return results, None


CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_function_child.py")
CHILD_SECONDS = 120
CHILD_OUTPUT = 1 << 20


def _run_isolated(source, function, calls):
    """The same, with the learner's code in a child process that gets the arguments and returns the values as
    Python literals: nothing it defines or patches reaches this process, and its values are plain data."""
    import ast
    import json
    import subprocess
    import sys

    from ._function_child import plain
    request = json.dumps({"source": source, "function": function, "calls": [repr(plain(c)) for c in calls]})
    try:
        done = subprocess.run([sys.executable, "-I", CHILD], input=request.encode(), capture_output=True,
                              timeout=CHILD_SECONDS, start_new_session=True)
    except subprocess.TimeoutExpired:
        return [], Failure("error", f"your function did not return within {CHILD_SECONDS} s (stopped)",
                           "look for a loop that never ends")
    try:
        answer = json.loads(done.stdout[:CHILD_OUTPUT]) if len(done.stdout) <= CHILD_OUTPUT else None
    except ValueError:
        answer = None
    if not isinstance(answer, list):
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        return [], Failure("error", f"your code stopped the process that ran it ({tail[0]})", "")
    results = []
    for entry in answer:
        if not isinstance(entry, dict):
            break
        if "load_error" in entry or entry.get("missing") or "error" in entry:
            results.append({k: entry[k] for k in ("load_error", "missing", "error") if k in entry})
            if "error" in entry:
                break
            continue
        if "value" not in entry:
            results.append({"error": f"your function returned {str(entry.get('repr', ''))[:200]}, which is not a "
                                     f"plain value (a number, a string, a list, tuple or dict of them): "
                                     f"{entry.get('unplain', '')}"})
            break
        try:
            value = ast.literal_eval(str(entry["value"]))
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            results.append({"error": "your function returned a value that could not be read back"})
            break
        results.append({"value": _numpy_scalar(value, entry.get("type")), "repr": str(entry.get("repr", repr(value)))})
    return _read_results(results, function)


def _numpy_scalar(value, type_name):
    """A NumPy scalar's type back (a diagnosis may name it: 'got float32'); any other value as it came."""
    import numpy as np
    kind = getattr(np, str(type_name), None) if isinstance(type_name, str) and type_name.isidentifier() else None
    if isinstance(kind, type) and issubclass(kind, np.generic) and isinstance(value, (bool, int, float, complex)):
        try:
            return kind(value)
        except (TypeError, ValueError, OverflowError):
            return value
    return value
