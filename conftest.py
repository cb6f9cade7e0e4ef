"""nbval settings for the lessons (kept out of lessons/, which holds notebooks only), so that
`pytest --nbval lessons/` from the repository alone is the full check.

- Kernels run in this very Python environment (the notebooks' stored kernel name is ignored).
- Outputs are sanitised with tests/nbval_sanitize.cfg (addresses, durations).
- Cells whose output depends on the backend, the machine or the clock carry the cell tag
  ``nbval-ignore-output`` (nbval's own tag), not a comment in the learner's code.
- stderr is not compared: it carries warnings and progress bars, whose text depends on
  library versions and terminal width; stdout and results are compared exactly.
"""
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


def pytest_collection_modifyitems(config, items):
    for item in items:
        notebook = item.parent
        skip = getattr(notebook, "skip_compare", None)
        if skip is not None and "stderr" not in skip:
            notebook.skip_compare = tuple(skip) + ("stderr",)
