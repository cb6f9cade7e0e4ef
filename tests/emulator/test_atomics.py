"""Atomics with contention: every thread of a grid on one address, for each type CUDA defines.

The overload set is CUDA's, so these sources also compile with nvcc (test_compile_nvcc)."""
import numpy as np
import pytest

from gpuedu.emulator._args import In, InOut
from gpuedu.emulator.compiler import SourceModule

ATOMICS_SRC = r"""
extern "C" __global__ void int_atomics(const int* x, int* r, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  atomicAdd(&r[0], x[i]);
  atomicSub(&r[1], x[i]);
  atomicMin(&r[2], x[i]);
  atomicMax(&r[3], x[i]);
  atomicAnd(&r[4], ~(1 << (i % 31)));
  atomicOr(&r[5], 1 << (i % 31));
  atomicXor(&r[6], x[i]);
  atomicExch(&r[7], 7);
  // a CAS loop (the pattern for operations CUDA lacks): multiply into r[8] mod 1000003
  int old = r[8], assumed;
  do {
    assumed = old;
    old = atomicCAS(&r[8], assumed, (int)((long long)assumed * 3 % 1000003));
  } while (old != assumed);
}
extern "C" __global__ void unsigned_atomics(const unsigned* x, unsigned* r, unsigned long long* w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  atomicAdd(&r[0], x[i]);
  atomicMax(&r[1], x[i]);
  atomicMin(&r[2], x[i]);
  atomicInc(&r[3], 16u);          // wraps to 0 after 16
  atomicDec(&r[4], 10u);          // wraps to 10 below 0
  atomicAdd(&w[0], (unsigned long long)x[i] << 20);
  atomicMax(&w[1], (unsigned long long)x[i] * 3ull);
  atomicCAS(&w[2], 0ull, (unsigned long long)i + 1);   // exactly one thread wins
}
extern "C" __global__ void float_atomics(const float* x, float* f, double* d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  atomicAdd(&f[0], x[i]);
  atomicAdd(&d[0], (double)x[i]);
  atomicExch(&f[1], 2.5f);
  atomicAdd(&f[2], -1.0f);
}
"""

N = 5000


@pytest.fixture(scope="module")
def mod():
    return SourceModule(ATOMICS_SRC)


def launch(f, *args):
    f(*args, np.int32(N), block=(256, 1, 1), grid=((N + 255) // 256, 1))


def test_int_atomics(mod):
    x = np.random.default_rng(0).integers(-1000, 1000, N).astype(np.int32)
    r = np.array([0, 0, 2**31 - 1, -2**31, -1, 0, 0, 0, 1], np.int32)
    launch(mod.get_function("int_atomics"), In(x), InOut(r))
    xor = np.bitwise_xor.reduce(x)
    assert r[:8].tolist() == [x.sum(), -x.sum(), x.min(), x.max(), (-1) & ~(2**31 - 1), 2**31 - 1, xor, 7]
    assert r[8] == pow(3, N, 1000003)


def test_unsigned_and_64_bit_atomics(mod):
    x = np.random.default_rng(1).integers(0, 100000, N).astype(np.uint32)
    r = np.array([0, 0, 2**32 - 1, 0, 0], np.uint32)
    w = np.zeros(3, np.uint64)
    launch(mod.get_function("unsigned_atomics"), In(x), InOut(r), InOut(w))
    inc, dec = 0, 0
    for _ in range(N):
        inc = 0 if inc >= 16 else inc + 1
        dec = 10 if dec == 0 or dec > 10 else dec - 1
    assert r.tolist() == [int(x.sum()), int(x.max()), int(x.min()), inc, dec]
    assert int(w[0]) == int(x.astype(np.uint64).sum()) << 20
    assert int(w[1]) == int(x.max()) * 3
    assert 1 <= int(w[2]) <= N


def test_float_and_double_atomic_add(mod):
    x = np.random.default_rng(2).random(N, dtype=np.float32)
    f = np.zeros(3, np.float32)
    d = np.zeros(1, np.float64)
    launch(mod.get_function("float_atomics"), In(x), InOut(f), InOut(d))
    assert abs(f[0] - x.sum(dtype=np.float64)) < 1e-3 * N ** 0.5
    assert abs(d[0] - x.sum(dtype=np.float64)) < 1e-9
    assert f[1] == 2.5 and f[2] == -N
