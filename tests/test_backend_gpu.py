"""setup() on a real NVIDIA GPU (the `gpu` tier; skipped with the reason elsewhere)."""
import pytest

from test_backend import REPORT, ok, run_child

pytestmark = pytest.mark.gpu


def test_auto_picks_the_gpu():
    out = ok(run_child(REPORT + 'import pycuda.driver as drv\nprint("CONTEXT", drv.Context.get_current() is not None)\n'))
    assert "NAME cuda" in out and "REASON a usable GPU was found" in out
    assert "ALIAS pycuda" in out and "CONTEXT True" in out


def test_forced_cpu_uses_the_emulator_even_on_a_gpu():
    out = ok(run_child(REPORT, backend_env="cpu"))
    assert "NAME cpu" in out and "ALIAS gpuedu.emulator" in out


def test_gpu_context_fixture_gives_a_working_context(gpu_context):
    import numpy as np
    import pycuda.gpuarray as gpuarray
    x = gpuarray.to_gpu(np.arange(1000, dtype=np.float32))
    assert float(gpuarray.sum(x).get()) == 499500.0


def test_preflight_describes_the_device_it_passed():
    from gpuedu import preflight
    ok_, reason, details = preflight.check_gpu()
    assert ok_ and reason == "a usable GPU was found"
    device = details["device"]
    assert device["arch"].isdigit() and device["total_memory"] > 2**30 and device["name"]
    assert details["launch"] == {"ok": True}
    assert details["nvcc"][1] and details["probe"]["cuda_driver_version"]
