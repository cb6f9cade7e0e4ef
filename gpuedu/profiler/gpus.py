"""The GPUs the profiler can model, with the published figure or stated assumption behind each number.

A performance model is only as honest as its inputs, so every `GPU` carries a ``sources`` mapping
from each field to where it comes from: an NVIDIA datasheet or whitepaper, the CUDA documentation,
or ``"assumption: ..."`` where NVIDIA publishes nothing (the L2 bandwidth of most chips).

>>> from gpuedu.profiler.gpus import get_gpu
>>> h100 = get_gpu("h100")
>>> h100.name, h100.sms, h100.dram_bytes_per_s
('H100 SXM', 132, 3350000000000.0)
>>> h100.sources["dram_bytes_per_s"]
'NVIDIA H100 Tensor Core GPU datasheet (SXM5: 3.35 TB/s HBM3)'
"""
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@dataclass(frozen=True)
class GPU:
    """One GPU model's figures. Bytes are bytes (not KB), rates are per second, clocks in MHz."""
    name: str
    arch: str                         # what nvcc's -arch takes, e.g. "sm_90"
    sms: int                          # streaming multiprocessors
    boost_clock_mhz: int
    dram_bytes_per_s: float           # peak DRAM bandwidth, datasheet figure
    memory_bytes: int
    l2_bytes: int
    l2_bytes_per_clock: float         # whole chip, bytes per SM clock (see sources: mostly an assumption)
    fp32_flops: float                 # peak FP32 FLOP/s on the CUDA cores (an FMA counts as 2)
    fp16_tensor_flops: float          # peak dense FP16 tensor-core FLOP/s (no 2:4 sparsity)
    shared_per_sm: int                # largest shared-memory carve-out of one SM
    shared_per_block_optin: int       # most a block may use (above 48 KB only after opting in)
    shared_reserved_per_block: int    # the system's own shared memory per block (1 KB on sm_80+)
    shared_allocation_unit: int       # a block's shared memory is allocated in multiples of this (256 bytes on
                                      # compute capability 7.x, 128 on 8.x and 9.x)
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    register_allocation_unit: int = 256   # registers are given to a warp in multiples of this ...
    register_allocation_granularity: str = "warp"  # ... per warp, not per thread
    register_file_partitions: int = 4     # an SM's four sub-partitions each hold a quarter of the registers
    max_threads_per_block: int = 1024
    warp_size: int = 32
    # Clocks a warp spends on each WMMA mma_sync (16 x 16 x 16, two mma.sync.m16n8k16 on sm_80 and later) before
    # it goes on, its mma_syncs being independent: None where no measurement says (the time model leaves it out).
    mma_sync_cycles: float = None
    # Clocks a warp spends on each HMMA instruction (inline PTX's mma.sync.m16n8k16 or m16n8k8): None where
    # mma_sync_cycles is (the time model leaves it out).
    hmma_cycles: float = None
    aliases: tuple = ()
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self):
        # Read-only, so that a lesson cannot quietly change the figures every other model uses.
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    @property
    def clock_hz(self):
        return self.boost_clock_mhz * 1e6

    @property
    def l2_bytes_per_s(self):
        return self.l2_bytes_per_clock * self.clock_hz

    @property
    def max_threads_per_sm(self):
        return self.max_warps_per_sm * self.warp_size

    def __str__(self):
        return (f"{self.name} ({self.arch}, {self.sms} SMs at {self.boost_clock_mhz} MHz, "
                f"{self.dram_bytes_per_s / 1e12:.3g} TB/s DRAM, {self.fp32_flops / 1e12:.3g} TFLOP/s FP32)")


_GUIDE = "CUDA C++ Programming Guide, technical specifications per compute capability"
_OCCUPANCY = "CUDA occupancy calculator rules (cuda_occupancy.h in the CUDA toolkit)"
_SHARED_UNIT = ("CUDA occupancy calculator rules (cuda_occupancy.h in the CUDA toolkit, "
                "cudaOccSMemAllocationGranularity: 256 bytes on compute capability 7.x, 128 on 8.x and 9.x)")


def _sources(datasheet, whitepaper, **specific):
    """The sources every GPU shares (architecture limits), overridden by the GPU's own."""
    common = {
        "name": datasheet, "arch": _GUIDE, "sms": whitepaper, "boost_clock_mhz": datasheet,
        "dram_bytes_per_s": datasheet, "memory_bytes": datasheet, "l2_bytes": whitepaper,
        "fp32_flops": f"{datasheet} (= SMs x 128 FP32 lanes x 2 x boost clock)",
        "fp16_tensor_flops": f"{datasheet} (dense: half the with-sparsity figure)",
        "shared_per_sm": _GUIDE, "shared_per_block_optin": _GUIDE,
        "shared_reserved_per_block": _GUIDE, "shared_allocation_unit": _SHARED_UNIT,
        "max_warps_per_sm": _GUIDE, "max_blocks_per_sm": _GUIDE, "registers_per_sm": _GUIDE,
        "max_registers_per_thread": _GUIDE, "register_allocation_unit": _OCCUPANCY,
        "register_allocation_granularity": _OCCUPANCY, "register_file_partitions": _OCCUPANCY,
        "max_threads_per_block": _GUIDE, "warp_size": _GUIDE,
        "mma_sync_cycles": "not known: no measurement of a warp's WMMA mma_sync on this GPU here, so the time model "
                           "leaves the wait out",
        "hmma_cycles": "not known: no measurement of a warp's WMMA mma_sync (two HMMA.16816) on this GPU here, so "
                       "the time model leaves the wait out",
    }
    common.update(specific)
    return common


# A100's whitepaper gives its L2 read bandwidth as 5120 bytes/clock; per SM that is:
_A100_L2_PER_SM = 5120 / 108

# A warp's WMMA mma_sync on Hopper, from the H200's sweep of the pipelined WMMA GEMM (gpu_probe.py tiles,
# benchmarks/results/nvidia-h200-probe-tiles.json, 2026-11-26): two shapes that differ only in the warps' tiles,
# 128 x 128 x 64 blocks, 4 stages, one block an SM, 8 waves at 4096^3, took 0.970 ms with 8 warps of 64 x 32 (8
# mma_sync a warp per 16-wide K step) and 1.456 ms with 4 warps of 64 x 64 (16): 8 more mma_syncs a warp per step,
# 256 steps, 8 waves, at the 1,980 MHz boost clock the model runs at, is 58.7 clocks each (57.7 and 62.3 for the
# transposed layouts), though they are independent (nvcc issues their HMMA.16816s back to back): a warp waits on
# each. Its fragment loads (two more a step) are in the figure too. Not a rate the tensor cores top out at: with
# more warps an SM the waits overlap (the sweep's speed follows the warps an SM holds).
_HOPPER_MMA_SYNC_CYCLES = 59
_HOPPER_MMA_SYNC = ("59 clocks a warp per WMMA mma_sync; the H200's tile sweep (gpu_probe.py tiles, "
                    "benchmarks/results/nvidia-h200-probe-tiles.json, 2026-11-26): 128 x 128 x 64 tiles, 4 stages, "
                    "one block an SM, took 0.970 ms with 8 warps of 64 x 32 and 1.456 ms with 4 warps of 64 x 64, "
                    "whose warps issue 8 more mma_syncs each 16-wide K step: 58.7 clocks each at the 1,980 MHz "
                    "boost clock (57.7 and 62.3 in the transposed layouts)")
# An inline PTX mma.sync on Hopper: half a WMMA mma_sync, which nvcc compiles to two HMMA.16816 issued back to back.
# An assumption, not a measurement: no run here has timed a lone HMMA, and an m16n8k8 (HMMA.1688) is charged the
# same wait as an m16n8k16, the figure being a warp's wait per instruction, not a rate of multiply-adds.
_HOPPER_HMMA_CYCLES = _HOPPER_MMA_SYNC_CYCLES / 2
_HOPPER_HMMA = (f"assumption: {_HOPPER_HMMA_CYCLES:g} clocks a warp per HMMA (inline PTX mma.sync, m16n8k16 or "
                f"m16n8k8 alike), half of mma_sync_cycles' {_HOPPER_MMA_SYNC_CYCLES} clocks: a WMMA mma_sync of 16 x 16 "
                f"x 16 is two HMMA.16816 on sm_80 and later, and no run here has timed an HMMA alone")

T4 = GPU(
    name="T4", arch="sm_75", sms=40, boost_clock_mhz=1590, dram_bytes_per_s=320e9,
    memory_bytes=16 * GiB, l2_bytes=4 * MiB, l2_bytes_per_clock=32 * 40,
    fp32_flops=8.1e12, fp16_tensor_flops=65e12,
    shared_per_sm=64 * KiB, shared_per_block_optin=64 * KiB, shared_reserved_per_block=0,
    shared_allocation_unit=256, max_warps_per_sm=32, max_blocks_per_sm=16,
    aliases=("tesla t4", "nvidia t4"),
    sources=_sources(
        "NVIDIA T4 Tensor Core GPU datasheet", "NVIDIA Turing GPU architecture whitepaper",
        fp32_flops="NVIDIA T4 datasheet (8.1 TFLOP/s; = 40 SMs x 64 FP32 lanes x 2 x 1590 MHz)",
        l2_bytes="NVIDIA Turing GPU architecture whitepaper (TU104, the T4's chip: 4 MB L2)",
        fp16_tensor_flops="NVIDIA T4 datasheet (65 TFLOP/s mixed precision; Turing has no sparsity)",
        l2_bytes_per_clock="assumption: 32 bytes/clock per SM (NVIDIA publishes no T4 L2 bandwidth)"),
)

A100 = GPU(
    name="A100 SXM4 80GB", arch="sm_80", sms=108, boost_clock_mhz=1410, dram_bytes_per_s=2039e9,
    memory_bytes=80 * GiB, l2_bytes=40 * MiB, l2_bytes_per_clock=5120,
    fp32_flops=19.5e12, fp16_tensor_flops=312e12,
    shared_per_sm=164 * KiB, shared_per_block_optin=163 * KiB, shared_reserved_per_block=1 * KiB,
    shared_allocation_unit=128, max_warps_per_sm=64, max_blocks_per_sm=32,
    aliases=("a100", "a100 sxm", "a100 sxm4", "a100 80gb"),
    sources=_sources(
        "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB)",
        "NVIDIA A100 Tensor Core GPU architecture whitepaper",
        fp32_flops="NVIDIA A100 datasheet (19.5 TFLOP/s; = 108 SMs x 64 FP32 lanes x 2 x 1410 MHz)",
        l2_bytes="NVIDIA A100 Tensor Core GPU architecture whitepaper (40 MB L2 on the A100)",
        l2_bytes_per_clock="NVIDIA A100 architecture whitepaper (L2 read bandwidth 5120 bytes/clock)"),
)

H100 = GPU(
    name="H100 SXM", arch="sm_90", sms=132, boost_clock_mhz=1980, dram_bytes_per_s=3.35e12,
    memory_bytes=80 * GiB, l2_bytes=50 * MiB, l2_bytes_per_clock=_A100_L2_PER_SM * 132,
    fp32_flops=67e12, fp16_tensor_flops=989e12,
    shared_per_sm=228 * KiB, shared_per_block_optin=227 * KiB, shared_reserved_per_block=1 * KiB,
    shared_allocation_unit=128, max_warps_per_sm=64, max_blocks_per_sm=32, mma_sync_cycles=_HOPPER_MMA_SYNC_CYCLES,
    hmma_cycles=_HOPPER_HMMA_CYCLES, aliases=("h100", "h100 sxm5", "h100 80gb"),
    sources=_sources(
        "NVIDIA H100 Tensor Core GPU datasheet",
        "NVIDIA H100 Tensor Core GPU architecture whitepaper (Hopper)",
        dram_bytes_per_s="NVIDIA H100 Tensor Core GPU datasheet (SXM5: 3.35 TB/s HBM3)",
        l2_bytes="NVIDIA H100 Tensor Core GPU architecture whitepaper (50 MB L2 on the H100 SXM5)",
        l2_bytes_per_clock="assumption: A100's published 5120 bytes/clock per SM (47.4) x 132 SMs "
                           "(NVIDIA publishes no H100 L2 bandwidth)",
        mma_sync_cycles=f"assumption: as fitted on an H200 (the same GH100 SMs and clock): {_HOPPER_MMA_SYNC}",
        hmma_cycles=_HOPPER_HMMA),
)

H200 = GPU(
    name="H200 SXM", arch="sm_90", sms=132, boost_clock_mhz=1980, dram_bytes_per_s=4.8e12,
    memory_bytes=141 * 10**9, l2_bytes=60 * MiB, l2_bytes_per_clock=_A100_L2_PER_SM * 132,
    fp32_flops=67e12, fp16_tensor_flops=989e12,
    shared_per_sm=228 * KiB, shared_per_block_optin=227 * KiB, shared_reserved_per_block=1 * KiB,
    shared_allocation_unit=128, max_warps_per_sm=64, max_blocks_per_sm=32, mma_sync_cycles=_HOPPER_MMA_SYNC_CYCLES,
    hmma_cycles=_HOPPER_HMMA_CYCLES, aliases=("h200",),
    sources=_sources(
        "NVIDIA H200 Tensor Core GPU datasheet (SXM: 141 GB HBM3e at 4.8 TB/s)",
        "NVIDIA H100 Tensor Core GPU architecture whitepaper (the H200 uses the same GH100 chip)",
        l2_bytes="measured: 62,914,560 bytes (60 MB) of L2 on an NVIDIA H200, the CUDA device attribute "
                 "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE (gpuedu bench, 2026-11-26), as Nsight Compute reported there; "
                 "the GH100 chip's full 60 MB, where the H100 SXM5 enables 50 MB",
        l2_bytes_per_clock="assumption: as H100 (the same chip; NVIDIA publishes no L2 bandwidth)",
        mma_sync_cycles=f"fitted to two times measured on this GPU: {_HOPPER_MMA_SYNC}", hmma_cycles=_HOPPER_HMMA),
)

RTX_A6000 = GPU(
    name="RTX A6000", arch="sm_86", sms=84, boost_clock_mhz=1800, dram_bytes_per_s=768e9,
    memory_bytes=48 * GiB, l2_bytes=6 * MiB, l2_bytes_per_clock=32 * 84,
    fp32_flops=38.7e12, fp16_tensor_flops=154.8e12,
    shared_per_sm=100 * KiB, shared_per_block_optin=99 * KiB, shared_reserved_per_block=1 * KiB,
    shared_allocation_unit=128, max_warps_per_sm=48, max_blocks_per_sm=16,
    aliases=("a6000", "nvidia rtx a6000"),
    sources=_sources(
        "NVIDIA RTX A6000 datasheet", "NVIDIA Ampere GA102 GPU architecture whitepaper",
        l2_bytes="NVIDIA Ampere GA102 GPU architecture whitepaper (6 MB L2 on the full GA102)",
        fp16_tensor_flops="NVIDIA Ampere GA102 whitepaper (154.8 TFLOP/s dense FP16 with FP32 "
                          "accumulate; the datasheet's 309.7 is with sparsity)",
        l2_bytes_per_clock="assumption: 32 bytes/clock per SM (NVIDIA publishes no GA102 L2 "
                           "bandwidth); with L1 hits counted as L2 traffic it puts the naive and "
                           "coalesced SGEMM of siboehm's A6000 ladder near their published times"),
)

#: Every GPU the profiler knows, in the order of their architectures.
GPUS = (T4, A100, RTX_A6000, H100, H200)


def _key(name):
    """Names compare without case, spaces, dashes or underscores: "H100-SXM" == "h100 sxm"."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


_BY_NAME = {_key(alias): gpu for gpu in GPUS for alias in (gpu.name, *gpu.aliases)}


def get_gpu(name):
    """The `GPU` called `name` (any case; aliases such as "h100", "A100", "a6000" work).

    A `GPU` passes through unchanged, so functions can take either.
    """
    if isinstance(name, GPU):
        return name
    if not isinstance(name, str):
        raise TypeError(f"a GPU is named by a string such as 'H100 SXM', got {type(name).__name__}")
    try:
        return _BY_NAME[_key(name)]
    except KeyError:
        known = ", ".join(gpu.name for gpu in GPUS)
        raise ValueError(f"unknown GPU {name!r}; the profiler knows: {known}") from None
