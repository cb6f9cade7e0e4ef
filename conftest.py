"""nbval settings for the lessons (kept out of lessons/, which holds notebooks only), so that
`pytest --nbval lessons/` from the repository alone is the full check.

- Kernels run in this very Python environment (the notebooks' stored kernel name is ignored).
- Outputs are sanitised with tests/nbval_sanitize.cfg (addresses, durations).
- Cells whose output depends on the backend, the machine or the clock carry the cell tag
  ``nbval-ignore-output`` (nbval's own tag), not a comment in the learner's code.
- stderr is not compared: it carries warnings and progress bars, whose text depends on
  library versions and terminal width; stdout and results are compared exactly.
- Cells tagged ``gpuedu-emulator-output`` print what only the emulator has (its counters, the model fed
  by them) and something else on a GPU: their stored output is compared when the lessons run on the
  emulator, and ignored when they run on a GPU.
"""
import functools
import os

SANITIZE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests", "nbval_sanitize.cfg")


def pytest_configure(config):
    option = config.option
    if not (getattr(option, "nbval", False) or getattr(option, "nbval_lax", False)):
        return
    if not option.nbval_sanitize_with:
        option.nbval_sanitize_with = SANITIZE
    if not option.nbval_kernel_name:
        option.nbval_current_env = True


EMULATOR_OUTPUT_TAG = "gpuedu-emulator-output"


@functools.lru_cache(maxsize=None)
def lessons_run_on_a_gpu():
    """Whether the notebooks' gpuedu.setup() will pick a GPU here: GPUEDU_BACKEND, or the preflight."""
    from gpuedu import backend, preflight
    choice = backend.requested_backend()
    return choice == "cuda" or (choice == "auto" and preflight.check_gpu()[0])


def compare_emulator_output(items, on_gpu=lessons_run_on_a_gpu):
    """Stop comparing the cells tagged EMULATOR_OUTPUT_TAG among ``items`` when the lessons run on a GPU."""
    for item in items:
        cell = getattr(item, "cell", None)
        tags = cell.get("metadata", {}).get("tags", []) if isinstance(cell, dict) else []
        if EMULATOR_OUTPUT_TAG in tags and on_gpu():   # asked once, and only when a tagged cell is there
            item.options["check"] = False


def pytest_collection_modifyitems(config, items):
    for item in items:
        notebook = item.parent
        skip = getattr(notebook, "skip_compare", None)
        if skip is not None and "stderr" not in skip:
            notebook.skip_compare = tuple(skip) + ("stderr",)
    compare_emulator_output(items)
