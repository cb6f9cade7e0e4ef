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
    from gpuedu import preflight
    ok, reason, _ = preflight.check_gpu()
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
    """The real ``pycuda.driver`` with device 0's primary context current (as setup() leaves it), for `gpu` tests."""
    import gpuedu
    backend = gpuedu.setup(verbose=False)
    if backend.name != "cuda":
        pytest.skip(f"this test process uses the CPU emulator ({backend.reason})")
    drv = backend.driver
    context = drv.Context.get_current()
    assert context is not None, "gpuedu.setup() chose cuda but left no current context"
    yield drv
    context.synchronize()


def _memory_mappings():
    """(mappings this process holds, the kernel's limit) on Linux, else None."""
    try:
        with open("/proc/self/maps") as f:
            held = sum(1 for _ in f)
        with open("/proc/sys/vm/max_map_count") as f:
            return held, int(f.read())
    except OSError:
        return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # A process that runs out of memory mappings fails in odd places ("failed to map segment from
    # shared object", a library that "seems to be broken"); say what actually ran out.
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.excinfo is not None:
        text = str(call.excinfo.value)
        if "failed to map segment" in text or "Cannot allocate memory" in text or "seems to be broken" in text:
            counts = _memory_mappings()
            if counts:
                report.sections.append(("memory mappings", (
                    f"this test process holds {counts[0]:,} memory mappings; the kernel allows "
                    f"{counts[1]:,} (vm.max_map_count): something maps memory without releasing it "
                    f"(device allocations kept alive, guard pages); run fewer tests per process "
                    f"(make test JOBS=...) while you find it.")))
