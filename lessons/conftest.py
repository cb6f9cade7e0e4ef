"""nbval settings for the lessons, so that `pytest --nbval lessons/` alone is the full check.

- Kernels run in this very Python environment (the notebooks' stored kernel name is ignored).
- Outputs are sanitised with nbval_sanitize.cfg (addresses, durations).
- stderr is not compared: it carries warnings and progress bars, whose text depends on
  library versions and terminal width; stdout and results are compared exactly.
"""
import os

SANITIZE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nbval_sanitize.cfg")


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
