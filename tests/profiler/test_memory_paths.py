"""Every way a kernel moves data off the chip is counted: a module's `__device__` variables are global memory, as
device allocations are, and a thread's array indexed at run time is local memory, laid out as a GPU lays it out
(word w of lane l at byte (w * 32 + l) * 4 of the warp's window: a warp at one index of its lanes' arrays reads 128
neighbouring bytes, 4 sectors); an array indexed only by constants once nvcc unrolls its loops stays in registers
and counts nothing. Each test runs with the C++ compiler of the environment (CXX=clang++-19 for clang++)."""
import numpy as np
import pytest

import gpuedu
from gpuedu.emulator import _scanner

SOURCE = r"""
__device__ float parked[1024];
__constant__ float scale[4];
__global__ void park(float* out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) parked[i] = x[i];
  __syncthreads();
  if (i < n) out[i] = parked[(i * 8) % n] * scale[0];
}
__global__ void park_atomic(const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&parked[i % 32], x[i]);
}
__global__ void local_row(float* out, const float* x, int n, int k, int spread) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float row[64];
  for (int j = 0; j < 64; j++) row[j] = x[(i + j) % n];
  out[i] = row[(k + spread * i) % 64];
}
__global__ void registers_only(float* out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc[4][4];
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++) acc[a][b] = x[(i + a * 4 + b) % n];
  float s = 0.0f;
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++) s += acc[a][b] * (a + b);
  out[i] = s;
}
"""

GLD_REQ, GLD_SECT = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
GST_REQ, GST_SECT = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
LLD_REQ, LLD_SECT = "l1tex__t_requests_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum"
LST_REQ, LST_SECT = "l1tex__t_requests_pipe_lsu_mem_local_op_st.sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"
LOCAL = (LLD_REQ, LLD_SECT, LST_REQ, LST_SECT, "smsp__sass_inst_executed_op_local_ld.sum",
         "smsp__sass_inst_executed_op_local_st.sum", "smsp__sass_thread_inst_executed_op_local_ld.sum",
         "smsp__sass_thread_inst_executed_op_local_st.sum")


@pytest.fixture(scope="module")
def emu(emulator_module):
    mod, gpuarray = emulator_module(SOURCE)
    import pycuda.driver as drv
    symbol, _ = mod.get_global("scale")
    drv.memcpy_htod(symbol, np.full(4, 2.0, np.float32))
    return mod, gpuarray


def profiled(fn, *args, **launch):
    with gpuedu.profile() as prof:
        fn(*args, **launch)
    (rec,) = prof.kernels
    return rec.metrics


def test_a_device_array_s_loads_and_stores_are_global_requests_and_sectors(emu):
    mod, gpuarray = emu
    n = 256
    x = gpuarray.to_gpu(np.arange(n, dtype=np.float32))
    y = gpuarray.empty(n, np.float32)
    m = profiled(mod.get_function("park"), y, x, np.int32(n), block=(256, 1, 1), grid=(1, 1))
    # x: 8 coalesced loads of 4 sectors; parked[i * 8 % n]: 8 loads, each lane 32 bytes from the next: 32 sectors;
    # the __constant__ scale is no global load (the constant cache serves it)
    assert m[GLD_REQ] == 8 + 8
    assert m[GLD_SECT] == 8 * 4 + 8 * 32
    assert m[GST_REQ] == 8 + 8 and m[GST_SECT] == 8 * 4 + 8 * 4   # parked[i] and out[i], coalesced
    assert m["smsp__sass_thread_inst_executed_op_global_ld.sum"] == 2 * n
    assert all(m[name] == 0 for name in LOCAL)
    np.testing.assert_array_equal(y.get(), 2.0 * x.get()[(np.arange(n) * 8) % n])


def test_an_atomic_on_a_device_array_is_a_global_red(emu):
    mod, gpuarray = emu
    x = gpuarray.to_gpu(np.ones(128, np.float32))
    m = profiled(mod.get_function("park_atomic"), x, np.int32(128), block=(128, 1, 1), grid=(1, 1))
    assert m["l1tex__t_requests_pipe_lsu_mem_global_op_red.sum"] == 4
    assert m["l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum"] == 4 * 4


@pytest.mark.parametrize("spread, sectors_per_load", [(0, 4), (1, 32), (7, 32)])
def test_a_runtime_indexed_thread_array_is_local_memory_interleaved_across_the_warp(emu, spread, sectors_per_load):
    mod, gpuarray = emu
    n = 256
    x = gpuarray.to_gpu(np.arange(n, dtype=np.float32))
    y = gpuarray.empty(n, np.float32)
    m = profiled(mod.get_function("local_row"), y, x, np.int32(n), np.int32(5), np.int32(spread),
                 block=(128, 1, 1), grid=(2, 1))
    warps = n // 32
    # row[j] = ...: 64 stores a warp, every lane at the same index: 128 neighbouring bytes, 4 sectors each
    assert m[LST_REQ] == 64 * warps and m[LST_SECT] == 64 * warps * 4
    # row[k + spread * i]: one load a warp; the same index in every lane is 4 sectors, 32 different ones 32
    assert m[LLD_REQ] == warps and m[LLD_SECT] == warps * sectors_per_load
    assert m["smsp__sass_inst_executed_op_local_st.sum"] == 64 * warps
    assert m["smsp__sass_thread_inst_executed_op_local_ld.sum"] == n
    assert m[GLD_REQ] == 64 * warps            # x's loads, as before
    expected = x.get()[(np.arange(n) + (5 + spread * np.arange(n)) % 64) % n]
    np.testing.assert_array_equal(y.get(), expected)


def test_an_array_indexed_only_by_unrolled_loops_stays_in_registers(emu):
    mod, gpuarray = emu
    n = 256
    x = gpuarray.to_gpu(np.arange(n, dtype=np.float32))
    y = gpuarray.empty(n, np.float32)
    m = profiled(mod.get_function("registers_only"), y, x, np.int32(n), block=(128, 1, 1), grid=(2, 1))
    assert all(m[name] == 0 for name in LOCAL)
    assert m[GLD_REQ] == 16 * n // 32


def test_the_lanes_per_instruction_see_local_memory(emu):
    mod, gpuarray = emu
    x = gpuarray.to_gpu(np.arange(64, dtype=np.float32))
    y = gpuarray.empty(64, np.float32)
    with gpuedu.profile() as prof:
        mod.get_function("local_row")(y, x, np.int32(64), np.int32(0), np.int32(0), block=(64, 1, 1), grid=(1, 1))
    assert prof.kernels[0].lanes_per_instruction() == 32


def _judged(body, params="float* out, const float* x, int n"):
    code = f'# 1 "kernel.cu"\nvoid k({params}) {{\n{body}\n}}\n'
    return sorted(name for _, _, _, name in _scanner.local_arrays(code, "module.cpp", "/nowhere"))


@pytest.mark.parametrize("body, local", [
    ("float a[8]; for (int j = 0; j < 8; j++) a[j] = x[j]; out[0] = a[n % 8];", ["a"]),   # a run-time index
    ("float a[8]; for (int j = 0; j < n; j++) a[j % 8] = x[j]; out[0] = a[3];", ["a"]),   # a loop nvcc cannot unroll
    ("float a[4][4]; for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) a[i][j] = x[i]; out[0] = a[1][2];", []),
    ("float s[32]; for (int r = 0; r < 32; r++) { float d = 0; for (int c = 0; c < 16; c++) d += x[c]; s[r] = d; }"
     " out[0] = s[0];", ["s"]),   # 512 turns: nvcc 13 kept this one in local memory (128 bytes of stack frame)
    ("float s[24]; for (int r = 0; r < 24; r++) { float d = 0; for (int c = 0; c < 16; c++) d += x[c]; s[r] = d; }"
     " out[0] = s[0];", []),      # 384 turns: unrolled, in registers
    ("float s[64];\n#pragma unroll\nfor (int r = 0; r < 64; r++) { for (int c = 0; c < 16; c++) s[r] += x[c]; }", []),
    ("float s[64];\n#pragma unroll 1\nfor (int r = 0; r < 64; r++) s[r] = x[r];", ["s"]),
    ("float a[8]; int k = 3; a[k] = 1; out[0] = a[k];", []),           # a scalar that is a constant
    ("float a[8]; int k = n; a[k] = 1;", ["a"]),
    ("float a[8]; a[threadIdx.x % 8] = 1;", ["a"]),
    ("float a[8]; for (int j = 0; j < 2; j += 4) for (int jj = j; jj < j + 4 && jj < n; jj++) a[jj] = 0;", []),
    ("float a[8], b[8]; a[0] = 1; b[n] = 2;", ["b"]),
    ("float a[8]; helper(a, n);", []),     # indexed only in the function it is passed to: judged by its own uses
    ("out[n] = 2.0f * x[n] * x[n + 1];", []),                         # an expression, no declaration
    ("for (int j = 0; j < n; j++) { float a[4]; a[j % 4] = x[j]; out[j] = a[0]; }", ["a"]),
])
def test_the_build_judges_local_arrays_as_nvcc_places_them(body, local):
    assert _judged(body) == local


def test_the_marked_declaration_keeps_its_line_and_its_name():
    text = "  float row[64] = {0};  // a row\n  float s = row[n];\n"
    marked = _scanner.mark_local_arrays(text, [(1, 1, "row")])
    assert marked.count("\n") == text.count("\n")
    assert marked.startswith("  float __gpuedu_local_row[64] = {0}; auto& row = "
                             "*::__gpuedu::prof::local(__builtin_addressof(__gpuedu_local_row));  // a row\n")
