"""The contract every lesson keeps, checked on the stored notebooks (nbval then re-runs them).

- the first cell is the course's first cell, character for character, tagged nbval-ignore-output;
- nbval's markers are cell tags, never comments in the learner's code;
- stored outputs are a complete run on the emulator: every code cell executed, no errors;
- no matplotlib object repr leaked into an output (end plotting cells with plt.show());
- lesson code reaches the emulator only through pycuda.* (so it runs unchanged on real PyCUDA);
- the skeleton's closing sections are there: a summary and exercises;
- a cell whose output depends on the backend carries a marker: nbval-ignore-output, or
  gpuedu-emulator-output (compared on the emulator, not on a GPU; the root conftest.py).
"""
import ast
import glob
import importlib.util
import os
import re

import nbformat
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LESSONS = sorted(glob.glob(os.path.join(REPO, "lessons", "[0-9][0-9]_*.ipynb")))


def _links():
    spec = importlib.util.spec_from_file_location("links", os.path.join(REPO, "scripts", "links.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The course's first cell, with the Colab install pinned to this release (scripts/links.py writes it).
FIRST_CELL = _links().first_cell()

LEAKED_REPR = re.compile(r"^\[?<matplotlib\.|^\[<matplotlib|^Text\(|^<matplotlib\.")


def lesson_ids():
    return [os.path.basename(p) for p in LESSONS]


@pytest.fixture(params=LESSONS, ids=lesson_ids())
def lesson(request):
    return os.path.basename(request.param), nbformat.read(request.param, as_version=4)


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_there_are_lessons():
    assert LESSONS, "no lessons/NN_topic.ipynb found"
    assert os.path.basename(LESSONS[0]) == "00_setup_and_first_look.ipynb"


def test_first_cell_is_the_course_first_cell(lesson):
    name, nb = lesson
    first = code_cells(nb)[0].source.strip()
    assert first == FIRST_CELL, f"{name}: the first code cell differs from the course's first cell"
    first_cell = code_cells(nb)[0]
    assert "nbval-ignore-output" in first_cell.metadata.get("tags", []), \
        f"{name}: the first cell's output names the backend: tag it nbval-ignore-output"


def test_nbval_markers_are_cell_tags_not_comments_in_learners_code(lesson):
    name, nb = lesson
    marked = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "NBVAL_" in c.source.split("\n", 1)[0]]
    assert not marked, (f"{name}: cells {marked} carry nbval comment markers; run "
                        f"python scripts/nbval_tags.py {name} to turn them into tags")


def test_outputs_are_a_complete_emulator_run(lesson):
    name, nb = lesson
    cells = code_cells(nb)
    unexecuted = [i for i, c in enumerate(cells) if c.source.strip() and c.execution_count is None]
    assert not unexecuted, f"{name}: code cells {unexecuted} have no stored run; execute the notebook top to bottom"
    errors = [(i, o.get("ename")) for i, c in enumerate(cells) for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{name}: stored errors {errors}"
    setup_text = "".join(o.get("text", "") for o in cells[0].outputs if o.output_type == "stream")
    assert "gpuedu: backend cpu" in setup_text, f"{name}: stored outputs must come from the emulator (GPUEDU_BACKEND=cpu)"


def test_no_plot_object_repr_in_outputs(lesson):
    name, nb = lesson
    for i, cell in enumerate(code_cells(nb)):
        for output in cell.outputs:
            text = output.get("data", {}).get("text/plain", "") if output.output_type == "execute_result" else ""
            assert not LEAKED_REPR.search(text), \
                f"{name}: code cell {i} shows {text[:40]!r}; end the plotting cell with plt.show()"


def test_lesson_code_does_not_import_the_emulator_directly(lesson):
    name, nb = lesson
    for i, cell in enumerate(code_cells(nb)):
        assert not re.search(r"^\s*(from|import)\s+gpuedu\.emulator", cell.source, re.M), \
            f"{name}: code cell {i} imports gpuedu.emulator; use pycuda.* after gpuedu.setup()"


def test_lesson_ends_with_summary_and_exercises(lesson):
    name, nb = lesson
    headings = [line.lower() for c in nb.cells if c.cell_type == "markdown"
                for line in c.source.splitlines() if line.startswith("#")]
    assert any("summary" in h for h in headings), f"{name}: no Summary section"
    assert any("exercise" in h for h in headings), f"{name}: no Exercises section"


def test_every_address_comes_from_the_one_setting():
    assert _links().main(["--check"]) == 0, "run python scripts/links.py"


# What names the backend in lesson code, and the markers that say a cell's output depends on it.
BACKEND = re.compile(r"\bbackend\.name\b|\bbackend\.is_emulator\b|\bON_GPU\b")
BACKEND_MARKERS = {"nbval-ignore-output", "gpuedu-emulator-output", "nbval-skip"}
OUTPUT_CALLS = {"print", "display", "show", "plot", "loglog", "semilogx", "semilogy", "bar", "imshow", "check"}


def _calls(nodes):
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                func = sub.func
                yield func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def backend_dependent_output(source):
    """Lines of a cell where what it prints or draws depends on the backend: an `if` on the backend with
    output in a branch, or a print whose arguments name it. (Sizes chosen by backend are not flagged: a
    cell that only prints results of them prints the same on both.)"""
    code = "\n".join(line[:len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.splitlines())   # IPython's magics and shell lines are not Python
    tree = ast.parse(code)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and BACKEND.search(ast.unparse(node.test)):
            if OUTPUT_CALLS & set(_calls(node.body + node.orelse)):
                found.append(node.lineno)
        elif (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "print"
              and any(BACKEND.search(ast.unparse(a)) for a in node.args)):
            found.append(node.lineno)
    return sorted(set(found))


def test_a_cell_whose_output_depends_on_the_backend_carries_a_marker(lesson):
    # On a GPU such a cell prints other text (or nothing), and nbval fails there without a marker.
    name, nb = lesson
    unmarked = []
    for i, cell in enumerate(code_cells(nb)):
        lines = backend_dependent_output(cell.source)
        if lines and not BACKEND_MARKERS & set(cell.metadata.get("tags", [])):
            unmarked.append(f"cell {i}, line {lines[0]}: {cell.source.splitlines()[lines[0] - 1].strip()}")
    assert not unmarked, (f"{name}: output depends on the backend, no marker (tag the cell gpuedu-emulator-output "
                          f"to compare it on the emulator only, or nbval-ignore-output):\n" + "\n".join(unmarked))


def test_the_backend_check_finds_what_it_should():
    assert backend_dependent_output('if backend.name == "cpu":\n    print(table)\nelse:\n    print("ncu")') == [1]
    assert backend_dependent_output('print(f"ran on {backend.name}")') == [1]
    assert backend_dependent_output('if not ON_GPU:\n    ax.plot(x, y)') == [1]
    assert backend_dependent_output('n = 2**20 if backend.name == "cpu" else 2**26\nprint(f(n) == g(n))') == []
    assert backend_dependent_output('if backend.name == "cpu":\n    compiler.set_schedule("reverse")') == []
    assert backend_dependent_output('%timeit f()\nprint(1)') == []
