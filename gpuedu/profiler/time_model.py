"""A modelled GPU time from exact counters: which roof a kernel would hit first, and how long it would take.

The emulator counts what a kernel does (requests, sectors, wavefronts, barriers, DRAM bytes); this module
turns the counts into time on a named GPU by asking how long each part of the chip would need for its
share of the work, if it ran at its own top speed, and how long the waits of one block take:

- launch: a fixed cost on the GPU before any work starts;
- DRAM: bytes that must come from or go to memory, over the achievable bandwidth;
- L2: every 32-byte sector the SMs ask for, over the L2 bandwidth;
- L1/shared: every wavefront (one pass of the L1/shared data path), at one per clock per SM: shared loads,
  stores and atomics, ldmatrix's (LDSM) and cp.async's shared writes (LDGSTS), and a pass per 128-byte line each
  global request touches;
- compute: your count of floating-point operations, over the FP32 peak (only when you give one), or
  over the dense FP16 tensor-core peak for kernels that run on the tensor cores (``pipe="tensor"``);
- tensor (wgmma): the counted FLOPs of Hopper's warpgroup MMAs over the dense FP16 tensor-core peak, which they are
  built to reach (the TMA copies that feed them cross L2 as their counted sectors, and reach DRAM through the L2
  model like loads);
- issue: every warp instruction the counts know of (memory instructions, LDSM and LDGSTS included, and
  barriers) at four a clock per SM, one per scheduler;
- latency/occupancy: the waits. An SM holds only so many blocks at once (the occupancy); each wave of
  them takes as long as one block's chain of waits: its start, its rounds of global loads (a DRAM or an
  L2 round trip each, as the counted DRAM bytes say), a barrier plus a shared-memory round trip per
  ``__syncthreads``, and, on the tensor cores, each warp's WMMA ``mma_sync`` operations one after another
  (the emulator counts them; ``GPU.mma_sync_cycles`` each, 59 clocks on Hopper as an H200 measured them) and its
  inline PTX ``mma.sync`` instructions (HMMA), ``GPU.hmma_cycles`` each: half a WMMA ``mma_sync``, which is two
  HMMA.16816 (an assumption: gpus.py). A cp.async's global read is a load here: its sectors cross L2 and count
  for DRAM as a load's do, and its requests are loads in the chain's rounds (a pipeline that keeps several
  stages in flight hides more of them than the chain's two loads in flight a warp: not modelled).
  The SM's shared-memory wavefronts, the replays of global requests scattered over several 128-byte
  lines, and its memory and barrier instructions add to that: a warp busy with them is not waiting on
  memory, and a barrier lets no warp run ahead into the next step.

The parts work at the same time, so the slowest sets the pace: modelled time = launch + the largest
of the others, and the largest term names the *limiter*. A call of several launches adds the host's side:
``timeline`` puts each launch after the host has issued it (6.2 µs a launch, as measured on an H200) and
after the kernel before it. It is a model, and every constant it rests on is listed in
``Prediction.assumptions`` (and here, with its source); it is meant to rank kernels and explain them, not
to replace a measurement. ``benchmarks/model_vs_measured.py`` holds it against an H200's measurements and a
published A6000 ladder.

>>> copy = {"dram__bytes_read.sum": 256e6, "dram__bytes_write.sum": 256e6}
>>> print(predict(copy, {"grid": (250_000, 1, 1), "block": (256, 1, 1)}, "H100"))
modelled on H100 SXM: 182.8 µs, DRAM-bound (DRAM 179.8 µs, latency/occupancy 23.1 µs, launch 3 µs)
"""
import math
import operator
from dataclasses import dataclass, field

from .gpus import get_gpu
from .occupancy import Occupancy, theoretical_occupancy

LAUNCH_OVERHEAD_S = 3e-6       # the GPU's side of a launch: an assumption of the model (see LAUNCH_NOTE)
#: What the launch term is, and what it is not: the host's side of a launch is ``timeline``'s.
LAUNCH_NOTE = ("µs per kernel before any work: the GPU's side of a launch, an assumption of the model; the host's "
               "side is timeline()'s (measured on an H200, 2026-11-26: one prepared launch from Python took 6.2 µs "
               "of host time, benchmarks/results/nvidia-h200.json)")
#: The host's side of a launch: one prepared launch from Python (PyCUDA's prepared_call), measured on an H200 on
#: 2026-11-26 (benchmarks/results/nvidia-h200.json, figure launch_prepared_call: 6.19 µs, median of 20 x 2000).
HOST_LAUNCH_S = 6.2e-6
#: The compute pipes a kernel's FLOPs can run on: the FP32 CUDA cores, or the FP16 tensor cores (dense).
PIPES = ("fp32", "tensor")
#: A device-to-device copy reaches 80-90% of the datasheet bandwidth; the H200 measured 86% (4,127 of 4,800 GB/s,
#: copy_dtod, 2026-11-26).
DRAM_EFFICIENCY = 0.85
#: A DRAM load's round trip under load: an assumption of 700 ns (600-800 ns on A100/H100 under load); pointer-
#: chasing microbenchmarks of an idle GPU (Jia et al., "Dissecting the NVIDIA Volta GPU Architecture via
#: Microbenchmarking", 2018; Luo et al., "Benchmarking and Dissecting the Nvidia Hopper GPU Architecture", 2024)
#: find less, since a loaded memory system's queues lengthen it.
DRAM_LATENCY_S = 700e-9
#: An L2 hit's round trip, in SM clocks: 193 on a V100 (Jia et al. 2018); used for loads L2 serves and as the
#: cost of a block's start and end (an assumption: NVIDIA publishes no figure for either on these GPUs).
L2_LATENCY_CYCLES = 193
#: A shared-memory load's round trip: 19 clocks on a V100 (Jia et al. 2018).
SHARED_LATENCY_CYCLES = 19
#: A __syncthreads the block's warps reach together: 20 clocks, an assumption (the order of a few dependent
#: instructions; NVIDIA publishes no figure).
BARRIER_CYCLES = 20
#: Loads a warp has in flight at once: two, an assumption (nvcc issues a loop's independent loads together, but
#: a store between two loads may alias the second, which then waits; the counts do not say which is which).
LOADS_IN_FLIGHT_PER_WARP = 2
#: Warp instructions an SM issues a clock: one per each of its four schedulers (NVIDIA's Volta-Hopper whitepapers).
ISSUE_PER_CLOCK = 4
WAVEFRONTS_PER_CLOCK = 1       # the L1/shared data path: 128 bytes, one wavefront, per clock per SM
SECTOR_BYTES = 32
SECTORS_PER_LINE = 4           # a 128-byte cache line
#: The counted ``__syncthreads`` released, summed over the blocks: the emulator's own count (Nsight Compute has
#: no metric of this name), which ``KernelRecord.predict`` passes in.
BARRIERS = "gpuedu__barriers_released.sum"
#: WMMA ``mma_sync`` operations, one per warp per call: the emulator's own count (mma.h), which
#: ``KernelRecord.predict`` passes in. On sm_80 and later each is two ``mma.sync.m16n8k16`` (SASS HMMA.16816), 8,192
#: FLOPs.
MMA_SYNC = "gpuedu__mma_sync.sum"
#: Warp-level HMMA instructions on the tensor pipe (Nsight Compute's name): inline PTX's mma.sync, and twice each
#: WMMA mma_sync (gpuedu.profiler.metrics). Those beyond twice ``MMA_SYNC`` are charged at ``GPU.hmma_cycles``.
TENSOR_HMMA = "smsp__inst_executed_pipe_tensor_op_hmma.sum"
#: The distinct 128-byte lines each global request touched, summed over the requests: the emulator's own count,
#: which ``KernelRecord.predict`` passes in. The L1 takes a pass (a wavefront) per line, so a request whose 32 lanes
#: fall in 32 lines costs 32 where a coalesced one costs 1.
GLOBAL_LINES = "gpuedu__global_request_lines.sum"
#: Hopper's asynchronous path, the emulator's own counts, which ``KernelRecord.predict`` passes in: the FLOPs of the
#: warpgroup MMAs (wgmma.mma_async, 2 x 64 x N x 16 each), and the 32-byte global sectors the TMA copies' boxes
#: touch (cp.async.bulk.tensor; the L2 model sees their lines for the DRAM bytes).
WGMMA_FLOPS = "gpuedu__wgmma_flops.sum"
TMA_SECTORS = "gpuedu__tma_sectors.sum"

GLOBAL_OPS = ("ld", "st", "atom", "red")   # red: atomics whose result is unused
#: The roofs, each a possible limiter.
ROOFS = ("launch", "DRAM", "L2", "L1/shared", "compute", "tensor (wgmma)", "issue", "latency/occupancy")


def _requests(op):
    return f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum"


def _sectors(op):
    return f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum"


SHARED_WAVEFRONTS = tuple(f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum" for op in ("ld", "st"))
#: ldmatrix's wavefronts and cp.async's shared writes: passes of the same data path (absent: none).
MATRIX_AND_ASYNC_WAVEFRONTS = tuple(f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum"
                                    for op in ("ldsm", "ldgsts"))
#: LDSM and LDGSTS instructions, and the global requests of LDGSTS (which the L1's global load requests include).
LDSM_INSTRUCTIONS, LDGSTS_INSTRUCTIONS = "smsp__inst_executed_op_ldsm.sum", "smsp__inst_executed_op_ldgsts.sum"
LDGSTS_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum"
SHARED_ATOMICS = "smsp__sass_inst_executed_op_shared_atom.sum"
DIVERGENT_BRANCHES = "smsp__sass_branch_targets_threads_divergent.sum"
DRAM_READ, DRAM_WRITE = "dram__bytes_read.sum", "dram__bytes_write.sum"


def format_seconds(seconds):
    """A time at a readable scale: 182.8 µs, 4.2 ms, 1.3 s."""
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds * 1e9:.4g} ns"


@dataclass(frozen=True)
class Prediction:
    """A modelled (never measured) kernel time on the GPU, from the kernel's start on the GPU (the host's side of
    the launch is ``timeline``'s): ``terms`` holds each roof's seconds."""
    gpu: str
    seconds: float
    limiter: str
    terms: dict = field(compare=False)
    assumptions: list = field(compare=False)

    def __str__(self):
        ranked = sorted(((n, t) for n, t in self.terms.items() if t > 0), key=lambda item: -item[1])
        detail = ", ".join(f"{name} {format_seconds(t)}" for name, t in ranked)
        return f"modelled on {self.gpu}: {format_seconds(self.seconds)}, {self.limiter}-bound ({detail})"

    __repr__ = __str__

    def _repr_pretty_(self, printer, cycle):   # IPython and Jupyter show the same text
        printer.text(str(self))


def _count(metrics, name):
    """A counter's value: 0 when absent (nothing of that kind happened), None when unknown."""
    value = metrics.get(name, 0)
    return None if value is None else float(value)


def _total(metrics, names):
    values = [_count(metrics, name) for name in names]
    return None if None in values else sum(values)


def _shape(launch, key):
    """The number of blocks (key "grid") or threads a block (key "block") of a launch."""
    if key not in launch:
        raise ValueError(f"launch needs {key!r}: a dict such as {{'grid': (64, 1, 1), 'block': (256, 1, 1)}}")
    value = launch[key]
    try:
        dims = [operator.index(d) for d in (value if hasattr(value, "__iter__") else (value,))]
    except TypeError:
        dims = []
    if not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise ValueError(f"launch[{key!r}] must be up to three positive integers, got {value!r}")
    return math.prod(dims)


def _occupancy(gpu, threads, shared_dynamic, occupancy, notes):
    if occupancy is None:
        notes.append("registers unknown: occupancy from the block size and dynamic shared memory only "
                     "(pass occupancy=theoretical_occupancy(...) with resource_usage()'s registers)")
        return theoretical_occupancy(gpu, threads, 0, shared_dynamic)
    if not isinstance(occupancy, Occupancy):
        raise TypeError(f"occupancy must come from theoretical_occupancy(), got {type(occupancy).__name__}")
    if (occupancy.gpu, occupancy.threads_per_block) != (gpu.name, threads):
        raise ValueError(f"occupancy was worked out for {occupancy.gpu} with {occupancy.threads_per_block} "
                         f"threads a block, but this launch is on {gpu.name} with {threads}")
    return occupancy


def _l1_wavefronts(metrics):
    """Wavefronts through the L1/shared data path, or None if a count it needs is unknown."""
    total = _total(metrics, (*SHARED_WAVEFRONTS, SHARED_ATOMICS, *MATRIX_AND_ASYNC_WAVEFRONTS))
    lines = metrics.get(GLOBAL_LINES)
    if lines is not None and total is not None:
        return total + float(lines)     # a global request takes a wavefront per line it touches
    for op in GLOBAL_OPS:
        requests, sectors = _count(metrics, _requests(op)), _count(metrics, _sectors(op))
        if None in (requests, sectors, total):
            return None
        # Each request takes at least one wavefront, and one per 128-byte line its sectors fill.
        total += max(requests, sectors / SECTORS_PER_LINE)
    return total


def _instructions(metrics, barriers, blocks, threads, gpu):
    """Warp instructions the counts know of: global and shared memory instructions (LDSM and LDGSTS too, an
    LDGSTS once: the global load requests include its reads), and a barrier per warp per ``__syncthreads`` (None
    when a count is unknown; barriers left out when not counted)."""
    names = [_requests(op) for op in GLOBAL_OPS] + [f"smsp__sass_inst_executed_op_shared_{op}.sum"
                                                     for op in ("ld", "st", "atom")]
    total = _total(metrics, names + [LDSM_INSTRUCTIONS, LDGSTS_INSTRUCTIONS])
    ldgsts_reads = _count(metrics, LDGSTS_REQUESTS)
    if total is None or ldgsts_reads is None:
        return None
    total -= ldgsts_reads
    if barriers:
        total += float(barriers) * math.ceil(threads / gpu.warp_size)
    return total


def _mma_chain(metrics, warps, gpu, notes):
    """Clocks each warp's tensor-core instructions add to its block's chain: its WMMA mma_syncs
    (``_wmma_chain``) and its inline PTX mma.syncs (``_hmma_chain``), one after another."""
    return _wmma_chain(metrics, warps, gpu, notes) + _hmma_chain(metrics, warps, gpu, notes)


def _hmma_chain(metrics, warps, gpu, notes):
    """Clocks of the HMMA instructions beyond WMMA's (the tensor-pipe count less two a WMMA mma_sync: inline PTX's
    mma.sync), ``gpu.hmma_cycles`` each, one after another on each warp's chain (0 where there are none, or the GPU
    has no such figure: the notes say which)."""
    tensor = metrics.get(TENSOR_HMMA)
    if not tensor:
        return 0.0
    hmma = float(tensor) - 2 * float(metrics.get(MMA_SYNC) or 0)
    if hmma <= 0:
        return 0.0
    per_warp = hmma / warps
    if gpu.hmma_cycles is None:
        notes.append(f"tensor cores: {hmma:,.0f} HMMA (inline PTX mma.sync) counted ({per_warp:,.4g} a warp); the "
                     f"wait on each is not modelled on the {gpu.name} ({gpu.sources['hmma_cycles']})")
        return 0.0
    notes.append(f"tensor cores: {hmma:,.0f} HMMA (inline PTX mma.sync) counted, {per_warp:,.4g} a warp, one after "
                 f"another on its chain at {gpu.hmma_cycles:g} clocks each ({gpu.sources['hmma_cycles']})")
    return per_warp * gpu.hmma_cycles


def _wmma_chain(metrics, warps, gpu, notes):
    """Clocks each warp's WMMA mma_syncs add to its block's chain: the counted mma_syncs a warp, one after another,
    ``gpu.mma_sync_cycles`` each (0 where none are counted, or the GPU has no such figure: the notes say which)."""
    mma = metrics.get(MMA_SYNC, 0)
    if mma is None:
        notes.append("mma_sync unknown: no tensor-core wait charged (KernelRecord.predict passes the emulator's count)")
        return 0.0
    if not mma:
        return 0.0
    per_warp = float(mma) / warps
    if gpu.mma_sync_cycles is None:
        notes.append(f"tensor cores: {float(mma):,.0f} WMMA mma_sync counted ({per_warp:,.4g} a warp); the wait on "
                     f"each is not modelled on the {gpu.name} ({gpu.sources['mma_sync_cycles']})")
        return 0.0
    notes.append(f"tensor cores: {float(mma):,.0f} WMMA mma_sync counted, {per_warp:,.4g} a warp, one after another on "
                 f"its chain at {gpu.mma_sync_cycles:g} clocks each ({gpu.sources['mma_sync_cycles']}); that "
                 f"measurement is the warp's wait, not a rate the tensor cores top out at: their roof stays the dense "
                 f"peak, and more warps an SM hide the waits")
    return per_warp * gpu.mma_sync_cycles


def _matrix_and_async_notes(metrics, notes):
    """Say how ldmatrix (LDSM) and cp.async (LDGSTS) are charged, where a launch made any."""
    ldsm, ldgsts = _count(metrics, LDSM_INSTRUCTIONS), _count(metrics, LDGSTS_INSTRUCTIONS)
    if ldsm:
        notes.append(f"ldmatrix: {ldsm:,.0f} LDSM counted, charged as shared loads are: their wavefronts (bank "
                     f"conflicts included) on the L1/shared data path and in the SM's serial work, each an instruction "
                     f"to issue")
    if ldgsts:
        notes.append(f"cp.async: {ldgsts:,.0f} LDGSTS counted; each one instruction to issue, its global read a load "
                     f"(its sectors through L2 and the DRAM model, its requests in the chain's rounds of loads: a "
                     f"pipeline keeping more stages in flight hides more of them, not modelled), its shared write "
                     f"wavefronts on the L1/shared data path as a store's")


def _latency(metrics, read, barriers, instructions, blocks, threads, busiest_share, occ, gpu, notes):
    """Seconds of the waits on the busiest SM: each wave of resident blocks as long as one block's chain, plus the
    SM's shared wavefronts, scattered requests' replays and counted instructions, which do not hide under them."""
    loads, load_sectors = _count(metrics, _requests("ld")), _count(metrics, _sectors("ld"))
    stores = _count(metrics, _requests("st"))
    shared = _total(metrics, (*SHARED_WAVEFRONTS, SHARED_ATOMICS, *MATRIX_AND_ASYNC_WAVEFRONTS))
    lines, requests = metrics.get(GLOBAL_LINES), _total(metrics, [_requests(op) for op in GLOBAL_OPS])
    if None in (read, loads, load_sectors, stores, shared, requests, instructions):
        return None
    # A global request scattered over several 128-byte lines is replayed once per extra line; its warp waits.
    replays = max(0.0, float(lines) - requests) if lines is not None else 0.0
    clock = gpu.clock_hz
    warps = blocks * math.ceil(threads / gpu.warp_size)
    per_warp, stores_per_warp = loads / warps, stores / warps
    syncs = float(barriers) / blocks if barriers else 0.0
    # Rounds of loads a warp waits for, one after another: its loads two at a time, or one per store between them
    # (the store may alias the next load); where the block synchronises, at most one per barrier (its loads
    # between two barriers go together).
    ordered = min(per_warp, stores_per_warp, syncs) if syncs else min(per_warp, stores_per_warp)
    rounds = max(math.ceil(per_warp / LOADS_IN_FLIGHT_PER_WARP), ordered) if loads else 0
    dram_share = min(1.0, read / (load_sectors * SECTOR_BYTES)) if load_sectors else 0.0
    round_trip = dram_share * DRAM_LATENCY_S * clock + (1 - dram_share) * L2_LATENCY_CYCLES
    chain = (L2_LATENCY_CYCLES + rounds * round_trip + syncs * (BARRIER_CYCLES + SHARED_LATENCY_CYCLES)
             + _mma_chain(metrics, warps, gpu, notes))
    waves = math.ceil(math.ceil(blocks / gpu.sms) / occ.blocks_per_sm)
    serial = ((shared + replays) / WAVEFRONTS_PER_CLOCK + instructions / ISSUE_PER_CLOCK) * busiest_share
    notes.append(
        f"latency: {occ.blocks_per_sm} blocks an SM at once, so the busiest SM runs {waves:,} wave(s) (the last one "
        f"may be part full); a block's chain is its start and end ({L2_LATENCY_CYCLES} clocks, an L2 round trip), "
        f"{rounds:,.4g} round(s) of loads ({LOADS_IN_FLIGHT_PER_WARP} in flight a warp, one per store between them, at "
        f"most one per barrier) of "
        f"{round_trip:,.0f} clocks ({dram_share:.0%} from DRAM at {DRAM_LATENCY_S * 1e9:.0f} ns, the rest L2 hits at "
        f"{L2_LATENCY_CYCLES} clocks), and {syncs:,.4g} barrier(s) of {BARRIER_CYCLES} clocks with a "
        f"{SHARED_LATENCY_CYCLES}-clock shared-memory round trip each; the SM's shared-memory wavefronts and the "
        f"replays of global requests scattered over several lines (one a clock), and its counted instructions "
        f"({ISSUE_PER_CLOCK} a clock), add to it: a warp busy with them is not waiting on memory, and barriers keep "
        f"one block's steps from overlapping (sources: the L2 and shared-memory round trips as Jia et al. 2018, "
        f"'Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking', measured them on a V100; DRAM's "
        f"{DRAM_LATENCY_S * 1e9:.0f} ns under load, the barrier's {BARRIER_CYCLES} clocks, {LOADS_IN_FLIGHT_PER_WARP} "
        f"loads in flight and a block's start and end as an L2 round trip are assumptions: gpuedu.profiler.time_model)")
    if barriers is None:
        notes.append("barriers unknown: none charged (KernelRecord.predict passes the emulator's count)")
    return (waves * chain + serial) / clock


def predict(metrics, launch, gpu, flops=None, occupancy=None, pipe="fp32", l2_warm=False):
    """Model how long a kernel launch would take on `gpu`, from the emulator's counters.

    metrics: {Nsight Compute metric name: count}; a missing name counts as 0, a None as unknown
    (its roof is then left out, and the assumptions say so). launch: {"grid": (x, y, z),
    "block": (x, y, z), "shared_dynamic": bytes}. gpu: a `GPU` or a name. flops: your own count
    of the floating-point operations (an FMA is 2), for the compute roof. occupancy: from
    `theoretical_occupancy` with the compiler's registers; without it registers are not counted.
    pipe: where those FLOPs run, "fp32" (the CUDA cores, the default) or "tensor" (the FP16 tensor cores,
    at the GPU's dense FP16 tensor-core peak). l2_warm: the launch's data already sits in L2 (the launches
    before it wrote or read it, and it fits): no DRAM traffic, and its loads wait an L2 round trip, not DRAM's.
    """
    compute_peak(gpu, pipe)            # a wrong pipe is refused before any work
    gpu = get_gpu(gpu)
    if l2_warm:
        metrics = {**metrics, DRAM_READ: 0, DRAM_WRITE: 0}
    blocks, threads = _shape(launch, "grid"), _shape(launch, "block")
    notes = [f"modelled, not measured: launch + the slowest of the roofs below, which overlap ({gpu.name})"]
    occ = _occupancy(gpu, threads, launch.get("shared_dynamic", 0), occupancy, notes)
    notes.append(f"occupancy: {occ}")
    # Roofs inside an SM are set by the busiest SM, which runs ceil(blocks / SMs) equal blocks.
    busiest_share = math.ceil(blocks / gpu.sms) / blocks
    active_sms = min(blocks, gpu.sms)
    notes.append(f"blocks do equal work, spread evenly: the busiest SM runs {math.ceil(blocks / gpu.sms)} "
                 f"of the {blocks:,} blocks, and the SM-local roofs (L1/shared, compute) wait for it")
    if blocks < gpu.sms:
        notes.append(f"the grid's {blocks} blocks fill {blocks} of the {gpu.sms} SMs: the rest stay idle")

    if l2_warm:
        notes.append("L2 warm: the launch's data is already in L2 (written or read by the launches before it), so "
                     "nothing comes from DRAM and its loads wait an L2 round trip")
    terms, unknown = {"launch": LAUNCH_OVERHEAD_S}, []
    notes.append(f"launch: {LAUNCH_OVERHEAD_S * 1e6:g} {LAUNCH_NOTE}")

    read, written = _count(metrics, DRAM_READ), _count(metrics, DRAM_WRITE)
    if None in (read, written):
        unknown.append("DRAM")
    else:
        terms["DRAM"] = (read + written) / (gpu.dram_bytes_per_s * DRAM_EFFICIENCY)
        notes.append(f"DRAM: {DRAM_EFFICIENCY:.0%} of the datasheet's {gpu.dram_bytes_per_s / 1e12:.3g} TB/s "
                     f"is reachable; its bytes come through a model of the {gpu.l2_bytes / 2**20:.0f} MB L2 "
                     f"(64-byte DRAM pairs, re-reads of resident lines hit, an output L2 still holds at the "
                     f"end not yet written: gpuedu.profiler.metrics.dram_bytes)")

    sectors = _total(metrics, [_sectors(op) for op in GLOBAL_OPS])
    tma_sectors = float(metrics.get(TMA_SECTORS) or 0)
    if sectors is None:
        unknown.append("L2")
    else:
        terms["L2"] = (sectors + tma_sectors) * SECTOR_BYTES / (gpu.l2_bytes_per_s * active_sms / gpu.sms)
        notes.append(f"L2: every global sector the SMs ask for crosses L2 at {gpu.l2_bytes_per_s / 1e12:.3g} TB/s, "
                     f"L1 hits included (an upper bound); busy SMs share it ({gpu.sources['l2_bytes_per_clock']})"
                     + (f"; the TMA copies' {tma_sectors:,.0f} sectors among them" if tma_sectors else ""))

    wavefronts = _l1_wavefronts(metrics)
    if wavefronts is None:
        unknown.append("L1/shared")
    else:
        terms["L1/shared"] = wavefronts * busiest_share / (gpu.clock_hz * WAVEFRONTS_PER_CLOCK)
        notes.append("L1/shared: one wavefront a clock per SM; shared accesses as counted (bank conflicts "
                     "included), a shared atomic as one, a global request as the 128-byte lines it touches ("
                     + ("counted" if metrics.get(GLOBAL_LINES) is not None else
                        "not counted here: at least one, and as many as its sectors fill")
                     + "; requests scattered over more lines cost more)")

    if flops is None:
        notes.append("compute: not modelled (pass flops= your count of the kernel's floating-point operations)")
    else:
        peak = compute_peak(gpu, pipe)
        where = "the FP32 peak" if pipe == "fp32" else "the dense FP16 tensor-core peak"
        terms["compute"] = flops * busiest_share / (peak / gpu.sms)
        notes.append(f"compute: your count of {flops:.4g} FLOPs at {where} of {peak / 1e12:.3g} "
                     f"TFLOP/s (a napkin count: address arithmetic and other instructions are not counted)"
                     + ("" if pipe == "fp32" else
                        "; an upper bound: on Hopper only the warpgroup instructions (wgmma) come near it, and "
                        "WMMA's warp-level mma.sync is held back by each warp's wait on it (the latency term): the "
                        "best WMMA tile an H200 ran reached 224 TFLOP/s, 23% of it "
                        "(benchmarks/results/nvidia-h200-probe-tiles-blocks.json, 2026-11-26)"))

    wgmma_flops = float(metrics.get(WGMMA_FLOPS) or 0)
    if wgmma_flops:
        peak = compute_peak(gpu, "tensor")
        terms["tensor (wgmma)"] = wgmma_flops * busiest_share / (peak / gpu.sms)
        notes.append(f"tensor (wgmma): the {wgmma_flops:.4g} FLOPs of the counted warpgroup MMAs at the dense FP16 "
                     f"tensor-core peak of {peak / 1e12:.3g} TFLOP/s, the roof wgmma is built to reach (an assumption: "
                     f"that the kernel keeps the tensor cores fed; the latency term charges no wgmma wait, as a "
                     f"pipeline of asynchronous MMAs and TMA copies hides them: how far it falls short is what a "
                     f"measurement shows)")

    barriers = metrics.get(BARRIERS)
    instructions = _instructions(metrics, barriers, blocks, threads, gpu)
    if instructions is None:
        unknown.append("issue")
    else:
        terms["issue"] = instructions * busiest_share / (gpu.clock_hz * ISSUE_PER_CLOCK)
        notes.append(f"issue: {ISSUE_PER_CLOCK} warp instructions a clock per SM (one per each of its four schedulers: "
                     f"NVIDIA's Volta, Ampere and Hopper whitepapers); counted: "
                     f"memory instructions and barriers (arithmetic is the compute roof's; address math and other "
                     f"instructions are not counted)")

    _matrix_and_async_notes(metrics, notes)
    latency = _latency(metrics, read, barriers, instructions, blocks, threads, busiest_share, occ, gpu, notes)
    if latency is None:
        unknown.append("latency/occupancy")
    else:
        terms["latency/occupancy"] = latency

    divergent = _count(metrics, DIVERGENT_BRANCHES)
    notes.append("not modelled: instructions the counts do not see (arithmetic, address math), atomic contention on "
                 "one address, blocks of unequal work, L1 hits (they are charged as L2's)"
                 + (f", the cost of {divergent:,.0f} divergent branch targets" if divergent else ""))
    if unknown:
        notes.append(f"left out, since a count they need is unknown (None): {', '.join(unknown)}")
    work = max((t for name, t in terms.items() if name != "launch"), default=0.0)
    limiter = max(terms, key=terms.get)
    return Prediction(gpu=gpu.name, seconds=LAUNCH_OVERHEAD_S + work, limiter=limiter, terms=terms,
                      assumptions=notes)


def timeline(predictions, host_seconds=HOST_LAUNCH_S):
    """Modelled seconds from the host's first launch to the end of the last kernel, for launches issued back to
    back on one stream (what CUDA events around the whole call measure).

    The host spends ``host_seconds`` issuing each launch (6.2 µs for one prepared launch from Python, measured on
    an H200); the GPU starts a kernel once the host has issued it and the kernel before it has finished. A long
    kernel hides the next launches' host time; a chain of short kernels waits for the host (launch-bound).
    """
    predictions = list(predictions)
    if not predictions:
        raise ValueError("timeline needs at least one Prediction (one per launch, in launch order)")
    if host_seconds < 0:
        raise ValueError(f"host_seconds is the host's time to issue one launch: >= 0, got {host_seconds!r}")
    end = 0.0
    for k, p in enumerate(predictions, start=1):
        if not isinstance(p, Prediction):
            raise TypeError(f"timeline takes the Predictions of predict(), got {type(p).__name__}")
        end = max(end, k * host_seconds) + p.seconds
    return end


def arithmetic_intensity(metrics, flops):
    """FLOPs per DRAM byte: the x axis of a roofline plot (infinite if nothing reached DRAM)."""
    moved = _total(metrics, (DRAM_READ, DRAM_WRITE))
    if moved is None:
        raise ValueError("the DRAM byte counts are unknown (None), so the arithmetic intensity is too")
    return math.inf if moved == 0 else flops / moved


def compute_peak(gpu, pipe="fp32"):
    """The FLOP/s roof of ``pipe`` on ``gpu``: the FP32 CUDA cores' peak, or the dense FP16 tensor-core peak."""
    if pipe not in PIPES:
        raise ValueError(f"pipe must be one of {PIPES} (the FP32 CUDA cores or the FP16 tensor cores), got {pipe!r}")
    gpu = get_gpu(gpu)
    return gpu.fp32_flops if pipe == "fp32" else gpu.fp16_tensor_flops


def roofline(metrics, flops, gpu, pipe="fp32"):
    """Where a kernel sits on `gpu`'s roofline: its intensity, the ridge point, the attainable FLOP/s,
    and whether the memory or the compute roof is the lower one there (the compute roof of ``pipe``)."""
    gpu = get_gpu(gpu)
    peak = compute_peak(gpu, pipe)
    intensity = arithmetic_intensity(metrics, flops)
    bandwidth = gpu.dram_bytes_per_s * DRAM_EFFICIENCY
    ridge = peak / bandwidth
    return {"intensity": intensity, "ridge": ridge,
            "attainable_flops": min(peak, intensity * bandwidth),
            "bound": "memory" if intensity < ridge else "compute"}
