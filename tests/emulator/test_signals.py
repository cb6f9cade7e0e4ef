"""A kernel that traps, hits a breakpoint or calls abort() stops its launch, not the notebook's process.

Each case runs in a fresh process: a handler that failed would take the process with it, and the test
must see that rather than be taken down itself.
"""
import os
import platform
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(r'''
    import numpy as np
    from gpuedu.emulator import driver as drv
    from gpuedu.emulator.compiler import SourceModule
    drv.init()
    ctx = drv.Device(0).make_context()
    bad = SourceModule(r"""
    __global__ void bad(int* x) {
      if (threadIdx.x == 3) { BODY; }
      x[threadIdx.x] = 1;
    }""", options=["-DBODY=" + BODY_TEXT]).get_function("bad")
    out = np.zeros(8, np.int32)
    try:
        bad(drv.Out(out), block=(8, 1, 1))
        print("NO ERROR")
    except drv.LaunchError as exc:
        print("LaunchError:", exc)
    good = SourceModule("__global__ void good(int* x) { x[threadIdx.x] = 7; }").get_function("good")
    good(drv.Out(out), block=(8, 1, 1))
    print("afterwards:", out.tolist())
''')

CASES = [
    ("__builtin_trap()", "executed an illegal instruction"),
    ("abort()", "called abort(): device code cannot call host functions"),
]
if platform.machine() in ("x86_64", "AMD64"):
    CASES.append(('asm volatile("int3")', "hit a breakpoint instruction"))


@pytest.mark.parametrize("body, message", CASES)
def test_the_launch_fails_with_what_stopped_it_and_the_process_goes_on(body, message, tmp_path):
    script = SCRIPT.replace("BODY_TEXT", repr(body))
    env = dict(os.environ, GPUEDU_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"LaunchError: kernel 'bad' thread (3,0,0) of block (0,0,0) {message}" in done.stdout
    assert "afterwards: [7, 7, 7, 7, 7, 7, 7, 7]" in done.stdout
