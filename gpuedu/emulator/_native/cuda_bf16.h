// cuda_bf16.h for the CPU emulator: __nv_bfloat16 and __nv_bfloat162 with CUDA's functions.
//
// A bfloat16 is the upper half of a float32 (sign, float's 8 exponent bits, 7 fraction bits), so every
// bfloat16 is a float whose lower 16 bits are 0, and float -> bfloat16 rounds those 16 bits away with
// integer operations: to nearest even (add 0x7fff plus the lowest bit kept), toward zero (drop them), down
// or up (drop them, then step the magnitude up when a negative, or a positive, number lost something).
// Subnormals need nothing of their own (float's subnormals are bfloat16's with 16 more bits) and, with
// float's exponent range, the only overflow is rounding past the largest finite bfloat16, which the carry
// into the exponent turns into infinity. Every NaN becomes the canonical 0x7fff, as with NVIDIA's header
// (cvt.rn.bf16.f32). A double or a 64-bit integer is first rounded to a float "to odd" (truncated, its last
// bit set if anything was dropped): float keeps 16 bits more than bfloat16, so the second rounding is the
// only one that counts.
//
// +, -, *, / are computed in float and rounded once, which is exact (the correctly rounded bfloat16 of
// the exact result): where the float result is normal, float's 24 bits are >= 2*8+2, enough that rounding
// to float first never changes the rounding to bfloat16; below 2^-126 (float's quantum 2^-149, bfloat16's
// 2^-133) a sum or difference is exact in float, and a product (at most 8x8 = 16 significant bits) or a
// quotient is never within float's rounding error, 2^-150, of a bfloat16 midpoint (an odd multiple of
// 2^-134) without being on it, so rounding to float cannot make a tie that was not there. sqrt is never
// subnormal, so the first case covers it. fma is computed in double (a*b is exact there) with the sum
// rounded to odd, then rounded once. A NaN result is 0x7fff here; PTX leaves a NaN result's bits open.
//
// Like NVIDIA's header this is C++ (overloads, operators) and includes cuda_fp16.h: including it inside
// PyCUDA's default extern "C" { } fails, as with nvcc; use no_extern_c=True.
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#include "cuda_fp16.h"
#include "gpuedu_bits.h"   // bfloat16 from and to float, bit by bit

#ifndef GPUEDU_SCAN
// A template with C linkage is an error for every compiler: this makes the header fail inside
// extern "C" { } the way NVIDIA's does (also when cuda_fp16.h was included before, outside it).
template <typename T> struct __gpuedu_bf16_needs_cxx_linkage {};

// double -> float rounded to odd: truncated toward zero, the last bit set when anything was dropped.
// Rounding that float to bfloat16 in any mode rounds the double itself (float keeps at least 2 more bits
// than bfloat16 at every magnitude, and below float's smallest subnormal only "not zero" matters).
static inline float __gpuedu_d2f_odd(double d) {
  float f = (float)d;
  if (d != d || (double)f == d) return f;
  uint32_t bits;
  memcpy(&bits, &f, 4);
  if (fabs((double)f) > fabs(d)) --bits;  // rounded away from zero (to infinity, too): one step back
  bits |= 1u;
  memcpy(&f, &bits, 4);
  return f;
}

// An integer's magnitude -> float rounded to odd (exact below 2^24), then to bfloat16 bits.
static inline unsigned short __gpuedu_u2bf_bits(bool negative, unsigned long long m, int mode) {
  float f;
  if (m < (1ull << 24)) {
    f = (float)m;
  } else {
    int shift = 64 - __builtin_clzll(m) - 24;  // keep the top 24 bits
    unsigned long long top = (m >> shift) | ((m & ((1ull << shift) - 1u)) != 0u);
    f = (float)top * (float)(1ull << shift);  // both exact, and so their product (below 2^64)
  }
  return __gpuedu_f2bf_bits(negative ? -f : f, mode);
}
static inline unsigned short __gpuedu_i2bf_bits(long long i, int mode) {
  return __gpuedu_u2bf_bits(i < 0, i < 0 ? 0ull - (unsigned long long)i : (unsigned long long)i, mode);
}


struct __nv_bfloat16_raw { unsigned short x; };
struct __nv_bfloat162_raw { unsigned short x, y; };

struct __align__(2) __nv_bfloat16 {
  unsigned short __x;
  __nv_bfloat16() = default;
  __nv_bfloat16(const __nv_bfloat16_raw& r) : __x(r.x) {}
  explicit __nv_bfloat16(const __half h) : __x(__gpuedu_f2bf_bits(__half2float(h), __GPUEDU_BF16_RN)) {}
  __nv_bfloat16(float f) : __x(__gpuedu_f2bf_bits(f, __GPUEDU_BF16_RN)) {}
  __nv_bfloat16(double d) : __x(__gpuedu_f2bf_bits(__gpuedu_d2f_odd(d), __GPUEDU_BF16_RN)) {}
  __nv_bfloat16(short i) : __x(__gpuedu_i2bf_bits(i, __GPUEDU_BF16_RN)) {}
  __nv_bfloat16(unsigned short i) : __x(__gpuedu_u2bf_bits(false, i, __GPUEDU_BF16_RN)) {}
  __nv_bfloat16(int i) : __x(__gpuedu_i2bf_bits(i, __GPUEDU_BF16_RN)) {}
  __nv_bfloat16(unsigned i) : __x(__gpuedu_u2bf_bits(false, i, __GPUEDU_BF16_RN)) {}
  __nv_bfloat16(long i) : __x(__gpuedu_i2bf_bits(i, __GPUEDU_BF16_RN)) {}
  __nv_bfloat16(unsigned long i) : __x(__gpuedu_u2bf_bits(false, i, __GPUEDU_BF16_RN)) {}
  __nv_bfloat16(long long i) : __x(__gpuedu_i2bf_bits(i, __GPUEDU_BF16_RN)) {}
  __nv_bfloat16(unsigned long long i) : __x(__gpuedu_u2bf_bits(false, i, __GPUEDU_BF16_RN)) {}
  operator float() const { return __gpuedu_bf2f_bits(__x); }
  operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
  __nv_bfloat16& operator=(const __nv_bfloat16_raw& r) { __x = r.x; return *this; }
  __nv_bfloat16& operator=(float f) { __x = __gpuedu_f2bf_bits(f, __GPUEDU_BF16_RN); return *this; }
  __nv_bfloat16& operator=(double d) { __x = __gpuedu_f2bf_bits(__gpuedu_d2f_odd(d), __GPUEDU_BF16_RN); return *this; }
  // (with float's and double's alone, x = 0 would be ambiguous)
  __nv_bfloat16& operator=(short i) { return *this = __nv_bfloat16(i); }
  __nv_bfloat16& operator=(unsigned short i) { return *this = __nv_bfloat16(i); }
  __nv_bfloat16& operator=(int i) { return *this = __nv_bfloat16(i); }
  __nv_bfloat16& operator=(unsigned i) { return *this = __nv_bfloat16(i); }
  __nv_bfloat16& operator=(long long i) { return *this = __nv_bfloat16(i); }
  __nv_bfloat16& operator=(unsigned long long i) { return *this = __nv_bfloat16(i); }
};

struct __align__(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;  // x is the low half: the first in memory
  __nv_bfloat162() = default;
  __nv_bfloat162(const __nv_bfloat16& a, const __nv_bfloat16& b) : x(a), y(b) {}
  __nv_bfloat162(const __nv_bfloat162_raw& r) { x.__x = r.x; y.__x = r.y; }
  operator __nv_bfloat162_raw() const { return __nv_bfloat162_raw{x.__x, y.__x}; }
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

static inline __nv_bfloat16 __gpuedu_bf(unsigned short bits) { __nv_bfloat16 h; h.__x = bits; return h; }
static inline __nv_bfloat16 __ushort_as_bfloat16(const unsigned short s) { return __gpuedu_bf(s); }
static inline __nv_bfloat16 __short_as_bfloat16(const short s) { return __gpuedu_bf((unsigned short)s); }
static inline unsigned short __bfloat16_as_ushort(const __nv_bfloat16 h) { return h.__x; }
static inline short __bfloat16_as_short(const __nv_bfloat16 h) { return (short)h.__x; }

#define CUDART_INF_BF16 __ushort_as_bfloat16((unsigned short)0x7F80U)
#define CUDART_MAX_NORMAL_BF16 __ushort_as_bfloat16((unsigned short)0x7F7FU)
#define CUDART_MIN_DENORM_BF16 __ushort_as_bfloat16((unsigned short)0x0001U)
#define CUDART_NAN_BF16 __ushort_as_bfloat16((unsigned short)0x7FFFU)
#define CUDART_NEG_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x8000U)
#define CUDART_ONE_BF16 __ushort_as_bfloat16((unsigned short)0x3F80U)
#define CUDART_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x0000U)

// ---- conversions ------------------------------------------------------------
static inline float __bfloat162float(const __nv_bfloat16 a) { return __gpuedu_bf2f_bits(a.__x); }
static inline __nv_bfloat16 __float2bfloat16(const float a) {
  return __gpuedu_bf(__gpuedu_f2bf_bits(a, __GPUEDU_BF16_RN));
}
static inline __nv_bfloat16 __float2bfloat16_rn(const float a) {
  return __gpuedu_bf(__gpuedu_f2bf_bits(a, __GPUEDU_BF16_RN));
}
static inline __nv_bfloat16 __float2bfloat16_rz(const float a) {
  return __gpuedu_bf(__gpuedu_f2bf_bits(a, __GPUEDU_BF16_RZ));
}
static inline __nv_bfloat16 __float2bfloat16_rd(const float a) {
  return __gpuedu_bf(__gpuedu_f2bf_bits(a, __GPUEDU_BF16_RD));
}
static inline __nv_bfloat16 __float2bfloat16_ru(const float a) {
  return __gpuedu_bf(__gpuedu_f2bf_bits(a, __GPUEDU_BF16_RU));
}
static inline __nv_bfloat16 __double2bfloat16(const double a) {
  return __gpuedu_bf(__gpuedu_f2bf_bits(__gpuedu_d2f_odd(a), __GPUEDU_BF16_RN));
}

// Integers to bfloat16: 8 significant bits, so every integer past 256 may round.
#define __GPUEDU_BF16_FROM_INT(name, type, mode) \
  static inline __nv_bfloat16 name(const type i) { return __gpuedu_bf(__gpuedu_i2bf_bits((long long)i, mode)); }
#define __GPUEDU_BF16_FROM_UINT(name, type, mode) \
  static inline __nv_bfloat16 name(const type i) { return __gpuedu_bf(__gpuedu_u2bf_bits(false, i, mode)); }
__GPUEDU_BF16_FROM_INT(__int2bfloat16_rn, int, __GPUEDU_BF16_RN)
__GPUEDU_BF16_FROM_INT(__int2bfloat16_rz, int, __GPUEDU_BF16_RZ)
__GPUEDU_BF16_FROM_INT(__int2bfloat16_rd, int, __GPUEDU_BF16_RD)
__GPUEDU_BF16_FROM_INT(__int2bfloat16_ru, int, __GPUEDU_BF16_RU)
__GPUEDU_BF16_FROM_UINT(__uint2bfloat16_rn, unsigned, __GPUEDU_BF16_RN)
__GPUEDU_BF16_FROM_UINT(__uint2bfloat16_rz, unsigned, __GPUEDU_BF16_RZ)
__GPUEDU_BF16_FROM_UINT(__uint2bfloat16_rd, unsigned, __GPUEDU_BF16_RD)
__GPUEDU_BF16_FROM_UINT(__uint2bfloat16_ru, unsigned, __GPUEDU_BF16_RU)
__GPUEDU_BF16_FROM_INT(__short2bfloat16_rn, short, __GPUEDU_BF16_RN)
__GPUEDU_BF16_FROM_UINT(__ushort2bfloat16_rn, unsigned short, __GPUEDU_BF16_RN)
__GPUEDU_BF16_FROM_INT(__ll2bfloat16_rn, long long, __GPUEDU_BF16_RN)
__GPUEDU_BF16_FROM_INT(__ll2bfloat16_rz, long long, __GPUEDU_BF16_RZ)
__GPUEDU_BF16_FROM_INT(__ll2bfloat16_rd, long long, __GPUEDU_BF16_RD)
__GPUEDU_BF16_FROM_INT(__ll2bfloat16_ru, long long, __GPUEDU_BF16_RU)
__GPUEDU_BF16_FROM_UINT(__ull2bfloat16_rn, unsigned long long, __GPUEDU_BF16_RN)
__GPUEDU_BF16_FROM_UINT(__ull2bfloat16_rz, unsigned long long, __GPUEDU_BF16_RZ)
__GPUEDU_BF16_FROM_UINT(__ull2bfloat16_rd, unsigned long long, __GPUEDU_BF16_RD)
__GPUEDU_BF16_FROM_UINT(__ull2bfloat16_ru, unsigned long long, __GPUEDU_BF16_RU)
#undef __GPUEDU_BF16_FROM_INT
#undef __GPUEDU_BF16_FROM_UINT

// bfloat16 to integers: CUDA's float conversions (NaN gives 0, values past the range saturate).
static inline int __bfloat162int_rn(const __nv_bfloat16 h) { return __float2int_rn(__bfloat162float(h)); }
static inline int __bfloat162int_rz(const __nv_bfloat16 h) { return __float2int_rz(__bfloat162float(h)); }
static inline int __bfloat162int_rd(const __nv_bfloat16 h) { return __float2int_rd(__bfloat162float(h)); }
static inline int __bfloat162int_ru(const __nv_bfloat16 h) { return __float2int_ru(__bfloat162float(h)); }
static inline unsigned __bfloat162uint_rn(const __nv_bfloat16 h) {
  return __gpuedu_sat_uint(nearbyint((double)__bfloat162float(h)));
}
static inline unsigned __bfloat162uint_rz(const __nv_bfloat16 h) {
  return __gpuedu_sat_uint(trunc((double)__bfloat162float(h)));
}
static inline unsigned __bfloat162uint_rd(const __nv_bfloat16 h) {
  return __gpuedu_sat_uint(floor((double)__bfloat162float(h)));
}
static inline unsigned __bfloat162uint_ru(const __nv_bfloat16 h) {
  return __gpuedu_sat_uint(ceil((double)__bfloat162float(h)));
}

// ---- arithmetic -------------------------------------------------------------
static inline __nv_bfloat16 __hadd(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  return __float2bfloat16(__bfloat162float(a) + __bfloat162float(b));
}
static inline __nv_bfloat16 __hsub(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  return __float2bfloat16(__bfloat162float(a) - __bfloat162float(b));
}
static inline __nv_bfloat16 __hmul(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  return __float2bfloat16(__bfloat162float(a) * __bfloat162float(b));
}
static inline __nv_bfloat16 __hdiv(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  return __float2bfloat16(__bfloat162float(a) / __bfloat162float(b));
}
// The _rn forms keep nvcc from fusing a product with a later sum; each call here is rounded on its own anyway.
static inline __nv_bfloat16 __hadd_rn(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __hadd(a, b); }
static inline __nv_bfloat16 __hsub_rn(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __hsub(a, b); }
static inline __nv_bfloat16 __hmul_rn(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __hmul(a, b); }
static inline __nv_bfloat16 __hfma(const __nv_bfloat16 a, const __nv_bfloat16 b, const __nv_bfloat16 c) {
  // a*b is exact in double (16 bits); the sum is rounded to odd (the error term of a two-sum decides),
  // which makes the final rounding to bfloat16 the only one that counts.
  double p = (double)__bfloat162float(a) * (double)__bfloat162float(b), cc = (double)__bfloat162float(c);
  double s = p + cc;
  if (s == s && s - s == 0.0) {
    double bb = s - p, err = (p - (s - bb)) + (cc - bb);
    uint64_t bits;
    memcpy(&bits, &s, 8);
    if (err != 0.0 && !(bits & 1u)) s = nextafter(s, err > 0 ? INFINITY : -INFINITY);
  }
  return __double2bfloat16(s);
}
static inline __nv_bfloat16 __hneg(const __nv_bfloat16 a) { return __gpuedu_bf((unsigned short)(a.__x ^ 0x8000u)); }
static inline __nv_bfloat16 __habs(const __nv_bfloat16 a) { return __gpuedu_bf((unsigned short)(a.__x & 0x7fffu)); }
static inline bool __hisnan(const __nv_bfloat16 a) { return (a.__x & 0x7fffu) > 0x7f80u; }
static inline int __hisinf(const __nv_bfloat16 a) {
  return (a.__x & 0x7fffu) == 0x7f80u ? ((a.__x & 0x8000u) ? -1 : 1) : 0;
}
// max and min as CUDA defines them: a NaN loses to a number (two NaNs give the canonical NaN), +0 > -0.
static inline __nv_bfloat16 __gpuedu_bf16_max(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  float fa = __bfloat162float(a), fb = __bfloat162float(b);
  if (fa != fb) return fa > fb ? a : b;
  return (a.__x & 0x8000u) ? b : a;  // equal: the same bits, or +0 and -0
}
static inline __nv_bfloat16 __gpuedu_bf16_min(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  float fa = __bfloat162float(a), fb = __bfloat162float(b);
  if (fa != fb) return fa < fb ? a : b;
  return (a.__x & 0x8000u) ? a : b;
}
static inline __nv_bfloat16 __hmax(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  if (__hisnan(a)) return __hisnan(b) ? CUDART_NAN_BF16 : b;
  return __hisnan(b) ? a : __gpuedu_bf16_max(a, b);
}
static inline __nv_bfloat16 __hmin(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  if (__hisnan(a)) return __hisnan(b) ? CUDART_NAN_BF16 : b;
  return __hisnan(b) ? a : __gpuedu_bf16_min(a, b);
}
// The _nan forms pass a NaN on instead (the canonical one).
static inline __nv_bfloat16 __hmax_nan(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  return __hisnan(a) || __hisnan(b) ? CUDART_NAN_BF16 : __gpuedu_bf16_max(a, b);
}
static inline __nv_bfloat16 __hmin_nan(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  return __hisnan(a) || __hisnan(b) ? CUDART_NAN_BF16 : __gpuedu_bf16_min(a, b);
}
// Comparisons: the plain ones are ordered (false if either is NaN), the u ones unordered (true if either is).
static inline bool __heq(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  return __bfloat162float(a) == __bfloat162float(b);
}
static inline bool __hlt(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  return __bfloat162float(a) < __bfloat162float(b);
}
static inline bool __hle(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  return __bfloat162float(a) <= __bfloat162float(b);
}
static inline bool __hgt(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  return __bfloat162float(a) > __bfloat162float(b);
}
static inline bool __hge(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  return __bfloat162float(a) >= __bfloat162float(b);
}
static inline bool __hne(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  return __hlt(a, b) || __hgt(a, b);
}
static inline bool __hequ(const __nv_bfloat16 a, const __nv_bfloat16 b) { return !__hne(a, b); }
static inline bool __hneu(const __nv_bfloat16 a, const __nv_bfloat16 b) { return !__heq(a, b); }
static inline bool __hltu(const __nv_bfloat16 a, const __nv_bfloat16 b) { return !__hge(a, b); }
static inline bool __hleu(const __nv_bfloat16 a, const __nv_bfloat16 b) { return !__hgt(a, b); }
static inline bool __hgtu(const __nv_bfloat16 a, const __nv_bfloat16 b) { return !__hle(a, b); }
static inline bool __hgeu(const __nv_bfloat16 a, const __nv_bfloat16 b) { return !__hlt(a, b); }
// Functions: computed in float, rounded once (the GPU's approximations may differ by a last bit).
static inline __nv_bfloat16 hsqrt(const __nv_bfloat16 a) { return __float2bfloat16(sqrtf(__bfloat162float(a))); }
static inline __nv_bfloat16 hrsqrt(const __nv_bfloat16 a) {
  return __float2bfloat16(1.0f / sqrtf(__bfloat162float(a)));
}
static inline __nv_bfloat16 hrcp(const __nv_bfloat16 a) { return __float2bfloat16(1.0f / __bfloat162float(a)); }
static inline __nv_bfloat16 hexp(const __nv_bfloat16 a) { return __float2bfloat16(expf(__bfloat162float(a))); }
static inline __nv_bfloat16 hexp2(const __nv_bfloat16 a) { return __float2bfloat16(exp2f(__bfloat162float(a))); }
static inline __nv_bfloat16 hlog(const __nv_bfloat16 a) { return __float2bfloat16(logf(__bfloat162float(a))); }
static inline __nv_bfloat16 hlog2(const __nv_bfloat16 a) { return __float2bfloat16(log2f(__bfloat162float(a))); }
static inline __nv_bfloat16 htanh(const __nv_bfloat16 a) { return __float2bfloat16(tanhf(__bfloat162float(a))); }
static inline __nv_bfloat16 hsin(const __nv_bfloat16 a) { return __float2bfloat16(sinf(__bfloat162float(a))); }
static inline __nv_bfloat16 hcos(const __nv_bfloat16 a) { return __float2bfloat16(cosf(__bfloat162float(a))); }
static inline __nv_bfloat16 hfloor(const __nv_bfloat16 a) { return __float2bfloat16(floorf(__bfloat162float(a))); }
static inline __nv_bfloat16 hceil(const __nv_bfloat16 a) { return __float2bfloat16(ceilf(__bfloat162float(a))); }
static inline __nv_bfloat16 htrunc(const __nv_bfloat16 a) { return __float2bfloat16(truncf(__bfloat162float(a))); }
static inline __nv_bfloat16 hrint(const __nv_bfloat16 a) { return __float2bfloat16(rintf(__bfloat162float(a))); }

static inline __nv_bfloat16 operator+(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hadd(a, b); }
static inline __nv_bfloat16 operator-(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hsub(a, b); }
static inline __nv_bfloat16 operator*(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hmul(a, b); }
static inline __nv_bfloat16 operator/(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hdiv(a, b); }
static inline __nv_bfloat16& operator+=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hadd(a, b); }
static inline __nv_bfloat16& operator-=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hsub(a, b); }
static inline __nv_bfloat16& operator*=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hmul(a, b); }
static inline __nv_bfloat16& operator/=(__nv_bfloat16& a, const __nv_bfloat16& b) { return a = __hdiv(a, b); }
static inline __nv_bfloat16 operator-(const __nv_bfloat16& a) { return __hneg(a); }
static inline __nv_bfloat16 operator+(const __nv_bfloat16& a) { return a; }
static inline bool operator==(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __heq(a, b); }
static inline bool operator!=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hneu(a, b); }
static inline bool operator<(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hlt(a, b); }
static inline bool operator<=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hle(a, b); }
static inline bool operator>(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hgt(a, b); }
static inline bool operator>=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hge(a, b); }

// ---- bfloat162 --------------------------------------------------------------
static inline __nv_bfloat162 make_bfloat162(const __nv_bfloat16 x, const __nv_bfloat16 y) {
  return __nv_bfloat162(x, y);
}
static inline __nv_bfloat162 __halves2bfloat162(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  return __nv_bfloat162(a, b);
}
static inline __nv_bfloat162 __floats2bfloat162_rn(const float a, const float b) {
  return __nv_bfloat162(__float2bfloat16(a), __float2bfloat16(b));
}
static inline __nv_bfloat162 __float2bfloat162_rn(const float a) {
  return __nv_bfloat162(__float2bfloat16(a), __float2bfloat16(a));
}
static inline __nv_bfloat162 __float22bfloat162_rn(const float2 a) { return __floats2bfloat162_rn(a.x, a.y); }
static inline float2 __bfloat1622float2(const __nv_bfloat162 a) {
  return make_float2(__bfloat162float(a.x), __bfloat162float(a.y));
}
static inline float __low2float(const __nv_bfloat162 a) { return __bfloat162float(a.x); }
static inline float __high2float(const __nv_bfloat162 a) { return __bfloat162float(a.y); }
static inline __nv_bfloat16 __low2bfloat16(const __nv_bfloat162 a) { return a.x; }
static inline __nv_bfloat16 __high2bfloat16(const __nv_bfloat162 a) { return a.y; }
static inline __nv_bfloat162 __low2bfloat162(const __nv_bfloat162 a) { return __nv_bfloat162(a.x, a.x); }
static inline __nv_bfloat162 __high2bfloat162(const __nv_bfloat162 a) { return __nv_bfloat162(a.y, a.y); }
static inline __nv_bfloat162 __bfloat162bfloat162(const __nv_bfloat16 a) { return __nv_bfloat162(a, a); }
static inline __nv_bfloat162 __lows2bfloat162(const __nv_bfloat162 a, const __nv_bfloat162 b) {
  return __nv_bfloat162(a.x, b.x);
}
static inline __nv_bfloat162 __highs2bfloat162(const __nv_bfloat162 a, const __nv_bfloat162 b) {
  return __nv_bfloat162(a.y, b.y);
}
static inline __nv_bfloat162 __lowhigh2highlow(const __nv_bfloat162 a) { return __nv_bfloat162(a.y, a.x); }
static inline __nv_bfloat162 __hadd2(const __nv_bfloat162 a, const __nv_bfloat162 b) {
  return __nv_bfloat162(__hadd(a.x, b.x), __hadd(a.y, b.y));
}
static inline __nv_bfloat162 __hsub2(const __nv_bfloat162 a, const __nv_bfloat162 b) {
  return __nv_bfloat162(__hsub(a.x, b.x), __hsub(a.y, b.y));
}
static inline __nv_bfloat162 __hmul2(const __nv_bfloat162 a, const __nv_bfloat162 b) {
  return __nv_bfloat162(__hmul(a.x, b.x), __hmul(a.y, b.y));
}
static inline __nv_bfloat162 __h2div(const __nv_bfloat162 a, const __nv_bfloat162 b) {
  return __nv_bfloat162(__hdiv(a.x, b.x), __hdiv(a.y, b.y));
}
static inline __nv_bfloat162 __hfma2(const __nv_bfloat162 a, const __nv_bfloat162 b, const __nv_bfloat162 c) {
  return __nv_bfloat162(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
static inline __nv_bfloat162 __hneg2(const __nv_bfloat162 a) { return __nv_bfloat162(__hneg(a.x), __hneg(a.y)); }
static inline __nv_bfloat162 __habs2(const __nv_bfloat162 a) { return __nv_bfloat162(__habs(a.x), __habs(a.y)); }
static inline __nv_bfloat162 __hmax2(const __nv_bfloat162 a, const __nv_bfloat162 b) {
  return __nv_bfloat162(__hmax(a.x, b.x), __hmax(a.y, b.y));
}
static inline __nv_bfloat162 __hmin2(const __nv_bfloat162 a, const __nv_bfloat162 b) {
  return __nv_bfloat162(__hmin(a.x, b.x), __hmin(a.y, b.y));
}
static inline __nv_bfloat162 h2sqrt(const __nv_bfloat162 a) { return __nv_bfloat162(hsqrt(a.x), hsqrt(a.y)); }
static inline __nv_bfloat162 h2exp(const __nv_bfloat162 a) { return __nv_bfloat162(hexp(a.x), hexp(a.y)); }
static inline __nv_bfloat162 h2rsqrt(const __nv_bfloat162 a) { return __nv_bfloat162(hrsqrt(a.x), hrsqrt(a.y)); }
static inline __nv_bfloat162 operator+(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __hadd2(a, b); }
static inline __nv_bfloat162 operator-(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __hsub2(a, b); }
static inline __nv_bfloat162 operator*(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __hmul2(a, b); }
static inline __nv_bfloat162 operator/(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __h2div(a, b); }
static inline __nv_bfloat162& operator+=(__nv_bfloat162& a, const __nv_bfloat162& b) { return a = __hadd2(a, b); }
static inline __nv_bfloat162& operator-=(__nv_bfloat162& a, const __nv_bfloat162& b) { return a = __hsub2(a, b); }
static inline __nv_bfloat162& operator*=(__nv_bfloat162& a, const __nv_bfloat162& b) { return a = __hmul2(a, b); }
static inline __nv_bfloat162& operator/=(__nv_bfloat162& a, const __nv_bfloat162& b) { return a = __h2div(a, b); }
static inline __nv_bfloat162 operator-(const __nv_bfloat162& a) { return __hneg2(a); }

// ---- atomics on bfloat16s (compare-and-swap loops) ------------------------------
GPUEDU_ATOMIC_FN __nv_bfloat16 atomicAdd(__nv_bfloat16* address, __nv_bfloat16 v) {
  GPUEDU_ATOMIC_AT(address);
  unsigned short* p = (unsigned short*)address;
  unsigned short old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &old, __hadd(__gpuedu_bf(old), v).__x, false, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {}
  return __gpuedu_bf(old);
}
GPUEDU_ATOMIC_FN __nv_bfloat162 atomicAdd(__nv_bfloat162* address, __nv_bfloat162 v) {
  GPUEDU_ATOMIC_AT(address);
  unsigned* p = (unsigned*)address;
  unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED), nw;
  __nv_bfloat162 o, s;
  do {
    memcpy(&o, &old, 4);
    s = __hadd2(o, v);
    memcpy(&nw, &s, 4);
  } while (!__atomic_compare_exchange_n(p, &old, nw, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  memcpy(&o, &old, 4);
  return o;
}
#endif  // GPUEDU_SCAN
