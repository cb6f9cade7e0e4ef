"""Test tiers: the default CPU tier, `nvcc` (needs nvcc on PATH), `gpu` (real PyCUDA on a real device).

Marked tests that cannot run here are skipped with the reason, never silently passed.
The `gpu_context` fixture hands a `gpu` test the real driver module with a live context and
synchronises after the test, so an asynchronous kernel fault fails the test that caused it.
"""
import functools
import shutil

import pytest

pytest_plugins = ["pytester"]


@functools.lru_cache(maxsize=None)
def gpu_unavailable_reason():
    """None when real PyCUDA can use a device here, else why not (probed once, in a child process)."""
    from gpuedu import backend
    ok, reason, _ = backend.check_gpu()
    return None if ok else reason


def pytest_collection_modifyitems(config, items):
    nvcc_missing = shutil.which("nvcc") is None
    for item in items:
        if nvcc_missing and item.get_closest_marker("nvcc"):
            item.add_marker(pytest.mark.skip(reason="nvcc is not on PATH (install the CUDA toolkit to run it)"))
        if item.get_closest_marker("gpu"):
            reason = gpu_unavailable_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"no usable GPU: {reason}"))


@pytest.fixture
def gpu_context():
    """The real ``pycuda.driver`` with a current context on device 0, for `gpu`-marked tests."""
    import gpuedu
    backend = gpuedu.setup(verbose=False)
    if backend.name != "cuda":
        pytest.skip(f"this test process uses the CPU emulator ({backend.reason})")
    drv = backend.driver
    context = drv.Context.get_current()
    assert context is not None, "gpuedu.setup() chose cuda but left no current context"
    yield drv
    context.synchronize()
