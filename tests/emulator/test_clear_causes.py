"""Errors that name the real cause: a freed allocation as freed (and where), a pointer in the first page as a null
or invalid address (not as misaligned), a size no machine holds as a ValueError that gives it. Each in a fresh
process: the message, the process surviving it, and a correct kernel run afterwards."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

PRELUDE = textwrap.dedent(r'''
    import numpy as np
    from gpuedu.emulator import driver as drv
    from gpuedu.emulator import gpuarray
    from gpuedu.emulator.compiler import SourceModule
    drv.init()
    ctx = drv.Device(0).make_context()
    f = SourceModule("__global__ void k(float* a, int n) { if (threadIdx.x < n) a[threadIdx.x] = 1; }").get_function("k")
    g = SourceModule("__global__ void g(float** pp) { *pp[0] = 2; }").get_function("g")

    def attempt(step):
        try:
            step()
            print("NO ERROR")
        except Exception as exc:
            print(f"{type(exc).__name__}: {exc}")
''')

AFTER = textwrap.dedent(r'''
    out = np.zeros(4, np.float32)
    f(drv.Out(out), np.int32(4), block=(4, 1, 1))
    print("afterwards", out.tolist())
''')

CASES = {
    "freed by free(), given to a launch": (
        "a = drv.mem_alloc(256); p = int(a); a.free()  # FREE-LINE\n"
        "attempt(lambda: f(np.intp(p), np.int32(4), block=(4, 1, 1)))",
        r"LaunchError: kernel 'k': parameter #0 \(0-based\) is not device memory: 0x[0-9a-f]+ is 0 bytes into a "
        r"256-byte allocation that was freed by \.free\(\) at <string>:\d+: a pointer kept after its memory was "
        r"freed\. On a GPU the kernel would fault with an illegal address"),
    "dropped, then copied to": (
        "b = gpuarray.zeros(100, np.float32); q = int(b.gpudata) + 8; del b\n"
        "attempt(lambda: drv.memcpy_htod(q, np.zeros(2, np.float32)))",
        r"LogicError: cuMemcpyHtoD failed: the destination is not device memory: 0x[0-9a-f]+ is 8 bytes into a "
        r"400-byte allocation that was freed when its last reference was dropped, at <string>:\d+"),
    "freed, then read by a kernel through a pointer in device memory": (
        "c = gpuarray.zeros(64, np.float32); pp = gpuarray.to_gpu(np.array([int(c.gpudata)], np.uint64))\n"
        "c.gpudata.free()\n"
        "attempt(lambda: g(pp, block=(1, 1, 1)))",
        r"LaunchError: kernel 'g' thread \(0,0,0\) of block \(0,0,0\) wrote an address that is not device memory: "
        r"0x[0-9a-f]+ is 0 bytes into a 256-byte allocation that was freed by \.free\(\) at <string>:\d+"),
    "a small integer as a pointer": (
        "attempt(lambda: f(np.intp(3), np.int32(4), block=(4, 1, 1)))",
        r"LaunchError: kernel 'k': parameter #0 \(0-based\) is not device memory: 0x3 is in the first 64 KiB of the "
        r"address space, where nothing is ever mapped: a null pointer \(plus an offset\), or a small integer given "
        r"where a pointer goes"),
    "a small integer as a copy's destination": (
        "attempt(lambda: drv.memcpy_htod(16, np.zeros(2, np.float32)))",
        r"LogicError: cuMemcpyHtoD failed: the destination is not device memory: 0x10 is in the first 64 KiB"),
    "mem_alloc(2**64)": (
        "attempt(lambda: drv.mem_alloc(2**64))",
        r"ValueError: cannot allocate 18,446,744,073,709,551,616 bytes \(about 2\^64\): more than any machine's "
        r"address space holds \(144,115,188,075,855,872 bytes, 2\^57\)\. Such a size is a mistake in its arithmetic"),
    "a shape whose product overflows": (
        "attempt(lambda: gpuarray.empty((2**40, 2**40), np.float32))",
        r"ValueError: cannot allocate 4,835,703,278,458,516,698,824,704 bytes \(about 2\^82\)"),
    "page-locked memory of 2**64 bytes": (
        "attempt(lambda: drv.pagelocked_empty(2**62, np.float32))",
        r"ValueError: cannot allocate page-locked host memory of 18,446,744,073,709,551,616 bytes"),
    "a pitched allocation too large": (
        "attempt(lambda: drv.mem_alloc_pitch(2**40, 2**40, 4))",
        r"ValueError: cannot allocate 1,208,925,819,614,629,174,706,176 bytes"),
}


@pytest.mark.parametrize("case", CASES)
def test_the_error_names_the_real_cause_and_the_process_goes_on(case, tmp_path):
    body, expected = CASES[case]
    script = PRELUDE + body + "\n" + AFTER
    env = dict(os.environ, GPUEDU_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    first = done.stdout.splitlines()[0]
    assert re.search(expected, first), first
    assert "misaligned" not in first and "OverflowError" not in first
    assert "afterwards [1.0, 1.0, 1.0, 1.0]" in done.stdout, done.stdout


def test_a_freed_range_given_back_to_the_system_is_not_named_as_freed(monkeypatch):
    """Memory whose pages stay reserved and inaccessible after a free is named as freed; memory whose pages went
    back to the system (which may hand them to host memory next) is not."""
    from gpuedu.emulator import _memory
    kept = _memory.allocate(1 << 16)                  # a slot of the reserved region, kept after the free
    _memory.release(kept, "by the first test")
    assert _memory.freed(kept.address + 10) == (1 << 16, 10, "by the first test")
    monkeypatch.setattr(_memory, "_take_slot", lambda pages: None)     # a mapping of its own...
    monkeypatch.setattr(_memory, "_keep", lambda m, base: False)       # ...closed when freed
    mapped = _memory.allocate(1 << 16)
    _memory.release(mapped, "by the second test")
    assert _memory.freed(mapped.address + 10) is None or _memory.freed(mapped.address + 10)[2] != "by the second test"
