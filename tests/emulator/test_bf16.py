"""cuda_bf16.h: every conversion bit for bit against NumPy references that round by definition (of the two
bfloat16s around a value, the one the rounding mode picks), the arithmetic against float64-computed-then-rounded
references, NaN as NVIDIA's header gives it (0x7fff from every conversion), bfloat162's layout, shuffles,
atomics, WMMA with bfloat16 inputs, and the header's refusal inside extern "C"."""
from fractions import Fraction

import numpy as np
import pytest

from gpuedu.emulator._args import In, InOut, Out
from gpuedu.emulator._errors import CompileError
from gpuedu.emulator.compiler import SourceModule
from gpuedu.exercises import lesson08

BF16_SRC = r"""
#include <cuda_bf16.h>
#include <mma.h>
using namespace nvcuda;

// Bits in, bits out: the reinterpretations, and bfloat16 -> float.
extern "C" __global__ void from_bits(const unsigned short* in, unsigned short* same, short* same_signed,
                                     float* value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  same[i] = __bfloat16_as_ushort(__ushort_as_bfloat16(in[i]));
  same_signed[i] = __bfloat16_as_short(__short_as_bfloat16((short)in[i]));
  value[i] = __bfloat162float(__ushort_as_bfloat16(in[i]));
}
// float -> bfloat16, one column per way of writing it.
extern "C" __global__ void from_float(const float* x, unsigned short* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __nv_bfloat16 assigned;
  assigned = x[i];
  const nv_bfloat16 constructed(x[i]);
  __nv_bfloat16 r[8] = {__float2bfloat16(x[i]), __float2bfloat16_rn(x[i]), __float2bfloat16_rz(x[i]),
                        __float2bfloat16_rd(x[i]), __float2bfloat16_ru(x[i]), constructed, assigned,
                        __high2bfloat16(__float2bfloat162_rn(x[i]))};
  for (int k = 0; k < 8; ++k) out[k * n + i] = __bfloat16_as_ushort(r[k]);
}
extern "C" __global__ void from_double(const double* x, unsigned short* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __nv_bfloat16 assigned;
  assigned = x[i];
  __nv_bfloat16 r[3] = {__double2bfloat16(x[i]), __nv_bfloat16(x[i]), assigned};
  for (int k = 0; k < 3; ++k) out[k * n + i] = __bfloat16_as_ushort(r[k]);
}
extern "C" __global__ void from_ints(const int* x32, const long long* x64, unsigned short* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int a = x32[i];
  unsigned u = (unsigned)a;
  long long l = x64[i];
  unsigned long long ul = (unsigned long long)l;
  __nv_bfloat16 from_int, from_ll;
  from_int = a;
  from_ll = l;
  __nv_bfloat16 r[24] = {
      __int2bfloat16_rn(a), __int2bfloat16_rz(a), __int2bfloat16_rd(a), __int2bfloat16_ru(a),
      __uint2bfloat16_rn(u), __uint2bfloat16_rz(u), __uint2bfloat16_rd(u), __uint2bfloat16_ru(u),
      __short2bfloat16_rn((short)a), __ushort2bfloat16_rn((unsigned short)a),
      __ll2bfloat16_rn(l), __ll2bfloat16_rz(l), __ll2bfloat16_rd(l), __ll2bfloat16_ru(l),
      __ull2bfloat16_rn(ul), __ull2bfloat16_rz(ul), __ull2bfloat16_rd(ul), __ull2bfloat16_ru(ul),
      __nv_bfloat16(a), __nv_bfloat16(u), __nv_bfloat16(l), __nv_bfloat16(ul), from_int, from_ll};
  for (int k = 0; k < 24; ++k) out[k * n + i] = __bfloat16_as_ushort(r[k]);
}
extern "C" __global__ void to_ints(const __nv_bfloat16* x, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int r[8] = {__bfloat162int_rn(x[i]), __bfloat162int_rz(x[i]), __bfloat162int_rd(x[i]), __bfloat162int_ru(x[i]),
              (int)__bfloat162uint_rn(x[i]), (int)__bfloat162uint_rz(x[i]), (int)__bfloat162uint_rd(x[i]),
              (int)__bfloat162uint_ru(x[i])};
  for (int k = 0; k < 8; ++k) out[k * n + i] = r[k];
}
// Two operands, one column per operation.
extern "C" __global__ void arith(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __nv_bfloat16 x = a[i], y = b[i], c[4] = {x, x, x, x};
  c[0] += y; c[1] -= y; c[2] *= y; c[3] /= y;
  __nv_bfloat16 r[22] = {__hadd(x, y), __hsub(x, y), __hmul(x, y), __hdiv(x, y),
                         __hadd_rn(x, y), __hsub_rn(x, y), __hmul_rn(x, y),
                         x + y, x - y, x * y, x / y, c[0], c[1], c[2], c[3],
                         __hmax(x, y), __hmin(x, y), __hmax_nan(x, y), __hmin_nan(x, y),
                         __hneg(x), __habs(x), -x};
  for (int k = 0; k < 22; ++k) out[k * n + i] = r[k];
}
extern "C" __global__ void fused(const __nv_bfloat16* a, const __nv_bfloat16* b, const __nv_bfloat16* c,
                                 __nv_bfloat16* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = __hfma(a[i], b[i], c[i]);
  // the same three in the high halves of pairs whose low halves hold other numbers
  __nv_bfloat162 p = __hfma2(__halves2bfloat162(c[i], a[i]), __halves2bfloat162(b[i], b[i]),
                             __halves2bfloat162(a[i], c[i]));
  out[n + i] = __high2bfloat16(p);
}
// One function of one operand per column.
extern "C" __global__ void unary(const __nv_bfloat16* a, __nv_bfloat16* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __nv_bfloat16 x = a[i];
  __nv_bfloat162 twin = __bfloat162bfloat162(x);
  __nv_bfloat16 r[17] = {hsqrt(x), hrcp(x), hfloor(x), hceil(x), htrunc(x), hrint(x),
                         hrsqrt(x), hexp(x), hexp2(x), hlog(x), hlog2(x), htanh(x), hsin(x), hcos(x),
                         __low2bfloat16(h2sqrt(twin)), __high2bfloat16(h2exp(twin)), __low2bfloat16(h2rsqrt(twin))};
  for (int k = 0; k < 17; ++k) out[k * n + i] = r[k];
}
extern "C" __global__ void compare(const __nv_bfloat16* a, const __nv_bfloat16* b, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __nv_bfloat16 x = a[i], y = b[i];
  bool r[18] = {__heq(x, y), __hne(x, y), __hlt(x, y), __hle(x, y), __hgt(x, y), __hge(x, y),
                __hequ(x, y), __hneu(x, y), __hltu(x, y), __hleu(x, y), __hgtu(x, y), __hgeu(x, y),
                x == y, x != y, x < y, x <= y, x > y, x >= y};
  int bits = 0;
  for (int k = 0; k < 18; ++k) bits |= (int)r[k] << k;
  out[i] = bits;
  out[n + i] = (int)__hisnan(x) | ((__hisinf(x) & 3) << 1);   // __hisinf: 1, or -1 (3 in two bits)
}
// Pairs: built from floats (x[2i] in .x, the low half), taken apart, combined lane by lane; each result is
// written as the 32 bits of the pair, so its layout is checked too.
#define PAIR_RESULTS 26
extern "C" __global__ void pairs(const float* x, const float* y, unsigned* out, float* floats, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __nv_bfloat162 p = __floats2bfloat162_rn(x[2 * i], x[2 * i + 1]);
  __nv_bfloat162 q = __float22bfloat162_rn(make_float2(y[2 * i], y[2 * i + 1]));
  __nv_bfloat162 c[4] = {p, p, p, p};
  c[0] += q; c[1] -= q; c[2] *= q; c[3] /= q;
  __nv_bfloat162 r[PAIR_RESULTS] = {
      p, q, __float2bfloat162_rn(x[2 * i]), __halves2bfloat162(__low2bfloat16(p), __high2bfloat16(q)),
      __bfloat162bfloat162(__high2bfloat16(p)), __lows2bfloat162(p, q), __highs2bfloat162(p, q),
      __low2bfloat162(p), __high2bfloat162(q), __lowhigh2highlow(p), make_bfloat162(q.y, p.x),
      __hadd2(p, q), __hsub2(p, q), __hmul2(p, q), __h2div(p, q), __hfma2(p, q, p), __hneg2(p), __habs2(p),
      __hmax2(p, q), __hmin2(p, q), p + q, p - q, p * q, p / q, -p, c[0]};
  for (int k = 0; k < PAIR_RESULTS; ++k) {
    unsigned bits;
    memcpy(&bits, &r[k], 4);
    out[k * n + i] = bits;
  }
  for (int k = 1; k < 4; ++k) memcpy(&out[(PAIR_RESULTS + k - 1) * n + i], &c[k], 4);
  float2 f = __bfloat1622float2(p);
  floats[4 * i + 0] = f.x;
  floats[4 * i + 1] = f.y;
  floats[4 * i + 2] = __low2float(q);
  floats[4 * i + 3] = __high2float(q);
}
// Shuffles move a bfloat16's and a bfloat162's bits unchanged.
extern "C" __global__ void shuffles(const __nv_bfloat16* x, __nv_bfloat16* one, __nv_bfloat162* two) {
  int lane = threadIdx.x;
  __nv_bfloat16 v = x[lane];
  __nv_bfloat162 w = __halves2bfloat162(v, __hneg(v));
  one[lane] = __shfl_sync(0xffffffffu, v, 3);
  one[32 + lane] = __shfl_down_sync(0xffffffffu, v, 1);
  two[lane] = __shfl_xor_sync(0xffffffffu, w, 1);
  two[32 + lane] = __shfl_up_sync(0xffffffffu, w, 2);
}
extern "C" __global__ void accumulate(__nv_bfloat16* total, __nv_bfloat162* pair_total, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  atomicAdd(total, CUDART_ONE_BF16);
  atomicAdd(pair_total, __floats2bfloat162_rn(0.5f, 1.0f));
}
// WMMA with bfloat16 inputs and a float accumulator (sm_80 and later): C = A (16 x K, row-major) B (K x 16,
// column-major).
extern "C" __global__ void wmma_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int K) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, A + k, K);
    wmma::load_matrix_sync(b, B + k, K);
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(C, acc, 16, wmma::mem_row_major);
}
"""

BLOCK = 256
ALL = np.arange(65536, dtype=np.uint32).astype(np.uint16)
NAN = 0x7FFF                       # the canonical NaN
assert NAN == lesson08.CANONICAL_NAN


@pytest.fixture(scope="module")
def mod():
    return SourceModule(BF16_SRC, no_extern_c=True)


def launch(mod, name, n, *args):
    mod.get_function(name)(*args, np.int32(n), block=(BLOCK, 1, 1), grid=((n + BLOCK - 1) // BLOCK, 1))


def value(bits):
    """float64 values of bfloat16 bit patterns (exact: a bfloat16 is the upper half of a float32)."""
    with np.errstate(invalid="ignore"):       # (a signalling NaN is quietened)
        return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def is_nan(bits):
    return (np.asarray(bits).astype(np.uint32) & 0x7FFF) > 0x7F80


def rounded(x, mode="rn"):
    """The bfloat16 bits of float64 x rounded by definition: lo, the largest bfloat16 <= |x| (|x|'s float32
    truncation, its lower 16 bits dropped), or the next one up, hi; which one the mode says (rn: the nearer,
    ties to the even one; rz: lo; ru, rd: hi where x is inexact and positive, or negative). The magnitude
    past the largest bfloat16 is the infinity (bits 0x7f80), taken as 2^128 to place the last midpoint.
    Every NaN gives 0x7fff."""
    x = np.asarray(x, np.float64)
    nan = np.isnan(x)
    negative = np.signbit(x)
    mag = np.abs(np.where(nan, 0.0, x))
    with np.errstate(over="ignore"):
        f = mag.astype(np.float32)
    f = np.where(f.astype(np.float64) > mag, np.nextafter(f, np.float32(0)), f)   # truncated to float32
    lo = (f.view(np.uint32) >> 16).astype(np.uint32)
    hi = lo + 1
    lo_value = value(lo)
    hi_value = np.where(hi == 0x7F80, 2.0**128, value(np.minimum(hi, 0x7F80)))
    exact = lo_value == mag
    mid = (lo_value + hi_value) / 2            # exact in float64: 9 significant bits
    up = {"rn": (mag > mid) | ((mag == mid) & (lo & 1 == 1)),
          "rz": np.zeros_like(exact),
          "ru": ~negative,
          "rd": negative}[mode] & ~exact
    bits = np.where(up, hi, lo) | (negative.astype(np.uint32) << 15)
    return np.where(nan, NAN, bits).astype(np.uint16)


def assert_bits(got, want, label, nan_any=False):
    """Bit for bit; with nan_any, a NaN is matched by any NaN (an arithmetic NaN's bits are PTX's to choose)."""
    got, want = np.asarray(got).astype(np.uint16), np.asarray(want).astype(np.uint16)
    ok = got == want
    if nan_any:
        ok |= is_nan(got) & is_nan(want)
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, (f"{label}: {bad.size} of {got.size} differ, e.g. at {bad[:4].tolist()}: got "
                           f"{[hex(v) for v in got[bad[:4]]]}, want {[hex(v) for v in want[bad[:4]]]}")


# ---- the reference itself, against exact arithmetic ---------------------------------------------------
def exact_rounded(q, mode="rn"):
    """The bfloat16 bits of a nonzero Fraction (or int) q, with exact arithmetic: near |q| the bfloat16s are
    the multiples of step = 2^(e-7), 2^e <= |q| < 2^(e+1) (e no lower than -126: subnormals share its step;
    past the largest finite bfloat16, 255 * 2^120, the next one up is the infinity)."""
    negative, mag = q < 0, abs(Fraction(q))
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    if Fraction(2) ** e > mag:
        e -= 1
    step = Fraction(2) ** (min(max(e, -126), 127) - 7)
    k = min(mag // step, 255)                # lo = k step <= mag < (k + 1) step = hi (hi = 2^128: infinity)
    up = {"rn": mag - k * step > step / 2 or (mag - k * step == step / 2 and k % 2 == 1),
          "rz": False, "ru": not negative, "rd": negative}[mode] and k * step != mag
    r = (k + up) * step
    bits = 0x7F80 if r >= 2**128 else int(np.float32(float(r)).view(np.uint32)) >> 16    # r: 8 bits, exact
    return bits | (negative << 15)


def test_the_reference_rounds_as_exact_arithmetic_does():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.integers(0, 2**64, 300, dtype=np.uint64).view(np.float64),
                        rng.standard_normal(300) * 2.0 ** rng.integers(-140, 128, 300),
                        (value(rng.integers(1, 0x7F7F, 100)) * (1 + 2.0**-8)),          # ties
                        [2.0**-134, 2.0**-135, 3 * 2.0**-134, 2.0**128 - 2.0**119, 2.0**128 - 2.0**120, 1e300]])
    x = x[np.isfinite(x)]
    for mode in ("rn", "rz", "rd", "ru"):
        got = rounded(x, mode)
        want = [exact_rounded(Fraction(float(v)), mode) for v in x]
        assert got.tolist() == want, mode


# ---- conversions ----------------------------------------------------------------------------------------
def test_every_bfloat16_to_float_and_its_bits_unchanged(mod):
    same, same_signed = np.zeros(65536, np.uint16), np.zeros(65536, np.int16)
    out = np.zeros(65536, np.float32)
    launch(mod, "from_bits", 65536, In(ALL), Out(same), Out(same_signed), Out(out))
    np.testing.assert_array_equal(same, ALL)
    np.testing.assert_array_equal(same_signed, ALL.view(np.int16))
    # bfloat16 -> float is exact: the bits moved up by 16, NaN payloads included
    np.testing.assert_array_equal(out.view(np.uint32), ALL.astype(np.uint32) << 16)


def float_inputs(rng):
    """Every bfloat16 as a float, every tie between neighbours (both signs) and their float neighbours,
    float subnormals, the overflow edge, infinities, NaNs, and a million random bit patterns."""
    finite = ALL[(ALL & 0x7FFF) < 0x7F80].astype(np.uint32)
    ties = (finite << 16) | 0x8000
    bits = np.concatenate([
        ALL.astype(np.uint32) << 16, ties, ties + 1, ties - 1,
        rng.integers(0, 0x800000, 50_000, dtype=np.uint32) | rng.choice([0, 0x80000000], 50_000).astype(np.uint32),
        np.array([0x7F7F7FFF, 0x7F7F8000, 0x7F7F8001, 0x7F7FFFFF, 0xFF7F8000, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
                  0x7FC00000, 0xFFC00000, 0x7FFFFFFF, 0x7F800001, 0x7FBFFFFF, 0x00000001, 0x00008000, 0x00018000,
                  0x80008000, 0x00007FFF, 0x007FFFFF, 0x00800000], np.uint32),
        rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32),
    ])
    return bits.view(np.float32)


def test_float_to_bfloat16_in_every_mode(mod):
    x = float_inputs(np.random.default_rng(1))
    n = x.size
    out = np.zeros((8, n), np.uint16)
    launch(mod, "from_float", n, In(x), Out(out))
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)
    nearest = rounded(x64, "rn")
    # the lesson 08 exercise's reference agrees (its canonical NaN, ties to even, Inf past the largest)
    assert_bits(lesson08.float_to_bf16_spec(x, n), nearest, "lesson 08's float_to_bf16_spec")
    for k, (label, mode) in enumerate([("__float2bfloat16", "rn"), ("__float2bfloat16_rn", "rn"),
                                       ("__float2bfloat16_rz", "rz"), ("__float2bfloat16_rd", "rd"),
                                       ("__float2bfloat16_ru", "ru"), ("nv_bfloat16(float)", "rn"),
                                       ("operator=(float)", "rn"), ("__float2bfloat162_rn", "rn")]):
        assert_bits(out[k], rounded(x64, mode), label)
    nan = np.isnan(x)
    assert nan.sum() > 1000 and np.all(out[:, nan] == NAN)      # every NaN, signalling ones too: 0x7fff
    # bfloat16 has float's exponents: nothing overflows but the roundings past the largest finite value
    big = (np.abs(x) > 3.3895e38) & np.isfinite(x)
    assert big.any() and np.all(np.isinf(value(out[1, big])) == (np.abs(x64[big]) >= 2.0**128 - 2.0**119))


def test_double_to_bfloat16_rounds_once(mod):
    rng = np.random.default_rng(2)
    mids = (value(np.arange(0x7F7F)) + value(np.arange(1, 0x7F80))) / 2       # every positive tie
    # A tie nudged by far less than float's last bit: rounded to float first, it would be a tie again.
    nudge = np.concatenate([mids * (1 + 2.0**-40), mids * (1 - 2.0**-40), mids])
    random = (rng.choice([-1.0, 1.0], 300_000) * (1 + rng.random(300_000))
              * 2.0 ** rng.integers(-140, 129, 300_000))
    x = np.concatenate([nudge, -nudge, random, rng.integers(0, 2**64, 100_000, dtype=np.uint64).view(np.float64),
                        [0.0, -0.0, 1e-300, -1e-300, 2.0**-134, 2.0**-134 * (1 + 2.0**-50), 2.0**128,
                         2.0**128 - 2.0**119, (2.0**128 - 2.0**119) * (1 - 2.0**-50), 1e300, np.inf, -np.inf, np.nan]])
    out = np.zeros((3, x.size), np.uint16)
    launch(mod, "from_double", x.size, In(x), Out(out))
    want = rounded(x, "rn")
    for k, label in enumerate(["__double2bfloat16", "nv_bfloat16(double)", "operator=(double)"]):
        assert_bits(out[k], want, label)


def bit_length(m):
    """The bit length of each uint64, exactly (float64 would round the large ones)."""
    m, n = m.copy(), np.zeros(m.shape, np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        big = m >= np.uint64(1 << s)
        n += s * big
        m = np.where(big, m >> np.uint64(s), m)
    return n + (m > 0)


def rounded_int(m, negative, mode):
    """The bfloat16 bits of the integer +-m (m uint64), with integer arithmetic: keep the top 8 bits, look at
    the rest."""
    shift = np.maximum(bit_length(m) - 8, 0).astype(np.uint64)
    q, rest = m >> shift, m & ((np.uint64(1) << shift) - np.uint64(1))
    half = np.where(shift > 0, np.uint64(1) << (np.maximum(shift, 1) - np.uint64(1)), 0)    # none when exact
    up = {"rn": (rest > half) | ((rest == half) & (shift > 0) & (q & np.uint64(1) == 1)),
          "rz": np.zeros(m.shape, bool), "ru": (rest > 0) & ~negative, "rd": (rest > 0) & negative}[mode]
    v = (q + up).astype(np.float64) * 2.0 ** shift.astype(np.float64)        # at most 9 bits: exact
    bits = (v.astype(np.float32).view(np.uint32) >> 16) | (negative.astype(np.uint32) << 15)
    return bits.astype(np.uint16)


def test_integers_to_bfloat16(mod):
    rng = np.random.default_rng(3)
    n = 200_000
    # ties and their neighbours at every scale (an odd 9-bit top, shifted), in 32 and 64 bits
    tops = rng.integers(256, 512, n, dtype=np.int64) | 1
    x64 = (tops << rng.integers(0, 55, n)) + rng.integers(-1, 2, n)
    x64[: n // 2] = rng.integers(-2**63, 2**63 - 1, n // 2, dtype=np.int64, endpoint=True)
    x64[n // 2:] *= rng.choice([-1, 1], n - n // 2)
    x64[n // 2: n // 2 + 8] = [0, 1, -1, 2**63 - 1, -2**63, 2**53 + 1, (2**8 + 1) << 54, -((2**8 + 1) << 54) + 1]
    x32 = np.where(rng.random(n) < 0.5, rng.integers(-2**31, 2**31, n),
                   ((tops << rng.integers(0, 23, n)) + rng.integers(-1, 2, n)) * rng.choice([-1, 1], n))
    x32 = x32.astype(np.int32)
    x32[:10] = [0, 1, -1, 255, 256, 257, 259, 2**31 - 1, -2**31, 65535]
    out = np.zeros((24, n), np.uint16)
    launch(mod, "from_ints", n, In(x32), In(x64), Out(out))

    def signed(v):
        v = v.astype(np.int64) if v.dtype != np.int64 else v
        negative = v < 0
        return np.where(negative, (0 - v.view(np.uint64)), v.view(np.uint64)).astype(np.uint64), negative

    def unsigned(v):
        return v.astype(np.uint64), np.zeros(v.shape, bool)

    u32 = x32.view(np.uint32)
    u64 = x64.view(np.uint64)
    columns = [(signed(x32), m) for m in ("rn", "rz", "rd", "ru")] + \
              [(unsigned(u32), m) for m in ("rn", "rz", "rd", "ru")] + \
              [(signed(x32.astype(np.int16)), "rn"), (unsigned(x32.astype(np.uint16)), "rn")] + \
              [(signed(x64), m) for m in ("rn", "rz", "rd", "ru")] + \
              [(unsigned(u64), m) for m in ("rn", "rz", "rd", "ru")] + \
              [(signed(x32), "rn"), (unsigned(u32), "rn"), (signed(x64), "rn"), (unsigned(u64), "rn"),
               (signed(x32), "rn"), (signed(x64), "rn")]
    names = ["int_rn", "int_rz", "int_rd", "int_ru", "uint_rn", "uint_rz", "uint_rd", "uint_ru", "short_rn",
             "ushort_rn", "ll_rn", "ll_rz", "ll_rd", "ll_ru", "ull_rn", "ull_rz", "ull_rd", "ull_ru",
             "nv_bfloat16(int)", "nv_bfloat16(unsigned)", "nv_bfloat16(long long)", "nv_bfloat16(unsigned long long)",
             "operator=(int)", "operator=(long long)"]
    for k, (((m, negative), mode), name) in enumerate(zip(columns, names)):
        assert_bits(out[k], rounded_int(m, negative, mode), name)
    # the integer reference agrees with exact arithmetic on a sample, 64-bit near-ties included
    for i in list(range(n // 2, n // 2 + 8)) + rng.choice(n, 200).tolist():
        for mode, col in (("rn", 10), ("rz", 11), ("rd", 12), ("ru", 13)):
            assert out[col, i] == exact_rounded(int(x64[i]), mode), (int(x64[i]), mode)


def test_bfloat16_to_integers(mod):
    out = np.zeros((8, 65536), np.int32)
    launch(mod, "to_ints", 65536, In(ALL), Out(out))
    v = value(ALL)
    nan = np.isnan(v)
    for k, (fn, lo, hi) in enumerate([(np.rint, -2**31, 2**31 - 1), (np.trunc, -2**31, 2**31 - 1),
                                      (np.floor, -2**31, 2**31 - 1), (np.ceil, -2**31, 2**31 - 1),
                                      (np.rint, 0, 2**32 - 1), (np.trunc, 0, 2**32 - 1),
                                      (np.floor, 0, 2**32 - 1), (np.ceil, 0, 2**32 - 1)]):
        with np.errstate(invalid="ignore"):
            want = np.where(nan, 0, np.clip(fn(v), lo, hi)).astype(np.int64).astype(np.uint32).view(np.int32)
        np.testing.assert_array_equal(out[k], want, err_msg=f"column {k}")


# ---- arithmetic -----------------------------------------------------------------------------------------
def random_bf16(rng, n):
    return rng.integers(0, 65536, n, dtype=np.uint32).astype(np.uint16)


def tiny_results(rng, n):
    """Operands whose products and quotients fall below 2^-126, where float has fewer bits than elsewhere."""
    a = rounded(rng.uniform(1, 2, n) * 2.0 ** rng.integers(-80, -50, n) * rng.choice([-1, 1], n))
    b = rounded(rng.uniform(1, 2, n) * 2.0 ** rng.integers(-80, -50, n))
    c = rounded(rng.uniform(1, 2, n) * 2.0 ** rng.integers(-133, -120, n))       # subnormal and near
    d = rounded(rng.uniform(1, 2, n) * 2.0 ** rng.integers(0, 10, n))
    return np.concatenate([a, c, c]), np.concatenate([b, d, c])


def test_arithmetic_rounds_once(mod):
    rng = np.random.default_rng(4)
    n = 400_000
    a, b = random_bf16(rng, n), random_bf16(rng, n)
    ta, tb = tiny_results(rng, 30_000)
    a, b = np.concatenate([a, ta]), np.concatenate([b, tb])
    b[:2000] = a[:2000]                                       # equal operands (and x - x)
    b[2000:4000] = a[2000:4000] ^ 0x8000                       # opposite ones (and x + -x)
    a[4000:4004], b[4000:4004] = [0, 0x8000, 0, 0x8000], [0x8000, 0, 0, 0x8000]     # zeros of each sign
    n = a.size
    out = np.zeros((22, n), np.uint16)
    launch(mod, "arith", n, In(a), In(b), Out(out))
    x, y = value(a), value(b)
    with np.errstate(all="ignore"):
        exact = {"add": rounded(x + y), "sub": rounded(x - y), "mul": rounded(x * y), "div": rounded(x / y)}
    for k, (label, op) in enumerate([("__hadd", "add"), ("__hsub", "sub"), ("__hmul", "mul"), ("__hdiv", "div"),
                                     ("__hadd_rn", "add"), ("__hsub_rn", "sub"), ("__hmul_rn", "mul"),
                                     ("+", "add"), ("-", "sub"), ("*", "mul"), ("/", "div"),
                                     ("+=", "add"), ("-=", "sub"), ("*=", "mul"), ("/=", "div")]):
        assert_bits(out[k], exact[op], label, nan_any=True)
    with np.errstate(all="ignore"):
        below = [(np.abs(r) < 2.0**-126) & (np.abs(r) >= 2.0**-134) for r in (x * y, x / y)]
    assert below[0].sum() > 10_000 and below[1].sum() > 10_000     # results below 2^-126 were checked

    # max and min as CUDA defines them: a NaN loses to a number, two NaNs give 0x7fff, +0 beats -0
    na, nb = is_nan(a), is_nan(b)
    larger = np.where((x > y) | ((x == y) & ~np.signbit(x)), a, b)
    smaller = np.where((x < y) | ((x == y) & np.signbit(x)), a, b)
    assert_bits(out[15], np.where(na & nb, NAN, np.where(na, b, np.where(nb, a, larger))), "__hmax")
    assert_bits(out[16], np.where(na & nb, NAN, np.where(na, b, np.where(nb, a, smaller))), "__hmin")
    assert_bits(out[17], np.where(na | nb, NAN, larger), "__hmax_nan")
    assert_bits(out[18], np.where(na | nb, NAN, smaller), "__hmin_nan")
    assert ((x == 0) & (y == 0) & (np.signbit(x) != np.signbit(y))).sum() > 0     # +0 against -0 was asked
    assert_bits(out[19], a ^ 0x8000, "__hneg")
    assert_bits(out[20], a & 0x7FFF, "__habs")
    assert_bits(out[21], a ^ 0x8000, "unary -")


def exact_fma(a, b, c):
    """a*b+c of bfloat16 bits, rounded once with exact arithmetic; an exact zero signed as IEEE signs it."""
    s = Fraction(float(value(a))) * Fraction(float(value(b))) + Fraction(float(value(c)))
    if s == 0:
        return int(rounded(float(value(a)) * float(value(b)) + float(value(c))))
    return exact_rounded(s)


def test_fma_rounds_once(mod):
    rng = np.random.default_rng(5)
    n = 300_000
    # finite operands of moderate size, so that sums cancel; then any finite bit patterns
    moderate = [rounded(rng.uniform(-300, 300, n // 2)) for _ in range(3)]
    wild = [random_bf16(rng, n // 2) for _ in range(3)]
    a, b, c = (np.concatenate([m, w]) for m, w in zip(moderate, wild))
    # Two ties nudged by -2^-60 and +2^-60: 7 * 37 = 259 lies halfway between 258 and 260, 9 * 29 = 261 between
    # 260 and 262. Rounded to double first, each sum would be the tie itself, which goes to 260 both times.
    a[:2], b[:2], c[:2] = rounded([7, 9]), rounded([37, 29]), rounded([-2.0**-60, 2.0**-60])
    out = np.zeros((2, n), np.uint16)
    launch(mod, "fused", n, In(a), In(b), In(c), Out(out))
    with np.errstate(all="ignore"):
        approx = rounded(value(a) * value(b) + value(c))   # a*b exact in float64; the sum rounded twice
    differ = np.flatnonzero((out[0] != approx) & ~(is_nan(out[0]) & is_nan(approx)))
    assert differ.size < n // 1000
    finite = ~(is_nan(a) | is_nan(b) | is_nan(c) | np.isinf(value(a)) | np.isinf(value(b)) | np.isinf(value(c)))
    checked = np.concatenate([differ, rng.choice(np.flatnonzero(finite), 1000, replace=False)])
    for i in checked:
        if finite[i]:
            assert out[0, i] == exact_fma(a[i], b[i], c[i]), (hex(a[i]), hex(b[i]), hex(c[i]))
        else:
            assert is_nan(out[0, i]) and is_nan(approx[i]), (hex(a[i]), hex(b[i]), hex(c[i]))
    assert value(out[0, :2]).tolist() == [258, 262]
    assert_bits(out[1], out[0], "__hfma2's high half")


def ordered(bits):
    """bfloat16 bits as integers in the order of their values (+0 and -0 both 0), one apart per step."""
    b = np.asarray(bits).astype(np.int32)
    return np.where(b & 0x8000, -(b & 0x7FFF), b)


def test_functions_of_one_operand(mod):
    out = np.zeros((17, 65536), np.uint16)
    launch(mod, "unary", 65536, In(ALL), Out(out))
    x = value(ALL)
    with np.errstate(all="ignore"):
        exact = [("hsqrt", np.sqrt(x)), ("hrcp", 1 / x), ("hfloor", np.floor(x)), ("hceil", np.ceil(x)),
                 ("htrunc", np.trunc(x)), ("hrint", np.rint(x)), ("h2sqrt", np.sqrt(x))]
        close = [("hrsqrt", 1 / np.sqrt(x)), ("hexp", np.exp(x)), ("hexp2", np.exp2(x)), ("hlog", np.log(x)),
                 ("hlog2", np.log2(x)), ("htanh", np.tanh(x)), ("hsin", np.sin(x)), ("hcos", np.cos(x)),
                 ("h2exp", np.exp(x)), ("h2rsqrt", 1 / np.sqrt(x))]
    columns = {name: k for k, name in enumerate(["hsqrt", "hrcp", "hfloor", "hceil", "htrunc", "hrint", "hrsqrt",
                                                 "hexp", "hexp2", "hlog", "hlog2", "htanh", "hsin", "hcos",
                                                 "h2sqrt", "h2exp", "h2rsqrt"])}
    for name, want in exact:                   # correctly rounded: one rounding of an exact or correct float
        assert_bits(out[columns[name]], rounded(want), name, nan_any=True)
    for name, want in close:                   # float's function, then rounded: at most one step off, rarely
        got, w = out[columns[name]], rounded(want)
        nan = is_nan(w)
        assert np.array_equal(is_nan(got), nan), name
        off = np.abs(ordered(got[~nan]) - ordered(w[~nan]))       # in bfloat16 steps
        assert off.max() <= 1 and np.count_nonzero(off) <= 65536 // 1000, (name, np.count_nonzero(off))


def test_comparisons(mod):
    rng = np.random.default_rng(6)
    n = 200_000
    a, b = random_bf16(rng, n), random_bf16(rng, n)
    b[:5000] = a[:5000]
    b[5000:6000] = a[5000:6000] ^ 0x8000           # +0 and -0 among them
    a[6000:6100], b[6000:6100] = 0x7FFF, 0x7FFF
    out = np.zeros((2, n), np.int32)
    launch(mod, "compare", n, In(a), In(b), Out(out))
    x, y = value(a), value(b)
    unordered = np.isnan(x) | np.isnan(y)
    ordered = [x == y, (x < y) | (x > y), x < y, x <= y, x > y, x >= y]
    results = ordered + [r | unordered for r in ordered] + [x == y, ~(x == y), x < y, x <= y, x > y, x >= y]
    for k, want in enumerate(results):
        np.testing.assert_array_equal((out[0] >> k) & 1, want.astype(np.int32), err_msg=f"comparison {k}")
    np.testing.assert_array_equal(out[1] & 1, np.isnan(x))
    np.testing.assert_array_equal(out[1] >> 1, np.where(np.isinf(x), np.where(x > 0, 1, 3), 0))


# ---- pairs, shuffles, atomics, WMMA ---------------------------------------------------------------------
def test_bfloat162_layout_and_lanes(mod):
    rng = np.random.default_rng(7)
    n = 20_000
    x = (rng.standard_normal(2 * n) * 2.0 ** rng.integers(-20, 20, 2 * n)).astype(np.float32)
    y = (rng.standard_normal(2 * n) * 2.0 ** rng.integers(-20, 20, 2 * n)).astype(np.float32)
    out = np.zeros((29, n), np.uint32)
    floats = np.zeros(4 * n, np.float32)
    launch(mod, "pairs", n, In(x), In(y), Out(out), Out(floats))
    p, q = rounded(x.reshape(n, 2)), rounded(y.reshape(n, 2))     # [:, 0] is .x, [:, 1] is .y
    px, py, qx, qy = p[:, 0], p[:, 1], q[:, 0], q[:, 1]
    vp, vq = value(p), value(q)
    with np.errstate(all="ignore"):
        add, sub, mul, div = (rounded(f(vp, vq)) for f in (np.add, np.subtract, np.multiply, np.divide))
    fma = rounded(vp * vq + vp)                   # right but near ties, where exact arithmetic decides
    got_fma = np.stack([out[15] & 0xFFFF, out[15] >> 16], 1)
    for i, j in zip(*np.nonzero(got_fma != fma)):
        fma[i, j] = exact_fma(p[i, j], q[i, j], p[i, j])
    larger = np.where(vp >= vq, p, q)   # no NaNs among these
    smaller = np.where(vp <= vq, p, q)

    def pair(lo, hi):
        return lo.astype(np.uint32) | (hi.astype(np.uint32) << 16)    # .x in the low half, first in memory

    want = [pair(px, py), pair(qx, qy), pair(rounded(x[0::2]), rounded(x[0::2])), pair(px, qy), pair(py, py),
            pair(px, qx), pair(py, qy), pair(px, px), pair(qy, qy), pair(py, px), pair(qy, px),
            pair(*add.T), pair(*sub.T), pair(*mul.T), pair(*div.T), pair(*fma.T), pair(px ^ 0x8000, py ^ 0x8000),
            pair(px & 0x7FFF, py & 0x7FFF), pair(*larger.T), pair(*smaller.T),
            pair(*add.T), pair(*sub.T), pair(*mul.T), pair(*div.T), pair(px ^ 0x8000, py ^ 0x8000),
            pair(*add.T), pair(*sub.T), pair(*mul.T), pair(*div.T)]
    for k, w in enumerate(want):
        np.testing.assert_array_equal(out[k], w, err_msg=f"pair result {k}")
    np.testing.assert_array_equal(floats.reshape(n, 4), np.stack([vp[:, 0], vp[:, 1], vq[:, 0], vq[:, 1]], 1))


def test_shuffles_move_bfloat16_bits(mod):
    x = rounded(np.linspace(-3, 3, 32))
    x[5] = NAN                               # a NaN's bits move unchanged too
    one, two = np.zeros(64, np.uint16), np.zeros(64, np.uint32)
    mod.get_function("shuffles")(In(x), Out(one), Out(two), block=(32, 1, 1))
    lanes = np.arange(32)
    w = x.astype(np.uint32) | ((x ^ 0x8000).astype(np.uint32) << 16)
    np.testing.assert_array_equal(one[:32], np.full(32, x[3]))
    np.testing.assert_array_equal(one[32:], x[np.minimum(lanes + 1, 31)])      # the last lane keeps its own
    np.testing.assert_array_equal(two[:32], w[lanes ^ 1])
    np.testing.assert_array_equal(two[32:], w[np.where(lanes >= 2, lanes - 2, lanes)])     # lanes 0, 1 keep theirs


def test_atomic_adds_round_in_bfloat16(mod):
    # 300 additions of 1: bfloat16 holds every integer up to 256, and 256 + 1 is a tie that goes back to 256
    total, pair_total = np.zeros(1, np.uint16), np.zeros(1, np.uint32)
    launch(mod, "accumulate", 300, InOut(total), InOut(pair_total))
    assert value(total)[0] == 256
    # 300 halves stop at 128, where bfloat16's step becomes 1 and 128 + 0.5 is a tie that goes back to 128
    assert value(pair_total.view(np.uint16)).tolist() == [128, 256]


def test_wmma_with_bfloat16_inputs(mod):
    rng = np.random.default_rng(8)
    K = 48
    A = rng.integers(-16, 17, (16, K)) / 4          # quarters: exact in bfloat16, products and sums in float
    B = rng.integers(-16, 17, (K, 16)) / 4
    C = np.zeros((16, 16), np.float32)
    mod.get_function("wmma_bf16")(In(rounded(A)), In(np.ascontiguousarray(rounded(B).T)), Out(C), np.int32(K),
                                  block=(32, 1, 1))
    np.testing.assert_array_equal(C, A @ B)


# ---- C++ only ---------------------------------------------------------------------------------------------
def test_header_inside_extern_c_fails_like_nvcc():
    with pytest.raises(CompileError, match=r"cuda_bf16\.h.*no_extern_c=True"):
        SourceModule("#include <cuda_bf16.h>\n__global__ void k(__nv_bfloat16* x) { x[0] = __hadd(x[0], x[1]); }\n")
    # also where cuda_fp16.h (which it includes) came first, outside the block
    with pytest.raises(CompileError, match=r"no_extern_c=True"):
        SourceModule('#include <cuda_fp16.h>\nextern "C" {\n#include <cuda_bf16.h>\n'
                     "__global__ void k(__nv_bfloat16* x) { x[0] = x[1]; }\n}\n", no_extern_c=True)
