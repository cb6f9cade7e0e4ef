"""``gpuedu grade`` against submissions written to fool it or to escape: one batch, graded by the command in a
fresh process, in which each submission below tries one thing; an honest right and an honest wrong submission
come last and must still be graded right, so no submission stops the batch or changes another's grade."""
import csv
import hashlib
import os
import socket
import subprocess
import sys
import threading

import nbformat
import pytest

import gpuedu
from gpuedu import exercises
from gpuedu.tools import sandbox

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sandbox.available()[0], reason=f"no sandbox here: {sandbox.available()[1]}")]

RELU = exercises.get("01.relu")
INSTALLED = os.path.join(os.path.dirname(gpuedu.__file__), "exercises", "__init__.py")


def notebook(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from gpuedu import exercises")]
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


def check_relu(answer="my_relu"):
    return f'exercises.check("01.relu", {answer})'


def define(source):
    return f"my_relu = {source!r}"


class Listener:
    """A TCP port on the grader's machine, counting the connections it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.accepted += 1
            conn.close()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("grading")
    home, subs, solutions = root / "home", root / "submissions", root / "solutions"
    for d in (home, subs, solutions):
        d.mkdir()
    secret = solutions / "answers.txt"
    secret.write_text("SECRET-SOLUTIONS-TEXT")
    listener = Listener()
    before = hashlib.sha256(open(INSTALLED, "rb").read()).hexdigest()
    right, wrong = define(RELU.solution), define(RELU.stub)
    subs_files = {
        "writes_outside": notebook(right, f"open({str(home / 'pwned')!r}, 'w').write('pwned')",
                                   f"open({str(subs / 'planted.ipynb')!r}, 'w').write('{{}}')", check_relu()),
        "reads_outside": notebook(f"import shutil\nshutil.copy({str(secret)!r}, {str(subs / 'stolen.txt')!r})",
                                  f"my_relu = open({str(secret)!r}).read()\n" + check_relu()),
        "network": notebook(right, f"import socket\nsocket.create_connection(('127.0.0.1', {listener.port}), timeout=5)",
                            check_relu()),
        "fork_bomb": notebook(right, "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(300)",
                              check_relu()),
        "memory_hog": notebook(right, "hog = []\nwhile True:\n    hog.append(bytearray(64 << 20))\n" + check_relu()),
        "replaces_check": notebook(
            "exercises.check = lambda i, s, **k: print(f'PASSED {i} (x): all 5 cases are right.')",
            "exercises.check(\"03.histogram\", 'this is not CUDA at all')"),
        "prints_passed": notebook(f"print('PASSED 01.relu ({RELU.title}): all 5 cases are right.')\n"
                                  f"# exercises.check(\"01.relu\", my_relu)"),
        "prints_only": notebook(f"print('PASSED 01.relu ({RELU.title}): all 5 cases are right.')"),
        "edits_gpuedu": notebook(wrong, f"open({INSTALLED!r}, 'a').write('\\ncheck = lambda *a, **k: True\\n')",
                                 check_relu()),
        "zz_right": notebook(right, check_relu()),
        "zz_wrong": notebook(wrong, check_relu()),
    }
    paths = []
    for name, nb in subs_files.items():
        nbformat.write(nb, str(subs / f"{name}.ipynb"))
        paths.append(str(subs / f"{name}.ipynb"))
    env = dict(os.environ, HOME=str(home), GPUEDU_BACKEND="cpu")
    done = subprocess.run([sys.executable, "-m", "gpuedu", "grade", *paths, "--out", str(root / "results.csv"),
                           "--timeout", "120", "--memory", "1", "--processes", "64"],
                          capture_output=True, text=True, env=env, timeout=1500, stdin=subprocess.DEVNULL, cwd=root)
    listener.done.set()
    rows = list(csv.DictReader(open(root / "results.csv")))
    return {"done": done, "rows": {(r["student"], r["exercise"]): r for r in rows}, "all": rows, "home": home,
            "subs": subs, "listener": listener, "before": before, "csv": open(root / "results.csv").read()}


def test_the_batch_finishes_and_every_row_ran_in_the_sandbox(graded):
    assert graded["done"].returncode == 0, graded["done"].stderr[-2000:]
    assert {r["sandbox"] for r in graded["all"]} == {"bubblewrap"}


def test_honest_submissions_after_the_others_are_graded_right(graded):
    rows = graded["rows"]
    assert rows["zz_right", "01.relu"]["result"] == "passed"
    assert rows["zz_wrong", "01.relu"]["result"] == "not yet" and rows["zz_wrong", "01.relu"]["hint"]


def test_a_submission_that_writes_outside_its_folder_writes_nothing_there(graded):
    assert not (graded["home"] / "pwned").exists()
    assert not (graded["subs"] / "planted.ipynb").exists()
    assert graded["rows"]["writes_outside", "01.relu"]["result"] == "passed"     # its own answer still counts


def test_a_submission_that_reads_outside_its_folder_finds_nothing(graded):
    assert not (graded["subs"] / "stolen.txt").exists()
    assert "SECRET-SOLUTIONS-TEXT" not in graded["csv"]
    row = graded["rows"]["reads_outside", "01.relu"]
    assert row["result"] == "error" and "FileNotFoundError" in row["message"]


def test_a_submission_cannot_open_a_network_connection(graded):
    assert graded["listener"].accepted == 0
    assert graded["rows"]["network", "01.relu"]["result"] == "passed"


def test_a_fork_bomb_is_stopped_by_the_process_limit(graded):
    row = graded["rows"]["fork_bomb", "01.relu"]
    assert row["result"] == "error" and "process limit (64 processes)" in row["message"], row
    left = subprocess.run(["pgrep", "-f", "time.sleep\\(300\\)"], capture_output=True, text=True).stdout.split()
    assert left == []


def test_a_submission_past_the_memory_limit_is_stopped_and_says_so(graded):
    row = graded["rows"]["memory_hog", "01.relu"]
    assert row["result"] == "error" and ("memory limit is 1 GiB" in row["message"]
                                         or "memory limit (1 GiB)" in row["message"]), row


def test_replacing_exercises_check_does_not_change_the_verdict(graded):
    row = graded["rows"]["replaces_check", "03.histogram"]
    assert row["result"] == "not yet" and "compile" in (row["message"] + row["hint"]).lower(), row


def test_printing_a_passed_line_is_not_a_pass(graded):
    assert graded["rows"]["prints_passed", "01.relu"]["result"] == "error"
    assert graded["rows"]["prints_passed", "01.relu"]["message"] == "the check did not run"
    assert graded["rows"]["prints_only", ""]["result"] == "error"


def test_a_submission_cannot_edit_the_installed_gpuedu(graded):
    assert hashlib.sha256(open(INSTALLED, "rb").read()).hexdigest() == graded["before"]
    assert graded["rows"]["edits_gpuedu", "01.relu"]["result"] == "not yet"


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """A second batch, with short limits: submissions stopped by the time limit, the output limit, a crash."""
    root = tmp_path_factory.mktemp("stopping")
    right = define(RELU.solution)
    subs = {
        "slow_cell": notebook(right, "import time\ntime.sleep(600)", check_relu()),     # interrupted; goes on
        "sleeper": notebook(right, "import time\ntime.sleep(600)\n" + check_relu()),
        "flood": notebook(right, "while True:\n    print('x' * 100000)", check_relu()),
        "segfault": notebook(right, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", check_relu()),
        "zz_right": notebook(right, check_relu()),
    }
    paths = []
    for name, nb in subs.items():
        nbformat.write(nb, str(root / f"{name}.ipynb"))
        paths.append(str(root / f"{name}.ipynb"))
    done = subprocess.run([sys.executable, "-m", "gpuedu", "grade", *paths, "--out", str(root / "results.csv"),
                           "--timeout", "20", "--output", "1"], capture_output=True, text=True,
                          env=dict(os.environ, GPUEDU_BACKEND="cpu"), timeout=900, stdin=subprocess.DEVNULL, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    return {(r["student"], r["exercise"]): r for r in csv.DictReader(open(root / "results.csv"))}


def test_each_row_names_what_stopped_its_submission(stopped):
    assert stopped["sleeper", "01.relu"]["message"] == "the cell ran longer than 20 s and was stopped"
    assert stopped["slow_cell", "01.relu"]["result"] == "passed"     # a slow cell before the check is stopped
    assert "more than 1 MiB (the output limit)" in stopped["flood", "01.relu"]["message"]
    assert stopped["segfault", "01.relu"]["message"].startswith("the notebook's kernel died")
    assert all(stopped[s, "01.relu"]["result"] == "error" for s in ("sleeper", "flood", "segfault"))
    assert stopped["zz_right", "01.relu"]["result"] == "passed"
