// curand_kernel.h for the CPU emulator: cuRAND's device API for the XORWOW (curandState_t) and
// Philox4x32-10 generators.
//
// The generators are cuRAND's own algorithms, with its seeding, so a kernel draws the same
// numbers as on a GPU:
//   - XORWOW (Marsaglia's xorshift with a Weyl sequence, 160 + 32 bits of state), seeded as cuRAND
//     seeds it; subsequence s starts 2^67 * s draws along the one sequence and offset n skips n
//     draws, both by powers of the generator's GF(2) transition matrix (M^(2^i), computed by
//     squaring once per loaded module, on first use) applied to the xorshift state, the Weyl
//     counter moving on by 362437 per draw;
//   - Philox4x32-10 (Salmon et al., Random123): 10 rounds on a 128-bit counter with a 64-bit key
//     (the seed); the subsequence is the counter's upper 64 bits, the offset counts draws of 32 bits.
// The integers (curand, curand4) and the uniforms are bit for bit cuRAND's: the tests check them
// against values computed by NVIDIA's own curand_kernel.h (whose integer code runs the same on a
// CPU) and against the Random123 known-answer vectors; no GPU ran in those checks. The normals use
// cuRAND's Box-Muller transform on the same integers, but a GPU computes its sine and cosine with
// the fast hardware __sincosf and its own logf, so a float normal there can differ from the
// emulator's in the last bits (a relative difference near 1e-6); double normals agree to a few ulps.
//
// A C++ header, like NVIDIA's: include it with no_extern_c=True.
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#include "gpuedu_prelude.h"

#ifndef GPUEDU_SCAN
struct curandStateXORWOW {
  unsigned int d, v[5];
  int boxmuller_flag;
  int boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
typedef struct curandStateXORWOW curandStateXORWOW_t;
typedef struct curandStateXORWOW curandState_t;
typedef struct curandStateXORWOW curandState;

struct curandStatePhilox4_32_10 {
  uint4 ctr;
  uint4 output;
  uint2 key;
  unsigned int STATE;
  int boxmuller_flag;
  int boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
typedef struct curandStatePhilox4_32_10 curandStatePhilox4_32_10_t;

struct curandStateMRG32k3a {
  unsigned int s1[3];
  unsigned int s2[3];
  int boxmuller_flag;
  int boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
typedef struct curandStateMRG32k3a curandStateMRG32k3a_t;

// Sobol's quasi-random sequences: one dimension per state, given by its direction vectors.
typedef unsigned int curandDirectionVectors32_t[32];
typedef unsigned long long curandDirectionVectors64_t[64];
struct curandStateSobol32 {
  unsigned int i, x, c;
  unsigned int direction_vectors[32];
};
typedef struct curandStateSobol32 curandStateSobol32_t;
struct curandStateScrambledSobol32 {
  unsigned int i, x, c;
  unsigned int direction_vectors[32];
};
typedef struct curandStateScrambledSobol32 curandStateScrambledSobol32_t;
struct curandStateSobol64 {
  unsigned long long i, x, c;
  unsigned long long direction_vectors[64];
};
typedef struct curandStateSobol64 curandStateSobol64_t;
struct curandStateScrambledSobol64 {
  unsigned long long i, x, c;
  unsigned long long direction_vectors[64];
};
typedef struct curandStateScrambledSobol64 curandStateScrambledSobol64_t;

#define CURAND_2POW32_INV (2.3283064e-10f)
#define CURAND_2POW32_INV_DOUBLE (2.3283064365386963e-10)
#define CURAND_2POW53_INV_DOUBLE (1.1102230246251565e-16)
#define CURAND_2POW32_INV_2PI (2.3283064e-10f * 6.2831855f)
#define CURAND_PI_DOUBLE (3.1415926535897932)

namespace __gpuedu_curand {
enum { NORMAL = 1, LOG_NORMAL = 2 };  // what boxmuller_extra holds

// ---- XORWOW -------------------------------------------------------------------------------
inline void xorwow_step(unsigned int* v) {
  unsigned int t = v[0] ^ (v[0] >> 2);
  v[0] = v[1];
  v[1] = v[2];
  v[2] = v[3];
  v[3] = v[4];
  v[4] = (v[4] ^ (v[4] << 4)) ^ (t ^ (t << 1));
}

// A 160 x 160 matrix over GF(2), as its columns: col[j] is the image of bit j of the state.
struct Matrix { unsigned int col[160][5]; };

// (a profiled build counts neither the jumps' matrix products nor the building of the matrices)
GPUEDU_PROF_QUIET inline void apply(const Matrix& m, const unsigned int* in, unsigned int* out) {
  unsigned int r[5] = {0, 0, 0, 0, 0};
  for (int j = 0; j < 160; ++j)
    if ((in[j / 32] >> (j % 32)) & 1u)
      for (int k = 0; k < 5; ++k) r[k] ^= m.col[j][k];
  for (int k = 0; k < 5; ++k) out[k] = r[k];
}

// M^(2^i) for i = 0 .. 130: offsets use i < 64, subsequences (2^67 draws each) i = 67 .. 130.
constexpr int POWERS = 131;
GPUEDU_PROF_QUIET inline const Matrix* powers() {
  // (Built once; workers that race to it each build one, and one is kept: published whole, with release order.)
  static Matrix* table = nullptr;
  if (Matrix* ready = __atomic_load_n(&table, __ATOMIC_ACQUIRE)) return ready;
  Matrix* p = (Matrix*)malloc(sizeof(Matrix) * POWERS);
  for (int j = 0; j < 160; ++j) {
    unsigned int v[5] = {0, 0, 0, 0, 0};
    v[j / 32] = 1u << (j % 32);
    xorwow_step(v);
    for (int k = 0; k < 5; ++k) p[0].col[j][k] = v[k];
  }
  for (int i = 1; i < POWERS; ++i)  // (A^2) e_j = A (A e_j)
    for (int j = 0; j < 160; ++j) apply(p[i - 1], p[i - 1].col[j], p[i].col[j]);
  __atomic_store_n(&table, p, __ATOMIC_RELEASE);
  return p;
}

inline void xorwow_jump(curandStateXORWOW_t* s, unsigned long long n, int first_power) {
  const Matrix* p = powers();
  for (int i = 0; n; ++i, n >>= 1)
    if (n & 1u) apply(p[first_power + i], s->v, s->v);
}

// ---- Philox4x32-10 -------------------------------------------------------------------------
inline uint4 philox(uint4 c, uint2 k) {
  for (int round = 0; round < 10; ++round) {
    if (round) {
      k.x += 0x9E3779B9u;
      k.y += 0xBB67AE85u;
    }
    unsigned long long p0 = 0xD2511F53ull * c.x, p1 = 0xCD9E8D57ull * c.z;
    unsigned int hi0 = (unsigned int)(p0 >> 32), lo0 = (unsigned int)p0;
    unsigned int hi1 = (unsigned int)(p1 >> 32), lo1 = (unsigned int)p1;
    c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
  }
  return c;
}

// The 128-bit counter plus n (n < 2^64).
inline void counter_add(uint4& c, unsigned long long n) {
  unsigned long long lo = ((unsigned long long)c.y << 32 | c.x) + n;
  bool carry = lo < n;
  c.x = (unsigned int)lo;
  c.y = (unsigned int)(lo >> 32);
  if (carry && ++c.z == 0) ++c.w;
}

// ---- MRG32k3a ------------------------------------------------------------------------------
// L'Ecuyer's combined multiple recursive generator: two recurrences of order three,
//   x(n) = (1403580 x(n-2) - 810728 x(n-3)) mod m1,  m1 = 2^32 - 209,
//   y(n) = (527612 y(n-1) - 1370589 y(n-3)) mod m2,  m2 = 2^32 - 22853,
// each draw (x(n) - y(n)) mod m1, taken in 1 .. m1. Integer arithmetic throughout, so the draws are
// exact. Jumps multiply each triple by a power of its 3 x 3 transition matrix modulo m; the powers
// A^(2^i), i = 0 .. 190, are computed by squaring once per loaded module, on first use.
constexpr unsigned long long MRG_M1 = 4294967087ull, MRG_M2 = 4294944443ull;
struct Mat3 { unsigned long long a[3][3]; };  // entries below m < 2^32, so products fit 64 bits

GPUEDU_PROF_QUIET inline Mat3 mat3_mul(const Mat3& x, const Mat3& y, unsigned long long m) {
  Mat3 r;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      unsigned long long sum = 0;
      for (int k = 0; k < 3; ++k) sum = (sum + x.a[i][k] * y.a[k][j] % m) % m;
      r.a[i][j] = sum;
    }
  return r;
}
GPUEDU_PROF_QUIET inline void mat3_apply(const Mat3& x, unsigned int* v, unsigned long long m) {
  unsigned long long r[3];
  for (int i = 0; i < 3; ++i) {
    unsigned long long sum = 0;
    for (int k = 0; k < 3; ++k) sum = (sum + x.a[i][k] * v[k] % m) % m;
    r[i] = sum;
  }
  for (int i = 0; i < 3; ++i) v[i] = (unsigned int)r[i];
}

// Offsets use A^(2^i) for i < 64; subsequences (2^76 draws each) i = 76 .. 126; sequences (2^127) i = 127 .. 190.
constexpr int MRG_POWERS = 191, MRG_SUBSEQUENCE = 76, MRG_SEQUENCE = 127;
struct MrgPowers { Mat3 p1[MRG_POWERS], p2[MRG_POWERS]; };
GPUEDU_PROF_QUIET inline const MrgPowers* mrg_powers() {
  static MrgPowers* table = nullptr;   // (as powers())
  if (MrgPowers* ready = __atomic_load_n(&table, __ATOMIC_ACQUIRE)) return ready;
  MrgPowers* t = (MrgPowers*)malloc(sizeof(MrgPowers));
  t->p1[0] = Mat3{{{0, 1, 0}, {0, 0, 1}, {MRG_M1 - 810728u, 1403580u, 0}}};
  t->p2[0] = Mat3{{{0, 1, 0}, {0, 0, 1}, {MRG_M2 - 1370589u, 0, 527612u}}};
  for (int i = 1; i < MRG_POWERS; ++i) {
    t->p1[i] = mat3_mul(t->p1[i - 1], t->p1[i - 1], MRG_M1);
    t->p2[i] = mat3_mul(t->p2[i - 1], t->p2[i - 1], MRG_M2);
  }
  __atomic_store_n(&table, t, __ATOMIC_RELEASE);
  return t;
}
GPUEDU_PROF_QUIET inline void mrg_jump(curandStateMRG32k3a_t* s, unsigned long long n, int first_power) {
  const MrgPowers* t = mrg_powers();
  for (int i = 0; n && first_power + i < MRG_POWERS; ++i, n >>= 1)
    if (n & 1u) {
      mat3_apply(t->p1[first_power + i], s->s1, MRG_M1);
      mat3_apply(t->p2[first_power + i], s->s2, MRG_M2);
    }
}
inline double mrg_draw(curandStateMRG32k3a_t* s) {
  long long p1 = (1403580ll * s->s1[1] - 810728ll * s->s1[0]) % (long long)MRG_M1;
  if (p1 < 0) p1 += (long long)MRG_M1;
  s->s1[0] = s->s1[1];
  s->s1[1] = s->s1[2];
  s->s1[2] = (unsigned int)p1;
  long long p2 = (527612ll * s->s2[2] - 1370589ll * s->s2[0]) % (long long)MRG_M2;
  if (p2 < 0) p2 += (long long)MRG_M2;
  s->s2[0] = s->s2[1];
  s->s2[1] = s->s2[2];
  s->s2[2] = (unsigned int)p2;
  return (double)(p1 <= p2 ? p1 - p2 + (long long)MRG_M1 : p1 - p2);
}
constexpr double MRG_NORM = 2.3283065498378288e-10;  // about 1 / (m1 + 1): draws / m1 in (0, 1]
constexpr double MRG_BITS_NORM = 1.000000048662;       // draws scaled to 32 bits

// ---- Sobol -------------------------------------------------------------------------------------
// Point i of a dimension is the XOR of the direction vectors at the set bits of i's Gray code
// i ^ (i >> 1); the next point flips one bit of the Gray code, the lowest zero bit of i. A scrambled
// sequence starts from its scramble constant c instead of 0.
template <typename S> inline void sobol_jump(S* s, decltype(S::i) n) {
  s->i += n;
  decltype(S::i) gray = s->i ^ (s->i >> 1);
  s->x = s->c;
  for (unsigned k = 0; k < 8 * sizeof(gray); ++k)
    if ((gray >> k) & 1u) s->x ^= s->direction_vectors[k];
}
template <typename S> inline decltype(S::i) sobol_next(S* s) {
  decltype(S::i) point = s->x;
  unsigned k = 0;  // the lowest zero bit of i (the last direction vector when i is all ones)
  while (k + 1 < 8 * sizeof(point) && ((s->i >> k) & 1u)) ++k;
  s->x ^= s->direction_vectors[k];
  s->i++;
  return point;
}

// Quasi-random draws become other distributions by inversion, one draw per number.
inline float uniform(unsigned long long x);
inline double uniform_double_bits(unsigned long long x) {  // 53 bits in (0, 1)
  return (x >> 11) * CURAND_2POW53_INV_DOUBLE + (CURAND_2POW53_INV_DOUBLE / 2.0);
}
inline float normal_icdf(unsigned int x) {  // mirrored about 1/2 to keep the tail's precision
  float sign = 1.4142135f;
  if (x > 0x80000000u) {
    x = 0xffffffffu - x;
    sign = -sign;
  }
  float p = x * CURAND_2POW32_INV + (CURAND_2POW32_INV / 2.0f);
  return sign * erfcinvf(2.0f * p);
}
inline float normal_icdf(unsigned long long x) { return normal_icdf((unsigned int)(x >> 32)); }
inline double normal_icdf_double(unsigned int x) {
  double sign = 1.4142135623730951;
  if (x > 0x80000000u) {
    x = 0xffffffffu - x;
    sign = -sign;
  }
  double p = x * CURAND_2POW32_INV_DOUBLE + (CURAND_2POW32_INV_DOUBLE / 2.0);
  return sign * erfcinv(2.0 * p);
}
inline double normal_icdf_double(unsigned long long x) {
  double sign = 1.4142135623730951;
  x >>= 11;
  if (x > 0x10000000000000ull) {
    x = 0x1fffffffffffffull - x;
    sign = -sign;
  }
  double p = x * CURAND_2POW53_INV_DOUBLE + (CURAND_2POW53_INV_DOUBLE / 2.0);
  return sign * erfcinv(2.0 * p);
}

// cuRAND's fmaf(x, 2^-32, 2^-33): the product is exact (a power of two times a float, far from underflow), so a
// multiply and an add round once, as the fused operation does, and take no call to the C library's fmaf.
static_assert(CURAND_2POW32_INV == 0x1p-32f, "the uniforms' scale is 2^-32 exactly");
inline float uniform(unsigned int x) { return (float)x * CURAND_2POW32_INV + CURAND_2POW32_INV / 2.0f; }
inline float uniform(unsigned long long x) { return uniform((unsigned int)(x >> 32)); }
inline double uniform_double(unsigned int x) { return x * CURAND_2POW32_INV_DOUBLE + CURAND_2POW32_INV_DOUBLE; }
// 53 random bits from two draws
inline double uniform_double(unsigned int x, unsigned int y) {
  unsigned long long z = (unsigned long long)x ^ ((unsigned long long)y << (53 - 32));
  return z * CURAND_2POW53_INV_DOUBLE + (CURAND_2POW53_INV_DOUBLE / 2.0);
}

// Box-Muller: two normals from two uniforms, u in (0, 1] for the radius and an angle in (0, 2 pi).
inline float2 box_muller(unsigned int x, unsigned int y) {
  float u = uniform(x);
  float v = fmaf((float)y, CURAND_2POW32_INV_2PI, CURAND_2POW32_INV_2PI / 2.0f);
  float s = sqrtf(-2.0f * logf(u));
  return make_float2(sinf(v) * s, cosf(v) * s);
}
inline double2 box_muller_double(unsigned int x0, unsigned int x1, unsigned int y0, unsigned int y1) {
  double u = uniform_double(x0, x1);
  unsigned long long zy = (unsigned long long)y0 ^ ((unsigned long long)y1 << (53 - 32));
  double v = zy * (CURAND_2POW53_INV_DOUBLE * 2.0) + CURAND_2POW53_INV_DOUBLE;  // in (0, 2): times pi
  double s = sqrt(-2.0 * log(u));
  return make_double2(sinpi(v) * s, cospi(v) * s);
}
}  // namespace __gpuedu_curand

// ---- initialisation and skipping ahead -----------------------------------------------------------
static inline void skipahead(unsigned long long n, curandStateXORWOW_t* state) {
  __gpuedu_curand::xorwow_jump(state, n, 0);
  state->d += 362437u * (unsigned int)n;
}
// 2^67 * n draws ahead: the Weyl counter moves by a multiple of 2^32, that is not at all
static inline void skipahead_sequence(unsigned long long n, curandStateXORWOW_t* state) {
  __gpuedu_curand::xorwow_jump(state, n, 67);
}
static inline void curand_init(unsigned long long seed, unsigned long long subsequence, unsigned long long offset,
                               curandStateXORWOW_t* state) {
  unsigned int s0 = (unsigned int)seed ^ 0xaad26b49u, s1 = (unsigned int)(seed >> 32) ^ 0xf7dcefddu;
  unsigned int t0 = 1099087573u * s0, t1 = 2591861531u * s1;
  state->d = 6615241u + t1 + t0;
  state->v[0] = 123456789u + t0;
  state->v[1] = 362436069u ^ t0;
  state->v[2] = 521288629u + t1;
  state->v[3] = 88675123u ^ t1;
  state->v[4] = 5783321u + t0;
  skipahead_sequence(subsequence, state);
  skipahead(offset, state);
  state->boxmuller_flag = 0;
  state->boxmuller_flag_double = 0;
  state->boxmuller_extra = 0.0f;
  state->boxmuller_extra_double = 0.0;
}

static inline void skipahead(unsigned long long n, curandStatePhilox4_32_10_t* state) {
  state->STATE += (unsigned int)(n & 3u);
  n /= 4;
  if (state->STATE > 3) {
    n += 1;
    state->STATE -= 4;
  }
  __gpuedu_curand::counter_add(state->ctr, n);
  state->output = __gpuedu_curand::philox(state->ctr, state->key);
}
static inline void skipahead_sequence(unsigned long long n, curandStatePhilox4_32_10_t* state) {
  unsigned long long hi = ((unsigned long long)state->ctr.w << 32 | state->ctr.z) + n;
  state->ctr.z = (unsigned int)hi;
  state->ctr.w = (unsigned int)(hi >> 32);
  state->output = __gpuedu_curand::philox(state->ctr, state->key);
}
static inline void curand_init(unsigned long long seed, unsigned long long subsequence, unsigned long long offset,
                               curandStatePhilox4_32_10_t* state) {
  state->ctr = make_uint4(0, 0, 0, 0);
  state->key = make_uint2((unsigned int)seed, (unsigned int)(seed >> 32));
  state->STATE = 0;
  state->boxmuller_flag = 0;
  state->boxmuller_flag_double = 0;
  state->boxmuller_extra = 0.0f;
  state->boxmuller_extra_double = 0.0;
  skipahead_sequence(subsequence, state);
  skipahead(offset, state);
}

static inline void skipahead(unsigned long long n, curandStateMRG32k3a_t* state) {
  __gpuedu_curand::mrg_jump(state, n, 0);
}
// n subsequences of 2^76 draws (n is taken modulo 2^51, as cuRAND takes it) and n sequences of 2^127
static inline void skipahead_subsequence(unsigned long long n, curandStateMRG32k3a_t* state) {
  __gpuedu_curand::mrg_jump(state, n & ((1ull << 51) - 1), __gpuedu_curand::MRG_SUBSEQUENCE);
}
static inline void skipahead_sequence(unsigned long long n, curandStateMRG32k3a_t* state) {
  __gpuedu_curand::mrg_jump(state, n, __gpuedu_curand::MRG_SEQUENCE);
}
static inline void curand_init(unsigned long long seed, unsigned long long subsequence, unsigned long long offset,
                               curandStateMRG32k3a_t* state) {
  for (int i = 0; i < 3; ++i) state->s1[i] = state->s2[i] = 12345u;
  if (seed != 0ull) {  // cuRAND's seeding: each word of the state times a half of the seed, modulo m
    unsigned long long x1 = (unsigned int)seed ^ 0x55555555u, x2 = (unsigned int)(seed >> 32) ^ 0xAAAAAAAAu;
    state->s1[0] = (unsigned int)(x1 * 12345u % __gpuedu_curand::MRG_M1);
    state->s1[1] = (unsigned int)(x2 * 12345u % __gpuedu_curand::MRG_M1);
    state->s1[2] = (unsigned int)(x1 * 12345u % __gpuedu_curand::MRG_M1);
    state->s2[0] = (unsigned int)(x2 * 12345u % __gpuedu_curand::MRG_M2);
    state->s2[1] = (unsigned int)(x1 * 12345u % __gpuedu_curand::MRG_M2);
    state->s2[2] = (unsigned int)(x2 * 12345u % __gpuedu_curand::MRG_M2);
  }
  skipahead_subsequence(subsequence, state);
  skipahead(offset, state);
  state->boxmuller_flag = 0;
  state->boxmuller_flag_double = 0;
  state->boxmuller_extra = 0.0f;
  state->boxmuller_extra_double = 0.0;
}

// Sobol: the offset skips points of the state's dimension; there are no subsequences.
static inline void skipahead(unsigned int n, curandStateSobol32_t* state) { __gpuedu_curand::sobol_jump(state, n); }
static inline void skipahead(unsigned int n, curandStateScrambledSobol32_t* state) {
  __gpuedu_curand::sobol_jump(state, n);
}
static inline void skipahead(unsigned long long n, curandStateSobol64_t* state) {
  __gpuedu_curand::sobol_jump(state, n);
}
static inline void skipahead(unsigned long long n, curandStateScrambledSobol64_t* state) {
  __gpuedu_curand::sobol_jump(state, n);
}
template <typename S, typename V, typename C>
static inline void __gpuedu_sobol_init(S* state, const V* direction_vectors, C scramble, decltype(S::i) offset) {
  state->i = 0;
  state->c = scramble;
  for (unsigned k = 0; k < 8 * sizeof(V); ++k) state->direction_vectors[k] = direction_vectors[k];
  __gpuedu_curand::sobol_jump(state, offset);
}
static inline void curand_init(const unsigned int* direction_vectors, unsigned int offset, curandStateSobol32_t* state) {
  __gpuedu_sobol_init(state, direction_vectors, 0u, offset);
}
static inline void curand_init(const unsigned int* direction_vectors, unsigned int scramble_c, unsigned int offset,
                               curandStateScrambledSobol32_t* state) {
  __gpuedu_sobol_init(state, direction_vectors, scramble_c, offset);
}
static inline void curand_init(const unsigned long long* direction_vectors, unsigned long long offset,
                               curandStateSobol64_t* state) {
  __gpuedu_sobol_init(state, direction_vectors, 0ull, offset);
}
static inline void curand_init(const unsigned long long* direction_vectors, unsigned long long scramble_c,
                               unsigned long long offset, curandStateScrambledSobol64_t* state) {
  __gpuedu_sobol_init(state, direction_vectors, scramble_c, offset);
}

// ---- 32 random bits ------------------------------------------------------------------------------
static inline unsigned int curand(curandStateXORWOW_t* state) {
  __gpuedu_curand::xorwow_step(state->v);
  state->d += 362437u;
  return state->v[4] + state->d;
}
static inline unsigned int curand(curandStatePhilox4_32_10_t* state) {
  const unsigned int out[4] = {state->output.x, state->output.y, state->output.z, state->output.w};
  unsigned int r = out[state->STATE & 3u];
  if (++state->STATE == 4) {
    __gpuedu_curand::counter_add(state->ctr, 1);
    state->output = __gpuedu_curand::philox(state->ctr, state->key);
    state->STATE = 0;
  }
  return r;
}
// Four draws at once: the next four of the sequence (the position moves on by four).
static inline uint4 curand4(curandStatePhilox4_32_10_t* state) {
  const uint4 a = state->output;
  __gpuedu_curand::counter_add(state->ctr, 1);
  state->output = __gpuedu_curand::philox(state->ctr, state->key);
  const uint4 b = state->output;
  const unsigned int both[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  unsigned int k = state->STATE & 3u;
  return make_uint4(both[k], both[k + 1], both[k + 2], both[k + 3]);
}

// MRG32k3a's draw in 1 .. m1, scaled to 32 bits; Sobol's next point (64 bits for the 64-bit sequences).
static inline unsigned int curand(curandStateMRG32k3a_t* state) {
  return (unsigned int)(__gpuedu_curand::mrg_draw(state) * __gpuedu_curand::MRG_BITS_NORM);
}
static inline unsigned int curand(curandStateSobol32_t* state) { return __gpuedu_curand::sobol_next(state); }
static inline unsigned int curand(curandStateScrambledSobol32_t* state) { return __gpuedu_curand::sobol_next(state); }
static inline unsigned long long curand(curandStateSobol64_t* state) { return __gpuedu_curand::sobol_next(state); }
static inline unsigned long long curand(curandStateScrambledSobol64_t* state) {
  return __gpuedu_curand::sobol_next(state);
}

// ---- distributions -------------------------------------------------------------------------------
// Uniform floats in (0, 1]: 0 is never drawn, 1 can be.
template <typename S> static inline float __gpuedu_curand_uniform(S* state) {
  return __gpuedu_curand::uniform(curand(state));
}
static inline float curand_uniform(curandStateXORWOW_t* state) { return __gpuedu_curand_uniform(state); }
static inline float curand_uniform(curandStatePhilox4_32_10_t* state) { return __gpuedu_curand_uniform(state); }
static inline float4 curand_uniform4(curandStatePhilox4_32_10_t* state) {
  uint4 x = curand4(state);
  return make_float4(__gpuedu_curand::uniform(x.x), __gpuedu_curand::uniform(x.y), __gpuedu_curand::uniform(x.z),
                     __gpuedu_curand::uniform(x.w));
}
// XORWOW gives doubles 53 random bits from two draws; Philox, as in cuRAND, 32 bits from one.
static inline double curand_uniform_double(curandStateXORWOW_t* state) {
  unsigned int x = curand(state);
  unsigned int y = curand(state);
  return __gpuedu_curand::uniform_double(x, y);
}
static inline double curand_uniform_double(curandStatePhilox4_32_10_t* state) {
  return __gpuedu_curand::uniform_double(curand(state));
}
static inline double2 curand_uniform2_double(curandStatePhilox4_32_10_t* state) {
  uint4 x = curand4(state);
  return make_double2(__gpuedu_curand::uniform_double(x.x, x.y), __gpuedu_curand::uniform_double(x.z, x.w));
}

// MRG32k3a's uniforms are its draws over m1 (cuRAND's), not 32-bit integers.
static inline float curand_uniform(curandStateMRG32k3a_t* state) {
  return (float)(__gpuedu_curand::mrg_draw(state) * __gpuedu_curand::MRG_NORM);
}
static inline double curand_uniform_double(curandStateMRG32k3a_t* state) {
  return __gpuedu_curand::mrg_draw(state) * __gpuedu_curand::MRG_NORM;
}

// Box-Muller pairs: from two 32-bit draws (XORWOW, Philox), or from two of MRG32k3a's uniforms.
template <typename S> static inline float2 __gpuedu_curand_bm(S* state) {
  unsigned int x = curand(state);
  unsigned int y = curand(state);
  return __gpuedu_curand::box_muller(x, y);
}
static inline float2 __gpuedu_curand_bm(curandStateMRG32k3a_t* state) {
  float u = curand_uniform(state);
  float v = curand_uniform(state) * 6.2831855f;
  float s = sqrtf(-2.0f * logf(u));
  return make_float2(sinf(v) * s, cosf(v) * s);
}

// Normals: Box-Muller makes two; curand_normal returns the first and keeps the second for its next call.
template <typename S> static inline float __gpuedu_curand_normal(S* state) {
  if (state->boxmuller_flag != __gpuedu_curand::NORMAL) {
    float2 v = __gpuedu_curand_bm(state);
    state->boxmuller_extra = v.y;
    state->boxmuller_flag = __gpuedu_curand::NORMAL;
    return v.x;
  }
  state->boxmuller_flag = 0;
  return state->boxmuller_extra;
}
static inline float curand_normal(curandStateXORWOW_t* state) { return __gpuedu_curand_normal(state); }
static inline float curand_normal(curandStatePhilox4_32_10_t* state) { return __gpuedu_curand_normal(state); }
template <typename S> static inline float2 __gpuedu_curand_normal2(S* state) { return __gpuedu_curand_bm(state); }
static inline float2 curand_normal2(curandStateXORWOW_t* state) { return __gpuedu_curand_normal2(state); }
static inline float2 curand_normal2(curandStatePhilox4_32_10_t* state) { return __gpuedu_curand_normal2(state); }
static inline float4 curand_normal4(curandStatePhilox4_32_10_t* state) {
  uint4 x = curand4(state);
  float2 a = __gpuedu_curand::box_muller(x.x, x.y), b = __gpuedu_curand::box_muller(x.z, x.w);
  return make_float4(a.x, a.y, b.x, b.y);
}

static inline double2 __gpuedu_curand_bm_double(curandStateXORWOW_t* state) {
  unsigned int x0 = curand(state);
  unsigned int x1 = curand(state);
  unsigned int y0 = curand(state);
  unsigned int y1 = curand(state);
  return __gpuedu_curand::box_muller_double(x0, x1, y0, y1);
}
static inline double2 __gpuedu_curand_bm_double(curandStatePhilox4_32_10_t* state) {
  uint4 x = curand4(state);
  return __gpuedu_curand::box_muller_double(x.x, x.y, x.z, x.w);
}
static inline double2 __gpuedu_curand_bm_double(curandStateMRG32k3a_t* state) {
  double u = curand_uniform_double(state);
  double v = curand_uniform_double(state) * 2.0;
  double s = sqrt(-2.0 * log(u));
  return make_double2(sinpi(v) * s, cospi(v) * s);
}
template <typename S> static inline double __gpuedu_curand_normal_double(S* state) {
  if (state->boxmuller_flag_double != __gpuedu_curand::NORMAL) {
    double2 v = __gpuedu_curand_bm_double(state);
    state->boxmuller_extra_double = v.y;
    state->boxmuller_flag_double = __gpuedu_curand::NORMAL;
    return v.x;
  }
  state->boxmuller_flag_double = 0;
  return state->boxmuller_extra_double;
}
static inline double curand_normal_double(curandStateXORWOW_t* state) { return __gpuedu_curand_normal_double(state); }
static inline double curand_normal_double(curandStatePhilox4_32_10_t* state) {
  return __gpuedu_curand_normal_double(state);
}
static inline double2 curand_normal2_double(curandStateXORWOW_t* state) { return __gpuedu_curand_bm_double(state); }
static inline double2 curand_normal2_double(curandStatePhilox4_32_10_t* state) {
  return __gpuedu_curand_bm_double(state);
}
static inline double4 curand_normal4_double(curandStatePhilox4_32_10_t* state) {
  double2 a = __gpuedu_curand_bm_double(state), b = __gpuedu_curand_bm_double(state);
  return make_double4(a.x, a.y, b.x, b.y);
}
static inline double4 curand_uniform4_double(curandStatePhilox4_32_10_t* state) {
  uint4 x = curand4(state);
  uint4 y = curand4(state);
  return make_double4(__gpuedu_curand::uniform_double(x.x, x.y), __gpuedu_curand::uniform_double(x.z, x.w),
                      __gpuedu_curand::uniform_double(y.x, y.y), __gpuedu_curand::uniform_double(y.z, y.w));
}

// Log-normals: exp(mean + stddev * normal), with the normal's Box-Muller pair kept as curand_normal keeps it.
template <typename S> static inline float __gpuedu_curand_log_normal(S* state, float mean, float stddev) {
  if (state->boxmuller_flag != __gpuedu_curand::LOG_NORMAL) {
    float2 v = __gpuedu_curand_bm(state);
    state->boxmuller_extra = expf(mean + stddev * v.y);
    state->boxmuller_flag = __gpuedu_curand::LOG_NORMAL;
    return expf(mean + stddev * v.x);
  }
  state->boxmuller_flag = 0;
  return state->boxmuller_extra;
}
static inline float curand_log_normal(curandStateXORWOW_t* state, float mean, float stddev) {
  return __gpuedu_curand_log_normal(state, mean, stddev);
}
static inline float curand_log_normal(curandStatePhilox4_32_10_t* state, float mean, float stddev) {
  return __gpuedu_curand_log_normal(state, mean, stddev);
}
template <typename S> static inline double __gpuedu_curand_log_normal_double(S* state, double mean, double stddev) {
  if (state->boxmuller_flag_double != __gpuedu_curand::LOG_NORMAL) {
    double2 v = __gpuedu_curand_bm_double(state);
    state->boxmuller_extra_double = exp(mean + stddev * v.y);
    state->boxmuller_flag_double = __gpuedu_curand::LOG_NORMAL;
    return exp(mean + stddev * v.x);
  }
  state->boxmuller_flag_double = 0;
  return state->boxmuller_extra_double;
}
template <typename S> static inline float2 __gpuedu_curand_log_normal2(S* state, float mean, float stddev) {
  float2 v = __gpuedu_curand_normal2(state);
  return make_float2(expf(mean + stddev * v.x), expf(mean + stddev * v.y));
}
static inline float2 curand_log_normal2(curandStateXORWOW_t* state, float mean, float stddev) {
  return __gpuedu_curand_log_normal2(state, mean, stddev);
}
static inline float2 curand_log_normal2(curandStatePhilox4_32_10_t* state, float mean, float stddev) {
  return __gpuedu_curand_log_normal2(state, mean, stddev);
}
static inline float4 curand_log_normal4(curandStatePhilox4_32_10_t* state, float mean, float stddev) {
  float4 v = curand_normal4(state);
  return make_float4(expf(mean + stddev * v.x), expf(mean + stddev * v.y), expf(mean + stddev * v.z),
                     expf(mean + stddev * v.w));
}
template <typename S> static inline double2 __gpuedu_curand_log_normal2_double(S* state, double mean, double stddev) {
  double2 v = __gpuedu_curand_bm_double(state);
  return make_double2(exp(mean + stddev * v.x), exp(mean + stddev * v.y));
}
static inline double2 curand_log_normal2_double(curandStateXORWOW_t* state, double mean, double stddev) {
  return __gpuedu_curand_log_normal2_double(state, mean, stddev);
}
static inline double2 curand_log_normal2_double(curandStatePhilox4_32_10_t* state, double mean, double stddev) {
  return __gpuedu_curand_log_normal2_double(state, mean, stddev);
}
static inline double4 curand_log_normal4_double(curandStatePhilox4_32_10_t* state, double mean, double stddev) {
  double4 v = curand_normal4_double(state);
  return make_double4(exp(mean + stddev * v.x), exp(mean + stddev * v.y), exp(mean + stddev * v.z),
                      exp(mean + stddev * v.w));
}
static inline double curand_log_normal_double(curandStateXORWOW_t* state, double mean, double stddev) {
  return __gpuedu_curand_log_normal_double(state, mean, stddev);
}
static inline double curand_log_normal_double(curandStatePhilox4_32_10_t* state, double mean, double stddev) {
  return __gpuedu_curand_log_normal_double(state, mean, stddev);
}

// Poisson: for lambda < 64, cuRAND's method (multiply uniforms until the product falls below
// exp(-lambda)); above 4000 its normal approximation. Between the two, cuRAND uses a rejection
// method whose every step rests on the GPU's approximate hardware exp, log and rsqrt, which a CPU
// cannot reproduce; this draws exactly Poisson-distributed numbers by inversion from one uniform
// double instead, so these draws, and those that follow them from the same state, are not cuRAND's.
namespace __gpuedu_curand {
inline unsigned int poisson_inverse(double u, double lambda);
}
template <typename S> static inline unsigned int __gpuedu_curand_poisson(S* state, double lambda) {
  if (lambda < 64) {
    unsigned int k = 0;
    float p = expf((float)lambda);
    do {
      k++;
      p *= curand_uniform(state);
    } while (p > 1.0f);
    return k - 1;
  }
  if (lambda > 4000) return (unsigned int)((sqrt(lambda) * curand_normal_double(state)) + lambda + 0.5);
  return __gpuedu_curand::poisson_inverse(curand_uniform_double(state), lambda);
}
namespace __gpuedu_curand {
// The Poisson count whose cumulative distribution first reaches u: the walk starts at the mode, k = floor(lambda).
inline unsigned int poisson_inverse(double u, double lambda) {
  if (!(lambda > 0.0)) return 0;  // a mean of 0 gives 0 (and so, here, does a negative or NaN one)
  unsigned int m = (unsigned int)lambda;
  double pm = exp(-lambda + m * log(lambda) - lgamma(m + 1.0));
  double below = 0.0, p = pm;  // P(X < m) is summed downwards
  for (unsigned int k = m; k > 0; --k) {
    p *= k / lambda;
    below += p;
    if (p < 1e-300) break;
  }
  double cdf = below + pm;
  if (u <= cdf) {  // at or below the mode: step down
    unsigned int k = m;
    double pk = pm;
    while (k > 0 && u <= cdf - pk) {
      cdf -= pk;
      pk *= k / lambda;
      --k;
    }
    return k;
  }
  unsigned int k = m;
  double pk = pm;
  while (u > cdf && pk > 0.0) {
    ++k;
    pk *= lambda / k;
    cdf += pk;
  }
  return k;
}
}  // namespace __gpuedu_curand
static inline unsigned int curand_poisson(curandStateXORWOW_t* state, double lambda) {
  return __gpuedu_curand_poisson(state, lambda);
}
static inline unsigned int curand_poisson(curandStatePhilox4_32_10_t* state, double lambda) {
  return __gpuedu_curand_poisson(state, lambda);
}

static inline unsigned int curand_poisson(curandStateMRG32k3a_t* state, double lambda) {
  return __gpuedu_curand_poisson(state, lambda);
}

// MRG32k3a's normals and log-normals, on its own Box-Muller pairs.
static inline float curand_normal(curandStateMRG32k3a_t* state) { return __gpuedu_curand_normal(state); }
static inline float2 curand_normal2(curandStateMRG32k3a_t* state) { return __gpuedu_curand_bm(state); }
static inline double curand_normal_double(curandStateMRG32k3a_t* state) { return __gpuedu_curand_normal_double(state); }
static inline double2 curand_normal2_double(curandStateMRG32k3a_t* state) { return __gpuedu_curand_bm_double(state); }
static inline float curand_log_normal(curandStateMRG32k3a_t* state, float mean, float stddev) {
  return __gpuedu_curand_log_normal(state, mean, stddev);
}
static inline float2 curand_log_normal2(curandStateMRG32k3a_t* state, float mean, float stddev) {
  return __gpuedu_curand_log_normal2(state, mean, stddev);
}
static inline double curand_log_normal_double(curandStateMRG32k3a_t* state, double mean, double stddev) {
  return __gpuedu_curand_log_normal_double(state, mean, stddev);
}
static inline double2 curand_log_normal2_double(curandStateMRG32k3a_t* state, double mean, double stddev) {
  return __gpuedu_curand_log_normal2_double(state, mean, stddev);
}

// Sobol: every distribution from one point by inversion (no Box-Muller, which would pair up two dimensions' worth).
namespace __gpuedu_curand {
inline double uniform_double_point(unsigned int x) { return uniform_double(x); }
inline double uniform_double_point(unsigned long long x) { return uniform_double_bits(x); }
// in (0, 1), never 1, for the Poisson inversion
inline double uniform_below_one(unsigned int x) { return x * CURAND_2POW32_INV_DOUBLE + CURAND_2POW32_INV_DOUBLE / 2.0; }
inline double uniform_below_one(unsigned long long x) {
  return (x >> 11) * CURAND_2POW53_INV_DOUBLE + CURAND_2POW53_INV_DOUBLE / 4.0;
}
template <typename T> inline unsigned int poisson_point(T x, double lambda) {
  if (lambda < 1000) return poisson_inverse(uniform_below_one(x), lambda);
  return (unsigned int)((sqrt(lambda) * normal_icdf_double(x)) + lambda + 0.5);
}
}  // namespace __gpuedu_curand
#define GPUEDU_SOBOL_DISTRIBUTIONS(S)                                                                     \
  static inline float curand_uniform(S* state) { return __gpuedu_curand::uniform(curand(state)); }       \
  static inline double curand_uniform_double(S* state) {                                                \
    return __gpuedu_curand::uniform_double_point(curand(state));                                         \
  }                                                                                                      \
  static inline float curand_normal(S* state) { return __gpuedu_curand::normal_icdf(curand(state)); }   \
  static inline double curand_normal_double(S* state) {                                                 \
    return __gpuedu_curand::normal_icdf_double(curand(state));                                           \
  }                                                                                                      \
  static inline float curand_log_normal(S* state, float mean, float stddev) {                          \
    return expf(mean + stddev * __gpuedu_curand::normal_icdf(curand(state)));                            \
  }                                                                                                      \
  static inline double curand_log_normal_double(S* state, double mean, double stddev) {                \
    return exp(mean + stddev * __gpuedu_curand::normal_icdf_double(curand(state)));                      \
  }                                                                                                      \
  static inline unsigned int curand_poisson(S* state, double lambda) {                                  \
    return __gpuedu_curand::poisson_point(curand(state), lambda);                                        \
  }
GPUEDU_SOBOL_DISTRIBUTIONS(curandStateSobol32_t)
GPUEDU_SOBOL_DISTRIBUTIONS(curandStateScrambledSobol32_t)
GPUEDU_SOBOL_DISTRIBUTIONS(curandStateSobol64_t)
GPUEDU_SOBOL_DISTRIBUTIONS(curandStateScrambledSobol64_t)
#undef GPUEDU_SOBOL_DISTRIBUTIONS
#endif  // GPUEDU_SCAN
