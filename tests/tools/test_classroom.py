"""Student and solution notebooks, and grading submissions: the CSV says who passed which exercise."""
import csv
import os
import subprocess
import sys

import nbformat
import pytest

from gpuedu import exercises
from gpuedu.tools import classroom

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


def test_verdicts_read_passed_not_yet_and_errors_from_outputs():
    nb = nbformat.v4.new_notebook()
    ok = nbformat.v4.new_code_cell('exercises.check("01.relu", a)\nexercises.check("01.saxpy", b)')
    ok.outputs = [nbformat.v4.new_output("stream", name="stdout", text=(
        "PASSED 01.relu (ReLU on every element): all 5 cases are right.\n  - n = 1\n"
        f"NOT YET 01.saxpy ({exercises.get('01.saxpy').title}): `y`: 1 of 1 elements wrong\n  hint: add a*x\n"))]
    broken = nbformat.v4.new_code_cell('exercises.check("01.scale_2d", c)')
    broken.outputs = [nbformat.v4.new_output("error", ename="NameError", evalue="name 'c' is not defined", traceback=[])]
    nb.cells = [ok, broken]
    got = classroom.verdicts(nb)
    assert got["01.relu"] == ("passed", "all 5 cases are right.", "")
    assert got["01.saxpy"] == ("not yet", "`y`: 1 of 1 elements wrong", "add a*x")
    assert got["01.scale_2d"][0] == "error" and "NameError" in got["01.scale_2d"][1]


@pytest.mark.slow
def test_grade_tells_a_right_submission_from_a_wrong_one(tmp_path):
    classroom.build(str(tmp_path / "kit"), os.path.join(REPO, "lessons"))
    right, wrong = tmp_path / "alice.ipynb", tmp_path / "bob.ipynb"
    right.write_bytes((tmp_path / "kit" / "solutions" / "01_first_kernel.ipynb").read_bytes())
    wrong.write_bytes((tmp_path / "kit" / "student" / "01_first_kernel.ipynb").read_bytes())
    env = dict(os.environ, GPUEDU_BACKEND="cpu")
    done = subprocess.run([sys.executable, "-m", "gpuedu", "grade", str(right), str(wrong), "--out",
                           str(tmp_path / "results.csv"), "--timeout", "300"], capture_output=True, text=True,
                          env=env, timeout=900, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(open(tmp_path / "results.csv")))
    by = {(r["student"], r["exercise"]): r for r in rows}
    for ex_id in ("01.relu", "01.saxpy", "01.scale_2d"):
        assert by["alice", ex_id]["result"] == "passed"
        assert by["bob", ex_id]["result"] == "not yet" and by["bob", ex_id]["hint"]
    assert "3 of 6 passed" in done.stdout


def test_grade_names_missing_notebooks(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gpuedu", "grade", str(tmp_path / "nope.ipynb")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no such notebook" in done.stderr


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
