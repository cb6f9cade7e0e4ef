"""The nbval settings (conftest.py at the root, tests/nbval_sanitize.cfg) do what the lessons rely on: addresses and durations are
sanitised, stderr is not compared, and any other difference in output still fails."""
import os
import shutil

import nbformat

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def notebook(path, cells):
    """Write a notebook whose cells carry the given stored stdout/stderr outputs."""
    nb = nbformat.v4.new_notebook()
    for source, stdout, stderr in cells:
        cell = nbformat.v4.new_code_cell(source)
        cell.execution_count = 1
        if stdout is not None:
            cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=stdout))
        if stderr is not None:
            cell.outputs.append(nbformat.v4.new_output("stream", name="stderr", text=stderr))
        nb.cells.append(cell)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))


def test_sanitising_and_stderr_policy(pytester):
    shutil.copy(os.path.join(REPO, "conftest.py"), pytester.path / "conftest.py")
    (pytester.path / "tests").mkdir()
    shutil.copy(os.path.join(REPO, "tests", "nbval_sanitize.cfg"), pytester.path / "tests" / "nbval_sanitize.cfg")
    notebook(pytester.path / "00_tolerated.ipynb", [
        ("print(hex(id(object())))", "0x7f00deadbeef\n", None),                       # an address
        ("print(f'took {12.5:.1f} ms and 3 s')", "took 0.4 ms and 9 s\n", None),      # durations
        ("import sys, random\nprint(random.random(), file=sys.stderr)\nprint('stable')",
         "stable\n", "0.123\n"),                                                      # stderr differs
    ])
    notebook(pytester.path / "01_wrong.ipynb", [("print(6 * 7)", "41\n", None)])     # a real difference
    result = pytester.runpytest_subprocess("--nbval", "-p", "no:cacheprovider", "-p", "no:xdist", "-q")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*01_wrong.ipynb::Cell 0*"])


def test_emulator_output_is_compared_on_the_emulator_and_not_on_a_gpu(pytester, monkeypatch):
    # A cell tagged gpuedu-emulator-output stores the emulator's text (counts, the model fed by them); on a
    # GPU the same cell prints something else, and only there is its output not compared.
    shutil.copy(os.path.join(REPO, "conftest.py"), pytester.path / "conftest.py")
    (pytester.path / "tests").mkdir()
    shutil.copy(os.path.join(REPO, "tests", "nbval_sanitize.cfg"), pytester.path / "tests" / "nbval_sanitize.cfg")
    notebook(pytester.path / "00_counts.ipynb", [("print('measured on a GPU instead')", "counted: 42\n", None),
                                                ("print(6 * 7)", "42\n", None)])
    nb = nbformat.read(str(pytester.path / "00_counts.ipynb"), as_version=4)
    nb.cells[0].metadata["tags"] = ["gpuedu-emulator-output"]
    nbformat.write(nb, str(pytester.path / "00_counts.ipynb"))
    monkeypatch.setenv("GPUEDU_BACKEND", "cuda")
    result = pytester.runpytest_subprocess("--nbval", "-p", "no:cacheprovider", "-p", "no:xdist", "-q")
    result.assert_outcomes(passed=2)
    monkeypatch.setenv("GPUEDU_BACKEND", "cpu")
    result = pytester.runpytest_subprocess("--nbval", "-p", "no:cacheprovider", "-p", "no:xdist", "-q")
    result.assert_outcomes(passed=1, failed=1)
