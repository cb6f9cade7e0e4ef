"""Exercises whose answer is a Python program run on several MPI processes (lesson 12's ring all-reduce).

The learner writes a function in a file (``%%writefile my_ring.py`` in a notebook) or a string; ``check``
runs ``_program_harness.py`` under ``mpiexec`` once per rank count.  On every rank the harness imports the
learner's code, lets the exercise's ``rank_cases`` call the function on each case and compare with MPI's
own collective, gathers what every rank saw to rank 0, which prints it as JSON.  Each run has a time limit:
a deadlock (two ranks both waiting in a blocking send) is a failed check with a hint, not a hung notebook.
"""
import ast
import json
import os
import secrets
import tempfile
from dataclasses import dataclass
from typing import Callable

from ._python import PythonExercise
from ._result import CheckResult, Failure

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_program_harness.py")


@dataclass
class ProgramExercise(PythonExercise):
    """An exercise answered by a Python function that runs on every rank of an MPI program.

    ``function``: the name the learner defines; ``rank_cases(function, comm, seed) -> list of dicts``
    runs on every rank (each dict: ``case``, ``ok`` and, when not ok, ``kind``, ``message``, ``hint``);
    ``ranks``: the rank counts each check runs; ``time_limit``: seconds per run.
    """

    id: str
    title: str
    text: str
    function: str
    rank_cases: Callable
    stub: str
    solution: str
    launch: str
    ranks: tuple = (1, 2, 3, 4)
    time_limit: float = 60.0
    deadlock_hint: str = ""

    answer = "program"

    def check(self, source, seed=0):
        result = CheckResult(self.id, self.title)
        code, failure = self._read(source)
        if failure is not None:
            result.failure = failure
            return result
        if "FILL ME IN" in code:
            result.notes.append("note: your program still contains the FILL ME IN marker.")
        from ..distributed import mpi
        ok, reason = mpi.mpi_status()
        if not ok:
            result.failure = Failure("mpi_unavailable", f"this check runs your code on MPI processes: {reason}",
                                     "install the extra, restart the kernel, and run the check again")
            return result
        with tempfile.TemporaryDirectory(prefix="gpuedu-exercise-") as folder:
            path = os.path.join(folder, "learner.py")
            with open(path, "w") as f:
                f.write(code)
            result.total = len(self.ranks)      # a case per number of ranks; the first wrong one stops the check
            for ranks in self.ranks:
                failure = self._run(mpi, path, ranks, seed, result, folder)
                if failure is not None:
                    result.failure = failure
                    break
        result.passed = result.failure is None
        return result

    def _read(self, source):
        """(the program's text, None), or (None, a Failure saying what is wrong with ``source``)."""
        if not isinstance(source, str) or not source.strip():
            return None, Failure("bad_source", f"check() needs your program: a file name or its text as a string, "
                                 f"got {type(source).__name__}",
                                 f"write it with %%writefile my_program.py, then check({self.id!r}, 'my_program.py')")
        code = source
        if "\n" not in source and source.strip().endswith(".py"):
            if not os.path.isfile(source):
                return None, Failure("bad_source", f"no file {source!r} here (in {os.getcwd()})",
                                     "run the %%writefile cell first, or pass the program's text")
            with open(source) as f:
                code = f.read()
        try:
            tree = ast.parse(code)
        except SyntaxError as e:
            line = (e.text or "").rstrip()
            return None, Failure("compile_error", f"your program is not valid Python: {e.msg} (line {e.lineno})"
                                 + (f"\n    {line}" if line else ""), "fix this line first")
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        if self.function not in names:
            return None, Failure("missing_function", f"your program defines no function `{self.function}`",
                                 f"keep the stub's name and parameters: {self._signature()}")
        return code, None

    def _signature(self):
        line = next((l for l in self.stub.splitlines() if l.startswith(f"def {self.function}")), "")
        return line.rstrip(":")

    def _run(self, mpi, path, ranks, seed, result, folder):
        label = f"{ranks} rank{'s' if ranks > 1 else ''}"
        token = secrets.token_hex(16)       # the harness's line starts with it; the learner's prints cannot
        token_file = os.path.join(folder, "token")
        with open(token_file, "w") as f:
            f.write(token)
        try:
            done = mpi.run(HARNESS, ranks, [self.id, path, seed, token_file], timeout=self.time_limit,
                           check=False)
        except RuntimeError as e:
            if "did not finish" in str(e):
                result.cases.append(label)
                result.failed_cases.append(label)
                return Failure("deadlock", f"on {label} your program did not finish within "
                                           f"{self.time_limit:g} s (stopped)", self.deadlock_hint, case=label)
            raise
        lines = [l[len(token) + 1:] for l in done.stdout.splitlines() if l.startswith(token + " {")]
        if not lines:
            result.cases.append(label)
            result.failed_cases.append(label)
            tail = "\n".join(done.stderr.strip().splitlines()[-6:])
            return Failure("error", f"on {label} your program stopped with an error:\n{tail}",
                           "read the last line of the traceback: it names the rank's problem", case=label)
        ranks_seen = json.loads(lines[0])["ranks"]
        names = [r["case"] for r in ranks_seen[0]]
        result.cases.append(f"{label}: {len(names)} cases ({names[0]} ... {names[-1]})" if len(names) > 1
                            else f"{label}: {names[0]}")
        for per_rank in zip(*ranks_seen):
            bad = [r for r in per_rank if not r["ok"]]
            if bad:
                # a wrong value on one rank says more than "the ranks differ" on another
                worst = next((r for r in bad if r["kind"] != "ranks_differ"), bad[0])
                result.failed_cases.append(result.cases[-1])
                return Failure(worst["kind"], worst["message"], worst.get("hint", ""),
                               case=f"{label}, {per_rank[0]['case']}")
        return None
