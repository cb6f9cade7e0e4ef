"""Device code that nvcc refuses (host calls, exceptions, undefined symbols) is refused at compile time.

Each case runs in a fresh process: before the check, ``exit()`` in a kernel ended the process, so the test must
see a surviving process print the refusal and then run a correct kernel.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gpuedu.emulator import _linkcheck
from gpuedu.emulator import driver as drv
from gpuedu.emulator.compiler import SourceModule

SCRIPT = textwrap.dedent(r'''
    import sys
    import numpy as np
    from gpuedu.emulator import driver as drv
    from gpuedu.emulator.compiler import SourceModule
    drv.init()
    ctx = drv.Device(0).make_context()
    try:
        bad = SourceModule(sys.argv[1], no_extern_c=True).get_function("bad")
        out = np.zeros(4, np.float32)
        bad(drv.Out(out), block=(4, 1, 1))
        print("NOT REFUSED")
    except drv.CompileError as exc:
        print("CompileError:", " ".join(str(exc).split()))
    good = SourceModule("__global__ void good(int* x) { x[threadIdx.x] = 7; }").get_function("good")
    out = np.zeros(4, np.int32)
    good(drv.Out(out), block=(4, 1, 1))
    print("afterwards:", out.tolist())
''')

HEAD = '#include <cstdlib>\n#include <cstdio>\nextern "C" __global__ void bad(float* x) { if (threadIdx.x == 1) { '
CASES = [
    ("exit(3);", "calls the host function exit: device code cannot call functions that run on the CPU"),
    ("abort();", "calls the host function abort"),
    ("x[0] = (float)rand();", "calls the host function rand"),
    ('FILE* f = fopen("x", "w"); x[0] = f != 0;', "calls the host function fopen"),
    ("throw 1;", "uses C++ exceptions or run-time type information"),
]


@pytest.mark.parametrize("body, message", CASES, ids=["exit", "abort", "rand", "fopen", "throw"])
def test_a_host_call_or_a_throw_is_refused_and_the_process_goes_on(body, message, tmp_path):
    env = dict(os.environ, GPUEDU_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", SCRIPT, HEAD + body + " } x[threadIdx.x] = 1; }"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "CompileError: error: kernel code " + message in done.stdout, done.stdout
    assert "nvcc" in done.stdout and "NOT REFUSED" not in done.stdout
    assert "afterwards: [7, 7, 7, 7]" in done.stdout


def test_an_undefined_device_function_is_named():
    with pytest.raises(drv.CompileError, match=r"refers to helper\(float\), which device code does not have"):
        SourceModule('__device__ float helper(float);\n'
                     'extern "C" __global__ void k(float* x) { x[0] = helper(x[1]); }', no_extern_c=True)


def test_what_device_code_may_call_still_builds_and_runs():
    mod = SourceModule(r'''
    #include <cstdio>
    #include <cstring>
    __global__ void k(float* x) {
        float* p = (float*)malloc(4 * sizeof(float));
        memset(p, 0, 4 * sizeof(float));
        p[threadIdx.x] = sinf(1.0f) + expf(0.0f) + powf(2.0f, 2.0f) + hypotf(3.0f, 4.0f) + fmaxf(-1.0f, 0.0f);
        memcpy(x + threadIdx.x, p + threadIdx.x, sizeof(float));
        free(p);
        if (threadIdx.x == 0) printf("");
    }''')
    out = np.zeros(1, np.float32)
    mod.get_function("k")(drv.Out(out), block=(1, 1, 1))
    assert out[0] == pytest.approx(np.sin(1.0) + 1 + 4 + 5, rel=1e-6)


def test_the_allow_list_knows_math_and_compiler_helpers_and_refuses_host_functions():
    assert all(_linkcheck.allowed(n) for n in ("sinf", "exp", "hypotl", "memcpy", "malloc", "__popcountdi2", "_Znwm"))
    assert not any(_linkcheck.allowed(n) for n in ("exit", "fopen", "rand", "system", "__cxa_throw"))
    assert _linkcheck.HOST_ONLY.isdisjoint(_linkcheck.DEVICE_CALLABLE | _linkcheck.MATH)


def test_aarch64_outline_atomics_are_the_compilers_lowering_not_host_calls():
    # What g++ and clang on aarch64 call for an atomicAdd, atomicExch, atomicCAS or __syncthreads' own atomics
    # (libgcc's helpers, linked into the module): a kernel that uses them is not calling the host.
    helpers = ["__aarch64_ldadd4_relax", "__aarch64_ldadd8_acq_rel", "__aarch64_swp4_acq", "__aarch64_cas4_relax",
               "__aarch64_cas16_sync", "__aarch64_ldset1_rel", "__aarch64_ldclr2_acq", "__aarch64_ldeor8_relax"]
    assert _linkcheck.problems(set(helpers)) == []
    # The naming scheme, not a prefix: anything else under __aarch64_ is still refused, as is a misspelt order.
    for name in ("__aarch64_ldadd3_relax", "__aarch64_ldadd4_seq", "__aarch64_fopen", "__aarch64_cas4_relax_x"):
        assert not _linkcheck.allowed(name), name
        assert _linkcheck.problems({name}), name


SHARED_MEMORY_SAMPLE = r'''
template <class T> struct SharedMemory {
  __device__ inline operator T*() { extern __shared__ int __smem[]; return (T*)__smem; }
};
template <> struct SharedMemory<double> {
  __device__ inline operator double*() { extern __shared__ double __smem_d[]; return (double*)__smem_d; }
};
template <class T> __global__ void reduce0(T* g_idata, T* g_odata, unsigned int n) {
  T* sdata = SharedMemory<T>();
  unsigned int tid = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;
  sdata[tid] = (i < n) ? g_idata[i] : 0;
  __syncthreads();
  for (unsigned int s = 1; s < blockDim.x; s *= 2) {
    if ((tid % (2 * s)) == 0) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}
template __global__ void reduce0<float>(float*, float*, unsigned int);
template __global__ void reduce0<double>(double*, double*, unsigned int);
extern "C" __global__ void rows(float* out) {
  extern __shared__ float tile[][4];          // rows of 4: a pointer to arrays, in dynamic shared memory
  tile[threadIdx.y][threadIdx.x] = threadIdx.y * 10 + threadIdx.x;
  __syncthreads();
  out[threadIdx.y * 4 + threadIdx.x] = tile[3 - threadIdx.y][threadIdx.x];
}
'''


def test_extern_shared_inside_a_class_template_as_in_the_reduction_sample():
    mod = SourceModule(SHARED_MEMORY_SAMPLE, no_extern_c=True)
    for dtype, name in ((np.float32, "_Z7reduce0IfEvPT_S1_j"), (np.float64, "_Z7reduce0IdEvPT_S1_j")):
        x = np.arange(512, dtype=dtype)
        partial = np.zeros(4, dtype)
        mod.get_function(name)(drv.In(x), drv.Out(partial), np.uint32(512), block=(128, 1, 1), grid=(4, 1),
                               shared=128 * np.dtype(dtype).itemsize)
        np.testing.assert_array_equal(partial, x.reshape(4, 128).sum(axis=1))
    out = np.zeros(16, np.float32)
    mod.get_function("rows")(drv.Out(out), block=(4, 4, 1), shared=64)
    expected = np.array([[(3 - y) * 10 + x for x in range(4)] for y in range(4)], np.float32).ravel()
    np.testing.assert_array_equal(out, expected)


def test_printf_with_a_number_for_a_string_is_named_as_a_printf_mistake(capfd):
    mod = SourceModule(r'''
    __global__ void k(int* x) {
        char name[4] = {'a', 'b', 'c', 0};
        if (threadIdx.x == 0) printf("%d %5.2f %s %lld %c %% %*d|\n", 7, 1.5, name, (long long)9, 'z', 4, 3);
        if (threadIdx.x == 1) printf("%s\n", 5);
        x[threadIdx.x] = 1;
    }''')
    with pytest.raises(drv.LaunchError, match=r"thread \(1,0,0\) of block \(0,0,0\) called printf with %s for "
                                              r"argument 1, whose value is 0x5: a number, not a pointer to a string"):
        mod.get_function("k")(drv.Out(np.zeros(2, np.int32)), block=(2, 1, 1))
    ok = SourceModule(r'''__global__ void k(int* x) {
        char name[4] = {'a', 'b', 'c', 0};
        printf("%d %5.2f %s %lld %c %% %*d|\n", 7, 1.5, name, (long long)9, 'z', 4, 3); }''')
    ok.get_function("k")(drv.Out(np.zeros(1, np.int32)), block=(1, 1, 1))
    assert "7  1.50 abc 9 z %    3|" in capfd.readouterr().out
