"""What the op families share: the checks of a version and a block size, and the warp tiles of
``gemm_warptile.cuh`` (read from the header, as every tile size Python needs is)."""
import numpy as np

from .. import kernels

MAX_THREADS_PER_BLOCK = 1024


def check_version(version, versions, op):
    if version not in versions:
        raise ValueError(f"{op} has versions {', '.join(map(str, versions))}; got version={version!r}")


def check_block(block_size, op, power_of_two=False, multiple_of=1, minimum=1):
    if not isinstance(block_size, (int, np.integer)) or isinstance(block_size, bool):
        raise TypeError(f"{op}: block_size must be an int, got {block_size!r}")
    if not minimum <= block_size <= MAX_THREADS_PER_BLOCK:
        raise ValueError(f"{op}: block_size must be in [{minimum}, {MAX_THREADS_PER_BLOCK}], got {block_size}")
    if power_of_two and block_size & (block_size - 1):
        raise ValueError(f"{op}: this version halves the block at each step, so block_size must be "
                         f"a power of two (e.g. 128, 256); got {block_size}")
    if block_size % multiple_of:
        raise ValueError(f"{op}: block_size must be a multiple of {multiple_of} (whole warps), got {block_size}")


def warp_tile(alias):
    """One tile shape of gemm_warptile.cuh (``Tile128x128``, ...) as {BM, BN, BK, THREADS}, computed from the
    template arguments of its ``using`` line as ``WarpTile`` computes them (THREADS = 32 warps' lanes
    times (BM / WM) x (BN / WN) warps)."""
    bm, bn, bk, wm, wn, _, _ = kernels.template_arguments("gemm_warptile.cuh", alias)
    return dict(BM=bm, BN=bn, BK=bk, THREADS=32 * (bm // wm) * (bn // wn))
