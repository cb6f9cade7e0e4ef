"""The device language of the prelude: math against NumPy, integer intrinsics, vector types,
constant and __device__ memory, templates and __device__ functions, printf, and the schedule."""
import ctypes

import numpy as np
import pytest

from gpuedu.emulator import driver as drv
from gpuedu.emulator._args import In, InOut, Out
from gpuedu.emulator._errors import LogicError
from gpuedu.emulator.compiler import SourceModule, get_schedule, set_schedule

DEVICE_SRC = r"""
#include <cfloat>
#include <math_constants.h>
// op selects a float function; results are compared with NumPy's float32 versions.
__global__ void unary_math(const float* x, float* y, int op, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i], r = 0.0f;
  switch (op) {
    case 0: r = expf(v); break;          case 1: r = __expf(v); break;
    case 2: r = logf(fabsf(v) + 1e-3f); break;  case 3: r = __logf(fabsf(v) + 1e-3f); break;
    case 4: r = tanhf(v); break;         case 5: r = sqrtf(fabsf(v)); break;
    case 6: r = rsqrtf(fabsf(v) + 1e-3f); break;  case 7: r = erff(v); break;
    case 8: r = sinf(v); break;          case 9: r = cosf(v); break;
    case 10: r = __sinf(v); break;       case 11: r = __cosf(v); break;
    case 12: r = floorf(v); break;       case 13: r = ceilf(v); break;
    case 14: r = roundf(v); break;       case 15: r = truncf(v); break;
    case 16: r = powf(fabsf(v), 1.5f); break;  case 17: r = __powf(fabsf(v), 1.5f); break;
    case 18: r = __fdividef(v, 3.0f); break;   case 19: r = fmaf(v, v, 1.0f); break;
    case 20: r = fmaxf(v, 0.5f) + fminf(v, -0.5f); break;
    case 21: r = max(v, 0.25f) - min(v, 0.25f); break;
    case 22: r = (float)exp((double)v); break;   case 23: r = (float)tanh((double)v); break;
    case 24: r = (float)log(fabs((double)v) + 1e-3); break;  case 25: r = (float)sqrt(fabs((double)v)); break;
  }
  y[i] = r;
}
__global__ void specials(float* y) {
  y[0] = INFINITY; y[1] = -CUDART_INF_F; y[2] = FLT_MAX; y[3] = isnan(sqrtf(-1.0f)); y[4] = isinf(1.0f / 0.0f);
  y[5] = __int_as_float(0x3f800000); y[6] = (float)__float_as_int(1.0f); y[7] = (float)__float2int_rn(2.5f);
  y[8] = (float)__float2int_rn(3.5f); y[9] = (float)__float2int_rz(-2.7f); y[10] = (float)min(3, 7);
  y[11] = (float)max(-3, 7); y[12] = CUDART_PI_F; y[13] = (float)__float2int_rn(1e20f);
}
__global__ void bits(const unsigned* x, unsigned* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = x[i];
  y[4 * i + 0] = __popc(v);
  y[4 * i + 1] = __clz((int)v);
  y[4 * i + 2] = __ffs((int)v);
  y[4 * i + 3] = __brev(v);
}
__global__ void vectors(const float4* in, float4* out, int2* ints, double2* dbl) {
  int i = threadIdx.x;
  float4 v = in[i];
  out[i] = make_float4(v.w, v.z, v.y, v.x);
  ints[i] = make_int2(i, -i);
  dbl[i] = make_double2(i * 0.5, i * 0.25);
  float2 f2 = make_float2(1.0f, 2.0f); float3 f3 = make_float3(f2.x, f2.y, 3.0f);
  if (f3.z != 3.0f) out[i].x = -1;
  uint3 u = make_uint3(1, 2, 3); dim3 d(4, 5); if (u.z + d.z != 4) out[i].y = -1;
}
__constant__ float coeffs[4];
__device__ int counter;
__global__ void polynomial(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  y[i] = ((coeffs[3] * v + coeffs[2]) * v + coeffs[1]) * v + coeffs[0];   // Horner
  atomicAdd(&counter, 1);
}
__device__ __forceinline__ float square(float v) { return v * v; }
__device__ __noinline__ float cube(float v) { return v * square(v); }
__global__ void __launch_bounds__(256) powers(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = square(__ldg(&x[i])) + cube(x[i]);
}
__global__ void say_hello(int n) {
  if (threadIdx.x < n) printf("hello from thread %d of block %d, %.2f\n", threadIdx.x, blockIdx.x, 0.5f * threadIdx.x);
}
// A shared-memory shift with NO barrier: correct only if thread t+1 ran before thread t.
__global__ void racy_shift(const int* x, int* y) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = x[t];
  // (missing __syncthreads)
  y[t] = t + 1 < 64 ? s[t + 1] : 0;
}
__global__ void timed(long long* out) {
  long long a = clock64();
  clock_t b = clock();
  out[0] = clock64() - a + (b > 0 ? 0 : 1);
}
"""

TEMPLATE_SRC = r"""
template <typename T> __device__ T twice(T v) { return v + v; }
template <typename T, int UNROLL> __global__ void scale(T* x, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
#pragma unroll
  for (int k = 0; k < UNROLL; ++k)
    if (i + k < n) x[i + k] = twice(x[i + k]);
}
template __global__ void scale<float, 2>(float*, int);
template __global__ void scale<int, 1>(int*, int);
extern "C" __global__ void square_ints(int* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * x[i] + OFFSET;
}
"""

MATH = {
    0: lambda v: np.exp(v), 1: lambda v: np.exp(v), 2: lambda v: np.log(np.abs(v) + np.float32(1e-3)),
    3: lambda v: np.log(np.abs(v) + np.float32(1e-3)), 4: np.tanh, 5: lambda v: np.sqrt(np.abs(v)),
    6: lambda v: 1 / np.sqrt(np.abs(v) + np.float32(1e-3)), 7: None, 8: np.sin, 9: np.cos, 10: np.sin, 11: np.cos,
    12: np.floor, 13: np.ceil, 14: lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5), 15: np.trunc,
    16: lambda v: np.abs(v) ** 1.5, 17: lambda v: np.abs(v) ** 1.5, 18: lambda v: v / 3,
    19: lambda v: v * v + 1, 20: lambda v: np.maximum(v, 0.5) + np.minimum(v, -0.5),
    21: lambda v: np.maximum(v, 0.25) - np.minimum(v, 0.25), 22: np.exp, 23: np.tanh,
    24: lambda v: np.log(np.abs(v) + 1e-3), 25: lambda v: np.sqrt(np.abs(v)),
}


@pytest.fixture(scope="module")
def mod():
    return SourceModule(DEVICE_SRC)


@pytest.mark.parametrize("op", sorted(MATH))
def test_math_functions_against_numpy(mod, op):
    x = np.linspace(-6, 6, 2001).astype(np.float32)
    y = np.zeros_like(x)
    mod.get_function("unary_math")(In(x), Out(y), np.int32(op), np.int32(x.size), block=(256, 1, 1), grid=(8, 1))
    if op == 7:
        from math import erf
        want = np.array([erf(float(v)) for v in x])
    else:
        want = MATH[op](x.astype(np.float64))
    # CUDA documents ≤ 2 ulp for the standard float functions; the fast ones are looser.
    np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-6)


def test_special_values_and_conversions(mod):
    y = np.zeros(14, np.float32)
    mod.get_function("specials")(Out(y), block=(1, 1, 1))
    assert y[0] == np.inf and y[1] == -np.inf and y[2] == np.finfo(np.float32).max
    assert y[3] == 1 and y[4] == 1 and y[5] == 1.0 and y[6] == 0x3F800000
    assert y[7:12].tolist() == [2, 4, -2, 3, 7] and y[12] == np.float32(np.pi) and y[13] == 2**31 - 1


def test_integer_intrinsics(mod):
    x = np.concatenate([[0, 1, 0x80000000, 0xFFFFFFFF],
                        np.random.default_rng(0).integers(0, 2**32, 996, dtype=np.uint64)]).astype(np.uint32)
    y = np.zeros(4 * x.size, np.uint32)
    mod.get_function("bits")(In(x), Out(y), np.int32(x.size), block=(256, 1, 1), grid=(4, 1))
    y = y.reshape(-1, 4)
    ints = [int(v) for v in x]
    assert y[:, 0].tolist() == [bin(v).count("1") for v in ints]
    assert y[:, 1].tolist() == [32 - v.bit_length() for v in ints]
    assert y[:, 2].tolist() == [(v & -v).bit_length() for v in ints]
    assert y[:, 3].tolist() == [int(f"{v:032b}"[::-1], 2) for v in ints]


def test_vector_types(mod):
    x = np.arange(32 * 4, dtype=np.float32)
    out = np.zeros_like(x)
    ints = np.zeros(64, np.int32)
    dbl = np.zeros(64, np.float64)
    mod.get_function("vectors")(In(x), Out(out), Out(ints), Out(dbl), block=(32, 1, 1))
    np.testing.assert_array_equal(out.reshape(32, 4), x.reshape(32, 4)[:, ::-1])
    np.testing.assert_array_equal(ints.reshape(32, 2), np.stack([np.arange(32), -np.arange(32)], 1))
    np.testing.assert_array_equal(dbl.reshape(32, 2), np.stack([np.arange(32) * 0.5, np.arange(32) * 0.25], 1))


def test_constant_and_device_globals(mod):
    ptr, size = mod.get_global("coeffs")
    assert size == 16
    c = np.array([1, -2, 0.5, 0.25], np.float32)
    drv.memcpy_htod(ptr, c)                      # as PyCUDA code sets constant memory
    back = np.zeros(4, np.float32)
    drv.memcpy_dtoh(back, ptr)
    np.testing.assert_array_equal(back, c)
    with pytest.raises(LogicError, match="past its end"):
        drv.memcpy_htod(ptr, np.zeros(5, np.float32))
    counter, csize = mod.get_global("counter")
    assert csize == 4
    ctypes.memmove(int(counter), np.zeros(1, np.int32).ctypes.data, 4)
    x = np.linspace(-2, 2, 300).astype(np.float32)
    y = np.zeros_like(x)
    mod.get_function("polynomial")(In(x), Out(y), np.int32(300), block=(128, 1, 1), grid=(3, 1))
    np.testing.assert_allclose(y, np.polyval(c[::-1], x), rtol=1e-6, atol=1e-6)
    got = np.zeros(1, np.int32)
    ctypes.memmove(got.ctypes.data, int(counter), 4)
    assert got[0] == 300
    with pytest.raises(LogicError, match="no __device__ or __constant__ variable 'nope'"):
        mod.get_global("nope")


def test_device_functions_and_qualifiers(mod):
    x = np.linspace(-3, 3, 100).astype(np.float32)
    y = np.zeros_like(x)
    mod.get_function("powers")(In(x), Out(y), np.int32(100), block=(64, 1, 1), grid=(2, 1))
    np.testing.assert_allclose(y, x * x + x * x * x, rtol=1e-6)


def test_templates_and_defines():
    mod = SourceModule(TEMPLATE_SRC, no_extern_c=True, options=["-DOFFSET=3", "-O3", "--use_fast_math",
                                                                "-lineinfo", "-arch=sm_80"])
    xf = np.arange(7, dtype=np.float32)
    mod.get_function("_Z5scaleIfLi2EEvPT_i")(InOut(xf), np.int32(7), block=(4, 1, 1))
    np.testing.assert_array_equal(xf, np.arange(7) * 2)
    xi = np.arange(5, dtype=np.int32)
    mod.get_function("_Z5scaleIiLi1EEvPT_i")(InOut(xi), np.int32(5), block=(8, 1, 1))
    mod.get_function("square_ints")(InOut(xi), np.int32(5), block=(8, 1, 1))
    np.testing.assert_array_equal(xi, (np.arange(5) * 2) ** 2 + 3)


def test_printf_reaches_sys_stdout(mod, capsys):
    mod.get_function("say_hello")(np.int32(2), block=(4, 1, 1), grid=(2, 1))
    out = capsys.readouterr().out
    assert out.splitlines() == ["hello from thread 0 of block 0, 0.00", "hello from thread 1 of block 0, 0.50",
                                "hello from thread 0 of block 1, 0.00", "hello from thread 1 of block 1, 0.50"]


def test_reverse_schedule_reveals_a_missing_barrier(mod):
    x = np.arange(64, dtype=np.int32)
    want = np.append(x[1:], 0)
    y = np.zeros_like(x)
    f = mod.get_function("racy_shift")
    assert get_schedule() == "forward"
    try:
        set_schedule("reverse")
        f(In(x), Out(y), block=(64, 1, 1))
        np.testing.assert_array_equal(y, want)      # thread t+1 ran first: looks right
        set_schedule("forward")
        f(In(x), Out(y), block=(64, 1, 1))
        assert not np.array_equal(y, want)         # the race shows
        set_schedule("random", seed=1)
        f(In(x), Out(y), block=(64, 1, 1))
        assert not np.array_equal(y, want)
    finally:
        set_schedule("forward")
    with pytest.raises(ValueError, match="unknown schedule"):
        set_schedule("sideways")


def test_clock(mod):
    out = np.zeros(1, np.int64)
    mod.get_function("timed")(Out(out), block=(1, 1, 1))
    assert out[0] >= 0
