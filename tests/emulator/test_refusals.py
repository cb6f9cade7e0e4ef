"""What a GPU (or nvcc, or compute-sanitizer) refuses, the emulator refuses too, with a message that says what
was wrong; each case runs in a fresh process, as a new learner's notebook would, and afterwards a correct
kernel still runs there."""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PRELUDE = """
import numpy as np
import gpuedu
gpuedu.setup("cpu", verbose=False)
import pycuda.autoinit
import pycuda.driver as drv
import pycuda.gpuarray as gpuarray
from pycuda.compiler import SourceModule
"""

AFTERWARDS = """
_check = SourceModule("__global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }").get_function("twice")
_x = gpuarray.to_gpu(np.arange(32, dtype=np.float32))
_check(_x, block=(32, 1, 1), grid=(1, 1))
assert (_x.get() == 2 * np.arange(32)).all()
print("A CORRECT KERNEL RAN AFTERWARDS")
"""


def fresh(code, timeout=240):
    """Run ``code`` (after the prelude) in a new Python process, then a correct kernel; (stdout, stderr)."""
    from test_backend import child_pythonpath
    env = dict(os.environ, PYTHONPATH=child_pythonpath(ROOT))
    env.pop("GPUEDU_BACKEND", None)
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code) + AFTERWARDS], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "A CORRECT KERNEL RAN AFTERWARDS" in proc.stdout
    return proc.stdout, proc.stderr


def refused(code, exception="drv.LaunchError"):
    """``code`` must raise ``exception``; returns its message (printed by the child between markers)."""
    body = "try:\n" + textwrap.indent(textwrap.dedent(code), "    ") + \
           f"\n    print('NOT REFUSED')\nexcept {exception} as _e:\n    print('REFUSED<<' + str(_e) + '>>')\n"
    out, _ = fresh(body)
    assert "NOT REFUSED" not in out, out
    return out.split("REFUSED<<", 1)[1].split(">>", 1)[0]


def test_printf_keeps_a_gpus_fifo_per_launch_and_says_what_it_dropped():
    out, err = fresh("""
        noisy = SourceModule(r'''__global__ void noisy() { printf("thread %4d says hello\\n", threadIdx.x); }''')
        noisy.get_function("noisy")(block=(1024, 1, 1), grid=(64, 1))      # 64 Ki lines of 23 bytes: 1.5 MB
        drv.Context.synchronize()
        print("LAUNCH DONE")
        drv.Context.set_limit(drv.limit.PRINTF_FIFO_SIZE, 220)
        noisy.get_function("noisy")(block=(32, 1, 1), grid=(1, 1))
    """)
    first = out.split("LAUNCH DONE")[0]
    assert len(first) <= 1 << 20 and first.count("says hello") == (1 << 20) // 23
    assert "more bytes of this launch's output were dropped" in err and "PRINTF_FIFO_SIZE" in err
    second = out.split("LAUNCH DONE")[1]
    assert second.count("says hello") == 9 and f"{23 * 23:,} more bytes" in err
