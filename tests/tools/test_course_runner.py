"""`gpuedu course`: lessons found in order, run headless, reported, and a failure fails the run."""
import json
import os
import subprocess
import sys

import nbformat
import pytest

from gpuedu.tools import course
from test_backend import child_pythonpath

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_notebook(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, str(path))


def test_find_lessons_orders_and_filters(tmp_path):
    for name in ["02_b.ipynb", "00_a.ipynb", "10_c.ipynb", "notes.ipynb", "01_x.txt"]:
        (tmp_path / name).write_text("{}")
    found = [os.path.basename(p) for p in course.find_lessons(str(tmp_path))]
    assert found == ["00_a.ipynb", "02_b.ipynb", "10_c.ipynb"]
    assert [os.path.basename(p) for p in course.find_lessons(str(tmp_path), ["10", "00_a"])] == \
        ["00_a.ipynb", "10_c.ipynb"]
    with pytest.raises(ValueError, match="no lesson matches 07"):
        course.find_lessons(str(tmp_path), ["07"])
    with pytest.raises(FileNotFoundError, match="no lessons folder"):
        course.find_lessons(str(tmp_path / "missing"))


def test_course_runs_every_lesson_and_reports_the_failure(tmp_path):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    # the first cell does what every lesson's first cell does
    write_notebook(lessons / "00_ok.ipynb", "import gpuedu\nbackend = gpuedu.setup()", "print(6 * 7)")
    write_notebook(lessons / "01_broken.ipynb", "x = 1", "raise ValueError('boom')", "print('never')")
    report = tmp_path / "report"
    env = dict(os.environ, GPUEDU_BACKEND="cpu")    # the runner, not the backend's choice, on any machine
    env["PYTHONPATH"] = child_pythonpath(REPO)
    proc = subprocess.run([sys.executable, "-m", "gpuedu", "course", "--lessons", str(lessons),
                           "--report", str(report), "--timeout", "120"],
                          capture_output=True, text=True, env=env, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads((report / "report.json").read_text())
    ok, broken = data["lessons"]
    assert data["passed"] is False
    assert (ok["lesson"], ok["status"], ok["backend"], ok["error"]) == ("00_ok.ipynb", "passed", "cpu", None)
    # the second code cell, counted from 1 as a reader counts them, and its execution count
    assert (broken["status"], broken["cell"], broken["execution_count"], broken["error"]) == \
        ("failed", 2, 2, "ValueError: boom")
    assert "code cell 2 (In [2]): ValueError: boom" in proc.stdout
    assert data["run"]["gpuedu"] and data["run"]["date"].endswith("UTC") and data["run"]["commit"]
    assert ok["seconds"] > 0
    executed = nbformat.read(str(report / "00_ok.ipynb"), as_version=4)
    assert executed.cells[1].outputs[0]["text"] == "42\n"
    assert "| 01_broken.ipynb | failed | ? |" in (report / "report.md").read_text()
    assert "1 of 2 lessons passed" in proc.stdout
    # the runner's own kernels talk over this user's Unix sockets: nothing for ipykernel to warn about
    assert "without encryption" not in proc.stderr, proc.stderr
    # the lessons themselves are left as they were
    assert nbformat.read(str(lessons / "00_ok.ipynb"), as_version=4).cells[1].outputs == []


def test_course_with_no_lessons_is_an_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gpuedu", "course", "--lessons", str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert "no NN_topic.ipynb lessons" in proc.stderr


def test_tidy_outputs_keeps_lasting_lines_and_no_progress_fragments():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("fit()")
    cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text="a warning\n  0%|  | 0/3\r"),
                    nbformat.v4.new_output("stream", name="stderr", text=" 66%|# | 2/3\r"),
                    nbformat.v4.new_output("stream", name="stdout", text="epoch 1\n"),
                    nbformat.v4.new_output("stream", name="stderr", text="\r          \r"),
                    nbformat.v4.new_output("stream", name="stdout", text="done\n"),
                    nbformat.v4.new_output("stream", name="stderr", text="from a shell\r\n")]
    nb.cells = [cell]
    course.tidy_outputs(nb)
    # a bar redraws its line with carriage returns: none of it is kept; the warning and stdout are
    # (CRLF line ends, as a shell command's output has, are line ends, not redraws)
    assert [(o["name"], o["text"]) for o in nb.cells[0].outputs] == [("stderr", "a warning\n"), ("stdout", "epoch 1\n"),
                                                                      ("stdout", "done\n"), ("stderr", "from a shell\r\n")]


def test_store_writes_a_passing_lesson_back_with_its_outputs(tmp_path):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    write_notebook(lessons / "00_ok.ipynb", "print(6 * 7)")
    env = {k: v for k, v in os.environ.items() if k != "GPUEDU_BACKEND"}
    env["PYTHONPATH"] = child_pythonpath(REPO)
    proc = subprocess.run([sys.executable, "-m", "gpuedu", "course", "--lessons", str(lessons), "--report",
                           str(tmp_path / "report"), "--store"], capture_output=True, text=True, env=env,
                          timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stored = nbformat.read(str(lessons / "00_ok.ipynb"), as_version=4)
    assert stored.cells[0].outputs[0]["text"] == "42\n"


def test_a_cell_past_the_time_limit_is_stopped_at_the_limit(tmp_path):
    import time

    from nbclient.exceptions import CellTimeoutError
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time\ntime.sleep(120)")])
    start = time.monotonic()
    with pytest.raises(CellTimeoutError):
        course.execute(nb, str(tmp_path), timeout=3)
    assert time.monotonic() - start < 60     # the limit, not the cell's two minutes
