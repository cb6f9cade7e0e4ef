"""Faults a plain launch used to let through without a word, each run in a fresh process: the launch fails with
a message that says what was wrong, the process lives on, and a correct kernel runs afterwards.

(Each script ends with the same correct kernel; the test reads what the script printed.)
"""
import os
import subprocess
import sys
import textwrap

import pytest

PROLOGUE = textwrap.dedent(r'''
    import os, sys
    import numpy as np
    from gpuedu.emulator import driver as drv, gpuarray
    from gpuedu.emulator.compiler import SourceModule
    drv.init()
    ctx = drv.Device(0).make_context()

    def attempt(label, launch):
        try:
            launch()
            print(label, "NO ERROR", flush=True)
        except drv.LaunchError as exc:
            print(label, "LaunchError:", exc, flush=True)

    def correct_kernel_runs():
        good = SourceModule("__global__ void good(int* x) { x[threadIdx.x] = 7 * threadIdx.x; }").get_function("good")
        out = np.zeros(64, np.int32)
        good(drv.Out(out), block=(64, 1, 1))
        return out.tolist() == [7 * i for i in range(64)]
''')

EPILOGUE = '\nprint("afterwards:", correct_kernel_runs(), flush=True)\n'


def run(body, timeout=300, **env):
    """What the script printed (stdout), run in a fresh Python; it must exit normally."""
    script = PROLOGUE + textwrap.dedent(body) + EPILOGUE
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **env))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "afterwards: True" in done.stdout, done.stdout[-3000:]
    return done.stdout


def line(out, label):
    found = [text for text in out.splitlines() if text.startswith(label + " ")]
    assert found, out
    return found[0][len(label) + 1:]


# ---- an index megabytes past a buffer, into another GPUArray ----------------------------------------

FAR = r'''
small = gpuarray.zeros(1024, np.float32)
big = gpuarray.zeros(4 << 20, np.float32)          # 16 MiB, allocated next
far = SourceModule("__global__ void far(float* a, long long k) { a[k + threadIdx.x] = 7.0f; }").get_function("far")
for mib in (6, 12, 40):
    attempt(f"far{mib}", lambda: far(small, np.int64(1024 + (mib << 20) // 4), block=(32, 1, 1)))
print("big untouched:", not big.get().any())

# A map expression that writes (an assignment is an expression): 8 MiB past `y`.
from gpuedu.emulator.reduction import ReductionKernel
x = gpuarray.to_gpu(np.ones(1000, np.float32))
y = gpuarray.zeros(1000, np.float32)
victim = gpuarray.zeros(4 << 20, np.float32)
mapped = ReductionKernel(np.float32, neutral="0", reduce_expr="a+b", map_expr="(y[i + (2 << 20)] = x[i])",
                         arguments="const float* x, float* y")
attempt("map", lambda: mapped(x, y).get())
print("victim untouched:", not victim.get().any())
'''


def test_a_write_megabytes_past_a_buffer_faults_in_its_gap_instead_of_landing_in_another_array():
    out = run(FAR)
    for mib in (6, 12):
        assert (f"kernel 'far' thread (0,0,0) of block (0,0,0) wrote past the end of a 4096-byte allocation "
                f"(at byte offset {4096 + (mib << 20)}, {mib << 20} bytes past its end)") in line(out, f"far{mib}")
    # nearer the next buffer than its own: named as the gap below that one
    assert (f"kernel 'far' thread (0,0,0) of block (0,0,0) wrote {(64 - 40) << 20} bytes before the start of a "
            f"16777216-byte allocation") in line(out, "far40")
    assert "big untouched: True" in out
    assert ("kernel 'reduce_kernel_stage1' thread (0,0,0) of block (0,0,0) wrote past the end of a 4000-byte "
            "allocation (at byte offset 8388608, 8384608 bytes past its end)") in line(out, "map")
    assert "victim untouched: True" in out
