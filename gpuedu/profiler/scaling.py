"""From counts you can afford to count to the size a GPU runs: each count as a power of the size.

The emulator counts exactly, but a 4096 x 4096 x 4096 GEMM is 137 GFLOP: far too long to run thread by
thread. For a kernel whose every count grows as a power of the problem size n (a GEMM's loads in the K
loop as n**3, its stores and the bytes it touches as n**2, its warps as n**2), two sizes that can run
give each power, and the counts at any size follow:

    small, large = records at n = 128 and n = 256
    big = extrapolate(small, large, 128, 256, 4096, grid=(32, 32))

Exact when each count really is c * n**p at both sizes (no partial tiles: choose sizes the tiles divide);
``big.exponents`` shows the power found for each count, so the napkin math is on the page.
"""
import math

from .session import KernelRecord


def extrapolate(small, large, size_small, size_large, size, grid):
    """A KernelRecord with the counts ``small`` (at ``size_small``) and ``large`` (at ``size_large``) imply at
    ``size``, launched with ``grid``. Counts that are zero at either size are carried over from ``large``."""
    if small._counts is None or large._counts is None:
        raise ValueError(f"kernel '{large.name}' has no counts to extrapolate ({large._reason or small._reason})")
    if small.name != large.name or small.block != large.block:
        raise ValueError(f"extrapolate needs two launches of one kernel with one block shape; got '{small.name}' "
                         f"{small.block} and '{large.name}' {large.block}")
    if not 0 < size_small < size_large:
        raise ValueError(f"the sizes must grow: got {size_small} then {size_large}")
    step = math.log(size_large / size_small)
    counts, exponents = {}, {}
    # The L2 model's per-GPU DRAM counts do not grow as a power of the size (a footprint that outgrows L2
    # starts writing back): they are left out, and the DRAM model works from the footprint at ``size``
    # (metrics.dram_bytes).
    from gpuedu.emulator.hooks import L2_KEY_PREFIXES
    per_l2 = {key for c in (small._counts, large._counts) for key in c if key.startswith(L2_KEY_PREFIXES)}
    for key, c2 in large._counts.items():
        if key in per_l2:
            continue
        c1 = small._counts[key]
        p = math.log(c2 / c1) / step if c1 > 0 and c2 > 0 else 0.0
        exponents[key] = round(p, 3)
        counts[key] = int(round(c2 * (size / size_large) ** p))
    grid = tuple(int(g) for g in grid) + (1,) * (3 - len(tuple(grid)))
    record = KernelRecord(large.name, grid, large.block, large.shared_dynamic, counts=counts, source=large._source,
                          arch=large.arch, backend=large.backend, gpu=large.gpu)
    record.exponents = exponents
    return record
