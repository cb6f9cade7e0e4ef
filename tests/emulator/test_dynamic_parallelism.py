"""Kernels that launch kernels (dynamic parallelism): DynamicSourceModule and DynamicModule, `<<<...>>>` in
device code with relocatable device code, as the CUDA samples and PyCUDA's own tests use them; and what nvcc
and CUDA 12 refuse."""
import numpy as np
import pytest

import gpuedu.emulator.driver as drv
from gpuedu.emulator import compiler
from gpuedu.emulator._errors import CompileError, LaunchError, LogicError

# PyCUDA's test_recursive_launch: each of 100 threads of `math` launches `sub` on 100 threads.
RECURSIVE = """
__device__ void saxpy(double* s, float a, long* p, int b, long* q) {
    int tx = threadIdx.x;
    s[tx] = a * p[tx] + b * q[tx];
}
__global__ void sub(long* p, long* q, long* d) {
    int tx = threadIdx.x;
    p[tx] = 2 * p[tx];
    d[tx] = p[tx] - q[tx];
}
__device__ long add(long p, long q) { p = p + 1; return p + q; }
__global__ void math(long* a, long* b, long* c, long* d, long* e, double* f) {
    int tx = threadIdx.x;
    __shared__ long x[100];
    x[tx] = a[tx];
    __shared__ long y[100];
    y[tx] = b[tx];
    c[tx] = add(x[tx], y[tx]);
    dim3 dimGrid_sub(1, 1, 1);
    dim3 dimBlock_sub(100, 1, 1);
    sub<<<dimGrid_sub, dimBlock_sub>>>(a, b, d);
    saxpy(f, 1.0345, x, -2, y);
}
"""


def test_a_kernel_launches_a_kernel_from_each_thread_and_every_child_grid_runs(context):
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 10, 100), rng.integers(0, 10, 100)
    c, d, f = np.empty_like(a), np.empty_like(a), a.astype(np.float64)
    gpu = {name: drv.mem_alloc(x.nbytes) for name, x in dict(a=a, b=b, c=c, d=d, e=c, f=f).items()}
    drv.memcpy_htod(gpu["a"], a)
    drv.memcpy_htod(gpu["b"], b)
    mod = compiler.DynamicSourceModule(RECURSIVE)
    mod.get_function("math")(*gpu.values(), block=(100, 1, 1), grid=(1, 1, 1))
    for name, host in (("c", c), ("d", d), ("f", f)):
        drv.memcpy_dtoh(host, gpu[name])
    doubled = a.copy()
    for _ in range(100):          # 100 child grids, one per thread of the parent, each doubles a
        doubled = 2 * doubled
    np.testing.assert_array_equal(c, a + 1 + b)        # the parent's own work
    np.testing.assert_array_equal(d, doubled - b)       # the last child's
    np.testing.assert_allclose(f, np.float32(1.0345) * a - 2 * b, rtol=1e-6)


def test_sources_linked_with_the_device_runtime_launch_across_sources(context, capfd):
    outer = """#include <cstdio>
    __global__ void test_kernel() {
        extern __global__ void test_kernel_inner();
        printf("Hello outer world!\\n");
        test_kernel_inner<<<2, 1>>>();
    }"""
    inner = """#include <cstdio>
    __global__ void test_kernel_inner() { printf("  Hello inner world!\\n"); }"""
    mod = compiler.DynamicModule()
    flags = ["-rdc=true", "-lcudadevrt", *compiler.DEFAULT_NVCC_FLAGS]
    mod.add_source(outer, nvcc_options=flags).add_source(inner, nvcc_options=flags).add_stdlib("cudadevrt").link()
    mod.get_function("test_kernel")(grid=(2, 1), block=(1, 1, 1))
    out = capfd.readouterr().out
    assert out == "Hello outer world!\n" * 2 + "  Hello inner world!\n" * 4   # children after the parent grid


def test_children_launch_grandchildren_and_their_results_are_there_when_the_launch_returns(context):
    mod = compiler.DynamicSourceModule("""
    __global__ void leaf(int* x, int level) { atomicAdd(&x[level], 1); }
    __global__ void middle(int* x) { x[1] += 1; leaf<<<2, 32>>>(x, 2); }
    __global__ void root(int* x) { x[0] = 1; if (threadIdx.x < 3) middle<<<1, 1>>>(x); }
    """)
    x = np.zeros(3, np.int32)
    mod.get_function("root")(drv.InOut(x), block=(32, 1, 1), grid=(1, 1))
    assert x.tolist() == [1, 3, 3 * 64]


def test_a_fault_in_a_child_grid_names_the_child_and_its_parent(context):
    mod = compiler.DynamicSourceModule("""
    __global__ void child(float* x) { x[threadIdx.x + 1000000] = 1.0f; }
    __global__ void parent(float* x) { if (threadIdx.x == 0) child<<<1, 32>>>(x); }
    """)
    x = drv.mem_alloc(64 * 4)
    with pytest.raises(LaunchError, match=r"kernel 'child' \(a grid that kernel 'parent' launched from device code\)"):
        mod.get_function("parent")(x, block=(32, 1, 1), grid=(1, 1))
    mod.get_function("parent")  # the module and the process carry on
    ok = compiler.SourceModule("__global__ void one(float* x) { x[threadIdx.x] = 1.0f; }").get_function("one")
    ok(x, block=(64, 1, 1), grid=(1, 1))


def test_more_pending_launches_than_cuda_allows_is_an_error(context):
    mod = compiler.DynamicSourceModule("""
    __global__ void nothing() {}
    __global__ void flood() { nothing<<<1, 1>>>(); }
    """)
    with pytest.raises(LaunchError, match="more than 2048 grids from device code.*cudaLimitDevRuntimePendingLaunchCount"):
        mod.get_function("flood")(block=(1024, 1, 1), grid=(3, 1))
    mod.get_function("flood")(block=(1024, 1, 1), grid=(2, 1))   # 2,048 is the limit itself: fine


def test_a_launch_from_device_code_without_relocatable_device_code_is_refused_as_nvcc_does(context):
    with pytest.raises(CompileError, match=r"kernel.cu\(3\): error: kernel launch from __device__ or __global__ "
                                           r"functions requires separate compilation mode.*DynamicSourceModule"):
        compiler.SourceModule("""
        __global__ void child(int* x) { x[0] = 1; }
        __global__ void parent(int* x) { child<<<1, 1>>>(x); }""")


def test_device_side_cudaDeviceSynchronize_is_refused_as_cuda_12_removed_it(context):
    with pytest.raises(CompileError, match=r"kernel.cu\(4\): error: cudaDeviceSynchronize\(\) in device code was "
                                           r"removed in CUDA 12"):
        compiler.DynamicSourceModule("""
        __global__ void child(int* x) { x[0] = 1; }
        __global__ void parent(int* x) { child<<<1, 1>>>(x);
            cudaDeviceSynchronize(); }""")


def test_what_only_a_gpu_can_link_is_refused_with_the_reason(context):
    mod = compiler.DynamicModule()
    with pytest.raises(LogicError, match="not PTX, cubins"):
        mod.add_data(b".version 8.0", 1, "k.ptx")
    with pytest.raises(LogicError, match="device runtime \\(cudadevrt\\) only"):
        mod.add_stdlib("cublas_device")
    with pytest.raises(LogicError, match="no source"):
        mod.link()
    with pytest.raises(LogicError, match="call link\\(\\) before"):
        mod.get_function("k")
