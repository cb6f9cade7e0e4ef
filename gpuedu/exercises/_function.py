"""Exercises answered by a plain Python function (napkin math the course asks for, such as occupancy).

``check(id, source)`` runs the learner's source (a string, or a ``.py`` file) in a process of its own
(``_function_child.py``), where gpuedu is out of its reach (the exercises' references and the profiler's
calculators hold the answers), calls the named function on every case there, and compares what comes back,
as plain data, with the exercise's reference computed here: first its type (the one the text promises: an int
is not a float, and a bool is not an int), then its value.  The check stops at the first wrong case and reports
it with the arguments, the expected and the returned value, and a hint from the exercise's diagnoses.
"""
import ast
import os
from dataclasses import dataclass
from typing import Callable

from ._python import PythonExercise
from ._result import CheckResult, Failure

#: What ``FunctionExercise.returns`` may name: a test of a returned value, and how the text says it.
RETURN_KINDS = {
    "int": (lambda v: _is_int(v), "an int"),
    "float": (lambda v: _is_number(v), "a float"),
    "None": (lambda v: v is None, "None"),
}


def _is_int(value):
    import numpy as np
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value):
    import numpy as np
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _returns_in_words(returns):
    return " or ".join(RETURN_KINDS[kind][1] for kind in returns)


@dataclass
class FunctionExercise(PythonExercise):
    """``function``: the name to define; ``cases(rng)`` yields (label, kwargs); ``reference(**kwargs)`` the answer;
    ``returns``: the kinds of value the text promises (names of ``RETURN_KINDS``: ("int",), or ("int", "None"));
    ``diagnoses``: callables (kwargs, expected, got) -> hint or None."""

    id: str
    title: str
    text: str
    function: str
    cases: Callable
    reference: Callable
    stub: str
    solution: str
    returns: tuple = ("int",)
    launch: str = "your function is called with each case's arguments and must return the reference's value"
    diagnoses: tuple = ()

    answer = "function"

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.returns, str):
            self.returns = (self.returns,)
        unknown = [k for k in self.returns if k not in RETURN_KINDS]
        if not self.returns or unknown:
            raise ValueError(f"{self.id}: returns names the kinds of value the text promises, among "
                             f"{', '.join(RETURN_KINDS)}; got {self.returns!r}")

    def check(self, source, seed=0, isolated=False):
        """The function always runs in a process of its own (``_function_child.py``), from which only its return
        values come back as plain data.  ``isolated`` (what ``gpuedu grade`` uses) drops what the function
        prints; otherwise it is shown here, as it would be if the function ran in the notebook."""
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
        result.total = len(cases)
        calls, failure = _run_child(source, self.function, [kwargs for _, kwargs in cases], self.id,
                                    echo=not isolated)
        if failure is not None:
            result.failure = failure
            return result
        for (label, kwargs), call in zip(cases, calls):
            result.cases.append(label)
            args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
            if "error" in call:
                result.failed_cases.append(label)
                result.failure = (_refusal(call["error"], label) if call.get("refused")
                                  else Failure("error", call["error"], "", case=label))
                break
            got = call["value"]
            expected = self.reference(**kwargs)
            # the exercise's diagnoses know its mistakes, whatever their type: asked only of a wrong value
            hint = "" if got == expected else self._diagnose(kwargs, expected, got)
            wrong_type = self._type_failure(f"{self.function}({args})", got, call["repr"], label, hint)
            if wrong_type is not None:
                result.failed_cases.append(label)
                result.failure = wrong_type
                break
            if got != expected:
                result.failed_cases.append(label)
                result.failure = Failure("wrong_values", f"{self.function}({args}) returned {call['repr']}, "
                                         f"expected {expected!r}", hint, case=label)
                break
        result.passed = result.failure is None and len(result.cases) == result.total
        return result

    def _diagnose(self, kwargs, expected, got):
        """The first hint of the exercise's diagnoses; one that cannot read a value of this type has none."""
        for diagnosis in self.diagnoses:
            try:
                hint = diagnosis(kwargs, expected, got)
            except (TypeError, ValueError, ArithmeticError):
                continue
            if hint:
                return hint
        return ""

    def _type_failure(self, call, got, shown, label, hint=""):
        """A Failure when ``got`` is not of a kind the text promises (checked before its value), else None;
        ``hint``: the exercise's diagnosis of the value, said instead of the type's own hint."""
        if any(RETURN_KINDS[kind][0](got) for kind in self.returns):
            return None
        wanted = _returns_in_words(self.returns)
        kind = type(got).__name__
        if hint:
            pass
        elif got is None:
            hint = "your function ended without returning a value: is the FILL ME IN line still there, or a return missing?"
        elif isinstance(got, bool) or type(got).__name__ == "bool":
            hint = (f"True and False are not numbers here, even though Python adds them as 1 and 0: return "
                    f"{wanted}, the number itself")
        elif "int" in self.returns and _is_number(got):
            hint = ("the answer is a whole number: compute it with integers (// divides and rounds down, "
                    "-(-a // b) rounds up), or round an exact value with int(...)")
        else:
            hint = f"return {wanted}, as the exercise's text says"
        return Failure("wrong_type", f"{call} returned {shown}, {_article(kind)} {kind}: the exercise asks for "
                       f"{wanted}", hint, case=label)


def _article(word):
    return "an" if word[:1].lower() in "aeiou" else "a"


def _refusal(message, label=None):
    return Failure("refused", message, "answer with your own arithmetic: every constant you need is in the "
                   "exercise's text (exercises.show(id) prints it)", case=label)


def _missing(function):
    return Failure("missing_function", f"your source defines no function `{function}`",
                   f"keep the stub's name and parameters: def {function}(...)")


def _read_results(entries, function):
    """The runner's entries as (results, None), or ([], the Failure of a source that did not load)."""
    results = []
    for entry in entries:
        if "load_error" in entry:
            message = str(entry["load_error"])
            return [], _refusal(message) if entry.get("refused") else Failure("error", message, "")
        if entry.get("missing"):
            return [], _missing(function)
        results.append(entry)
    return results, None


CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_function_child.py")
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))    # gpuedu's folder, refused there
CHILD_SECONDS = 120
CHILD_OUTPUT = 1 << 20
ECHO_LIMIT = 64 << 10       # what a function prints, shown in the notebook up to this many bytes


def _run_child(source, function, calls, exercise, echo):
    """Run the learner's code in a child process that gets the arguments and returns the values as Python
    literals: gpuedu is out of its reach there (``_function_child.Guard``), nothing it defines or patches reaches
    this process, and its values are plain data.  ([{"value", "repr"} or {"error"}, ...], None), or ([], the
    Failure of a source that did not load or a process that did not answer).  ``echo``: show what it printed."""
    import json
    import subprocess
    import sys
    import tempfile

    from ._function_child import plain
    request = json.dumps({"source": source, "function": function, "calls": [repr(plain(c)) for c in calls],
                          "exercise": exercise, "package_dirs": [PACKAGE_DIR]})
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            done = subprocess.run([sys.executable, "-I", CHILD], input=request.encode(), stdout=out, stderr=err,
                                  timeout=CHILD_SECONDS, start_new_session=True)
        except subprocess.TimeoutExpired:
            return [], Failure("error", f"your function did not return within {CHILD_SECONDS} s (stopped)",
                               "look for a loop that never ends")
        out.seek(0)
        answer_bytes = out.read(CHILD_OUTPUT + 1)
        err.seek(0)
        printed = err.read(ECHO_LIMIT + 1).decode(errors="replace")
    try:
        answer = json.loads(answer_bytes) if len(answer_bytes) <= CHILD_OUTPUT else None
    except ValueError:
        answer = None
    if not isinstance(answer, list):
        tail = printed.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        return [], Failure("error", f"your code stopped the process that ran it ({tail[0]})", "")
    if echo and printed:
        cut = len(printed) > ECHO_LIMIT
        sys.stdout.write(printed[:ECHO_LIMIT] + (f"\n[... what your function printed, cut at {ECHO_LIMIT >> 10} KiB]\n"
                                                 if cut else "" if printed.endswith("\n") else "\n"))
    results = []
    for entry in answer:
        if not isinstance(entry, dict):
            break
        if "load_error" in entry or entry.get("missing") or "error" in entry:
            results.append({k: entry[k] for k in ("load_error", "missing", "error", "refused") if k in entry})
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
    import builtins

    import numpy as np
    if not isinstance(type_name, str) or not type_name.isidentifier() or hasattr(builtins, type_name):
        return value            # a Python type's name (NumPy 2 names its bool "bool" too)
    kind = getattr(np, type_name, None)
    if isinstance(kind, type) and issubclass(kind, np.generic) and isinstance(value, (bool, int, float, complex)):
        try:
            return kind(value)
        except (TypeError, ValueError, OverflowError):
            return value
    return value
