"""cuda_fp16.h: every conversion and operation is bit-for-bit numpy.float16 (round to nearest even).

NaN payloads may differ between implementations, so NaN results are compared by NaN-ness."""
from fractions import Fraction

import numpy as np
import pytest

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")

from gpuedu.emulator._args import In, InOut, Out
from gpuedu.emulator.compiler import SourceModule

FP16_SRC = r"""
#include <cuda_fp16.h>
extern "C" __global__ void half_to_float(const unsigned short* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __half2float(__ushort_as_half(in[i]));
}
extern "C" __global__ void float_to_half(const float* in, unsigned short* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __half_as_ushort(__float2half(in[i]));
}
extern "C" __global__ void float_to_half_rn(const float* in, __half* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(in[i]);
}
// op: 0 add, 1 sub, 2 mul, 3 div, 5 max, 6 min, 7 neg(a), 8 abs(a), 9 operators a*b+a, 10 sqrt(a)
extern "C" __global__ void binary(const __half* a, const __half* b, __half* out, int op, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half x = a[i], y = b[i], r;
  switch (op) {
    case 0: r = __hadd(x, y); break;
    case 1: r = __hsub(x, y); break;
    case 2: r = __hmul(x, y); break;
    case 3: r = __hdiv(x, y); break;
    case 5: r = __hmax(x, y); break;
    case 6: r = __hmin(x, y); break;
    case 7: r = __hneg(x); break;
    case 8: r = __habs(x); break;
    case 10: r = hsqrt(x); break;
    default: { __half t = x * y; t += x; r = t; }
  }
  out[i] = r;
}
extern "C" __global__ void fused(const __half* a, const __half* b, const __half* c, __half* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __hfma(a[i], b[i], c[i]);
}
extern "C" __global__ void compare(const __half* a, const __half* b, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __hlt(a[i], b[i]) | (__hgt(a[i], b[i]) << 1) | (__heq(a[i], b[i]) << 2) | ((a[i] < b[i]) << 3);
}
// half2: pairs built from floats, combined lane-wise, read back as floats.
extern "C" __global__ void pairs(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half2 p = __floats2half2_rn(x[2 * i], x[2 * i + 1]);
  __half2 q = __halves2half2(__float2half(y[2 * i]), __float2half(y[2 * i + 1]));
  __half2 s = __hadd2(p, q), m = __hmul2(p, q), f = __hfma2(p, q, s);
  float2 sf = __half22float2(s);
  out[6 * i + 0] = sf.x; out[6 * i + 1] = sf.y;
  out[6 * i + 2] = __low2float(m); out[6 * i + 3] = __high2float(m);
  out[6 * i + 4] = __half2float(__low2half(f)); out[6 * i + 5] = __half2float(__high2half(f));
}
// Shuffling halves between lanes moves their bits unchanged.
extern "C" __global__ void shuffle_halves(__half* x) {
  __half v = x[threadIdx.x];
  x[threadIdx.x] = __shfl_xor_sync(0xffffffffu, v, 1);
}
extern "C" __global__ void sum_halves(const __half* x, __half* total, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(total, x[i]);
}
"""

ALL = np.arange(65536, dtype=np.uint16)


@pytest.fixture(scope="module")
def mod():
    return SourceModule(FP16_SRC, no_extern_c=True)


def launch(f, n, *args):
    f(*args, np.int32(n), block=(256, 1, 1), grid=((n + 255) // 256, 1))


def same_half(got, want):
    got, want = np.asarray(got, np.float16), np.asarray(want, np.float16)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    bad = np.flatnonzero(got.view(np.uint16)[~nan] != want.view(np.uint16)[~nan])
    assert bad.size == 0, f"{bad.size} mismatches, e.g. got {got[~nan][bad[:5]]} want {want[~nan][bad[:5]]}"


def test_all_half_bit_patterns_to_float(mod):
    out = np.zeros(65536, np.float32)
    launch(mod.get_function("half_to_float"), 65536, In(ALL), Out(out))
    want = ALL.view(np.float16).astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(out), nan)
    assert np.array_equal(out[~nan].view(np.uint32), want[~nan].view(np.uint32))


def test_float_to_half_every_half_and_every_midpoint(mod):
    values = ALL.view(np.float16).astype(np.float32)
    finite = np.sort(values[np.isfinite(values)])
    mids = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)   # exact ties
    nudged = np.concatenate([np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))])
    edges = np.array([65504, 65519.99, 65520, 65536, 1e30, -65520, 2.0**-24, 2.0**-25, 2.0**-25 * 1.0001,
                      2.0**-26, 1e-30, -0.0, np.inf, -np.inf, np.nan], np.float32)
    x = np.concatenate([values, mids, nudged, edges]).astype(np.float32)
    out = np.zeros(x.size, np.uint16)
    launch(mod.get_function("float_to_half"), x.size, In(x), Out(out))
    same_half(out.view(np.float16), x.astype(np.float16))


def test_float_to_half_random_sweep(mod):
    rng = np.random.default_rng(16)
    x = rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    out = np.zeros(x.size, np.float16)
    launch(mod.get_function("float_to_half_rn"), x.size, In(x), Out(out))
    same_half(out, x.astype(np.float16))


def random_halves(rng, n):
    return rng.integers(0, 65536, n, dtype=np.uint32).astype(np.uint16).view(np.float16)


@pytest.mark.parametrize("op,ref", [
    (0, np.add), (1, np.subtract), (2, np.multiply), (3, np.divide),
    (5, np.fmax), (6, np.fmin), (7, lambda a, b: -a), (8, lambda a, b: np.abs(a)),
    (9, lambda a, b: a * b + a), (10, lambda a, b: np.sqrt(a)),
])
def test_binary_ops_random_sweep(mod, op, ref):
    rng = np.random.default_rng(op)
    n = 1_000_000 if op <= 3 else 200_000
    a, b = random_halves(rng, n), random_halves(rng, n)
    out = np.zeros(n, np.float16)
    mod.get_function("binary")(In(a), In(b), Out(out), np.int32(op), np.int32(n),
                               block=(256, 1, 1), grid=((n + 255) // 256, 1))
    with np.errstate(all="ignore"):
        same_half(out, ref(a, b))


def exact_fma(a, b, c):
    """a*b+c rounded once to float16, with exact rational arithmetic (ties to even)."""
    s = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    lo = np.float16(float(s))          # a neighbour; search the two halves around s
    cands = [lo, np.nextafter(lo, np.float16(np.inf)), np.nextafter(lo, np.float16(-np.inf))]
    cands = [h for h in cands if np.isfinite(h)]
    best = min(cands, key=lambda h: (abs(Fraction(float(h)) - s), int(h.view(np.uint16)) & 1))
    if abs(s) >= 65520:
        return np.float16(np.inf if s > 0 else -np.inf)
    if best == 0 and s == 0:
        return np.float16(float(a) * float(b) + float(c))    # signed zero as IEEE gives it
    return best


def test_fma_random_sweep(mod):
    rng = np.random.default_rng(7)
    n = 1_000_000
    # finite values in a moderate range, so most products and sums neither overflow nor vanish
    a, b, c = (rng.uniform(-300, 300, n).astype(np.float16) for _ in range(3))
    out = np.zeros(n, np.float16)
    mod.get_function("fused")(In(a), In(b), In(c), Out(out), np.int32(n), block=(256, 1, 1),
                              grid=((n + 255) // 256, 1))
    approx = (a.astype(np.float64) * b + c).astype(np.float16)  # double rounding: wrong only near ties
    differ = np.flatnonzero(out.view(np.uint16) != approx.view(np.uint16))
    assert differ.size < n // 1000
    for i in differ:
        assert out[i] == exact_fma(a[i], b[i], c[i]), (a[i], b[i], c[i])
    # a sample of the agreeing ones checked exactly too
    for i in rng.choice(n, 300, replace=False):
        want = exact_fma(a[i], b[i], c[i])
        assert out[i].view(np.uint16) == want.view(np.uint16) or (out[i] == want == 0)


def test_comparisons(mod):
    rng = np.random.default_rng(3)
    n = 100_000
    a, b = random_halves(rng, n), random_halves(rng, n)
    b[:1000] = a[:1000]
    out = np.zeros(n, np.int32)
    launch(mod.get_function("compare"), n, In(a), In(b), Out(out))
    want = (a < b) * 1 | (a > b) * 2 | (a == b) * 4 | (a < b) * 8
    np.testing.assert_array_equal(out, want)


def test_half2_pairs(mod):
    rng = np.random.default_rng(4)
    n = 50_000
    x = rng.uniform(-100, 100, 2 * n).astype(np.float32)
    y = rng.uniform(-100, 100, 2 * n).astype(np.float32)
    out = np.zeros(6 * n, np.float32)
    launch(mod.get_function("pairs"), n, In(x), In(y), Out(out))
    p, q = x.astype(np.float16), y.astype(np.float16)
    s, m = p + q, p * q
    f = np.array([exact_fma(*t) for t in zip(p[:200], q[:200], s[:200])], np.float16)  # first 100 pairs
    got = out.reshape(n, 6)
    same_half(got[:, 0:2].reshape(-1), s)
    same_half(got[:, 2:4].reshape(-1), m)
    same_half(got[:, 4:6].reshape(-1)[:200], f)


def test_shuffle_and_atomic_add_on_halves(mod):
    x = np.arange(32, dtype=np.float16)
    y = x.copy()
    mod.get_function("shuffle_halves")(InOut(y), block=(32, 1, 1))
    np.testing.assert_array_equal(y, x[np.arange(32) ^ 1])
    ones = np.ones(1000, np.float16)
    total = np.zeros(1, np.float16)
    mod.get_function("sum_halves")(In(ones), InOut(total), np.int32(1000), block=(256, 1, 1), grid=(4, 1))
    assert total[0] == 1000
