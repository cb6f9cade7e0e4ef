"""Inline PTX's instructions counted as Nsight Compute counts them: mma.sync as HMMA on the tensor pipe, ldmatrix as
LDSM (its wavefronts and bank conflicts apart from LDS's), cp.async as LDGSTS (its global sectors and its shared
wavefronts); racecheck's report of a read before the wait that lands a cp.async, and memcheck's of a cp.async that
reads past its source. The kernels of benchmarks/ptx_counts.cu (which ncu_compare.py runs on a GPU) say beside each
what Nsight Compute counts; the ones here pin one rule each, worked out in their comments."""
import importlib.util
import os

import numpy as np
import pytest

import gpuedu
from gpuedu.emulator import _module, hooks
from gpuedu.profiler import metrics, report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PTX_COUNTS = os.path.join(ROOT, "benchmarks", "ptx_counts.cu")

LDSM_WAVES = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum"
LDSM_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum"
LDGSTS_REQ = "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum"
LDGSTS_SECT = "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum"
LDGSTS_WAVES = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum"
LDGSTS_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum"
LD_REQ = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
LD_SECT = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
SASS_LD = "smsp__sass_inst_executed_op_global_ld.sum"
LDS = "smsp__sass_inst_executed_op_shared_ld.sum"
STS = "smsp__sass_inst_executed_op_shared_st.sum"

# One rule each, one warp unless said.
SOURCE = r"""
// ldmatrix.x4 alone: lane r names row r at
//   layout 0: r * 16 (4 wavefronts: each matrix's 8 rows on 8 different groups of 4 banks),
//   layout 1: r * 128 (each matrix's 8 rows on the same 4 banks: 8 wavefronts a matrix, 32, 28 conflicts),
//   layout 2: r * 128 + (r % 8) * 16 (the 128-byte rows swizzled: 4, 0 conflicts),
//   layout 3: (r / 8) * 16 (the 8 lanes of a matrix name one row: 4, as an LDS of one word by every lane).
__global__ void ldsm_x4(unsigned* out, int layout) {
  __shared__ __align__(128) unsigned char tile[4096];
  unsigned lane = threadIdx.x;
  for (int i = lane; i < 1024; i += 32) reinterpret_cast<unsigned*>(tile)[i] = i;
  __syncthreads();
  unsigned row = layout == 0 ? lane * 16 : layout == 1 ? lane * 128
               : layout == 2 ? lane * 128 + (lane % 8) * 16 : (lane / 8) * 16;
  unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(tile + row)), r0, r1, r2, r3;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a));
  out[lane] = r0 ^ r1 ^ r2 ^ r3;
}
// ldmatrix.x1 reads the rows lanes 0-7 name; the other lanes' addresses are not used (here: past shared memory).
__global__ void ldsm_x1_lanes(unsigned* out) {
  __shared__ __align__(16) unsigned short tile[8][8];
  unsigned lane = threadIdx.x;
  for (int i = lane; i < 64; i += 32) tile[i / 8][i % 8] = (unsigned short)i;
  __syncthreads();
  unsigned a = lane < 8 ? static_cast<unsigned>(__cvta_generic_to_shared(&tile[lane][0])) : 0xfffff0u, r;
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r) : "r"(a));
  out[lane] = r;
}
// cp.async of 16 bytes to shared rows 128 bytes apart: each quarter-warp's 8 rows on the same 4 banks, 8
// wavefronts each, 32 where 4 would do (28 conflicts); its global reads are 512 neighbouring bytes, 16 sectors.
__global__ void ldgsts_conflicts(float* out, const float* in) {
  __shared__ __align__(16) float s[32 * 32];
  unsigned lane = threadIdx.x;
  unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(&s[32 * lane]));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(in + 4 * lane));
  asm volatile("cp.async.wait_all;\n" ::);
  out[lane] = s[32 * lane] + s[32 * lane + 3];
}
// A cp.async of a float a thread from `in`, which holds 31: the last thread reads the 4 bytes past its end.
__global__ void ldgsts_past_the_end(float* out, const float* in) {
  __shared__ float s[32];
  unsigned t = threadIdx.x;
  unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(&s[t]));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(dst), "l"(in + t));
  asm volatile("cp.async.wait_all;\n" ::);
  out[t] = s[t];
}
// A wait, but no barrier after it: each thread's copy has landed for itself, not for the thread that reads it.
__global__ void wait_without_barrier(float* out, const float* in) {
  __shared__ __align__(16) float s[128];
  int t = threadIdx.x;
  unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(&s[4 * t]));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(in + 4 * t));
  asm volatile("cp.async.commit_group;\n" ::);
  asm volatile("cp.async.wait_group 0;\n" ::);
  out[t] = s[(t * 4 + 5) % 128];
}
"""


def _load_test_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MISSING_WAIT_SRC = _load_test_module(os.path.join(ROOT, "tests", "emulator", "test_ptx.py"),
                                     "_ptx_tests").MISSING_WAIT_SRC


@pytest.fixture(scope="module")
def emu():
    if gpuedu.setup(verbose=False).name != "cpu":
        pytest.skip("the counters are the emulator's")
    from pycuda.compiler import SourceModule
    import pycuda.gpuarray as gpuarray
    with open(PTX_COUNTS, encoding="utf-8") as f:
        counts = SourceModule(f.read(), no_extern_c=True)
    return counts, SourceModule(SOURCE), gpuarray


def profiled(fn, *args, **launch):
    with gpuedu.profile() as prof:
        fn(*args, **launch)
    (rec,) = prof.kernels
    assert rec._counts is not None, rec._reason
    return rec


def test_each_mma_sync_is_one_hmma_a_warp_on_the_tensor_pipe(emu):
    counts, _, gpuarray = emu
    # 2 blocks of 2 warps, each warp 3 m16n8k16 and 1 m16n8k8: 4 x 4 = 16 HMMA; A = B = ones in halves, so every
    # element of each lane's accumulator is 3 x 16 + 8 = 56.
    regs = gpuarray.to_gpu(np.full(32 * 6, 0x3C003C00, np.uint32))
    out = gpuarray.zeros(128 * 4, np.float32)
    rec = profiled(counts.get_function("ptx_mma"), out, regs, np.int32(3), block=(64, 1, 1), grid=(2, 1))
    np.testing.assert_array_equal(out.get(), 56.0)
    assert rec.metrics[metrics.TENSOR_HMMA] == 16
    assert (rec._counts["hmma_16816"], rec._counts["hmma_1688"], rec._counts["mma_sync"]) == (12, 4, 0)
    assert "16 inline PTX mma.sync (12 m16n8k16, HMMA.16816; 4 m16n8k8, HMMA.1688) and 0 WMMA" in \
        rec.reasons[metrics.TENSOR_HMMA]
    # the runtime's meeting of the warp is no work of the kernel's: no memory instruction, no divergent branch
    assert rec.metrics[LDS] == rec.metrics[STS] == 0 and rec.metrics[metrics.LDSM] == 0
    assert rec.metrics["smsp__sass_branch_targets_threads_divergent.sum"] == 0
    assert rec.metrics[LD_REQ] == 4 * 6            # each warp loads its 6 registers once


@pytest.mark.parametrize("layout, wavefronts, conflicts", [(0, 4, 0), (1, 32, 28), (2, 4, 0), (3, 4, 0)])
def test_an_ldmatrix_x4_takes_a_wavefront_a_matrix_unless_its_rows_share_banks(emu, layout, wavefronts, conflicts):
    _, mod, gpuarray = emu
    out = gpuarray.zeros(32, np.uint32)
    rec = profiled(mod.get_function("ldsm_x4"), out, np.int32(layout), block=(32, 1, 1))
    m = rec.metrics
    assert (m[metrics.LDSM], m[LDSM_WAVES], m[LDSM_CONFLICTS]) == (1, wavefronts, conflicts)
    assert m[LDS] == 0                              # an LDSM, not an LDS
    assert m[STS] == 32                             # the 1,024 words of the fill, 32 a store


def test_ldmatrix_x1_reads_only_the_rows_of_lanes_0_to_7(emu):
    _, mod, gpuarray = emu
    out = gpuarray.zeros(32, np.uint32)
    rec = profiled(mod.get_function("ldsm_x1_lanes"), out, block=(32, 1, 1))
    assert (rec.metrics[metrics.LDSM], rec.metrics[LDSM_WAVES], rec.metrics[LDSM_CONFLICTS]) == (1, 1, 0)
    tile = np.arange(64).reshape(8, 8)
    lanes = np.arange(32)
    want = tile[lanes // 4, 2 * (lanes % 4)] | tile[lanes // 4, 2 * (lanes % 4) + 1] << 16
    np.testing.assert_array_equal(out.get(), want)


@pytest.mark.parametrize("zeros, sectors", [(0, 8 * 20), (8, 8 * 20 - 4)])
def test_a_cp_async_is_an_ldgsts_with_a_load_s_sectors_and_a_store_s_wavefronts(emu, zeros, sectors):
    counts, _, gpuarray = emu
    # 2 blocks of 4 warps; each warp one 16-byte and one 4-byte copy: 2 LDGSTS, 16 + 4 sectors, 4 + 1 wavefronts.
    # With a zero-filling tail of 8 threads, the last warp's 16-byte copy reads 24 lanes' bytes: 4 sectors fewer.
    x = np.arange(5 * 256, dtype=np.float32)
    out = gpuarray.zeros(5 * 256, np.float32)
    rec = profiled(counts.get_function("ptx_cp_async"), out, gpuarray.to_gpu(x), np.int32(zeros),
                   block=(128, 1, 1), grid=(2, 1))
    m = rec.metrics
    assert (m[metrics.LDGSTS], m[LDGSTS_REQ], m[LDGSTS_SECT], m[LDGSTS_WAVES], m[LDGSTS_CONFLICTS]) == (
        16, 16, sectors, 40, 0)
    # the L1's global load requests and sectors include LDGSTS's, as Nsight Compute's do; the SASS load count not
    assert (m[LD_REQ], m[LD_SECT], m[SASS_LD]) == (16, sectors, 0)
    assert "includes cp.async's global reads (16 LDGSTS requests" in rec.reasons[LD_REQ]
    assert m[STS] == 0                              # the shared write is the LDGSTS's, not an STS
    wide = x[:1024].reshape(256, 4).copy()
    wide[256 - zeros:] = 0.0
    nxt = (np.arange(256) % 128 + 1) % 128 + np.arange(256) // 128 * 128
    np.testing.assert_array_equal(out.get(), np.concatenate([wide[nxt].ravel(), x[1024:][nxt]]))


def test_cp_async_writes_to_rows_that_share_banks_are_bank_conflicts(emu):
    _, mod, gpuarray = emu
    x = gpuarray.to_gpu(np.arange(128, dtype=np.float32))
    out = gpuarray.zeros(32, np.float32)
    rec = profiled(mod.get_function("ldgsts_conflicts"), out, x, block=(32, 1, 1))
    m = rec.metrics
    assert (m[metrics.LDGSTS], m[LDGSTS_SECT], m[LDGSTS_WAVES], m[LDGSTS_CONFLICTS]) == (1, 16, 32, 28)
    np.testing.assert_array_equal(out.get(), np.arange(0, 128, 4) * 2 + 3)


def test_pipeline_memcpy_async_is_counted_as_the_ldgsts_it_is(emu):
    counts, _, gpuarray = emu
    # 2 blocks of 4 warps, 4 stages: each warp one 16-byte copy a stage, 32 LDGSTS, 16 sectors and 4 wavefronts
    # each; no STS (the copies' shared writes are the LDGSTS's). (Its reads of the stages, a float4 a thread, are
    # one LDS.128 under g++ and nvcc, four scalar loads under clang++: not asserted here.)
    x = np.arange(2 * 4 * 128 * 4, dtype=np.float32).reshape(2, 4, 128, 4)
    out = gpuarray.zeros(256, np.float32)
    rec = profiled(counts.get_function("ptx_pipeline"), out, gpuarray.to_gpu(x), np.int32(4), block=(128, 1, 1),
                   grid=(2, 1))
    m = rec.metrics
    assert (m[metrics.LDGSTS], m[LDGSTS_REQ], m[LDGSTS_SECT], m[LDGSTS_WAVES], m[STS]) == (32, 32, 512, 128, 0)
    np.testing.assert_array_equal(out.get(), np.roll(x.sum(axis=(1, 3)), -1, axis=1).ravel())


def test_counts_are_the_same_on_one_or_two_workers(emu):
    counts, _, gpuarray = emu
    x = gpuarray.to_gpu(np.arange(16 * 4 * 128 * 4, dtype=np.float32))
    fill = gpuarray.to_gpu(np.arange(1024, dtype=np.uint32))
    regs = gpuarray.to_gpu(np.full(32 * 6, 0x3C003C00, np.uint32))
    out = gpuarray.zeros(16 * 128 * 7, np.float32)
    runs = [lambda: counts.get_function("ptx_pipeline")(out, x, np.int32(4), block=(128, 1, 1), grid=(16, 1)),
            lambda: counts.get_function("ptx_ldmatrix")(out, fill, np.int32(1), block=(64, 1, 1), grid=(16, 1)),
            lambda: counts.get_function("ptx_mma")(out, regs, np.int32(2), block=(64, 1, 1), grid=(16, 1))]
    for run in runs:
        found = []
        for workers in (1, 2):
            before = _module.get_threads()
            _module.set_threads(workers)
            seen = []
            try:
                with hooks.counting(seen.append, l2_bytes=(4 << 10,)):
                    run()
            finally:
                _module.set_threads(before)
            found.append(seen[0].counts)
        assert found[0] == found[1]
        assert found[0]["ldgsts_requests"] + found[0]["ldsm_requests"] + found[0]["hmma_16816"] > 0


def test_racecheck_names_a_read_before_the_wait_with_both_lines_and_what_to_do(emu):
    from pycuda.compiler import SourceModule
    _, _, gpuarray = emu
    mod = SourceModule(MISSING_WAIT_SRC)
    x = gpuarray.to_gpu(np.arange(128, dtype=np.float32))
    out = gpuarray.zeros(32, np.float32)
    with gpuedu.racecheck() as rc:
        mod.get_function("missing_wait")(out, x, block=(32, 1, 1))
    assert {h["kind"] for h in rc.hazards} == {"read-before-wait"}
    (h,) = rc.hazards
    # thread t reads word 4t + 5, the second of thread t + 1's copy (thread 31's wraps to thread 0's)
    assert h["first"]["line"] == "kernel.cu:6" and h["second"]["line"] == "kernel.cu:9"
    assert h["count"] == 32 and h["space"] == "shared"
    text = str(rc)
    assert "read-before-wait hazard in shared memory of kernel 'missing_wait'" in text
    assert "has not landed: no wait of that thread covers the copy yet" in text
    assert "cp.async.wait_group N, wait_all or __pipeline_wait_prior(N)), then __syncthreads()" in text


def test_a_wait_without_a_barrier_is_a_read_after_the_cp_async_s_write(emu):
    _, mod, gpuarray = emu
    x = gpuarray.to_gpu(np.arange(128, dtype=np.float32))
    out = gpuarray.zeros(32, np.float32)
    with gpuedu.racecheck() as rc:
        mod.get_function("wait_without_barrier")(out, x, block=(32, 1, 1))
    kinds = {(h["kind"], h["first"]["line"], h["second"]["line"]) for h in rc.hazards}
    # No barrier: the block's threads run one after another. Thread 0 reads word 5 before thread 1 issues the copy
    # that writes it (a write after a read, nothing between); thread 31 reads word 1 after thread 0's copy landed
    # at thread 0's wait, with no barrier since (a read after a write, the cp.async's line first).
    assert kinds == {("write-after-read", "kernel.cu:56", "kernel.cu:53"),
                     ("read-after-write", "kernel.cu:53", "kernel.cu:56")}


def test_racecheck_is_silent_on_pipelines_that_wait_and_then_synchronise(emu):
    counts, _, gpuarray = emu
    x = gpuarray.to_gpu(np.arange(2 * 4 * 128 * 4, dtype=np.float32))
    y = gpuarray.to_gpu(np.arange(5 * 256, dtype=np.float32))
    out = gpuarray.zeros(5 * 256, np.float32)
    with gpuedu.racecheck() as rc:
        counts.get_function("ptx_pipeline")(out, x, np.int32(4), block=(128, 1, 1), grid=(2, 1))
        counts.get_function("ptx_cp_async")(out, y, np.int32(8), block=(128, 1, 1), grid=(2, 1))
    assert rc.hazards == [] and "racecheck: no hazards found" in str(rc)


def test_memcheck_reports_a_cp_async_that_reads_past_its_source(emu):
    _, mod, gpuarray = emu
    x = gpuarray.to_gpu(np.arange(31, dtype=np.float32))
    out = gpuarray.zeros(32, np.float32)
    with gpuedu.memcheck() as mc:
        mod.get_function("ldgsts_past_the_end")(out, x, block=(32, 1, 1))
    assert [(e["kind"], e["space"], e["access"], e["size"], e["offset"], e["line"], e["thread"]) for e in mc.errors] \
        == [("out of bounds", "global", "read", 4, 124, "kernel.cu:44", (31, 0, 0))]
    assert "invalid __global__ read of size 4 in kernel 'ldgsts_past_the_end' at kernel.cu:44" in str(mc)


# wgmma (sm_90a): each warpgroup issues `steps` wgmma.mma_async m64n8k16 on an A of ones and a B of ones (both K-major,
# no swizzle, in one static tile), so each of its accumulators is 16 x steps.
WGMMA_SOURCE = r"""
__global__ void wgmma_steps(float* out, int steps) {
  __shared__ __align__(1024) unsigned short tile[64 * 16];     // A (64 x 16); B (16 x 8) is its first 256 bytes
  for (unsigned i = threadIdx.x; i < 64 * 16; i += blockDim.x) tile[i] = 0x3C00;   // 1.0 in halves
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const unsigned long long desc = ((static_cast<unsigned>(__cvta_generic_to_shared(tile)) & 0x3FFFF) >> 4)
                                  | (128ull >> 4) << 16 | (256ull >> 4) << 32;
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  for (int s = 0; s < steps; ++s)
    asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %4, 1, 1, 1, 0, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(desc));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  out[blockIdx.x * blockDim.x + threadIdx.x] = d[0] + d[1] + d[2] + d[3];
}
"""


def test_each_wgmma_is_one_a_warpgroup_and_an_hgmma_for_each_of_its_warps(emu):
    from pycuda.compiler import SourceModule
    _, _, gpuarray = emu
    f = SourceModule(WGMMA_SOURCE, arch="sm_90a").get_function("wgmma_steps")
    # 2 blocks of 2 warpgroups, 3 wgmma each: 12 wgmma, 48 warp-level HGMMA
    out = gpuarray.zeros(2 * 256, np.float32)
    with gpuedu.profile() as prof:
        f(out, np.int32(3), block=(256, 1, 1), grid=(2, 1))
    (rec,) = prof.kernels
    np.testing.assert_array_equal(out.get(), 4 * 16 * 3)
    assert rec._counts["wgmma"] == 12 and rec.metrics[metrics.TENSOR_GMMA] == 48
    assert rec.metrics[metrics.TENSOR_HMMA] == 0
    assert rec.reasons[metrics.TENSOR_GMMA].startswith("12 wgmma.mma_async (one a warpgroup a call, counted)")
    # the warpgroup's meeting is no work of the kernel's: it reads no shared memory as LDS, and branches nowhere
    assert rec.metrics[LDS] == 0 and rec.metrics["smsp__sass_branch_targets_threads_divergent.sum"] == 0
    table = report.tensor_table(prof).splitlines()
    assert table[0].split()[:4] == ["tensor", "cores", "HMMA", "GMMA"] and table[1].split()[1:3] == ["0", "48"]
    assert metrics.SINCE_SM[metrics.TENSOR_GMMA] == 90


def test_the_ncu_command_leaves_out_what_the_device_lacks():
    # LDGSTS is Ampere's: ncu refuses a command that names a metric the device does not have (a T4 is sm_75).
    turing, hopper, unknown = (metrics.ncu_command("train.py", sm=sm) for sm in (75, 90, None))
    assert "smsp__inst_executed_op_ldgsts.sum" not in turing and "op_ldgsts" not in turing
    assert "smsp__inst_executed_op_ldsm.sum" in turing and metrics.TENSOR_HMMA in turing
    assert "smsp__inst_executed_op_ldgsts.sum" in hopper and hopper == unknown
    assert metrics.TENSOR_GMMA in hopper and metrics.TENSOR_GMMA not in metrics.ncu_command("train.py", sm=80)
    assert metrics.kind("smsp__inst_executed_op_ldgsts.sum") == metrics.kind(metrics.TENSOR_HMMA) == "counted"


@pytest.mark.nvcc
def test_the_kernels_here_are_cuda_that_nvcc_compiles_for_ampere_and_hopper(tmp_path):
    import shutil
    import subprocess
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    path = tmp_path / "kernel.cu"
    path.write_text('extern "C" {\n' + SOURCE + "\n}\n")      # as SourceModule wraps it
    archs = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"]
    proc = subprocess.run(["nvcc", "-fatbin", *archs, "-o", str(tmp_path / "k.fatbin"), str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    path.write_text('extern "C" {\n' + WGMMA_SOURCE + "\n}\n")
    proc = subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-o", str(tmp_path / "k.cubin"), str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
