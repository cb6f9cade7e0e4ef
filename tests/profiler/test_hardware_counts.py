"""The counting rules that make the emulator's counts read as Nsight Compute's on a GPU, each pinned by a
small kernel whose count is worked out by hand in the comment beside it.

Where these rules come from: Nsight Compute on an NVIDIA H200 (2026-11-26) counted 0 divergent branches
where nvcc predicates a short body, RED where an atomic's result is unused, registers as a launch gets them
(ptxas's 10 -> 16), no DRAM writes for outputs that stay in the 60 MB L2, and twice the DRAM sectors for
a stride-32 read (64-byte DRAM pairs).
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import gpuedu
from gpuedu.emulator import hooks
from gpuedu.emulator._scanner import mark_reductions
from gpuedu.profiler import metrics
from gpuedu.profiler.occupancy import allocated_registers, launch_registers, theoretical_occupancy

SOURCE = r"""
__global__ void red_and_atom(float* out, int* counters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&counters[0], 1);                 // result unused: RED
  int ticket = atomicAdd(&counters[1], 1);    // result read: ATOM
  out[i] = (float)ticket;
}
__global__ void interleaved(float* out, const float* in) {
  __shared__ float s[64];
  unsigned tid = threadIdx.x;
  s[tid] = in[tid];
  __syncthreads();
  for (unsigned st = 1; st < blockDim.x; st *= 2) {
    if (tid % (2 * st) == 0) s[tid] += s[tid + st];
    __syncthreads();
  }
  if (tid == 0) out[0] = s[0];
}
__global__ void five_stores(float* out, const float* in) {
  unsigned tid = threadIdx.x;
  float x = in[tid];
  if (tid % 2 == 0) {
    out[tid + 64] = x; out[tid + 128] = 2.0f * x; out[tid + 192] = 3.0f * x; out[tid + 256] = 4.0f * x;
    out[tid + 320] = 5.0f * x;
  }
  out[tid] = x;
}
__global__ void atomic_then_more(float* out, float* total) {
  if (threadIdx.x == 0) atomicAdd(total, 1.0f);   // one lane's global atomic, then code for every lane
  __syncthreads();
  out[threadIdx.x] = 2.0f;
}
__global__ void four_stores(float* out, const float* in) {
  unsigned tid = threadIdx.x;
  float x = in[tid];
  if (tid % 2 == 0) { out[tid + 64] = x; out[tid + 128] = 2.0f * x; out[tid + 192] = 3.0f * x; out[tid + 256] = 4.0f * x; }
  out[tid] = x;
}
__global__ void body_in_two_blocks(float* out, const float* in, int n) {
  unsigned tid = threadIdx.x;
  float x = in[tid];
  if (tid % 2 == 0) {
    out[tid + 64] = x;
    if (n > 0) out[tid + 128] = 2.0f * x;   // every lane agrees on n: a block of its own, no split
  }
  out[tid] = x;
}
__global__ void five_stores_in_two_blocks(float* out, const float* in, int n) {
  unsigned tid = threadIdx.x;
  float x = in[tid];
  if (tid % 2 == 0) {
    out[tid + 64] = x; out[tid + 128] = 2.0f * x; out[tid + 192] = 3.0f * x;
    if (n > 0) { out[tid + 256] = 4.0f * x; out[tid + 320] = 5.0f * x; }
  }
  out[tid] = x;
}
__global__ void uneven_loop(float* out, const float* in) {
  unsigned tid = threadIdx.x;
  float x = 0.0f;
  for (unsigned k = 0; k < tid % 4; ++k) x += in[k];
  out[tid] = x;
}
__global__ void copy(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}
__global__ void far_reread(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i] + in[(i + n / 2) % n];
}
__global__ void stride32(float* out, const float* in) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i * 32];
}
"""

DIVERGENT = "smsp__sass_branch_targets_threads_divergent.sum"
SH_LD, SH_LD_LANES = "smsp__sass_inst_executed_op_shared_ld.sum", "smsp__sass_thread_inst_executed_op_shared_ld.sum"


@pytest.fixture(scope="module")
def emu(emulator_module):
    return emulator_module(SOURCE)


def record(fn, *args, **launch):
    with gpuedu.profile() as prof:
        fn(*args, **launch)
    assert len(prof.kernels) == 1
    return prof.kernels[0]


def raw_counts(fn, *args, l2_bytes=(), **launch):
    seen = []
    with hooks.counting(seen.append, l2_bytes=l2_bytes):
        fn(*args, **launch)
    assert len(seen) == 1 and seen[0].counts is not None, seen[0].reason
    return seen[0].counts


# ---- RED vs ATOM ---------------------------------------------------------------------------------
def test_an_atomic_whose_result_is_unused_is_a_red_and_one_whose_result_is_read_an_atom(emu):
    mod, gpuarray = emu
    out, counters = gpuarray.zeros(128, np.float32), gpuarray.zeros(2, np.int32)
    m = record(mod.get_function("red_and_atom"), out, counters, block=(64, 1, 1), grid=(2, 1)).metrics
    # 2 blocks x 2 warps = 4 warp-level instructions of each kind, 128 lanes; every lane hits one int,
    # so each instruction touches one sector
    assert m["l1tex__t_requests_pipe_lsu_mem_global_op_red.sum"] == 4
    assert m["smsp__sass_thread_inst_executed_op_global_red.sum"] == 128
    assert m["l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum"] == 4
    assert m["l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum"] == 4
    assert m["smsp__sass_thread_inst_executed_op_global_atom.sum"] == 128
    assert list(counters.get()) == [128, 128]
    assert sorted(out.get().astype(int)) == list(range(128))   # each ATOM returned a distinct ticket


def test_the_time_model_charges_red_traffic_as_it_did_atomics(emu):
    from gpuedu.profiler.time_model import predict
    mod, gpuarray = emu
    out, counters = gpuarray.zeros(128, np.float32), gpuarray.zeros(2, np.int32)
    rec = record(mod.get_function("red_and_atom"), out, counters, block=(64, 1, 1), grid=(2, 1))
    launch = {"grid": rec.grid, "block": rec.block}
    without_red = {k: v for k, v in rec.metrics.items() if not k.endswith("red.sum")}
    # L2 sees every global sector: 4 RED + 4 ATOM + 4 x 4 store sectors; without the REDs, 4 fewer
    ratio = predict(rec.metrics, launch, "H100").terms["L2"] / predict(without_red, launch, "H100").terms["L2"]
    assert ratio == pytest.approx(24 / 20)


@pytest.mark.parametrize("code, reds", [
    ("atomicAdd(&c[0], 1);", 1),
    ("if (i < n) atomicMax(p, v);", 1),
    ("for (int k = 0; k < 4; ++k) atomicOr(&m[k], bit);", 1),
    ("{ atomicSub(p, 1); } else atomicAdd_block(q, 2);", 2),
    ("(void)atomicAdd(p, 1);", 1),
    ("int old = atomicAdd(p, 1);", 0),                     # the result is read: ATOM
    ("x = (int)atomicAdd(p, 1);", 0),
    ("return atomicInc(p, 7);", 0),
    ("if (atomicCAS(p, 0, 1) == 0) f();", 0),
    ("atomicExch(p, 5);", 0),                              # no RED form: always an ATOM
    ("atomicCAS(p, 0, 1);", 0),
    ("y = c ? 0 : atomicAdd(p, 1);", 0),
    ("// atomicAdd(p, 1);\n\"atomicAdd(p, 1);\";", 0),     # comments and strings are not code
    ("s.atomicAdd(p, 1);", 0),
    ("atomicAdd(p, __shfl_sync(0xffffffffu, v, 0));", 1),
])
def test_the_build_marks_exactly_the_atomics_whose_statement_discards_the_result(code, reds):
    marked = mark_reductions(code)
    assert marked.count("__gpuedu_prof_red(), ") == reds
    assert marked.replace("__gpuedu_prof_red(), ", "") == code   # nothing else moves
    assert marked.count("\n") == code.count("\n")


# ---- divergence as the GPU shows it --------------------------------------------------------------
def test_nvcc_predicates_the_interleaved_reduction_s_short_body_so_no_branch_diverges(emu):
    mod, gpuarray = emu
    out = gpuarray.zeros(1, np.float32)
    x = gpuarray.to_gpu(np.arange(64, dtype=np.float32))
    rec = record(mod.get_function("interleaved"), out, x, block=(64, 1, 1), grid=(1, 1))
    assert out.get()[0] == sum(range(64))
    # `if (tid % (2*st) == 0) s[tid] += s[tid + st];` is two loads, an add and a store: nvcc predicates it
    # (nvdisasm shows @!P LDS/FADD/STS and no BRA), and Nsight Compute counts 0 on the GPU
    assert rec.metrics[DIVERGENT] == 0
    # the host compiler's code does branch there: each warp splits at st = 1, 2, 4, 8, 16 (5 steps x 2 warps),
    # warp 0 at st = 32 and at `if (tid == 0)`; the reasons say how many splits were not kept as branches
    assert rec.reasons[DIVERGENT].startswith("0 of the 12 places")


def test_lanes_per_shared_load_show_what_the_predicated_reduction_loses(emu):
    mod, gpuarray = emu
    out = gpuarray.zeros(1, np.float32)
    x = gpuarray.to_gpu(np.ones(64, dtype=np.float32))
    rec = record(mod.get_function("interleaved"), out, x, block=(64, 1, 1), grid=(1, 1))
    m = rec.metrics
    # Two shared loads (s[tid], s[tid + st]) per step. Steps st = 1..16: both warps, with 32 / (2 st) = 16, 8,
    # 4, 2, 1 lanes working; st = 32: warp 0 alone, lane 0; then `out[0] = s[0]`: one lane.
    # Instructions: 5 steps x 2 warps x 2 loads + 2 + 1 = 23; lanes: 4 x (16 + 8 + 4 + 2 + 1) + 2 + 1 = 127.
    assert (m[SH_LD], m[SH_LD_LANES]) == (23, 127)
    # shared stores: s[tid] = in[tid] (2 x 32 lanes), then one a working warp and step: 10 + 1 instructions
    # with 2 x (16 + 8 + 4 + 2 + 1) + 1 = 63 lanes
    assert (m["smsp__sass_inst_executed_op_shared_st.sum"], m["smsp__sass_thread_inst_executed_op_shared_st.sum"]) \
        == (2 + 11, 64 + 63)
    # all shared instructions together: 254 lanes over 36 instructions, 7.1 of a warp's 32
    assert rec.lanes_per_instruction("shared") == pytest.approx((127 + 127) / (23 + 13))
    # the global load of in[tid] runs on every lane
    assert m["smsp__sass_thread_inst_executed_op_global_ld.sum"] == 64
    assert rec.lanes_per_instruction("global") == pytest.approx((64 + 1) / 3)


def test_a_body_of_four_stores_is_predicated_and_one_of_five_is_a_divergent_branch(emu):
    mod, gpuarray = emu
    x = gpuarray.to_gpu(np.arange(64, dtype=np.float32))
    out = gpuarray.zeros(384, np.float32)
    # nvcc 13 for sm_90 predicated the four stores and branched around the five (checked with nvdisasm):
    # the even lanes of each of the 2 warps run the body, so a divergent branch per warp, or none
    four = record(mod.get_function("four_stores"), out, x, block=(64, 1, 1), grid=(1, 1)).metrics
    five = record(mod.get_function("five_stores"), out, x, block=(64, 1, 1), grid=(1, 1)).metrics
    assert (four[DIVERGENT], five[DIVERGENT]) == (0, 2)
    assert five["smsp__sass_thread_inst_executed_op_global_st.sum"] == 64 + 5 * 32   # 16 even lanes x 2 warps x 5


def test_a_body_with_a_global_atomic_is_a_branch_nvcc_keeps(emu):
    mod, gpuarray = emu
    out, total = gpuarray.zeros(64, np.float32), gpuarray.zeros(1, np.float32)
    # nvcc 13 for sm_90 branched around `if (threadIdx.x == 0) atomicAdd(...)` followed by more code
    # (BSSY/BRA, checked with nvdisasm), and Nsight Compute counted one divergent branch a block for
    # reduction version 7's ticket on an H200: warp 0 splits, warp 1's lanes all skip the body
    rec = record(mod.get_function("atomic_then_more"), out, total, block=(64, 1, 1), grid=(3, 1))
    assert total.get()[0] == 3.0
    assert rec.metrics[DIVERGENT] == 3
    assert rec.metrics["smsp__sass_inst_executed_op_global_red.sum"] == 3


def test_a_loop_whose_trip_count_differs_by_lane_keeps_its_branch(emu):
    mod, gpuarray = emu
    x = gpuarray.to_gpu(np.ones(4, dtype=np.float32))
    out = gpuarray.zeros(64, np.float32)
    rec = record(mod.get_function("uneven_loop"), out, x, block=(64, 1, 1), grid=(1, 1))
    np.testing.assert_array_equal(out.get(), np.arange(64) % 4)
    # lanes run 0, 1, 2 or 3 iterations: a warp parts at the loop test before the first, second and third
    # iteration (after the third, all leave together): 3 divergent branches a warp, 2 warps
    assert rec.metrics[DIVERGENT] == 6


def test_a_body_the_host_compiler_cuts_into_two_blocks_is_still_one_short_body(emu):
    mod, gpuarray = emu
    x = gpuarray.to_gpu(np.arange(64, dtype=np.float32))
    out = gpuarray.zeros(384, np.float32)
    # The even lanes run `out[tid + 64] = x;` then, n > 0 for every lane, `out[tid + 128] = 2x;`: the uniform
    # `if (n > 0)` ends a basic block in the host code, but the even lanes go through both blocks splitting
    # nowhere and meet the odd lanes after 2 stores: one short body, predicated (a rule that took one basic
    # block for a body would count a divergent branch a warp here, and how many blocks a body becomes is the
    # host compiler's choice)
    two = record(mod.get_function("body_in_two_blocks"), out, x, np.int32(1), block=(64, 1, 1), grid=(1, 1))
    assert two.metrics[DIVERGENT] == 0
    assert two.reasons[DIVERGENT].startswith("0 of the 2 places")
    # the memory instructions of the whole run count: 3 + 2 stores are more than nvcc predicates
    five = record(mod.get_function("five_stores_in_two_blocks"), out, x, np.int32(1), block=(64, 1, 1), grid=(1, 1))
    assert five.metrics[DIVERGENT] == 2
    np.testing.assert_array_equal(out.get()[320:384:2], 5.0 * np.arange(0, 64, 2))


def test_the_reduction_ladder_keeps_no_divergent_branch_where_the_host_code_splits(emu):
    # Nsight Compute counted 0 divergent branches for versions 1-6 on an H200 (2026-11-26): each `if` of the
    # ladder guards a body of a few shared-memory instructions, which nvcc predicates; and one a block for
    # version 7, whose thread 0 takes a ticket with a global atomic
    _, gpuarray = emu
    from gpuedu import ops
    x = gpuarray.to_gpu(np.random.default_rng(0).standard_normal(1 << 14).astype(np.float32))
    for version in ops.REDUCE_VERSIONS:
        seen = []
        with hooks.counting(seen.append):
            total = ops.reduce_sum(x, version=version)
        assert total.get().item() == pytest.approx(float(x.get().astype(np.float64).sum()), abs=1e-2)
        expected = [r.grid[0] * r.grid[1] if version == 7 else 0 for r in seen]
        assert [r.counts["divergent_branches"] for r in seen] == expected, version
        if version <= 4:   # the tree's `if (tid ...)` splits warps in the host code: the rule had work to do
            assert sum(r.counts["host_divergent_branches"] for r in seen) > 0, version


# The cases that pin the divergence rule, run again under clang++ below.
RULE_CASES = ("test_nvcc_predicates_the_interleaved_reduction_s_short_body_so_no_branch_diverges",
              "test_a_body_of_four_stores_is_predicated_and_one_of_five_is_a_divergent_branch",
              "test_a_loop_whose_trip_count_differs_by_lane_keeps_its_branch",
              "test_a_body_the_host_compiler_cuts_into_two_blocks_is_still_one_short_body",
              "test_a_body_with_a_global_atomic_is_a_branch_nvcc_keeps",
              "test_the_reduction_ladder_keeps_no_divergent_branch_where_the_host_code_splits")
CLANG = "clang++-19"


def test_the_divergence_rule_gives_the_same_counts_under_clang(emu):
    # The rule reads the host compiler's blocks; clang++ lays code out otherwise than g++ (edge blocks,
    # unrolled loops, bounds checks cut into blocks), so its cases run again in a process whose CXX is clang++
    # (the emulator picks its compiler once a process). The toolchains' clang leg uses the same compiler.
    from gpuedu.emulator.compiler import find_cxx
    if "clang" in find_cxx()[1].lower():
        pytest.skip("this run's compiler is clang++ already: the cases above are its cases")
    if shutil.which(CLANG) is None:
        pytest.skip(f"{CLANG} is not installed (apt-get install clang-19 gives it)")
    here = os.path.abspath(__file__)
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    env = dict(os.environ, CXX=CLANG, GPUEDU_BACKEND="cpu",
               PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           *(f"{here}::{name}" for name in RULE_CASES)],
                          cwd=root, env=env, capture_output=True, text=True, timeout=900)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-4000:]
    assert f"{len(RULE_CASES)} passed" in report and "skipped" not in report, report[-4000:]


# ---- registers as a launch gets them, and as the register file allocates them ------------------
@pytest.mark.parametrize("ptxas, launch, allocated", [(0, 0, 0), (1, 16, 16), (10, 16, 16), (16, 16, 16),
                                                     (25, 25, 32), (31, 31, 32), (162, 162, 168), (255, 255, 256)])
def test_registers_as_a_launch_gets_them_and_as_the_register_file_allocates_them(ptxas, launch, allocated):
    # Nsight Compute reported 16 for every kernel ptxas gave fewer, and ptxas's own count above that (25, 30,
    # 31, not rounded), on an H200; a warp's registers come in units of 256 = 8 a thread, which occupancy counts
    assert launch_registers(ptxas) == launch
    assert allocated_registers("H200", ptxas) == allocated


def test_occupancy_follows_the_allocated_registers():
    # 1024 threads x 60 registers: 60 are 64 allocated, 2048 a warp, 32 warps = the whole 65,536 file:
    # one block fits (with 60 a thread unrounded, 61,440 would seem to leave room for more)
    occ = theoretical_occupancy("H100", 1024, 60, 0)
    assert (occ.registers_allocated, occ.blocks_per_sm, occ.active_warps_per_sm) == (64, 1, 32)
    # 64 threads x 70 registers: 72 allocated = 2304 a warp; a quarter of the file (16,384) holds 7 warps,
    # 28 warps per SM, 14 blocks of 2 warps: 43.75% of 64 warps
    occ = theoretical_occupancy("H100", 64, 70, 0)
    assert (occ.registers_allocated, occ.blocks_per_sm, occ.percent) == (72, 14, 43.75)
    with pytest.raises(ValueError, match="negative"):
        allocated_registers("H100", -1)


@pytest.mark.nvcc
def test_the_record_gives_registers_as_a_launch_gets_them_with_ptxas_s_count_in_its_reasons(emu):
    mod, gpuarray = emu
    out, x = gpuarray.zeros(64, np.float32), gpuarray.zeros(64, np.float32)
    rec = record(mod.get_function("copy"), out, x, np.int32(64), block=(64, 1, 1), grid=(1, 1))
    regs = rec.metrics["launch__registers_per_thread"]
    if regs is None:
        pytest.skip(rec.reasons["launch__registers_per_thread"])
    assert regs == max(rec.ptxas_registers, 16)
    if regs != rec.ptxas_registers:
        assert f"ptxas uses {rec.ptxas_registers} registers" in rec.reasons["launch__registers_per_thread"]


# ---- DRAM with an L2 -----------------------------------------------------------------------------
def test_an_output_that_fits_in_l2_is_not_written_to_dram_by_the_end_of_the_launch(emu):
    mod, gpuarray = emu
    n = 4096
    x, out = gpuarray.to_gpu(np.ones(n, np.float32)), gpuarray.zeros(n, np.float32)
    rec = record(mod.get_function("copy"), out, x, np.int32(n), block=(128, 1, 1), grid=(32, 1))
    # 16 KB read (64-byte pairs of whole lines: exactly the bytes), 16 KB written into a 50 MB L2: it stays
    assert rec.metrics["dram__bytes_read.sum"] == 4 * n
    assert rec.metrics["dram__bytes_write.sum"] == 0
    assert "50 MB L2 of the H100 SXM" in rec.reasons["dram__bytes_write.sum"]
    # a GPU named for the profile gives its own L2
    with gpuedu.profile(gpu="H200") as prof:
        mod.get_function("copy")(out, x, np.int32(n), block=(128, 1, 1), grid=(32, 1))
    assert "60 MB L2 of the H200 SXM" in prof.kernels[0].reasons["dram__bytes_write.sum"]


def test_an_l2_of_32_lines_writes_back_what_it_evicts_and_misses_far_re_reads(emu):
    mod, gpuarray = emu
    n = 4096              # 128 warps: warp w reads in-lines w and (w + 64) % 128, then writes out-line w
    x, out = gpuarray.to_gpu(np.arange(n, dtype=np.float32)), gpuarray.zeros(n, np.float32)
    small, big = 32 * 128, 60 * 2**20
    c = raw_counts(mod.get_function("far_reread"), out, x, np.int32(n), l2_bytes=(small, big),
                   block=(128, 1, 1), grid=(32, 1))
    np.testing.assert_array_equal(out.get(), x.get() + np.roll(x.get(), -n // 2))
    big_read, big_written = metrics.dram_bytes(c, big)
    small_read, small_written = metrics.dram_bytes(c, small)
    # 256 lines in all fit in 60 MB: each input line comes from DRAM once (16 KB), nothing is written back
    assert (big_read, big_written) == (16384, 0)
    # 32 lines: the two reads of an input line are 64 warps (192 lines) apart, so both miss: 32 KB read.
    # At the end L2 holds the 32 lines touched last: warps 118-127 (3 lines each) and warp 117's last two
    # (in-line 53, out-line 117): 11 output lines stay; the other 117 were written back, 4 sectors each.
    assert small_read == 2 * 16384
    assert small_written == 117 * 4 * 32


def test_dram_moves_64_byte_pairs_so_a_stride_32_read_fetches_twice_its_sectors(emu):
    mod, gpuarray = emu
    n = 1024
    x, out = gpuarray.to_gpu(np.ones(32 * n, np.float32)), gpuarray.zeros(n, np.float32)
    m = record(mod.get_function("stride32"), out, x, block=(128, 1, 1), grid=(8, 1)).metrics
    # every lane reads its own 128-byte line: one sector of it, but DRAM sends the 64-byte pair
    assert m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == n
    assert m["dram__bytes_read.sum"] == 64 * n == 2 * 32 * m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]


def test_counts_carried_to_a_size_beyond_l2_write_back_by_footprint():
    # extrapolated counts have no L2 run: 2 MB touched (16,384 lines), 1 MB of it written (32,768 sectors)
    counts = {"l2_lines": 16384, "dram_read_pairs": 16384, "dram_read_sectors": 32768, "dram_write_sectors": 32768}
    assert metrics.dram_bytes(counts, 4 * 2**20) == (64 * 16384, 0)            # fits: nothing written yet
    # a 512 KB L2 keeps the last quarter of the footprint: three quarters of the written bytes reach DRAM
    assert metrics.dram_bytes(counts, 512 * 1024) == (64 * 16384, 3 * 32768 * 32 // 4)


def test_a_profile_names_one_gpu_and_refuses_an_architecture_that_is_not_its_own():
    with pytest.raises(ValueError, match="is sm_80, but arch='sm_90'"):
        gpuedu.profile(arch="sm_90", gpu="A100")
    with pytest.raises(ValueError, match="unknown GPU"):
        gpuedu.profile(gpu="GTX 9999")
