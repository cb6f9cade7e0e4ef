"""Student and solution notebooks, and grading submissions: the CSV says who passed which exercise."""
import csv
import os
import subprocess
import sys

import nbformat
import pytest

from gpuedu import exercises
from gpuedu.tools import classroom, sandbox

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LESSON01 = os.path.join(REPO, "lessons", "01_first_kernel.ipynb")


def test_student_notebooks_clear_exercise_outputs_and_solutions_fill_the_stubs():
    nb = nbformat.read(LESSON01, as_version=4)
    student, solution = classroom.student_notebook(nb), classroom.solution_notebook(nb)
    relu = exercises.get("01.relu")
    stub_cells = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and relu.stub.strip() in c.source]
    assert stub_cells
    for i in stub_cells:
        assert nb.cells[i].outputs                      # the lesson stores the stub's NOT YET
        assert student.cells[i].outputs == [] and student.cells[i].source == nb.cells[i].source
        assert relu.solution.strip() in solution.cells[i].source and relu.stub.strip() not in solution.cells[i].source
    # cells that are not exercises keep their outputs
    kept = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.outputs and i not in stub_cells
            and "exercises." not in c.source]
    assert kept and all(student.cells[i].outputs == nb.cells[i].outputs for i in kept)


def test_a_checks_report_becomes_the_rows_message_and_hint():
    relu = exercises.check("01.relu", exercises.get("01.relu").solution, verbose=False)
    assert classroom._report_row(relu.report()) == ("all 5 cases are right.", "")
    saxpy = exercises.check("01.saxpy", exercises.get("01.saxpy").stub, verbose=False)
    message, hint = classroom._report_row(saxpy.report())
    assert message == saxpy.failure.message.splitlines()[0] and hint == saxpy.failure.hint


def test_only_the_calls_of_the_course_check_name_an_exercise():
    cell = nbformat.v4.new_code_cell('exercises.check("01.relu", a)\ngpuedu.exercises.check(\'01.saxpy\', b)\n'
                                     'myexercises.check("01.scale_2d", c)\nx.exercises.check("02.strided_read", d)')
    assert classroom._checked_ids(cell) == ["01.relu", "01.saxpy"]


@pytest.mark.slow
def test_grade_tells_a_right_submission_from_a_wrong_one(tmp_path):
    classroom.build(str(tmp_path / "kit"), os.path.join(REPO, "lessons"))
    right, wrong = tmp_path / "alice.ipynb", tmp_path / "bob.ipynb"
    right.write_bytes((tmp_path / "kit" / "solutions" / "01_first_kernel.ipynb").read_bytes())
    wrong.write_bytes((tmp_path / "kit" / "student" / "01_first_kernel.ipynb").read_bytes())
    env = dict(os.environ, GPUEDU_BACKEND="cpu")
    done = subprocess.run([sys.executable, "-m", "gpuedu", "grade", str(right), str(wrong), "--out",
                           str(tmp_path / "results.csv"), "--timeout", "300"]
                          + ([] if sandbox.available()[0] else ["--no-sandbox"]), capture_output=True, text=True,
                          env=env, timeout=900, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(open(tmp_path / "results.csv")))
    by = {(r["student"], r["exercise"]): r for r in rows}
    assert {r["sandbox"] for r in rows} == {"bubblewrap" if sandbox.available()[0] else "none (--no-sandbox)"}
    for ex_id in ("01.relu", "01.saxpy", "01.scale_2d"):
        assert by["alice", ex_id]["result"] == "passed"
        assert by["bob", ex_id]["result"] == "not yet" and by["bob", ex_id]["hint"]
    assert "3 of 6 passed" in done.stdout


def test_grade_names_missing_notebooks(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gpuedu", "grade", str(tmp_path / "nope.ipynb")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no such notebook" in done.stderr


def test_without_a_sandbox_grade_refuses_and_says_why_unless_told(tmp_path):
    nb = tmp_path / "alice.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('PASSED 01.relu')")]), str(nb))
    env = dict(os.environ, PATH=str(tmp_path))           # no bwrap on this PATH (nor anything else)
    cmd = [sys.executable, "-m", "gpuedu", "grade", str(nb), "--out", str(tmp_path / "r.csv")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "bubblewrap is not installed" in done.stderr and "--no-sandbox" in done.stderr
    assert not (tmp_path / "r.csv").exists()
    done = subprocess.run(cmd + ["--no-sandbox"], capture_output=True, text=True, timeout=120, env=env,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(open(tmp_path / "r.csv")))
    assert [(r["result"], r["sandbox"]) for r in rows] == [("error", "none (--no-sandbox)")]


@pytest.mark.parametrize("option", ["--timeout", "--memory", "--processes", "--output"])
def test_grade_refuses_limits_that_are_not_positive(tmp_path, option):
    nb = tmp_path / "alice.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), str(nb))
    done = subprocess.run([sys.executable, "-m", "gpuedu", "grade", str(nb), option, "0"], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and f"{option} must be more than 0" in done.stderr


def test_a_file_that_is_not_a_notebook_is_an_error_row_not_a_stopped_batch(tmp_path):
    bad = tmp_path / "carol.ipynb"
    bad.write_bytes(b"\x00\xffnot json")
    rows = classroom.grade_one(str(bad), sandbox=False)
    assert rows[0]["result"] == "error" and "not a notebook" in rows[0]["message"]


def test_a_gpuedu_that_python_dash_I_cannot_import_is_refused_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(classroom.sys, "executable", str(tmp_path / "no-python"))
    (tmp_path / "no-python").write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named gpuedu' >&2\nexit 1\n")
    (tmp_path / "no-python").chmod(0o755)
    with pytest.raises(classroom.GradingUnavailable, match="No module named gpuedu.*virtual environment"):
        classroom._check_isolated_import()


def test_every_lessons_solution_notebook_holds_every_solution():
    import glob
    for path in sorted(glob.glob(os.path.join(REPO, "lessons", "[0-9][0-9]_*.ipynb"))):
        nb = nbformat.read(path, as_version=4)
        solved = classroom.solution_notebook(nb)
        ids = {i for c in nb.cells for i in classroom._checked_ids(c)}
        for ex_id in ids:
            assert any(exercises.get(ex_id).solution.strip() in c.source for c in solved.cells), (path, ex_id)


def test_the_instructor_guide_lists_every_lesson_with_its_estimate():
    import glob
    import re
    guide = open(os.path.join(REPO, "docs", "INSTRUCTORS.md")).read()
    rows = dict(re.findall(r"^\| (\d\d) [^|]+\| (\d+) \|", guide, flags=re.M))
    lessons = sorted(glob.glob(os.path.join(REPO, "lessons", "[0-9][0-9]_*.ipynb")))
    assert sorted(rows) == [os.path.basename(p)[:2] for p in lessons]
    for path in lessons:
        estimate = classroom.estimate_minutes(nbformat.read(path, as_version=4))
        assert int(rows[os.path.basename(path)[:2]]) == estimate, path
