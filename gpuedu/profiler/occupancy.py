"""Theoretical occupancy: how many warps of a kernel an SM can hold at once, and what stops it holding more.

An SM hides the latency of one warp's memory access by running other warps meanwhile, so the number
of warps it can keep resident matters. Four resources cap how many *blocks* fit on one SM:

- warps: an SM holds at most `max_warps_per_sm` warps (64 on H100, 48 on RTX A6000, 32 on T4);
- blocks: and at most `max_blocks_per_sm` blocks, however small;
- registers: a launch gets ptxas's count, but at least 16 a thread (`launch_registers`: the
  ``launch__registers_per_thread`` Nsight Compute reports, 16 where ptxas says 10), a warp gets that
  x 32 rounded up to a multiple of 256, that is, a multiple of 8 a thread (`allocated_registers`),
  and each of the SM's four sub-partitions (a quarter of the 65,536 registers) holds whole warps;
- shared memory: a block takes its shared memory plus the 1 KB the system reserves per block
  (sm_80 and later), rounded up to the allocation unit (`GPU.shared_allocation_unit`: 128 bytes on compute
  capability 8.x and 9.x, 256 on 7.x, as ``cudaOccSMemAllocationGranularity`` in ``cuda_occupancy.h`` has it).

The smallest of the four wins. Occupancy is the resident warps over `max_warps_per_sm`, the number
Nsight Compute reports as ``sm__maximum_warps_per_active_cycle_pct``.

>>> occ = theoretical_occupancy("H100", threads_per_block=256, registers_per_thread=128, shared_per_block=0)
>>> occ.percent, occ.limiter
(25.0, 'registers')
"""
import operator
from dataclasses import dataclass, field

from .gpus import get_gpu

#: The order in which a tie between limits is reported: the hardware's fixed slots first, since
#: a kernel that fills every warp slot is not held back by its registers even when they also run out.
LIMITERS = ("warps", "blocks", "registers", "shared memory")


@dataclass(frozen=True)
class Occupancy:
    """The result of `theoretical_occupancy`. ``limits`` maps each resource to the blocks it allows."""
    gpu: str
    threads_per_block: int
    registers_per_thread: int
    shared_per_block: int
    blocks_per_sm: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    percent: float
    limiter: str
    limits: dict = field(compare=False)
    registers_allocated: int = 0      # what the hardware gives each thread: registers_per_thread rounded up

    def __str__(self):
        return (f"{self.gpu}: {self.percent:.4g}% theoretical occupancy ({self.active_warps_per_sm} of "
                f"{self.max_warps_per_sm} warps per SM: {self.blocks_per_sm} blocks of "
                f"{self.threads_per_block} threads), limited by {self.limiter}")


def _round_up(value, unit):
    return -(-value // unit) * unit


def _count(name, value):
    """value as an int (NumPy ints too), or a TypeError that names the argument."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}") from None


#: The fewest registers a thread of a launch gets: Nsight Compute reported ``launch__registers_per_thread``
#: = 16 for every kernel ptxas compiled to fewer, and ptxas's own count above it (25, 26, 28, 30, 31: not
#: rounded), on an H200 on 2026-11-26 (benchmarks/results/nvidia-h200-ncu.json).
MIN_LAUNCH_REGISTERS = 16


def launch_registers(registers_per_thread):
    """Registers a thread of a launch gets, as Nsight Compute reports them (``launch__registers_per_thread``):
    ptxas's count, but at least `MIN_LAUNCH_REGISTERS`. 0 (no kernel code) stays 0."""
    registers = _count("registers_per_thread", registers_per_thread)
    if registers < 0:
        raise ValueError(f"registers_per_thread cannot be negative, got {registers}")
    return max(registers, MIN_LAUNCH_REGISTERS) if registers else 0


def allocated_registers(gpu, registers_per_thread):
    """Registers the register file sets aside for each thread of a kernel for which ptxas reports
    ``registers_per_thread``: a warp's registers are allocated in units of ``register_allocation_unit``
    (256), so a thread's `launch_registers` are rounded up to a multiple of 256 / 32 = 8 (31 take 32;
    ptxas's 10 take 16). This is what occupancy counts. 0 stays 0."""
    gpu = get_gpu(gpu)
    per_thread = gpu.register_allocation_unit // gpu.warp_size
    return _round_up(launch_registers(registers_per_thread), per_thread)


def _check(gpu, threads, registers, shared):
    if threads < 1:
        raise ValueError(f"threads_per_block must be at least 1, got {threads}: a block needs a thread")
    if threads > gpu.max_threads_per_block:
        raise ValueError(
            f"threads_per_block is {threads}, more than the {gpu.max_threads_per_block} a block may "
            f"have on {gpu.name}: use smaller blocks and more of them")
    if registers < 0:
        raise ValueError(f"registers_per_thread cannot be negative, got {registers}")
    if registers > gpu.max_registers_per_thread:
        raise ValueError(
            f"registers_per_thread is {registers}, more than the {gpu.max_registers_per_thread} a "
            f"thread may have on {gpu.arch}; the compiler never assigns more (take the number "
            f"from resource_usage(), which asks the real compiler)")
    if shared < 0:
        raise ValueError(f"shared_per_block cannot be negative, got {shared}")
    if shared > gpu.shared_per_block_optin:
        raise ValueError(
            f"shared_per_block is {shared:,} bytes, more than the {gpu.shared_per_block_optin:,} a "
            f"block may use on {gpu.name} (beyond 48 KB only after cudaFuncSetAttribute(..., "
            f"cudaFuncAttributeMaxDynamicSharedMemorySize, ...)): use smaller tiles or fewer stages")


def _register_limit(gpu, warps_per_block, registers):
    """Blocks per SM that the register file allows (None when the kernel uses no registers)."""
    if registers == 0:
        return None
    per_warp = allocated_registers(gpu, registers) * gpu.warp_size
    # A warp lives in one sub-partition, so registers are counted per sub-partition: a quarter of
    # the file holds `warps_per_partition` whole warps, and leftovers smaller than a warp are lost.
    warps_per_partition = gpu.registers_per_sm // gpu.register_file_partitions // per_warp
    warps = warps_per_partition * gpu.register_file_partitions
    # The launch check assumes a block's warps are spread over all four sub-partitions evenly.
    spread = _round_up(warps_per_block, gpu.register_file_partitions) * per_warp
    if warps < warps_per_block or spread > gpu.registers_per_sm:
        raise ValueError(
            f"a block of {warps_per_block * gpu.warp_size} threads x {registers} registers cannot "
            f"launch on {gpu.name}: its warps need {per_warp:,} registers each (rounded up to "
            f"{gpu.register_allocation_unit}) and an SM has {gpu.registers_per_sm:,} in "
            f"{gpu.register_file_partitions} quarters; use fewer threads per block or cap the "
            f"registers (__launch_bounds__, or nvcc -maxrregcount)")
    return warps // warps_per_block


def theoretical_occupancy(gpu, threads_per_block, registers_per_thread, shared_per_block):
    """Blocks and warps of one kernel an SM holds at once, by the CUDA occupancy calculator's rules.

    gpu: a `GPU` or a name ("H100", "a6000"). threads_per_block: the block's size (x*y*z).
    registers_per_thread: as the compiler reports it (`resource_usage`); the hardware allocates it
    rounded up (`allocated_registers`, in ``registers_allocated``). shared_per_block: bytes
    of shared memory per block, static and dynamic together (without the reserved 1 KB).
    """
    gpu = get_gpu(gpu)
    threads = _count("threads_per_block", threads_per_block)
    registers = _count("registers_per_thread", registers_per_thread)
    shared = _count("shared_per_block", shared_per_block)
    _check(gpu, threads, registers, shared)

    warps_per_block = -(-threads // gpu.warp_size)  # a partial warp still takes a whole warp slot
    limits = {
        "warps": gpu.max_warps_per_sm // warps_per_block,
        "blocks": gpu.max_blocks_per_sm,
        "registers": _register_limit(gpu, warps_per_block, registers),
        "shared memory": gpu.shared_per_sm // _round_up(
            shared + gpu.shared_reserved_per_block, gpu.shared_allocation_unit)
        if shared + gpu.shared_reserved_per_block else None,
    }
    limits = {name: blocks for name, blocks in limits.items() if blocks is not None}
    blocks = min(limits.values())
    limiter = next(name for name in LIMITERS if limits.get(name) == blocks)
    warps = blocks * warps_per_block
    return Occupancy(
        gpu=gpu.name, threads_per_block=threads, registers_per_thread=registers,
        shared_per_block=shared, blocks_per_sm=blocks, active_warps_per_sm=warps,
        max_warps_per_sm=gpu.max_warps_per_sm, percent=100.0 * warps / gpu.max_warps_per_sm,
        limiter=limiter, limits=limits, registers_allocated=allocated_registers(gpu, registers))
