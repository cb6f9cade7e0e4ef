"""The emulator's public face for the tools built on it (gpuedu.emulator.hooks): counted launches heard of as
records, countings that nest, activity, the kernel cache; and nothing outside the emulator reaches past it."""
import ast
import os

import numpy as np
import pytest

import gpuedu.emulator.driver as drv
from gpuedu import preflight
from gpuedu.emulator import compiler, hooks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = r"""
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
__global__ void past_the_end(float* x) { x[threadIdx.x + 64] = 1.0f; }   // x holds 64 floats
"""


@pytest.fixture(scope="module")
def module(context):
    return compiler.SourceModule(SOURCE)


def _launch(module, name, *args, n=64):
    module.get_function(name)(*args, block=(n, 1, 1), grid=(1, 1))


def test_a_counted_launch_is_heard_of_with_its_shape_source_and_counts(module):
    x = drv.to_device(np.ones(64, np.float32))
    heard = []
    with hooks.counting(heard.append):
        _launch(module, "scale", x, np.float32(3), np.int32(64))
    (record,) = heard
    assert (record.name, record.grid, record.block, record.shared_dynamic) == ("scale", (1, 1, 1), (64, 1, 1), 0)
    assert record.source[0] == SOURCE and record.reason is None and record.error is None
    assert set(record.counts) == set(hooks.COUNTERS)
    assert record.counts["global_ld_requests"] == 2 and record.counts["global_st_requests"] == 2   # 2 warps
    np.testing.assert_array_equal(drv.from_device(x, (64,), np.float32), np.full(64, 3, np.float32))


def test_a_failed_launch_is_heard_of_and_raises_as_it_would_unobserved(module):
    x = drv.to_device(np.ones(64, np.float32))
    heard = []
    with hooks.counting(heard.append):
        with pytest.raises(drv.LaunchError, match="past the end"):
            _launch(module, "past_the_end", x, n=32)
    assert heard[0].error.startswith("LaunchError") and heard[0].counts is None


def test_a_launch_that_cannot_be_counted_runs_plainly_and_its_record_says_why(context):
    plain = drv.module_from_buffer(compiler.compile(SOURCE))
    x = drv.to_device(np.ones(64, np.float32))
    heard = []
    with hooks.counting(heard.append):
        _launch(plain, "scale", x, np.float32(2), np.int32(64))
    assert heard[0].counts is None and "source is unknown" in heard[0].reason and heard[0].seconds >= 0
    np.testing.assert_array_equal(drv.from_device(x, (64,), np.float32), np.full(64, 2, np.float32))


def test_countings_nest_and_leaving_the_last_launches_plainly_again(module):
    x = drv.to_device(np.ones(64, np.float32))
    outer, inner = [], []
    with hooks.counting(outer.append):
        with hooks.counting(inner.append, racecheck=True):
            _launch(module, "scale", x, np.float32(1), np.int32(64))
        _launch(module, "scale", x, np.float32(1), np.int32(64))
    _launch(module, "scale", x, np.float32(1), np.int32(64))
    assert (len(outer), len(inner)) == (1, 1)


def test_activity_is_heard_of_until_the_previous_recorder_is_put_back():
    heard = []
    previous = hooks.record_activity(lambda kind, info: heard.append((kind, info["name"])))
    try:
        hooks.emit_activity("range_push", name="forward")
    finally:
        assert hooks.record_activity(previous) is not None
    hooks.emit_activity("range_pop", name="forward")
    assert heard == [("range_push", "forward")]


def test_the_cache_rule_is_the_one_preflight_reports(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUEDU_CACHE_DIR", str(tmp_path / "kernels"))
    assert hooks.cache_path() == preflight.kernel_cache_dir() == str(tmp_path / "kernels")
    (tmp_path / "open").mkdir(mode=0o777)
    os.chmod(tmp_path / "open", 0o777)
    assert "other users may write into it" in hooks.cache_problem(str(tmp_path / "open"))


def _python_files(*folders):
    for folder in folders:
        for dirpath, _, names in os.walk(os.path.join(ROOT, folder)):
            yield from (os.path.join(dirpath, n) for n in names if n.endswith(".py"))


def _imported_modules(source, relpath):
    """The absolute names of the modules the file at ``relpath`` imports (relative imports resolved), lazy ones
    included."""
    package = relpath[:-3].split("/")[:-1]
    if relpath.endswith("__init__.py"):
        package = relpath.split("/")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module.split(".") if node.module else []
            if node.level:
                base = package[:len(package) - node.level + 1] + base
            yield ".".join(base)
            yield from (".".join(base + [a.name]) for a in node.names)


def test_nothing_outside_the_emulator_imports_its_private_modules():
    emulator = os.path.join(ROOT, "gpuedu", "emulator")
    reaching = sorted(f"{os.path.relpath(path, ROOT)}: {name}"
                      for path in _python_files("gpuedu", "benchmarks", "scripts")
                      if not path.startswith(emulator + os.sep)
                      for name in _imported_modules(open(path, encoding="utf-8").read(),
                                                    os.path.relpath(path, ROOT).replace(os.sep, "/"))
                      if name.startswith("gpuedu.emulator.") and name.split(".")[2].startswith("_"))
    assert reaching == [], "use gpuedu.emulator.hooks (or PyCUDA's names) instead"


def test_the_privacy_check_resolves_relative_and_lazy_imports():
    source = "def f():\n    from ..emulator import _cache\n    from ..emulator._alloc import DeviceAllocation\n"
    found = set(_imported_modules(source, "gpuedu/tools/doctor.py"))
    assert {"gpuedu.emulator._cache", "gpuedu.emulator._alloc"} <= found
    assert "gpuedu.emulator._module" in set(_imported_modules("from . import _module\n", "gpuedu/emulator/__init__.py"))
