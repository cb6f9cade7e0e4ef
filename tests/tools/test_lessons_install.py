"""The lessons travel with the package: `gpuedu lessons DEST`, and a built wheel that runs the course outside
the repository."""
import os
import subprocess
import sys
import zipfile

import pytest

from gpuedu.tools import course

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_copy_lessons_keeps_your_work_unless_forced(tmp_path):
    copied, kept = course.copy_lessons(tmp_path / "mine")
    assert copied and not kept
    assert copied == sorted(n for n in os.listdir(os.path.join(REPO, "lessons")) if course.LESSON_PATTERN.match(n))
    first = tmp_path / "mine" / copied[0]
    first.write_text("my work")
    copied_again, kept = course.copy_lessons(tmp_path / "mine")
    assert copied_again == [] and copied[0] in kept and first.read_text() == "my work"
    course.copy_lessons(tmp_path / "mine", force=True)
    assert first.read_text() != "my work"


def test_lessons_command_says_where_and_what_next(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gpuedu", "lessons", str(tmp_path / "course")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "copied" in done.stdout and "gpuedu course --lessons" in done.stdout


@pytest.mark.slow
def test_a_wheel_in_a_fresh_venv_outside_the_repository_copies_runs_and_grades_the_lessons(tmp_path):
    wheels = tmp_path / "wheels"
    isolation = ["--no-build-isolation"] if _build_backend_reason() is None else []   # else pip fetches one
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w",
                    str(wheels), REPO], check=True, capture_output=True, timeout=600)
    (wheel,) = wheels.glob("gpuedu-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "gpuedu/emulator/_native/cassert" in names
    assert sum(n.startswith("gpuedu/lesson_notebooks/") and n.endswith(".ipynb") for n in names) == \
        len([n for n in os.listdir(os.path.join(REPO, "lessons")) if course.LESSON_PATTERN.match(n)])
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], capture_output=True,
                         text=True, timeout=900)
    if pip.returncode != 0 and ("connection" in pip.stderr.lower() or "no matching distribution" in pip.stderr.lower()):
        pytest.skip(f"the wheel's dependencies cannot be installed here (no package index): {pip.stderr[-300:]}")
    assert pip.returncode == 0, pip.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPUEDU_BACKEND")}
    env["GPUEDU_CACHE_DIR"] = str(tmp_path / "cache")
    gpuedu = str(venv / "bin" / "gpuedu")

    def run(*args):
        return subprocess.run([gpuedu, *args], cwd=work, env=env, capture_output=True, text=True, timeout=900,
                              stdin=subprocess.DEVNULL)

    assert run("lessons", "mine").returncode == 0
    assert (work / "mine" / "01_first_kernel.ipynb").exists()
    done = run("course", "01", "--lessons", "mine", "--report", "report")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 of 1 lessons passed" in done.stdout
    # without a lessons folder, the course runs the install's own lessons from a copy in the report folder
    done = run("course", "01", "--report", "report2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (work / "report2" / "lessons" / "01_first_kernel.ipynb").exists()
    # the instructor's round: hand-outs, then a right and a wrong submission graded into a CSV
    assert run("classroom", "kit").returncode == 0
    (work / "alice.ipynb").write_bytes((work / "kit" / "solutions" / "01_first_kernel.ipynb").read_bytes())
    (work / "bob.ipynb").write_bytes((work / "kit" / "student" / "01_first_kernel.ipynb").read_bytes())
    done = run("grade", "alice.ipynb", "bob.ipynb", "--out", "results.csv")
    assert done.returncode == 0, done.stdout + done.stderr
    import csv
    rows = list(csv.DictReader(open(work / "results.csv")))
    assert {r["result"] for r in rows if r["student"] == "alice"} == {"passed"}
    assert {r["result"] for r in rows if r["student"] == "bob"} == {"not yet"}


def _build_backend_reason():
    """None when this environment's setuptools can build the project (pyproject.toml asks for >= 77)."""
    import setuptools
    major = int(setuptools.__version__.split(".")[0])
    return None if major >= 77 else (f"setuptools {setuptools.__version__} is older than the 77 pyproject.toml "
                                     f"names as its build backend; make venv installs it")


def test_the_sdist_is_the_whole_course(tmp_path):
    import tarfile
    if _build_backend_reason():
        pytest.skip(_build_backend_reason())
    subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path)], cwd=REPO, check=True,
                   capture_output=True, timeout=300)
    (sdist,) = tmp_path.glob("gpuedu-*.tar.gz")
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    for wanted in ("Makefile", "environment.yml", ".ci/run", "tests/conftest.py", "tests/emulator/conftest.py",
                   "conftest.py", "tests/nbval_sanitize.cfg", "lessons/01_first_kernel.ipynb",
                   "gpuedu/emulator/_native/cassert", "benchmarks/README.md", "docs/conf.py",
                   "docs/figures/grid.svg", "scripts/site.py", "tests/scripts/test_site.py",
                   "Containerfile", ".dockerignore", ".devcontainer/devcontainer.json",
                   "scripts/container.py", "tests/scripts/test_container.py"):
        assert wanted in names, wanted
