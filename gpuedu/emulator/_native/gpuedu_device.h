// The CUDA device language for the CPU emulator: qualifiers, built-in
// variables, vector types, math, bit intrinsics, atomics and printf.
// Included (through gpuedu_prelude.h) before the kernel source, which is then
// compiled as ordinary C++.
#pragma once
#ifndef GPUEDU_SCAN  // in the scan, macro expansions must stay attributed to the user's file
#pragma GCC system_header
#endif

// Fortified C library calls (-D_FORTIFY_SOURCE, on by default in Ubuntu's and other distributions' compilers)
// abort the whole process when they see an overrun: the emulator reports overruns itself, as a LaunchError
// the notebook survives. Undefined before the first system header, whatever the command line says.
#undef _FORTIFY_SOURCE
#if defined(__APPLE__) && !defined(_XOPEN_SOURCE)
#define _XOPEN_SOURCE 700   // macOS hides ucontext (the fiber fallback there) without it
#define _DARWIN_C_SOURCE 1  // ...and the BSD names (MAP_ANONYMOUS) with it, unless this is set
#endif
// glibc gives g++, not clang++, the C++ overloads of index and rindex (<strings.h>); as plain C functions
// they would clash with a learner's own __device__ function called index. Both compilers get the same.
#if defined(__clang__) && !defined(__CORRECT_ISO_CPP_STRINGS_H_PROTO)
#define __CORRECT_ISO_CPP_STRINGS_H_PROTO
#endif
#ifndef GPUEDU_SCAN
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <math.h>
#include <stdint.h>
#endif
#include "gpuedu_profile.h"

// ---- qualifiers -------------------------------------------------------------
// In scan mode (a preprocessing pass that finds kernels) __global__ survives as
// a marker; in the real build it is an ordinary, exported function.
// The scan also keeps __device__ and __constant__ as markers: a profiled build counts the accesses to the module's
// __device__ variables as global memory, and needs their names (_scanner.analyse); __constant__ ones are not global
// loads to Nsight Compute (the constant cache serves them).
#ifdef GPUEDU_SCAN
#define __global__ __gpuedu_global__
#define __device__ __gpuedu_device__
#define __constant__ __gpuedu_constant__
#else
#define __global__
#define __device__
#define __constant__
#endif
#define __host__
// The block's shared memory: a static __shared__ declaration in a function becomes a slot of the running
// worker's shared memory (the compiler rewrites it: _scanner.rewrite_source), seen by every thread (fiber) of
// the block; one at file scope (or brought by a macro) stays a static variable of the module, which then runs
// its blocks on one worker.
#define __shared__ static
#define __gpuedu_file_scope_shared__ static
#define __managed__
#if defined(GPUEDU_PROFILE)
// The profiled build inlines what nvcc inlines: a __forceinline__ helper that takes a thread's accumulators by
// reference (gemm_warptile.cuh) would otherwise keep them in memory, each use a counted access of its own.
#define __forceinline__ inline __attribute__((always_inline))
#else
#define __forceinline__ inline
#endif
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
// A kernel's cluster shape (Hopper's thread-block clusters, gpuedu_cluster.h): the scan reads it (a marker there,
// _scanner.analyse) into the kernel's entry, where the launch finds it.
#ifdef GPUEDU_SCAN
#define __cluster_dims__(...) __gpuedu_cluster_dims__(__VA_ARGS__)
#else
#define __cluster_dims__(...)
#endif
#define __grid_constant__
#define __CUDACC__ 1
#define __CUDA_ARCH__ 800
#define __NVCC__ 1
#define __CUDA_ARCH_LIST__ 800
#define CUDART_VERSION 13000
#define __CUDACC_VER_MAJOR__ 13
#define __CUDACC_VER_MINOR__ 0

#ifndef GPUEDU_SCAN
// ---- vector types -----------------------------------------------------------
#define GPUEDU_VEC1(T, N, A) struct __attribute__((aligned(A))) N##1 { T x; }; \
  static inline N##1 make_##N##1(T x) { N##1 v; v.x = x; return v; }
#define GPUEDU_VEC2(T, N, A) struct __attribute__((aligned(A))) N##2 { T x, y; }; \
  static inline N##2 make_##N##2(T x, T y) { N##2 v; v.x = x; v.y = y; return v; }
#define GPUEDU_VEC3(T, N) struct N##3 { T x, y, z; }; \
  static inline N##3 make_##N##3(T x, T y, T z) { N##3 v; v.x = x; v.y = y; v.z = z; return v; }
#define GPUEDU_VEC4(T, N, A) struct __attribute__((aligned(A))) N##4 { T x, y, z, w; }; \
  static inline N##4 make_##N##4(T x, T y, T z, T w) { N##4 v; v.x = x; v.y = y; v.z = z; v.w = w; return v; }
#define GPUEDU_VECS(T, N, S) GPUEDU_VEC1(T, N, S) GPUEDU_VEC2(T, N, 2 * S) GPUEDU_VEC3(T, N) GPUEDU_VEC4(T, N, (4 * S > 16 ? 16 : 4 * S))
GPUEDU_VECS(signed char, char, 1)
GPUEDU_VECS(unsigned char, uchar, 1)
GPUEDU_VECS(short, short, 2)
GPUEDU_VECS(unsigned short, ushort, 2)
GPUEDU_VECS(int, int, 4)
GPUEDU_VECS(unsigned int, uint, 4)
GPUEDU_VECS(long, long, 8)
GPUEDU_VECS(unsigned long, ulong, 8)
GPUEDU_VECS(long long, longlong, 8)
GPUEDU_VECS(unsigned long long, ulonglong, 8)
GPUEDU_VECS(float, float, 4)
GPUEDU_VECS(double, double, 8)

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// ---- built-in variables -----------------------------------------------------
// Set by the runtime before each thread runs (and on every fiber switch). A launch's blocks run on several
// OS threads at once (its workers), each with a state of its own (__gpuedu::Worker, gpuedu_runtime.h) whose
// head holds its threadIdx and blockIdx; the thread-local __gpuedu_worker points at it. It is the one
// thread-local variable there is, in a library of its own that every module shares
// (_native/gpuedu_worker.cpp), reached as a fixed offset from the thread pointer.
namespace __gpuedu {
struct WorkerHead {
  uint3 tid;
  uint3 bid;
  // In a profiled module's launch, the counters' state of this worker (the block it runs, what its blocks
  // counted: gpuedu_profile.cpp's Lane), null otherwise; and what their hooks read at every load, store and
  // basic block (its Running: zero, counting off, outside such a launch). The counters reach them here, as the
  // runtime reaches the rest, from the one thread-local pointer.
  void* prof;
  alignas(64) unsigned char prof_running[128];
};
}  // namespace __gpuedu
#if defined(__linux__) && defined(GPUEDU_PROFILE) && !defined(__clang__) && !defined(GPUEDU_SCAN)
// In g++'s profiled build the module sees the pointer as const: a thread's pointer never changes once its worker
// has set it (through a cast, gpuedu_launch.h), and g++ instruments no read of a const object, so that reading
// threadIdx costs the counters no call (its field is read unseen, below). (clang++ instruments such reads all the
// same: one call.)
extern "C" __thread __gpuedu::WorkerHead* const __gpuedu_worker __attribute__((tls_model("initial-exec")));
#elif defined(__linux__)
extern "C" __thread __gpuedu::WorkerHead* __gpuedu_worker __attribute__((tls_model("initial-exec")));
#else
// (Elsewhere one worker runs every block: a plain variable of the module.)
extern "C" __attribute__((visibility("hidden"))) __gpuedu::WorkerHead* __gpuedu_worker;
#endif
// (The runtime sets them by these names.)
#define __gpuedu_threadIdx (__gpuedu_worker->tid)
#define __gpuedu_blockIdx (__gpuedu_worker->bid)
static dim3 __gpuedu_blockDim;
static dim3 __gpuedu_gridDim;
#if defined(GPUEDU_PROFILE) && !defined(GPUEDU_SCAN)
// A GPU reads threadIdx and blockIdx from registers. In the profiled build every read of memory is a call to
// the counters, which turn these away (they are neither global nor shared memory) at the cost of the call, a
// few a thread: there they (the running thread's, in its worker) are read by an instruction the
// instrumentation does not see. blockDim and gridDim, the module's own variables, are read plainly: read by
// such an instruction, they would be memory its operand lets escape, and g++ would no longer keep values
// across stores through __restrict__ pointers (lesson 09's fused Adam loaded g, m and v again after storing m).
namespace __gpuedu {
__attribute__((always_inline)) inline unsigned unseen(const unsigned& v) {
  unsigned r;
#if defined(__x86_64__)
  __asm__("movl %1, %0" : "=r"(r) : "m"(v));
#elif defined(__aarch64__)
  __asm__("ldr %w0, %1" : "=r"(r) : "m"(v));
#else
  r = v;
#endif
  return r;
}
__attribute__((always_inline)) inline uint3 unseen(const uint3& v) { return uint3{unseen(v.x), unseen(v.y), unseen(v.z)}; }
}  // namespace __gpuedu
#define threadIdx (::__gpuedu::unseen(__gpuedu_threadIdx))
#define blockIdx (::__gpuedu::unseen(__gpuedu_blockIdx))
#else
#define threadIdx __gpuedu_threadIdx
#define blockIdx __gpuedu_blockIdx
#endif
#define blockDim __gpuedu_blockDim
#define gridDim __gpuedu_gridDim
static constexpr int warpSize = 32;

// ---- math -------------------------------------------------------------------
// float versions of the C library come from <math.h>; these are CUDA's extras.
// CUDA's names that C23 gives the C library too (rsqrt, sinpi, cospi and their float forms: glibc 2.41
// declares sinpi and cospi, others rsqrt) are macros for functions of the emulator's own names, so that
// nothing here declares a name a C library may declare, and every toolchain computes them alike.
static inline float __gpuedu_rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double __gpuedu_rsqrt(double x) { return 1.0 / sqrt(x); }
#define rsqrtf(x) __gpuedu_rsqrtf(x)
#define rsqrt(x) __gpuedu_rsqrt(x)
static inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
// glibc declares __expf and friends itself (as its own internal names): macros
// avoid clashing with those declarations.
#define __expf(x) expf(x)
#define __exp10f(x) exp10f(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __powf(x, y) powf(x, y)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __sincosf(x, s, c) (*(s) = sinf(x), *(c) = cosf(x), (void)0)
#define __tanhf(x) tanhf(x)
static inline float __fdividef(float x, float y) { return x / y; }
static inline float fdividef(float x, float y) { return x / y; }
static inline double __ddiv_rn(double x, double y) { return x / y; }
static inline float __fdiv_rn(float x, float y) { return x / y; }
static inline float __fadd_rn(float x, float y) { return x + y; }
static inline float __fsub_rn(float x, float y) { return x - y; }
static inline float __fmul_rn(float x, float y) { return x * y; }
static inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
static inline double __fma_rn(double x, double y, double z) { return fma(x, y, z); }
static inline double __dadd_rn(double x, double y) { return x + y; }
static inline double __dmul_rn(double x, double y) { return x * y; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
static inline float __saturatef(float x) { return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x)); }
static inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
static inline double normcdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752); }
// sin(pi x) and cos(pi x) with the argument reduced exactly first (sinpi(1) is 0, not sin of a rounded pi).
static inline double __gpuedu_sinpi(double x) {
  double r = remainder(x, 2.0);                      // exact, in [-1, 1]
  if (r == 0.0 || fabs(r) == 1.0) return copysign(0.0, x);
  if (fabs(r) == 0.5) return r > 0 ? 1.0 : -1.0;
  return sin(r * 3.14159265358979323846);
}
static inline double __gpuedu_cospi(double x) {
  double r = fabs(remainder(x, 2.0));
  if (r == 0.5) return 0.0;
  if (r == 0.0) return 1.0;
  if (r == 1.0) return -1.0;
  return cos(r * 3.14159265358979323846);
}
static inline float __gpuedu_sinpif(float x) { return (float)__gpuedu_sinpi(x); }
static inline float __gpuedu_cospif(float x) { return (float)__gpuedu_cospi(x); }
#define sinpi(x) __gpuedu_sinpi(x)
#define cospi(x) __gpuedu_cospi(x)
#define sinpif(x) __gpuedu_sinpif(x)
#define cospif(x) __gpuedu_cospif(x)

// Inverse error functions: a starting guess, then Newton steps on erf/erfc in double precision
// (near |y| = 1, on erfc: erf(x) - y would cancel every digit that matters).
static inline double __gpuedu_erfcinv(double y);
static inline double __gpuedu_erfinv(double y) {
  if (y <= -1.0) return y == -1.0 ? -INFINITY : NAN;
  if (y >= 1.0) return y == 1.0 ? INFINITY : NAN;
  if (y != y) return y;
  if (fabs(y) > 0.9375) return copysign(__gpuedu_erfcinv(1.0 - fabs(y)), y);
  // Giles's single-precision approximation ("Approximating the erfinv function", 2010) as the start
  double w = -log((1.0 - y) * (1.0 + y)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w; p = -3.5233877e-06 + p * w; p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;  p = -0.00125372503 + p * w; p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w; p = 0.00134934322 + p * w;  p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;  p = -0.0076224613 + p * w;  p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;     p = 2.83297682 + p * w;
  }
  double x = p * y;
  for (int i = 0; i < 3; ++i) {                      // Newton in double: erf'(x) = 2/sqrt(pi) exp(-x^2)
    double err = erf(x) - y;
    x -= err / (1.1283791670955126 * exp(-x * x));
  }
  return x;
}
static inline double __gpuedu_erfcinv(double y) {
  if (y <= 0.0) return y == 0.0 ? INFINITY : NAN;
  if (y >= 2.0) return y == 2.0 ? -INFINITY : NAN;
  if (y != y) return y;
  if (y > 0.0625 && y < 1.9375) return __gpuedu_erfinv(1.0 - y);
  // the tails: Newton on erfc itself keeps the relative precision of a tiny y
  double t = y < 1.0 ? y : 2.0 - y, x = sqrt(-log(t));
  for (int i = 0; i < 60; ++i) {
    double step = (erfc(x) - t) / (-1.1283791670955126 * exp(-x * x));
    x -= step;
    if (fabs(step) <= 1e-15 * fabs(x)) break;
  }
  return y < 1.0 ? x : -x;
}
static inline float erfinvf(float y) { return (float)__gpuedu_erfinv(y); }
static inline double erfinv(double y) { return __gpuedu_erfinv(y); }
static inline float erfcinvf(float y) { return (float)__gpuedu_erfcinv(y); }
static inline double erfcinv(double y) { return __gpuedu_erfcinv(y); }
static inline float normcdfinvf(float p) { return (float)(-1.4142135623730951 * __gpuedu_erfcinv(2.0 * (double)p)); }
static inline double normcdfinv(double p) { return -1.4142135623730951 * __gpuedu_erfcinv(2.0 * p); }

// Norms: hypot's care against overflow, in double.
static inline float rhypotf(float x, float y) { return (float)(1.0 / hypot((double)x, (double)y)); }
static inline double rhypot(double x, double y) { return 1.0 / hypot(x, y); }
static inline float norm3df(float a, float b, float c) { return (float)hypot(hypot((double)a, (double)b), (double)c); }
static inline float rnorm3df(float a, float b, float c) { return (float)(1.0 / hypot(hypot((double)a, (double)b), (double)c)); }
static inline float norm4df(float a, float b, float c, float d) {
  return (float)hypot(hypot((double)a, (double)b), hypot((double)c, (double)d));
}
static inline float rnorm4df(float a, float b, float c, float d) { return 1.0f / norm4df(a, b, c, d); }
static inline float normf(int dim, const float* p) {
  double s = 0.0; for (int i = 0; i < dim; ++i) s = hypot(s, (double)p[i]); return (float)s;
}
static inline float rnormf(int dim, const float* p) { return 1.0f / normf(dim, p); }
static inline double norm(int dim, const double* p) { double s = 0.0; for (int i = 0; i < dim; ++i) s = hypot(s, p[i]); return s; }
static inline double rnorm(int dim, const double* p) { return 1.0 / norm(dim, p); }
static inline void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }

// min/max: the overload set of CUDA's math headers (mixed int/float is ambiguous there too).
#define GPUEDU_MINMAX(T) \
  static inline T min(T a, T b) { return a < b ? a : b; } \
  static inline T max(T a, T b) { return a > b ? a : b; }
GPUEDU_MINMAX(int)
GPUEDU_MINMAX(unsigned int)
GPUEDU_MINMAX(long)
GPUEDU_MINMAX(unsigned long)
GPUEDU_MINMAX(long long)
GPUEDU_MINMAX(unsigned long long)
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline double min(float a, double b) { return fmin(a, b); }
static inline double max(float a, double b) { return fmax(a, b); }
static inline double min(double a, float b) { return fmin(a, b); }
static inline double max(double a, float b) { return fmax(a, b); }
static inline unsigned int min(int a, unsigned int b) { return min((unsigned int)a, b); }
static inline unsigned int max(int a, unsigned int b) { return max((unsigned int)a, b); }
static inline unsigned int min(unsigned int a, int b) { return min(a, (unsigned int)b); }
static inline unsigned int max(unsigned int a, int b) { return max(a, (unsigned int)b); }
#undef GPUEDU_MINMAX

#ifndef CUDART_INF_F
#define CUDART_INF_F __builtin_huge_valf()
#define CUDART_NAN_F __builtin_nanf("")
#define CUDART_INF __builtin_huge_val()
#define CUDART_NAN __builtin_nan("")
#define CUDART_PI_F 3.141592654f
#define CUDART_PI 3.1415926535897931e+0
#define CUDART_SQRT_HALF_F 0.707106781f
#define CUDART_MIN_DENORM_F 1.40129846e-45f
#define CUDART_MAX_NORMAL_F 3.40282347e+38f
#define CUDART_ZERO_F 0.0f
#define CUDART_ONE_F 1.0f
#endif

// ---- bit reinterpretation and conversions -----------------------------------
static inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
static inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
static inline float __uint_as_float(unsigned x) { float f; memcpy(&f, &x, 4); return f; }
static inline unsigned __float_as_uint(float x) { unsigned i; memcpy(&i, &x, 4); return i; }
static inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }
static inline long long __double_as_longlong(double x) { long long i; memcpy(&i, &x, 8); return i; }
static inline int __double2hiint(double x) { return (int)(__double_as_longlong(x) >> 32); }
static inline int __double2loint(double x) { return (int)__double_as_longlong(x); }
static inline double __hiloint2double(int hi, int lo) {
  return __longlong_as_double((long long)(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo));
}
// float -> int conversions: CUDA saturates and maps NaN to 0 (C++ leaves it undefined).
static inline int __gpuedu_sat_int(double v) {
  if (v != v) return 0;
  if (v >= 2147483647.0) return INT_MAX;
  if (v <= -2147483648.0) return INT_MIN;
  return (int)v;
}
static inline unsigned __gpuedu_sat_uint(double v) {
  if (v != v || v <= 0.0) return 0;
  if (v >= 4294967295.0) return UINT_MAX;
  return (unsigned)v;
}
static inline int __float2int_rn(float x) { return __gpuedu_sat_int(nearbyint((double)x)); }
static inline int __float2int_rz(float x) { return __gpuedu_sat_int(trunc((double)x)); }
static inline int __float2int_rd(float x) { return __gpuedu_sat_int(floor((double)x)); }
static inline int __float2int_ru(float x) { return __gpuedu_sat_int(ceil((double)x)); }
static inline unsigned __float2uint_rn(float x) { return __gpuedu_sat_uint(nearbyint((double)x)); }
static inline unsigned __float2uint_rz(float x) { return __gpuedu_sat_uint(trunc((double)x)); }
static inline int __double2int_rn(double x) { return __gpuedu_sat_int(nearbyint(x)); }
static inline int __double2int_rz(double x) { return __gpuedu_sat_int(trunc(x)); }
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __uint2float_rn(unsigned x) { return (float)x; }
static inline float __double2float_rn(double x) { return (float)x; }
static inline long long __float2ll_rn(float x) { return llrint(x); }
static inline long long __float2ll_rz(float x) { return (long long)x; }

// ---- integer intrinsics -----------------------------------------------------
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
  return __builtin_bswap32(x);
}
static inline unsigned long long __brevll(unsigned long long x) {
  return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
static inline int __mul24(int a, int b) { return (int)((long long)((a << 8) >> 8) * ((b << 8) >> 8)); }
static inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xFFFFFFu) * (b & 0xFFFFFFu); }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned long long v = ((unsigned long long)y << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
  return r;
}
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
  unsigned long long v = ((unsigned long long)hi << 32) | lo; return (unsigned)((v << (s & 31)) >> 32);
}
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
  unsigned long long v = ((unsigned long long)hi << 32) | lo; return (unsigned)(v >> (s & 31));
}
static inline int __sad(int a, int b, unsigned c) { return (a > b ? a - b : b - a) + (int)c; }
static inline unsigned __usad(unsigned a, unsigned b, unsigned c) { return (a > b ? a - b : b - a) + c; }
// Byte and halfword SIMD within a 32-bit word (sm_61+ __dp4a; the __v* family).
static inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i) c += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
  return c;
}
static inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  for (int i = 0; i < 4; ++i) c += ((a >> (8 * i)) & 0xffu) * ((b >> (8 * i)) & 0xffu);
  return c;
}
static inline unsigned __gpuedu_lanes(unsigned a, unsigned b, int bits, int sub) {
  unsigned out = 0, mask = bits == 16 ? 0xffffu : 0xffu;
  for (int shift = 0; shift < 32; shift += bits) {
    unsigned x = (a >> shift) & mask, y = (b >> shift) & mask;
    out |= ((sub ? x - y : x + y) & mask) << shift;
  }
  return out;
}
static inline unsigned __vadd2(unsigned a, unsigned b) { return __gpuedu_lanes(a, b, 16, 0); }
static inline unsigned __vsub2(unsigned a, unsigned b) { return __gpuedu_lanes(a, b, 16, 1); }
static inline unsigned __vadd4(unsigned a, unsigned b) { return __gpuedu_lanes(a, b, 8, 0); }
static inline unsigned __vsub4(unsigned a, unsigned b) { return __gpuedu_lanes(a, b, 8, 1); }
static inline int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
static inline int __rhadd(int a, int b) { return (int)(((long long)a + b + 1) >> 1); }

// ---- memory access hints ----------------------------------------------------
template <typename T> static inline T __ldg(const T* p) { return *p; }
template <typename T> static inline T __ldcg(const T* p) { return *p; }
template <typename T> static inline T __ldca(const T* p) { return *p; }
template <typename T> static inline T __ldcs(const T* p) { return *p; }
template <typename T> static inline T __ldlu(const T* p) { return *p; }
template <typename T> static inline T __ldcv(const T* p) { return *p; }
template <typename T> static inline void __stcg(T* p, T v) { *p = v; }
template <typename T> static inline void __stcs(T* p, T v) { *p = v; }
template <typename T> static inline void __stwb(T* p, T v) { *p = v; }
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __prof_trigger(int) {}
static inline void __nanosleep(unsigned) {}
#define __assume(x) ((void)0)
#define __builtin_assume_aligned_(p, a) (p)

// ---- clock ------------------------------------------------------------------
#include <time.h>
static inline long long clock64() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;  // a 1 GHz clock
}
#define clock() ((clock_t)clock64())

// ---- atomics (GCC __atomic builtins; CAS loops for floating point) ----------
// The overload set is CUDA's: e.g. atomicSub exists only for int and unsigned,
// and there is no atomicAdd(long long*), so code the emulator accepts compiles with nvcc.
#define GPUEDU_ATOMIC_OP(T, NAME, BUILTIN) \
  GPUEDU_ATOMIC_FN T NAME(T* a, T v) { GPUEDU_ATOMIC_AT(a); return BUILTIN(a, v, __ATOMIC_RELAXED); }
#define GPUEDU_ATOMIC_MINMAX(T) \
  GPUEDU_ATOMIC_FN T atomicMin(T* a, T v) { GPUEDU_ATOMIC_AT(a); T old = __atomic_load_n(a, __ATOMIC_RELAXED); \
    while (v < old && !__atomic_compare_exchange_n(a, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} return old; } \
  GPUEDU_ATOMIC_FN T atomicMax(T* a, T v) { GPUEDU_ATOMIC_AT(a); T old = __atomic_load_n(a, __ATOMIC_RELAXED); \
    while (v > old && !__atomic_compare_exchange_n(a, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} return old; }
#define GPUEDU_ATOMIC_CAS(T) \
  GPUEDU_ATOMIC_FN T atomicCAS(T* a, T cmp, T v) { GPUEDU_ATOMIC_AT(a); \
    __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); return cmp; }
#define GPUEDU_ATOMIC_BITS(T) \
  GPUEDU_ATOMIC_OP(T, atomicAnd, __atomic_fetch_and) GPUEDU_ATOMIC_OP(T, atomicOr, __atomic_fetch_or) \
  GPUEDU_ATOMIC_OP(T, atomicXor, __atomic_fetch_xor)
GPUEDU_ATOMIC_OP(int, atomicAdd, __atomic_fetch_add)
GPUEDU_ATOMIC_OP(unsigned int, atomicAdd, __atomic_fetch_add)
GPUEDU_ATOMIC_OP(unsigned long long, atomicAdd, __atomic_fetch_add)
GPUEDU_ATOMIC_OP(int, atomicSub, __atomic_fetch_sub)
GPUEDU_ATOMIC_OP(unsigned int, atomicSub, __atomic_fetch_sub)
GPUEDU_ATOMIC_OP(int, atomicExch, __atomic_exchange_n)
GPUEDU_ATOMIC_OP(unsigned int, atomicExch, __atomic_exchange_n)
GPUEDU_ATOMIC_OP(unsigned long long, atomicExch, __atomic_exchange_n)
GPUEDU_ATOMIC_MINMAX(int)
GPUEDU_ATOMIC_MINMAX(unsigned int)
GPUEDU_ATOMIC_MINMAX(long long)
GPUEDU_ATOMIC_MINMAX(unsigned long long)
GPUEDU_ATOMIC_CAS(int)
GPUEDU_ATOMIC_CAS(unsigned int)
GPUEDU_ATOMIC_CAS(unsigned long long)
GPUEDU_ATOMIC_CAS(unsigned short)
GPUEDU_ATOMIC_BITS(int)
GPUEDU_ATOMIC_BITS(unsigned int)
GPUEDU_ATOMIC_BITS(unsigned long long)
#undef GPUEDU_ATOMIC_OP
#undef GPUEDU_ATOMIC_MINMAX
#undef GPUEDU_ATOMIC_CAS
#undef GPUEDU_ATOMIC_BITS
// atomicInc/Dec wrap as CUDA defines them: ((old >= v) ? 0 : old+1), ((old == 0 || old > v) ? v : old-1).
GPUEDU_ATOMIC_FN unsigned atomicInc(unsigned* a, unsigned v) {
  GPUEDU_ATOMIC_AT(a);
  unsigned old = __atomic_load_n(a, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(a, &old, old >= v ? 0u : old + 1u, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
  return old;
}
GPUEDU_ATOMIC_FN unsigned atomicDec(unsigned* a, unsigned v) {
  GPUEDU_ATOMIC_AT(a);
  unsigned old = __atomic_load_n(a, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(a, &old, (old == 0u || old > v) ? v : old - 1u, false, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {}
  return old;
}
#define GPUEDU_ATOMIC_FP(T, U) \
  GPUEDU_ATOMIC_FN T atomicAdd(T* a, T v) { GPUEDU_ATOMIC_AT(a); U* p = (U*)a; U old = __atomic_load_n(p, __ATOMIC_RELAXED), nw; \
    do { T f; memcpy(&f, &old, sizeof f); f += v; memcpy(&nw, &f, sizeof nw); } \
    while (!__atomic_compare_exchange_n(p, &old, nw, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)); \
    T r; memcpy(&r, &old, sizeof r); return r; }
GPUEDU_ATOMIC_FP(float, unsigned int)
GPUEDU_ATOMIC_FP(double, unsigned long long)
#undef GPUEDU_ATOMIC_FP
GPUEDU_ATOMIC_FN float atomicExch(float* a, float v) {
  GPUEDU_ATOMIC_AT(a);
  unsigned nw, old;
  memcpy(&nw, &v, 4);
  old = __atomic_exchange_n((unsigned*)a, nw, __ATOMIC_RELAXED);
  float r;
  memcpy(&r, &old, 4);
  return r;
}
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicCAS_block atomicCAS
#define atomicExch_block atomicExch
#define atomicMax_block atomicMax
#define atomicMin_block atomicMin

// ---- printf: buffered, printed through Python's sys.stdout after the launch --
namespace __gpuedu {
void printf_append(const char* text, size_t n);
[[noreturn]] void printf_bad_string(int index, unsigned long long value);

// Walk the arguments as the format describes them, and stop the launch (instead of faulting inside the
// C library) where a %s gets a small number rather than a pointer: printf("%s", 5).
inline bool printf_in(char c, const char* set) {
  for (; *set; ++set) if (*set == c) return true;
  return false;
}
GPUEDU_PROF_QUIET inline void printf_check_strings(const char* fmt, va_list ap) {
  int index = 0;
  for (const char* p = fmt; *p; ++p) {
    if (*p != '%') continue;
    if (*++p == '%') continue;
    while (*p && printf_in(*p, "-+ #0'")) ++p;                     // flags
    if (*p == '*') { (void)va_arg(ap, int); ++index; ++p; } else while (*p >= '0' && *p <= '9') ++p;
    if (*p == '.') {
      ++p;
      if (*p == '*') { (void)va_arg(ap, int); ++index; ++p; } else while (*p >= '0' && *p <= '9') ++p;
    }
    int longs = 0;
    bool big = false;
    while (*p && printf_in(*p, "hlLqjzt")) { longs += *p == 'l'; big |= printf_in(*p, "Lqjzt"); ++p; }
    ++index;
    switch (*p) {
      case 'd': case 'i': case 'o': case 'u': case 'x': case 'X': case 'c':
        if (longs || big) (void)va_arg(ap, long long); else (void)va_arg(ap, int);
        break;
      case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': case 'a': case 'A':
        if (big) (void)va_arg(ap, long double); else (void)va_arg(ap, double);
        break;
      case 's': {
        const char* s = va_arg(ap, const char*);
        if ((unsigned long long)(size_t)s < 65536) printf_bad_string(index, (unsigned long long)(size_t)s);
        break;
      }
      case 'p': case 'n': (void)va_arg(ap, void*); break;
      default: return;                                                     // not a conversion we know: stop checking
    }
    if (!*p) return;
  }
}
}  // namespace __gpuedu
static inline int __gpuedu_printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int __gpuedu_printf(const char* fmt, ...) {
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  __gpuedu::printf_check_strings(fmt, ap);
  va_end(ap);
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return n;
  if ((size_t)n < sizeof small) {
    __gpuedu::printf_append(small, (size_t)n);
  } else {
    char* big = (char*)malloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    __gpuedu::printf_append(big, (size_t)n);
    free(big);
  }
  return n;
}
#define printf __gpuedu_printf
#endif  // GPUEDU_SCAN
