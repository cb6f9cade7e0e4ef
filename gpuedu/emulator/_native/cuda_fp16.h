// cuda_fp16.h for the CPU emulator: __half and __half2 with CUDA's functions.
// Every result is rounded to nearest-even exactly as numpy.float16 rounds:
// float -> half rounding is done with integer operations (exact for
// subnormals, overflow to infinity and NaN); +, -, *, / are computed in float
// and rounded once (exact: float's 24 bits >= 2*11+2); fma is computed in
// double with round-to-odd, then rounded once.
//
// Like NVIDIA's header this is C++ (overloads, operators): including it inside
// PyCUDA's default extern "C" { } fails, as with nvcc; use no_extern_c=True.
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#include "gpuedu_prelude.h"
#include "gpuedu_bits.h"

#ifndef GPUEDU_SCAN
// A template with C linkage is an error for every compiler: this makes the header fail inside
// extern "C" { } the way NVIDIA's does.
template <typename T> struct __gpuedu_fp16_needs_cxx_linkage {};

struct __half_raw { unsigned short x; };
struct __half2_raw { unsigned short x, y; };

struct __align__(2) __half {
  unsigned short __x;
  __half() = default;
  __half(const __half_raw& r) : __x(r.x) {}
  __half(float f) : __x(__gpuedu_f2h_bits(f)) {}
  __half(double d) : __x(__gpuedu_d2h_bits(d)) {}
  __half(int i) : __x(__gpuedu_d2h_bits((double)i)) {}
  __half(unsigned i) : __x(__gpuedu_d2h_bits((double)i)) {}
  __half(short i) : __x(__gpuedu_f2h_bits((float)i)) {}
  __half(unsigned short i) : __x(__gpuedu_f2h_bits((float)i)) {}
  __half(long long i) : __x(__gpuedu_d2h_bits((double)i)) {}
  __half(unsigned long long i) : __x(__gpuedu_d2h_bits((double)i)) {}
  operator float() const { return __gpuedu_h2f_bits(__x); }
  operator __half_raw() const { return __half_raw{__x}; }
  __half& operator=(const __half_raw& r) { __x = r.x; return *this; }
  __half& operator=(float f) { __x = __gpuedu_f2h_bits(f); return *this; }
  __half& operator=(double d) { __x = __gpuedu_d2h_bits(d); return *this; }
};

struct __align__(4) __half2 {
  __half x, y;
  __half2() = default;
  __half2(const __half& a, const __half& b) : x(a), y(b) {}
  __half2(const __half2_raw& r) { x.__x = r.x; y.__x = r.y; }
  operator __half2_raw() const { return __half2_raw{x.__x, y.__x}; }
};
typedef __half half;
typedef __half2 half2;
typedef __half __nv_half;
typedef __half2 __nv_half2;

static inline __half __gpuedu_h(unsigned short bits) { __half h; h.__x = bits; return h; }
static inline float __half2float(const __half a) { return __gpuedu_h2f_bits(a.__x); }
static inline __half __float2half(const float a) { return __gpuedu_h(__gpuedu_f2h_bits(a)); }
static inline __half __float2half_rn(const float a) { return __gpuedu_h(__gpuedu_f2h_bits(a)); }
static inline __half __double2half(const double a) { return __gpuedu_h(__gpuedu_d2h_bits(a)); }
static inline __half __float2half_rz(const float a) {
  __half r = __float2half_rn(a);  // step back toward zero when rounding went away from it
  float back = __half2float(r);
  if (back == back && fabsf(back) > fabsf(a) && !(fabsf(a) == INFINITY)) r.__x = (unsigned short)(r.__x - 1);
  return r;
}
static inline __half __int2half_rn(int i) { return __gpuedu_h(__gpuedu_d2h_bits((double)i)); }
static inline __half __uint2half_rn(unsigned i) { return __gpuedu_h(__gpuedu_d2h_bits((double)i)); }
static inline int __half2int_rn(__half h) { return __float2int_rn(__half2float(h)); }
static inline int __half2int_rz(__half h) { return __float2int_rz(__half2float(h)); }
static inline short __half_as_short(__half h) { return (short)h.__x; }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline __half __short_as_half(short s) { return __gpuedu_h((unsigned short)s); }
static inline __half __ushort_as_half(unsigned short s) { return __gpuedu_h(s); }

// ---- arithmetic -------------------------------------------------------------
static inline __half __hadd(const __half a, const __half b) { return __float2half(__half2float(a) + __half2float(b)); }
static inline __half __hsub(const __half a, const __half b) { return __float2half(__half2float(a) - __half2float(b)); }
static inline __half __hmul(const __half a, const __half b) { return __float2half(__half2float(a) * __half2float(b)); }
static inline __half __hdiv(const __half a, const __half b) { return __float2half(__half2float(a) / __half2float(b)); }
static inline __half __hadd_rn(const __half a, const __half b) { return __hadd(a, b); }
static inline __half __hmul_rn(const __half a, const __half b) { return __hmul(a, b); }
static inline __half __hfma(const __half a, const __half b, const __half c) {
  // a*b is exact in double (22 bits); the sum is rounded to odd (the error term
  // of a two-sum decides), which makes the final rounding to half correct.
  double p = (double)__half2float(a) * (double)__half2float(b), cc = (double)__half2float(c);
  double s = p + cc;
  if (s == s && s - s == 0.0) {
    double bb = s - p, err = (p - (s - bb)) + (cc - bb);
    uint64_t bits;
    memcpy(&bits, &s, 8);
    if (err != 0.0 && !(bits & 1u)) s = nextafter(s, err > 0 ? INFINITY : -INFINITY);
  }
  return __double2half(s);
}
static inline __half __hneg(const __half a) { return __gpuedu_h((unsigned short)(a.__x ^ 0x8000u)); }
static inline __half __habs(const __half a) { return __gpuedu_h((unsigned short)(a.__x & 0x7fffu)); }
static inline bool __hisnan(const __half a) { return (a.__x & 0x7fffu) > 0x7c00u; }
static inline int __hisinf(const __half a) { return (a.__x & 0x7fffu) == 0x7c00u ? ((a.__x & 0x8000u) ? -1 : 1) : 0; }
static inline __half __hmax(const __half a, const __half b) {
  if (__hisnan(a)) return b;
  if (__hisnan(b)) return a;
  return __half2float(a) >= __half2float(b) ? a : b;
}
static inline __half __hmin(const __half a, const __half b) {
  if (__hisnan(a)) return b;
  if (__hisnan(b)) return a;
  return __half2float(a) <= __half2float(b) ? a : b;
}
static inline bool __heq(const __half a, const __half b) { return __half2float(a) == __half2float(b); }
static inline bool __hne(const __half a, const __half b) { return __half2float(a) != __half2float(b); }
static inline bool __hlt(const __half a, const __half b) { return __half2float(a) < __half2float(b); }
static inline bool __hle(const __half a, const __half b) { return __half2float(a) <= __half2float(b); }
static inline bool __hgt(const __half a, const __half b) { return __half2float(a) > __half2float(b); }
static inline bool __hge(const __half a, const __half b) { return __half2float(a) >= __half2float(b); }
static inline __half hsqrt(const __half a) { return __float2half(sqrtf(__half2float(a))); }
static inline __half hrsqrt(const __half a) { return __float2half(1.0f / sqrtf(__half2float(a))); }
static inline __half hrcp(const __half a) { return __float2half(1.0f / __half2float(a)); }
static inline __half hexp(const __half a) { return __float2half(expf(__half2float(a))); }
static inline __half hexp2(const __half a) { return __float2half(exp2f(__half2float(a))); }
static inline __half hlog(const __half a) { return __float2half(logf(__half2float(a))); }
static inline __half hlog2(const __half a) { return __float2half(log2f(__half2float(a))); }
static inline __half htanh(const __half a) { return __float2half(tanhf(__half2float(a))); }
static inline __half hsin(const __half a) { return __float2half(sinf(__half2float(a))); }
static inline __half hcos(const __half a) { return __float2half(cosf(__half2float(a))); }
static inline __half hfloor(const __half a) { return __float2half(floorf(__half2float(a))); }
static inline __half hceil(const __half a) { return __float2half(ceilf(__half2float(a))); }
static inline __half htrunc(const __half a) { return __float2half(truncf(__half2float(a))); }

static inline __half operator+(const __half& a, const __half& b) { return __hadd(a, b); }
static inline __half operator-(const __half& a, const __half& b) { return __hsub(a, b); }
static inline __half operator*(const __half& a, const __half& b) { return __hmul(a, b); }
static inline __half operator/(const __half& a, const __half& b) { return __hdiv(a, b); }
static inline __half& operator+=(__half& a, const __half& b) { return a = __hadd(a, b); }
static inline __half& operator-=(__half& a, const __half& b) { return a = __hsub(a, b); }
static inline __half& operator*=(__half& a, const __half& b) { return a = __hmul(a, b); }
static inline __half& operator/=(__half& a, const __half& b) { return a = __hdiv(a, b); }
static inline __half operator-(const __half& a) { return __hneg(a); }
static inline __half operator+(const __half& a) { return a; }
static inline bool operator==(const __half& a, const __half& b) { return __heq(a, b); }
static inline bool operator!=(const __half& a, const __half& b) { return __hne(a, b); }
static inline bool operator<(const __half& a, const __half& b) { return __hlt(a, b); }
static inline bool operator<=(const __half& a, const __half& b) { return __hle(a, b); }
static inline bool operator>(const __half& a, const __half& b) { return __hgt(a, b); }
static inline bool operator>=(const __half& a, const __half& b) { return __hge(a, b); }

// ---- half2 ------------------------------------------------------------------
static inline __half2 __halves2half2(const __half a, const __half b) { return __half2(a, b); }
static inline __half2 __floats2half2_rn(const float a, const float b) { return __half2(__float2half(a), __float2half(b)); }
static inline __half2 __float2half2_rn(const float a) { return __half2(__float2half(a), __float2half(a)); }
static inline __half2 __float22half2_rn(const float2 a) { return __floats2half2_rn(a.x, a.y); }
static inline float2 __half22float2(const __half2 a) { return make_float2(__half2float(a.x), __half2float(a.y)); }
static inline float __low2float(const __half2 a) { return __half2float(a.x); }
static inline float __high2float(const __half2 a) { return __half2float(a.y); }
static inline __half __low2half(const __half2 a) { return a.x; }
static inline __half __high2half(const __half2 a) { return a.y; }
static inline __half2 __low2half2(const __half2 a) { return __half2(a.x, a.x); }
static inline __half2 __high2half2(const __half2 a) { return __half2(a.y, a.y); }
static inline __half2 __half2half2(const __half a) { return __half2(a, a); }
static inline __half2 __lows2half2(const __half2 a, const __half2 b) { return __half2(a.x, b.x); }
static inline __half2 __highs2half2(const __half2 a, const __half2 b) { return __half2(a.y, b.y); }
static inline __half2 __lowhigh2highlow(const __half2 a) { return __half2(a.y, a.x); }
static inline __half2 __hadd2(const __half2 a, const __half2 b) { return __half2(__hadd(a.x, b.x), __hadd(a.y, b.y)); }
static inline __half2 __hsub2(const __half2 a, const __half2 b) { return __half2(__hsub(a.x, b.x), __hsub(a.y, b.y)); }
static inline __half2 __hmul2(const __half2 a, const __half2 b) { return __half2(__hmul(a.x, b.x), __hmul(a.y, b.y)); }
static inline __half2 __h2div(const __half2 a, const __half2 b) { return __half2(__hdiv(a.x, b.x), __hdiv(a.y, b.y)); }
static inline __half2 __hfma2(const __half2 a, const __half2 b, const __half2 c) {
  return __half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
static inline __half2 __hneg2(const __half2 a) { return __half2(__hneg(a.x), __hneg(a.y)); }
static inline __half2 __habs2(const __half2 a) { return __half2(__habs(a.x), __habs(a.y)); }
static inline __half2 __hmax2(const __half2 a, const __half2 b) { return __half2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }
static inline __half2 __hmin2(const __half2 a, const __half2 b) { return __half2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }
static inline __half2 h2sqrt(const __half2 a) { return __half2(hsqrt(a.x), hsqrt(a.y)); }
static inline __half2 h2exp(const __half2 a) { return __half2(hexp(a.x), hexp(a.y)); }
static inline __half2 h2rsqrt(const __half2 a) { return __half2(hrsqrt(a.x), hrsqrt(a.y)); }
static inline __half2 operator+(const __half2& a, const __half2& b) { return __hadd2(a, b); }
static inline __half2 operator-(const __half2& a, const __half2& b) { return __hsub2(a, b); }
static inline __half2 operator*(const __half2& a, const __half2& b) { return __hmul2(a, b); }
static inline __half2 operator/(const __half2& a, const __half2& b) { return __h2div(a, b); }
static inline __half2& operator+=(__half2& a, const __half2& b) { return a = __hadd2(a, b); }
static inline __half2& operator*=(__half2& a, const __half2& b) { return a = __hmul2(a, b); }
static inline __half2 operator-(const __half2& a) { return __hneg2(a); }

// ---- atomics on halves (compare-and-swap loops) -----------------------------------
GPUEDU_ATOMIC_FN __half atomicAdd(__half* address, __half v) {
  GPUEDU_ATOMIC_AT(address);
  unsigned short* p = (unsigned short*)address;
  unsigned short old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &old, __hadd(__gpuedu_h(old), v).__x, false, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {}
  return __gpuedu_h(old);
}
GPUEDU_ATOMIC_FN __half2 atomicAdd(__half2* address, __half2 v) {
  GPUEDU_ATOMIC_AT(address);
  unsigned* p = (unsigned*)address;
  unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED), nw;
  __half2 o, s;
  do {
    memcpy(&o, &old, 4);
    s = __hadd2(o, v);
    memcpy(&nw, &s, 4);
  } while (!__atomic_compare_exchange_n(p, &old, nw, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  memcpy(&o, &old, 4);
  return o;
}
#endif  // GPUEDU_SCAN
