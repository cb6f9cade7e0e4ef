"""setmaxnreg in the profile: the largest register count each warpgroup of a block asked for (counted), held against
the registers the block holds from its launch (ptxas's count a thread, what occupancy counts): within them, the
reasons say how the warpgroups share them; beyond them, that a GPU's setmaxnreg.inc would wait for ever."""
import shutil

import numpy as np
import pytest

import gpuedu

SETMAXNREG_SRC = r"""
// Warpgroup 0 gives registers back, the others take more: a producer and its consumers' shape.
__global__ void __launch_bounds__(384, 1) shares(float* out, float x)
{
    if (threadIdx.x < 128) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    else asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    out[threadIdx.x] = x * threadIdx.x;
}

// Every warpgroup takes 240: more than a block of 384 threads can hold (65,536 registers an SM).
__global__ void __launch_bounds__(384, 1) greedy(float* out, float x)
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
    out[threadIdx.x] = x * threadIdx.x;
}
"""

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="the registers a launch holds are ptxas's")


def _profiled(name, threads, options=()):
    backend = gpuedu.setup(verbose=False)
    if backend.name != "cpu":
        pytest.skip("the counts are the emulator's")
    from pycuda.compiler import SourceModule
    import pycuda.driver as drv
    f = SourceModule(SETMAXNREG_SRC, arch="sm_90a", options=list(options)).get_function(name)
    out = np.zeros(threads, np.float32)
    with gpuedu.profile(gpu="H200") as prof:
        f(drv.Out(out), np.float32(2.0), block=(threads, 1, 1))
    np.testing.assert_array_equal(out, 2.0 * np.arange(threads, dtype=np.float32))
    return prof.kernels[0]


def test_warpgroups_that_share_the_blocks_registers_are_said_to():
    rec = _profiled("shares", 384)
    regs = rec.metrics["launch__registers_per_thread"]
    assert rec.setmaxnreg == {"warpgroups": [40, 232, 232], "needed": 128 * 504, "allocated": regs * 384}
    assert 128 * 504 <= regs * 384
    assert "setmaxnreg (counted) moves registers between the block's warpgroups: 40, 232, 232 a thread" in \
        rec.reasons["sm__maximum_warps_per_active_cycle_pct"]


def test_warpgroups_asking_more_than_the_block_holds_are_told_a_gpu_would_wait_for_ever():
    rec = _profiled("greedy", 384)
    regs = rec.metrics["launch__registers_per_thread"]
    assert regs * 384 <= 65536 and rec.setmaxnreg["needed"] == 128 * 720 > rec.setmaxnreg["allocated"] == regs * 384
    assert "a setmaxnreg.inc waits until registers are free, for ever here" in \
        rec.reasons["launch__registers_per_thread"]


def test_a_kernel_without_setmaxnreg_says_nothing_of_it():
    backend = gpuedu.setup(verbose=False)
    if backend.name != "cpu":
        pytest.skip("the counts are the emulator's")
    from pycuda.compiler import SourceModule
    import pycuda.driver as drv
    f = SourceModule("__global__ void plain(float* o) { o[threadIdx.x] = 1.0f; }").get_function("plain")
    with gpuedu.profile(gpu="H200") as prof:
        f(drv.Out(np.zeros(32, np.float32)), block=(32, 1, 1))
    rec = prof.kernels[0]
    rec.metrics   # (the compiler's figures are read when the metrics are)
    assert rec.setmaxnreg is None
    assert "setmaxnreg" not in " ".join(rec.reasons.values())
