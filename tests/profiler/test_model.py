"""The modelled GPU time, on synthetic counters whose answer follows by hand."""
import math

import pytest

from gpuedu.profiler.gpus import get_gpu
from gpuedu.profiler.time_model import (BARRIER_CYCLES, BARRIERS, DRAM_EFFICIENCY, DRAM_LATENCY_S, GLOBAL_LINES,
                                       HOST_LAUNCH_S, MMA_SYNC, TENSOR_HMMA,
                                       L2_LATENCY_CYCLES, LAUNCH_OVERHEAD_S, ROOFS, SHARED_LATENCY_CYCLES,
                                       arithmetic_intensity, compute_peak, format_seconds, predict, roofline,
                                       timeline)
from gpuedu.profiler.occupancy import theoretical_occupancy

H100 = get_gpu("H100")


def counters(ld=(0, 0), st=(0, 0), shared=(0, 0), dram=(0, 0), **extra):
    """Counters by kind: global (requests, sectors) for loads and stores, shared wavefronts
    (loads, stores), DRAM bytes (read, written)."""
    found = {
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": ld[0],
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": ld[1],
        "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": st[0],
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": st[1],
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": shared[0],
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": shared[1],
        "dram__bytes_read.sum": dram[0],
        "dram__bytes_write.sum": dram[1],
    }
    found.update(extra)
    return found


# A float copy of 256 MB: 64e6 threads, one 128-byte request (4 sectors) per warp each way.
COPY_BYTES = 256_000_000
COPY_WARPS = COPY_BYTES // 4 // 32
COPY = counters(ld=(COPY_WARPS, 4 * COPY_WARPS), st=(COPY_WARPS, 4 * COPY_WARPS), dram=(COPY_BYTES, COPY_BYTES))
COPY_LAUNCH = {"grid": (COPY_BYTES // 4 // 256, 1, 1), "block": (256, 1, 1), "shared_dynamic": 0}


# The same copy as a grid-stride loop of float4s: 1,056 blocks (8 an SM), each request 512 bytes (16 sectors).
STREAM = counters(ld=(COPY_BYTES // 512, COPY_BYTES // 32), st=(COPY_BYTES // 512, COPY_BYTES // 32),
                  dram=(COPY_BYTES, COPY_BYTES))
STREAM_LAUNCH = {"grid": (1056, 1, 1), "block": (256, 1, 1)}
CLOCK = H100.clock_hz
DRAM_ROUND_TRIP = DRAM_LATENCY_S * CLOCK     # in clocks


def test_streaming_copy_is_dram_bound_at_the_achievable_bandwidth():
    p = predict(STREAM, STREAM_LAUNCH, "H100")
    assert p.limiter == "DRAM"
    assert p.seconds == pytest.approx(LAUNCH_OVERHEAD_S + 2 * COPY_BYTES / (3.35e12 * DRAM_EFFICIENCY))
    # L2 carries the same bytes at ~12 TB/s; the L1 path sees 4 wavefronts a request, the busiest SM 8 blocks' worth.
    assert p.terms["L2"] == pytest.approx(2 * COPY_BYTES / H100.l2_bytes_per_s)
    busiest = 8 / 1056
    assert p.terms["L1/shared"] == pytest.approx(2 * 4 * COPY_BYTES // 512 * busiest / CLOCK)


def test_one_float_a_thread_copy_waits_a_dram_round_trip_per_wave_of_blocks():
    # 250,000 blocks, 8 an SM at once: the busiest SM runs 1,894 blocks in 237 waves, each a block's start and end
    # (an L2 round trip) and one load round trip to DRAM; the SM's 2 memory instructions a warp issue 4 a clock.
    p = predict(COPY, COPY_LAUNCH, "H100")
    busiest = math.ceil(250_000 / 132) / 250_000
    serial = 2 * COPY_WARPS * busiest / 4
    assert p.limiter == "latency/occupancy"
    assert p.terms["latency/occupancy"] == pytest.approx((237 * (L2_LATENCY_CYCLES + DRAM_ROUND_TRIP) + serial) / CLOCK)
    assert p.terms["issue"] == pytest.approx(serial / CLOCK)
    assert any("237 wave(s)" in note for note in p.assumptions)


def test_copy_with_too_few_warps_is_latency_bound():
    # 64 blocks of 256 threads walking the array: each warp's 3,906.25 loads wait one by one, a store between two.
    p = predict(COPY, {"grid": (64, 1, 1), "block": (256, 1, 1)}, "H100")
    loads = COPY_WARPS / 512
    assert p.limiter == "latency/occupancy"
    assert p.terms["latency/occupancy"] == pytest.approx(
        (L2_LATENCY_CYCLES + loads * DRAM_ROUND_TRIP + 2 * COPY_WARPS / 64 / 4) / CLOCK)   # one block an SM
    assert any("fill 64 of the 132 SMs" in note for note in p.assumptions)


def test_loads_without_stores_between_them_wait_two_at_a_time():
    # 4 loads a warp and no store: two rounds; with a store after each load: four.
    launch = {"grid": (132, 1, 1), "block": (32, 1, 1)}
    reads = counters(ld=(4 * 132, 16 * 132), dram=(4 * 132 * 128, 0))
    copies = counters(ld=(4 * 132, 16 * 132), st=(4 * 132, 16 * 132), dram=(4 * 132 * 128, 0))
    two, four = (predict(m, launch, "H100").terms["latency/occupancy"] * CLOCK for m in (reads, copies))
    assert two == pytest.approx(L2_LATENCY_CYCLES + 2 * DRAM_ROUND_TRIP + 4 / 4)
    assert four == pytest.approx(L2_LATENCY_CYCLES + 4 * DRAM_ROUND_TRIP + 8 / 4)


def test_loads_l2_serves_wait_an_l2_round_trip():
    # Half the loaded bytes come from DRAM: a round trip is half DRAM's, half L2's.
    launch = {"grid": (132, 1, 1), "block": (32, 1, 1)}
    p = predict(counters(ld=(132, 4 * 132), dram=(132 * 64, 0)), launch, "H100")
    assert p.terms["latency/occupancy"] * CLOCK == pytest.approx(
        L2_LATENCY_CYCLES + (DRAM_ROUND_TRIP + L2_LATENCY_CYCLES) / 2 + 1 / 4)


def test_each_barrier_adds_a_barrier_and_a_shared_round_trip_to_the_chain_and_its_instructions_to_the_sm():
    launch = {"grid": (132, 1, 1), "block": (256, 1, 1)}
    plain = predict(counters(), launch, "H100")
    synced = predict(counters(**{BARRIERS: 132 * 10}), launch, "H100")
    # Per block: 10 barriers of (barrier + shared round trip) on the chain; 8 warps x 10 barrier instructions.
    extra = 10 * (BARRIER_CYCLES + SHARED_LATENCY_CYCLES) + 8 * 10 / 4
    assert (synced.terms["latency/occupancy"] - plain.terms["latency/occupancy"]) * CLOCK == pytest.approx(extra)
    assert any("barriers unknown" in note for note in plain.assumptions)
    assert not any("barriers unknown" in note for note in synced.assumptions)


def test_loads_between_barriers_go_together():
    # 4 loads and 4 stores a warp: with no barrier a store may alias the next load (4 rounds); with one barrier
    # the loads before it go two at a time (2 rounds).
    launch = {"grid": (132, 1, 1), "block": (32, 1, 1)}
    m = counters(ld=(4 * 132, 16 * 132), st=(4 * 132, 16 * 132), dram=(4 * 132 * 128, 0))
    free = predict(m, launch, "H100").terms["latency/occupancy"] * CLOCK
    synced = predict({**m, BARRIERS: 132}, launch, "H100").terms["latency/occupancy"] * CLOCK
    assert free == pytest.approx(L2_LATENCY_CYCLES + 4 * DRAM_ROUND_TRIP + 8 / 4)
    assert synced == pytest.approx(L2_LATENCY_CYCLES + 2 * DRAM_ROUND_TRIP + BARRIER_CYCLES + SHARED_LATENCY_CYCLES
                                   + 8 / 4 + 1 / 4)


def test_a_request_scattered_over_lines_takes_a_wavefront_per_line_and_is_replayed():
    # One warp's store of 32 floats 128 bytes apart: 32 lines (the emulator counts them), against 1 coalesced.
    launch = {"grid": (1, 1, 1), "block": (32, 1, 1)}
    coalesced = predict({**counters(st=(1, 4)), GLOBAL_LINES: 1}, launch, "H100")
    scattered = predict({**counters(st=(1, 32)), GLOBAL_LINES: 32}, launch, "H100")
    assert coalesced.terms["L1/shared"] * CLOCK == pytest.approx(1)
    assert scattered.terms["L1/shared"] * CLOCK == pytest.approx(32)
    assert (scattered.terms["latency/occupancy"] - coalesced.terms["latency/occupancy"]) * CLOCK == pytest.approx(31)
    # without the line count, a request is the lines its sectors fill at least
    assert predict(counters(st=(1, 32)), launch, "H100").terms["L1/shared"] * CLOCK == pytest.approx(8)
    assert any("lines it touches (counted" in note for note in scattered.assumptions)


def test_a_warm_l2_takes_dram_out_and_makes_loads_l2_round_trips():
    launch = {"grid": (132, 1, 1), "block": (32, 1, 1)}
    m = counters(ld=(132, 4 * 132), dram=(132 * 128, 0))
    cold, warm = predict(m, launch, "H100"), predict(m, launch, "H100", l2_warm=True)
    assert warm.terms["DRAM"] == 0 < cold.terms["DRAM"]
    assert warm.terms["latency/occupancy"] * CLOCK == pytest.approx(2 * L2_LATENCY_CYCLES + 1 / 4)
    assert cold.terms["latency/occupancy"] * CLOCK == pytest.approx(L2_LATENCY_CYCLES + DRAM_ROUND_TRIP + 1 / 4)
    assert any("L2 warm" in note for note in warm.assumptions)


def test_shared_wavefronts_add_to_the_waits():
    launch = {"grid": (132, 1, 1), "block": (256, 1, 1)}
    calm = predict(counters(shared=(132 * 100, 0)), launch, "H100")
    conflicted = predict(counters(shared=(132 * 400, 0)), launch, "H100")
    assert (conflicted.terms["latency/occupancy"] - calm.terms["latency/occupancy"]) * CLOCK == pytest.approx(300)


def test_register_hungry_kernel_waits_through_more_waves():
    lean = theoretical_occupancy("H100", 256, 32, 0)      # 8 blocks an SM
    hungry = theoretical_occupancy("H100", 256, 128, 0)   # 2 blocks an SM
    fast = predict(COPY, COPY_LAUNCH, "H100", occupancy=lean)
    slow = predict(COPY, COPY_LAUNCH, "H100", occupancy=hungry)
    serial = 2 * COPY_WARPS * math.ceil(250_000 / 132) / 250_000 / 4 / CLOCK
    # 1,894 blocks on the busiest SM: 237 waves of 8, or 947 of 2.
    assert slow.terms["latency/occupancy"] - serial == pytest.approx(947 / 237 * (fast.terms["latency/occupancy"] - serial))
    assert slow.limiter == "latency/occupancy"


def test_timeline_puts_each_launch_after_the_host_has_issued_it():
    short = predict(counters(), {"grid": 1, "block": 32}, "H100")
    long = predict(STREAM, STREAM_LAUNCH, "H100")
    # One launch: the host's issue, then the kernel.
    assert timeline([long]) == pytest.approx(HOST_LAUNCH_S + long.seconds)
    # A long kernel hides the host's next launches; short kernels after each other wait for the host.
    assert timeline([long, short, short]) == pytest.approx(HOST_LAUNCH_S + long.seconds + 2 * short.seconds)
    assert timeline([short] * 3) == pytest.approx(3 * HOST_LAUNCH_S + short.seconds)
    assert timeline([short] * 3, host_seconds=0) == pytest.approx(3 * short.seconds)
    with pytest.raises(ValueError, match="at least one"):
        timeline([])
    with pytest.raises(TypeError, match="Predictions"):
        timeline([1e-6])
    with pytest.raises(ValueError, match="host_seconds"):
        timeline([short], host_seconds=-1)


def test_huge_flop_count_is_compute_bound():
    flops = 1e15
    p = predict(COPY, COPY_LAUNCH, "H100", flops=flops)
    assert p.limiter == "compute"
    busiest = math.ceil(250_000 / 132) / 250_000 * 132
    assert p.seconds == pytest.approx(LAUNCH_OVERHEAD_S + flops / 67e12 * busiest)


def test_tensor_core_flops_run_at_the_dense_fp16_tensor_peak():
    flops = 1e15
    busiest = math.ceil(250_000 / 132) / 250_000 * 132
    p = predict(COPY, COPY_LAUNCH, "H100", flops=flops, pipe="tensor")
    assert p.limiter == "compute"
    assert p.seconds == pytest.approx(LAUNCH_OVERHEAD_S + flops / 989e12 * busiest)
    assert any("dense FP16 tensor-core peak of 989 TFLOP/s" in note for note in p.assumptions)
    assert compute_peak("H100", "tensor") == 989e12 and compute_peak("H100") == 67e12
    with pytest.raises(ValueError, match="pipe must be one of"):
        predict(COPY, COPY_LAUNCH, "H100", flops=flops, pipe="fp16")


def test_each_warp_s_mma_syncs_wait_one_after_another_on_its_block_s_chain():
    # 132 blocks of 4 warps, 100 mma_sync a warp, nothing else: one wave, whose chain is a block's start and end
    # (an L2 round trip) and the warp's 100 mma_syncs at Hopper's 59 clocks each.
    launch = {"grid": (132, 1, 1), "block": (128, 1, 1)}
    p = predict(counters(**{MMA_SYNC: 132 * 4 * 100}), launch, "H100")
    assert H100.mma_sync_cycles == 59 == get_gpu("H200").mma_sync_cycles
    assert p.terms["latency/occupancy"] * CLOCK == pytest.approx(L2_LATENCY_CYCLES + 100 * 59)
    assert p.limiter == "latency/occupancy"
    assert any("52,800 WMMA mma_sync counted, 100 a warp, one after another on its chain at 59 clocks each" in note
               for note in p.assumptions)
    # Twice the blocks with room for one an SM: two waves, each a block's whole chain.
    one_an_sm = theoretical_occupancy("H100", 128, 32, 150 * 1024)   # shared memory for one block an SM
    assert one_an_sm.blocks_per_sm == 1
    q = predict(counters(**{MMA_SYNC: 264 * 4 * 100}), {"grid": (264, 1, 1), "block": (128, 1, 1)}, "H100",
                occupancy=one_an_sm)
    assert q.terms["latency/occupancy"] * CLOCK == pytest.approx(2 * (L2_LATENCY_CYCLES + 100 * 59))


def test_mma_syncs_add_to_the_other_waits_of_the_chain():
    # 2 barriers a block and 10 mma_sync a warp (8 warps): the chain is start + 2 barrier steps + 10 x 59; the SM's
    # barrier instructions (8 warps x 2, four a clock) come on top, as without the mma_syncs.
    launch = {"grid": (132, 1, 1), "block": (256, 1, 1)}
    plain = predict(counters(**{BARRIERS: 132 * 2}), launch, "H200")
    tensor = predict(counters(**{BARRIERS: 132 * 2, MMA_SYNC: 132 * 8 * 10}), launch, "H200")
    assert (tensor.terms["latency/occupancy"] - plain.terms["latency/occupancy"]) * CLOCK == pytest.approx(590)
    assert plain.terms["latency/occupancy"] * CLOCK == pytest.approx(
        L2_LATENCY_CYCLES + 2 * (BARRIER_CYCLES + SHARED_LATENCY_CYCLES) + 8 * 2 / 4)
    # The compute roof stays the dense peak: the wait is a warp's, not the tensor cores' rate.
    flops = 132 * 8 * 10 * 8192
    assert tensor.terms["latency/occupancy"] > predict(counters(**{BARRIERS: 132 * 2, MMA_SYNC: 132 * 8 * 10}), launch,
                                                       "H200", flops=flops, pipe="tensor").terms["compute"]


def test_mma_syncs_are_not_charged_where_the_gpu_has_no_measured_wait_or_the_count_is_unknown():
    launch = {"grid": (108, 1, 1), "block": (128, 1, 1)}
    counted = predict(counters(**{MMA_SYNC: 108 * 4 * 100}), launch, "A100")
    none = predict(counters(), launch, "A100")
    assert get_gpu("A100").mma_sync_cycles is None
    assert counted.terms["latency/occupancy"] == none.terms["latency/occupancy"]
    assert any("43,200 WMMA mma_sync counted (100 a warp); the wait on each is not modelled on the A100 SXM4 80GB"
               in note for note in counted.assumptions)
    # A count from before the emulator counted mma_syncs (None) is said to be unknown; an absent one is 0.
    unknown = predict(counters(**{MMA_SYNC: None}), {"grid": (132, 1, 1), "block": (128, 1, 1)}, "H100")
    assert any("mma_sync unknown" in note for note in unknown.assumptions)
    assert not any("mma_sync" in note for note in predict(counters(), launch, "H100").assumptions)


def test_inline_ptx_hmma_waits_half_a_wmma_mma_sync_on_the_warps_chain():
    # 132 blocks of 4 warps, 100 HMMA a warp (inline PTX mma.sync): one wave, whose chain is a block's start and end
    # and the warp's 100 HMMA at half of Hopper's 59 clocks a WMMA mma_sync (two HMMA.16816) each.
    launch = {"grid": (132, 1, 1), "block": (128, 1, 1)}
    assert H100.hmma_cycles == 29.5 == get_gpu("H200").hmma_cycles == H100.mma_sync_cycles / 2
    p = predict(counters(**{TENSOR_HMMA: 132 * 4 * 100}), launch, "H100")
    assert p.terms["latency/occupancy"] * CLOCK == pytest.approx(L2_LATENCY_CYCLES + 100 * 29.5)
    assert any("52,800 HMMA (inline PTX mma.sync) counted, 100 a warp, one after another on its chain at 29.5 "
               "clocks each (assumption: 29.5 clocks a warp per HMMA" in note for note in p.assumptions)
    # The tensor-pipe total holds two HMMA a WMMA mma_sync: those are WMMA's (59 clocks each), charged once; a
    # warp's 10 mma_sync and 20 HMMA beside them wait as long as 20 mma_sync.
    both = predict(counters(**{MMA_SYNC: 132 * 4 * 10, TENSOR_HMMA: 132 * 4 * (2 * 10 + 20)}), launch, "H100")
    wmma = predict(counters(**{MMA_SYNC: 132 * 4 * 20, TENSOR_HMMA: 132 * 4 * 40}), launch, "H100")
    assert both.terms["latency/occupancy"] == pytest.approx(wmma.terms["latency/occupancy"])
    assert not any("HMMA (inline PTX" in note for note in wmma.assumptions)


def test_hmma_is_not_charged_where_the_gpu_has_no_measured_wait():
    launch = {"grid": (108, 1, 1), "block": (128, 1, 1)}
    counted = predict(counters(**{TENSOR_HMMA: 108 * 4 * 100}), launch, "A100")
    assert get_gpu("A100").hmma_cycles is None
    assert counted.terms["latency/occupancy"] == predict(counters(), launch, "A100").terms["latency/occupancy"]
    assert any("43,200 HMMA (inline PTX mma.sync) counted (100 a warp); the wait on each is not modelled on the A100"
               in note for note in counted.assumptions)


def test_ldsm_and_ldgsts_wavefronts_are_charged_as_shared_wavefronts():
    # 132 blocks of 8 warps. An LDSM is a shared load instruction and its wavefronts the L1/shared data path's; an
    # LDGSTS is one instruction, its reads in the global load requests and sectors (which include them, as Nsight
    # Compute's do) and its shared writes' wavefronts on the same data path.
    launch = {"grid": (132, 1, 1), "block": (256, 1, 1)}
    lds = predict(counters(shared=(132 * 800, 0), **{"smsp__sass_inst_executed_op_shared_ld.sum": 132 * 200}),
                  launch, "H100")
    ldsm = predict(counters(**{"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum": 132 * 800,
                               "smsp__inst_executed_op_ldsm.sum": 132 * 200}), launch, "H100")
    assert ldsm.terms == pytest.approx(lds.terms)
    assert any(note.startswith("ldmatrix: 26,400 LDSM counted, charged as shared loads are") for note in
               ldsm.assumptions)
    ld_sts = predict(counters(ld=(132 * 64, 132 * 1024), shared=(0, 132 * 256), dram=(132 * 32768, 0),
                              **{"smsp__sass_inst_executed_op_shared_st.sum": 0}), launch, "H100")
    ldgsts = predict(counters(ld=(132 * 64, 132 * 1024), dram=(132 * 32768, 0),
                              **{"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum": 132 * 256,
                                 "smsp__inst_executed_op_ldgsts.sum": 132 * 64,
                                 "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum": 132 * 64,
                                 "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum": 132 * 1024}), launch, "H100")
    assert ldgsts.terms == pytest.approx(ld_sts.terms)     # the LDGSTS issued once: its reads are the loads
    assert any(note.startswith("cp.async: 8,448 LDGSTS counted; each one instruction to issue, its global read a "
                               "load") for note in ldgsts.assumptions)


def test_the_launch_term_says_it_is_the_gpus_side_and_names_the_measured_host_cost():
    text = "\n".join(predict(COPY, COPY_LAUNCH, "H100").assumptions)
    assert "3 µs per kernel before any work: the GPU's side of a launch, an assumption of the model" in text
    assert "measured on an H200, 2026-11-26" in text and "6.2 µs" in text


def test_tiny_launch_is_launch_bound():
    p = predict(counters(ld=(1, 4), st=(1, 4), dram=(128, 128)), {"grid": (1, 1, 1), "block": (32, 1, 1)}, "T4")
    assert p.limiter == "launch"
    assert LAUNCH_OVERHEAD_S < p.seconds < 2 * LAUNCH_OVERHEAD_S


def test_one_block_more_than_the_sms_doubles_the_sm_time():
    # Equal blocks of 1e9 FLOPs: 132 run at once, the 133rd runs alone afterwards.
    full = predict({}, {"grid": 132, "block": 256}, "H100", flops=132e9)
    one_more = predict({}, {"grid": 133, "block": 256}, "H100", flops=133e9)
    assert one_more.terms["compute"] == pytest.approx(2 * full.terms["compute"])


def naive_matmul(n, sectors_per_a_load):
    """Counters of a naive n x n x n matmul, one thread per output, A read with the given sectors per
    warp request (32: lanes walk down a column, as in an uncoalesced kernel; 4: lanes read along a row)."""
    warps = n * n // 32
    return counters(ld=(2 * warps * n, warps * n * (sectors_per_a_load + 4)), st=(warps, 4 * warps),
                    dram=(2 * n * n * 4, n * n * 4))


def test_uncoalesced_matmul_is_bound_by_the_caches_and_slower():
    launch = {"grid": (128, 128, 1), "block": (32, 32, 1)}
    scattered = predict(naive_matmul(4096, 32), launch, "H100", flops=2 * 4096**3)
    coalesced = predict(naive_matmul(4096, 4), launch, "H100", flops=2 * 4096**3)
    assert scattered.limiter in ("L2", "L1/shared")
    assert scattered.seconds > 4 * coalesced.seconds    # 36 sectors per k step against 8
    assert scattered.terms["DRAM"] == coalesced.terms["DRAM"]


# siboehm, "How to optimize a CUDA matmul kernel for cuBLAS-like performance": 4092^3 SGEMM on an
# RTX A6000, GFLOP/s per kernel. Counters worked out by hand for 4096^3 (0.3% larger, same access
# pattern) per warp, with W warps and T tiles along K:
# 1 naive: per k, A at 32 rows (32 sectors), B broadcast (1); C stored down a column (32).
# 2 coalesced: per k, A broadcast (1), B along a row (4); C along a row (4).
# 3 shared-memory 32x32 tiles: per tile 2 loads of 4 sectors, 2 shared stores, 32 x 2 shared loads.
# 4 1D blocktiling (64x64x8 tiles, 8 results a thread): per tile 2 loads of 4 sectors, 2 shared
#   stores, 8 x (1 + 8) shared loads (A broadcast); C: 8 stores of 4 sectors.
# 5 2D blocktiling (128x128x8, 8x8 a thread): per tile 8 loads of 4 sectors, 8 shared stores,
#   8 x 8 x (2 + 4) shared loads (2- and 4-way bank conflicts); C: 64 stores of 4 sectors.
N = 4096
LADDER = [
    # name, GFLOP/s measured, (grid, block), warps, per warp: (ld req, ld sec, st req, st sec, shared ld, st)
    ("naive", 309, ((128, 128), (32, 32)), N * N // 32, (2 * N, 33 * N, 1, 32, 0, 0)),
    ("coalesced", 1987, ((128, 128), (1024,)), N * N // 32, (2 * N, 5 * N, 1, 4, 0, 0)),
    ("shared memory", 2980, ((128, 128), (1024,)), N * N // 32, (2 * 128, 8 * 128, 1, 4, 64 * 128, 2 * 128)),
    ("1D blocktiling", 8475, ((64, 64), (512,)), N * N // 8 // 32, (2 * 512, 8 * 512, 8, 32, 72 * 512, 2 * 512)),
    ("2D blocktiling", 15972, ((32, 32), (256,)), N * N // 64 // 32, (8 * 512, 32 * 512, 64, 256, 384 * 512, 8 * 512)),
]


def ladder_prediction(launch, warps, per_warp):
    ld_req, ld_sec, st_req, st_sec, sh_ld, sh_st = (warps * count for count in per_warp)
    metrics = counters(ld=(ld_req, ld_sec), st=(st_req, st_sec), shared=(sh_ld, sh_st), dram=(2 * N * N * 4, N * N * 4))
    return predict(metrics, {"grid": launch[0], "block": launch[1]}, "RTX A6000", flops=2 * N**3)


def test_sgemm_ladder_ranks_right_and_lands_within_2x_of_the_published_times():
    modelled = [ladder_prediction(launch, warps, per_warp) for _, _, launch, warps, per_warp in LADDER]
    measured = [2 * 4092**3 / (gflops * 1e9) for _, gflops, _, _, _ in LADDER]
    assert [p.seconds for p in modelled] == sorted((p.seconds for p in modelled), reverse=True)
    assert [p.limiter for p in modelled] == ["L2"] + ["latency/occupancy"] * 4
    assert all(set(p.terms) <= set(ROOFS) for p in modelled)
    for (name, *_), model, real in zip(LADDER, modelled, measured):
        assert 0.5 < model.seconds / real < 2, f"{name}: {model}; measured {real * 1e3:.1f} ms"


def test_str_and_repr_say_it_is_modelled():
    p = predict(STREAM, STREAM_LAUNCH, "H100")
    assert str(p).startswith("modelled on H100 SXM: 182.8 µs, DRAM-bound (DRAM 179.8 µs, ")
    assert repr(p) == str(p)


def test_assumptions_state_every_constant():
    text = "\n".join(predict(COPY, COPY_LAUNCH, "H100", flops=1e9).assumptions)
    for fact in ("modelled, not measured", "3 µs", "85%", "3.35 TB/s", "700 ns", "one wavefront a clock",
                 "12.4 TB/s", "assumption: A100's published", "67 TFLOP/s", "napkin", "registers unknown",
                 f"{L2_LATENCY_CYCLES} clocks", f"{BARRIER_CYCLES} clocks", f"{SHARED_LATENCY_CYCLES}-clock",
                 "2 in flight a warp", "4 warp instructions a clock", "Jia et al. 2018"):
        assert fact in text, fact


def test_missing_counts_are_zero_and_none_counts_are_left_out():
    p = predict({"dram__bytes_read.sum": None, "dram__bytes_write.sum": 1e9}, COPY_LAUNCH, "H100")
    assert "DRAM" not in p.terms and "latency/occupancy" not in p.terms
    assert p.terms["L2"] == 0
    assert any("unknown (None): DRAM, latency/occupancy" in note for note in p.assumptions)


def test_divergent_branches_are_reported_as_not_modelled():
    p = predict(counters(**{"smsp__sass_branch_targets_threads_divergent.sum": 96}), COPY_LAUNCH, "H100")
    assert any("96 divergent branch targets" in note for note in p.assumptions)


def test_occupancy_for_another_launch_is_refused():
    with pytest.raises(ValueError, match="worked out for A100 SXM4 80GB with 256 threads"):
        predict(COPY, COPY_LAUNCH, "H100", occupancy=theoretical_occupancy("A100", 256, 32, 0))
    with pytest.raises(ValueError, match="with 128"):
        predict(COPY, {"grid": 8, "block": 128}, "H100", occupancy=theoretical_occupancy("H100", 256, 32, 0))


@pytest.mark.parametrize("launch", [{"block": (256,)}, {"grid": (0, 1, 1), "block": 256},
                                    {"grid": (1, 1, 1, 1), "block": 256}, {"grid": 2.5, "block": 256}])
def test_bad_launch_is_a_value_error(launch):
    with pytest.raises(ValueError, match="launch"):
        predict(COPY, launch, "H100")


def test_roofline_places_a_kernel_against_the_ridge():
    ridge = 67e12 / (3.35e12 * DRAM_EFFICIENCY)
    copy = roofline(COPY, flops=0, gpu="H100")
    assert (copy["intensity"], copy["bound"], copy["attainable_flops"]) == (0, "memory", 0)
    assert copy["ridge"] == pytest.approx(ridge)
    gemm = roofline(counters(dram=(2 * 4096**2 * 4, 4096**2 * 4)), flops=2 * 4096**3, gpu="H100")
    assert gemm["intensity"] == pytest.approx(2 * 4096 / 12)
    assert (gemm["bound"], gemm["attainable_flops"]) == ("compute", 67e12)
    tensor = roofline(counters(dram=(2 * 4096**2 * 2, 4096**2 * 2)), flops=2 * 4096**3, gpu="H100", pipe="tensor")
    assert tensor["ridge"] == pytest.approx(989e12 / (3.35e12 * DRAM_EFFICIENCY))
    assert (tensor["bound"], tensor["attainable_flops"]) == ("compute", 989e12)
    assert arithmetic_intensity({}, 1.0) == math.inf


@pytest.mark.parametrize("seconds, text", [(1.5, "1.5 s"), (4.2e-3, "4.2 ms"), (182.8e-6, "182.8 µs"),
                                           (3e-6, "3 µs"), (5e-8, "50 ns")])
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text
