"""What the tests of benchmarks/ share: the scripts there are not a package, so tests load them by path."""
import importlib.util
import os

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def load_benchmark(name):
    """The module ``benchmarks/<name>.py``, loaded fresh."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCHMARKS, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
