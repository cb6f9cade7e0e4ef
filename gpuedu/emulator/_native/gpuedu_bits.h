// gpuedu_bits.h: the number formats of the tensor cores, bit by bit, for the emulator's headers
// (cuda_fp16.h, cuda_bf16.h, gpuedu_ptx.h): binary16 (half), bfloat16 and TF32 from and to float.
// Every rounding is done with integer operations, exactly as the formats define it: round to nearest even
// (half, bfloat16), to nearest with ties away from zero (TF32's cvt.rna), NaN kept a NaN.
// Plain functions (no templates, no overloads): usable inside extern "C" as well.
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#include <cstdint>
#include <cstring>

#ifndef GPUEDU_SCAN
static inline unsigned short __gpuedu_f2h_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // infinity, or NaN (kept quiet, top payload bits kept)
    if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    return (unsigned short)(sign | 0x7c00u);
  }
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // >= 65520 rounds to infinity
  if (ax < 0x38800000u) {  // below 2^-14: a subnormal half (or zero)
    if (ax < 0x33000000u) return (unsigned short)sign;  // below 2^-25: rounds to zero
    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;  // value * 2^24 = m * 2^(e-126)
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // nearest, ties to even
    return (unsigned short)(sign | q);
  }
  uint32_t r = ax - 0x38000000u;  // rebias the exponent from 127 to 15
  uint32_t q = r >> 13, rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;  // a carry into the exponent is right
  return (unsigned short)(sign | q);
}

static inline unsigned short __gpuedu_d2h_bits(double d) {
  uint64_t x;
  memcpy(&x, &d, 8);
  uint32_t sign = (uint32_t)(x >> 48) & 0x8000u;
  uint64_t ax = x & 0x7fffffffffffffffull;
  if (ax >= 0x7ff0000000000000ull) {
    if (ax > 0x7ff0000000000000ull) return (unsigned short)(sign | 0x7e00u | (uint32_t)((ax >> 42) & 0x3ffu));
    return (unsigned short)(sign | 0x7c00u);
  }
  if (ax >= 0x40effe0000000000ull) return (unsigned short)(sign | 0x7c00u);  // >= 65520
  if (ax < 0x3f10000000000000ull) {  // below 2^-14
    if (ax < 0x3e60000000000000ull) return (unsigned short)sign;  // below 2^-25
    uint64_t e = ax >> 52, m = (ax & 0xfffffffffffffull) | 0x10000000000000ull;
    uint64_t shift = 1022u + 52u - 24u - e;  // value * 2^24 = m * 2^(e - 1075 + 24)
    uint64_t q = m >> shift, rem = m & ((1ull << shift) - 1u), half = 1ull << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return (unsigned short)(sign | (uint32_t)q);
  }
  uint64_t r = ax - ((uint64_t)(1023 - 15) << 52);
  uint64_t q = r >> 42, rem = r & ((1ull << 42) - 1u), half = 1ull << 41;
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return (unsigned short)(sign | (uint32_t)q);
}

static inline float __gpuedu_h2f_bits(unsigned short h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, bits;
  if (e == 0) {
    float v = (float)m * 5.9604644775390625e-8f;  // m * 2^-24, exact
    return sign ? -v : v;
  }
  if (e == 31) bits = sign | 0x7f800000u | (m << 13);
  else bits = sign | ((e + 112u) << 23) | (m << 13);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

// bfloat16: float's sign and exponent, 7 fraction bits: the top 16 bits of a float, rounded to nearest even.
// A NaN becomes the canonical NaN 0x7FFF, as NVIDIA's __float2bfloat16 and PTX's cvt.rn.bf16 give it.
static inline unsigned short __gpuedu_f2bf_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  uint32_t lsb = (x >> 16) & 1u;
  return (unsigned short)((x + 0x7fffu + lsb) >> 16);   // a carry into the exponent is right (up to infinity)
}

static inline float __gpuedu_bf2f_bits(unsigned short b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

// TF32: float's sign and exponent, 10 fraction bits, kept in a float's 32 bits with the low 13 bits zero.
// cvt.rna.tf32.f32 rounds to nearest with ties away from zero; a NaN stays a (quiet) NaN.
static inline uint32_t __gpuedu_f2tf32_bits(uint32_t x) {
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffffffu;
  if ((x & 0x7f800000u) == 0x7f800000u) return x;   // infinity stays
  return (x + 0x1000u) & 0xffffe000u;               // ties (0x1000 exactly) go away from zero
}
#endif  // GPUEDU_SCAN
