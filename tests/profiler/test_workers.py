"""The profiler's counts, racecheck's hazards and memcheck's errors do not depend on how many worker threads
the emulator runs a launch's blocks on (its instrumented launches run them in the grid's order, which the L2
model follows)."""
import numpy as np
import pytest

import gpuedu
from gpuedu.emulator import _module

SOURCE = r"""
__global__ void reduce(float* out, const float* x, int n) {
  __shared__ float s[128];
  int t = threadIdx.x, i = blockIdx.x * 256 + t;
  s[t] = (i < n ? x[i] : 0.0f) + (i + 128 < n ? x[i + 128] : 0.0f);
  __syncthreads();
  for (int k = 64; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
  if (t == 0) atomicAdd(out, s[0]);
}
__global__ void racy(unsigned* out) {
  __shared__ unsigned c;
  if (threadIdx.x == 0) c = 0;
  __syncthreads();
  c += 1;                                   // a race between the block's threads
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = c;
}
__global__ void one_past(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i <= n) x[i] = 1.0f; }
"""


@pytest.fixture(scope="module")
def emu(emulator_module):
    return emulator_module(SOURCE)


def under(n, what, run):
    before = _module.get_threads()
    _module.set_threads(n)
    try:
        with what() as session:
            run()
        return session
    finally:
        _module.set_threads(before)


def test_counts_racecheck_and_memcheck_are_the_same_with_one_worker_or_several(emu):
    mod, gpuarray = emu
    x = gpuarray.to_gpu(np.arange(100_000, dtype=np.float32) % 7)
    total = gpuarray.zeros(1, np.float32)
    counts = []
    for n in (1, 4):
        prof = under(n, gpuedu.profile, lambda: mod.get_function("reduce")(total, x, np.int32(100_000),
                                                                         block=(128, 1, 1), grid=(391, 1)))
        counts.append(dict(prof.kernels[0].metrics))
    assert counts[0] == counts[1] and counts[0]["smsp__sass_inst_executed_op_shared_atom.sum"] == 0

    out = gpuarray.zeros(8, np.uint32)
    hazards = [sorted((h["kind"], h["first"]["line"], h["second"]["line"]) for h in
                      under(n, gpuedu.racecheck, lambda: mod.get_function("racy")(out, block=(32, 1, 1),
                                                                                  grid=(8, 1))).hazards)
               for n in (1, 4)]
    assert hazards[0] == hazards[1] and hazards[0]

    y = gpuarray.zeros(99, np.float32)
    errors = [[(e["kind"], e["thread"], e["offset"], e["line"]) for e in
               under(n, gpuedu.memcheck, lambda: mod.get_function("one_past")(y, np.int32(99), block=(64, 1, 1),
                                                                              grid=(2, 1))).errors]
              for n in (1, 4)]
    assert errors[0] == errors[1] == [("out of bounds", (35, 0, 0), 396, "kernel.cu:18")]
