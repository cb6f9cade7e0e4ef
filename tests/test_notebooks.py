"""The contract every lesson keeps, checked on the stored notebooks (nbval then re-runs them).

- the first cell is the course's first cell, character for character, tagged nbval-ignore-output;
- nbval's markers are cell tags, never comments in the learner's code;
- stored outputs are a complete run on the emulator: every code cell executed, no errors;
- no matplotlib object repr leaked into an output (end plotting cells with plt.show());
- lesson code reaches the emulator only through pycuda.* (so it runs unchanged on real PyCUDA);
- the skeleton's closing sections are there: a summary and exercises.
"""
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
