"""Exercises answered by a plain Python function (napkin math the course asks for, such as occupancy).

``check(id, source)`` runs the learner's source (a string, or a ``.py`` file) in a fresh namespace, calls the
named function on every case, and compares with the exercise's reference; the first wrong case is reported
with the arguments, the expected and the returned value, and a hint from the exercise's diagnoses.
"""
import ast
import os
import traceback
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

    def check(self, source, seed=0):
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
            code = compile(ast.parse(source), "<your function>", "exec")
        except SyntaxError as e:
            result.failure = Failure("compile_error", f"your source is not valid Python: {e.msg} (line {e.lineno})",
                                     "fix this line first")
            return result
        namespace = {"__name__": "learner"}
        try:
            exec(code, namespace)
        except Exception as e:       # the learner's module-level code raised
            result.failure = Failure("error", f"running your source raised {type(e).__name__}: {e}", "")
            return result
        fn = namespace.get(self.function)
        if not callable(fn):
            result.failure = Failure("missing_function", f"your source defines no function `{self.function}`",
                                     f"keep the stub's name and parameters: def {self.function}(...)")
            return result
        for label, kwargs in self.cases(np.random.default_rng(seed)):
            result.cases.append(label)
            expected = self.reference(**kwargs)
            try:
                got = fn(**kwargs)
            except Exception as e:
                frame = traceback.extract_tb(e.__traceback__)[-1]
                where = f" (line {frame.lineno} of your function)" if frame.filename == "<your function>" else ""
                result.failed_cases.append(label)
                result.failure = Failure("error", f"your function raised {type(e).__name__}: {e}{where}",
                                         "", case=label)
                break
            if got != expected:
                hint = next((h for h in (d(kwargs, expected, got) for d in self.diagnoses) if h), "")
                args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
                result.failed_cases.append(label)
                result.failure = Failure("wrong_values", f"{self.function}({args}) returned {got!r}, expected "
                                         f"{expected!r}", hint, case=label)
                break
        result.passed = result.failure is None
        return result
