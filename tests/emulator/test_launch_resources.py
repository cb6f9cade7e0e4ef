"""Loading many modules must not exhaust the process's memory mappings.

Linux allows about 65,000 mappings a process; each fiber stack has a guard page
(two mappings), so the stacks are shared by every module rather than mapped per
module.  A long notebook or a test run loads hundreds of modules.
"""
import numpy as np

from gpuedu.emulator import driver as drv
from gpuedu.emulator.compiler import SourceModule


def _mappings():
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def _block_reverse(tag):
    # A distinct source per module (the tag), each with a barrier so it runs on fibers.
    return SourceModule(f"""
    __global__ void reverse_{tag}(float *x)
    {{
        __shared__ float tile[64];
        int t = threadIdx.x;
        tile[t] = x[t];
        __syncthreads();
        x[t] = tile[63 - t];
    }}
    """).get_function(f"reverse_{tag}")


def test_fiber_modules_share_one_stack_pool():
    x = np.arange(64, dtype=np.float32)
    before = None
    for i in range(12):
        kernel = _block_reverse(f"m{i}")
        out = x.copy()
        kernel(drv.InOut(out), block=(64, 1, 1), grid=(1, 1))
        np.testing.assert_array_equal(out, x[::-1])
        if i == 1:
            before = _mappings()   # the pool exists by now
    grown = _mappings() - before
    # Each further module adds its own library mappings (a handful), never a stack pool (2,049).
    assert grown < 10 * 60, f"{grown} new mappings for 10 modules"
