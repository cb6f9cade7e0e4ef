"""How kernels are declared: extern "C" { } blocks written by the user (no_extern_c=True), mixed with
templates, device functions and nested namespaces, and kernels or device functions named like C library
functions (read, write, time, ...), which nvcc accepts and the emulator must not confuse with the host's."""
import numpy as np
import pytest

from gpuedu.emulator._args import In, InOut, Out
from gpuedu.emulator._errors import CompileError, LogicError
from gpuedu.emulator._scanner import analyse
from gpuedu.emulator.compiler import SourceModule

# A block of C-linkage kernels between C++ code: a template, a device function, a
# kernel in a C++17 nested namespace and one in an extern "C" block inside a namespace.
EXTERN_BLOCK_SRC = r"""
template <typename T> __device__ T twice(T v) { return v + v; }
__device__ float halve(float v) { return 0.5f * v; }

extern "C" {
__global__ void double_it(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = twice(x[i]);          // guard: the last block may be partial
}
__global__ void halve_it(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = halve(x[i]);
}
}  // extern "C"

template <typename T> __global__ void fill(T* x, T v) { x[threadIdx.x] = v; }
template __global__ void fill<int>(int*, int);

namespace outer::inner {
__device__ int offset() { return 100; }
extern "C" __global__ void add_offset(int* x) { x[threadIdx.x] += offset(); }
}

namespace layers {
extern "C" {
__global__ void shared_reverse(float* x) {
  __shared__ float tile[32];
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();                        // every thread's value is in tile before any is read back
  x[threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}
}
}
"""


def test_extern_c_block_kernels_are_found():
    mod = SourceModule(EXTERN_BLOCK_SRC, no_extern_c=True)
    x = np.arange(40, dtype=np.float32)
    mod.get_function("double_it")(InOut(x), np.int32(40), block=(32, 1, 1), grid=(2, 1))
    np.testing.assert_array_equal(x, 2 * np.arange(40))
    mod.get_function("halve_it")(InOut(x), np.int32(40), block=(32, 1, 1), grid=(2, 1))
    np.testing.assert_array_equal(x, np.arange(40))


def test_extern_c_block_beside_nested_namespaces_and_templates():
    mod = SourceModule(EXTERN_BLOCK_SRC, no_extern_c=True)
    y = np.arange(8, dtype=np.int32)
    mod.get_function("add_offset")(InOut(y), block=(8, 1, 1))
    np.testing.assert_array_equal(y, np.arange(8) + 100)
    z = np.arange(32, dtype=np.float32)
    mod.get_function("shared_reverse")(InOut(z), block=(32, 1, 1))
    np.testing.assert_array_equal(z, np.arange(32)[::-1])


def test_scan_names_and_qualifies_each_kernel():
    a = analyse(EXTERN_BLOCK_SRC.replace("__global__", "__gpuedu_global__"))
    found = {plain: expr for expr, plain in a.kernels}
    assert found == {"double_it": "::double_it", "halve_it": "::halve_it", "fill": "::fill<int>",
                     "add_offset": "::outer::inner::add_offset", "shared_reverse": "::layers::shared_reverse"}
    assert a.needs_fibers["shared_reverse"] and not a.needs_fibers["double_it"]


# Kernels and device functions named like functions of the C library and POSIX, with C
# linkage (SourceModule's default). Not `time`: nvcc's own headers declare time() in C.
LIBC_NAMES_SRC = r"""
__device__ int index(int i) { return 2 * i; }
__device__ float signal(float v) { return v > 0.0f ? 1.0f : -1.0f; }
__global__ void read(const float* src, float* dst) { dst[threadIdx.x] = src[threadIdx.x]; }
__global__ void write(float* dst, float v) { dst[threadIdx.x] = v; }
__global__ void open(int* out) { out[threadIdx.x] = index(threadIdx.x); }
__global__ void close(float* x) { x[threadIdx.x] = signal(x[threadIdx.x]); }
__global__ void sleep(int* out) {
  __shared__ int s[32];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();                        // all of s is written before neighbours read it
  out[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}
"""

# The same names with C++ linkage (no_extern_c=True), where `time` is allowed too: an overload.
CXX_NAMES_SRC = r"""
__device__ int read(const int* p) { return *p; }
__device__ void write(int* p, int v) { *p = v; }
__device__ int sleep(int v) { return v + 1; }
__device__ int signal(int v) { return -v; }
__global__ void time(int* out) { write(&out[threadIdx.x], signal(sleep(read(&out[threadIdx.x])))); }
extern "C" __global__ void close(int* out) { out[threadIdx.x] = sleep(threadIdx.x); }
"""


def test_kernels_named_like_libc_functions_compile_and_run():
    mod = SourceModule(LIBC_NAMES_SRC)
    src = np.arange(16, dtype=np.float32)
    dst = np.zeros(16, np.float32)
    mod.get_function("read")(In(src), Out(dst), block=(16, 1, 1))
    np.testing.assert_array_equal(dst, src)
    mod.get_function("write")(Out(dst), np.float32(7), block=(16, 1, 1))
    assert (dst == 7).all()
    out = np.zeros(16, np.int32)
    mod.get_function("open")(Out(out), block=(16, 1, 1))
    np.testing.assert_array_equal(out, 2 * np.arange(16))
    x = np.linspace(-1, 1, 16).astype(np.float32)
    mod.get_function("close")(InOut(x), block=(16, 1, 1))
    np.testing.assert_array_equal(x, np.where(np.linspace(-1, 1, 16) > 0, 1, -1))
    mod.get_function("sleep")(Out(out), block=(16, 1, 1))
    np.testing.assert_array_equal(out, (np.arange(16) + 1) % 16)


def test_cxx_linkage_kernel_named_time_beside_device_functions_named_like_libc():
    mod = SourceModule(CXX_NAMES_SRC, no_extern_c=True)
    out = np.arange(8, dtype=np.int32)
    mod.get_function("_Z4timePi")(InOut(out), block=(8, 1, 1))   # C++ linkage: the mangled name
    np.testing.assert_array_equal(out, -(np.arange(8) + 1))
    mod.get_function("close")(Out(out), block=(8, 1, 1))
    np.testing.assert_array_equal(out, np.arange(8) + 1)



OVERLOADS = r"""
__global__ void scale(float* x, float by = 2.0f) { x[threadIdx.x] *= by; }
__global__ void scale(int* __restrict__ x, const int* by) { x[threadIdx.x] *= by[0]; }
namespace other { __global__ void scale(double* x) { x[threadIdx.x] = 3.0; } }
"""


def test_overloaded_kernels_compile_with_cpp_linkage_and_each_is_found_by_its_own_name(context):
    mod = SourceModule(OVERLOADS, no_extern_c=True)
    with pytest.raises(LogicError, match=r"kernel 'scale' is overloaded \(C\+\+ linkage\), so each version has its "
                       r"own name in the module: '_Z5scalePff' \(scale\(float\*, float\)\), '_Z5scalePiPKi' "):
        mod.get_function("scale")
    f = np.ones(4, np.float32)
    mod.get_function("_Z5scalePff")(InOut(f), np.float32(5), block=(4, 1, 1))
    i = np.full(4, 3, np.int32)
    mod.get_function("_Z5scalePiPKi")(InOut(i), In(np.array([7], np.int32)), block=(4, 1, 1))
    d = np.zeros(4)
    mod.get_function("_ZN5other5scaleEPd")(Out(d), block=(4, 1, 1))
    assert f.tolist() == [5.0] * 4 and i.tolist() == [21] * 4 and d.tolist() == [3.0] * 4


def test_overloaded_kernels_under_extern_c_are_refused_with_a_message_about_overloads(context):
    with pytest.raises(CompileError) as caught:
        SourceModule(OVERLOADS.split("namespace")[0])
    text = str(caught.value)
    assert "Two functions named 'scale' take different parameters (overloads)" in text
    assert "pass no_extern_c=True" in text and "module.cpp" not in text


def test_a_c_function_overloaded_beside_the_kernels_gets_the_same_hint(context):
    with pytest.raises(CompileError, match="Two functions named 'helper' take different parameters"):
        SourceModule("__device__ float helper(float v) { return v; }\n__device__ int helper(int v) { return v; }\n"
                     "__global__ void k(float* x) { x[0] = helper(1.0f) + helper(2); }")
