"""The reduction ladder of ``gpuedu/kernels/reduction.cu``: launchers, workspace and NumPy references.

    ops.reduce_sum(x, version=6)
    ops.reduce_sum(x, 7, out=out, workspace=ops.reduce_workspace(x.size, 7))    (one launch, allocation-free)
    ops.reduce_pass(x, version)                                                 (one launch: partial sums)

``reduce_sum_reference`` sums in float64; ``sum_tolerance`` bounds how far a float32 tree sum may be from it.
"""
import weakref

import numpy as np

from .. import launch as L
from ..launch import ceil_div
from ._common import check_block, check_version
from .elementwise import as_float64

VERSIONS = (1, 2, 3, 4, 5, 6, 7)
MAX_BLOCKS = 1024   # versions 6 and 7: grid-stride over at most this many blocks


def _reduce_blocks(n, version, block_size):
    """How many blocks (= partial sums) one pass of ``version`` makes from n elements."""
    if version <= 3:
        return ceil_div(n, block_size)
    if version <= 5:
        return ceil_div(n, 2 * block_size)    # two elements per thread in the first add
    return min(ceil_div(n, block_size), MAX_BLOCKS)


def _check_reduce_block(version, block_size):
    op = f"reduce_sum version {version}"
    if version <= 4:   # a 1-thread block would make one partial sum per element: no progress
        check_block(block_size, op, power_of_two=True, minimum=2)
    elif version == 5:
        check_block(block_size, op, power_of_two=True, minimum=32)
    else:
        check_block(block_size, op, multiple_of=32, minimum=32)


def _launch_reduce_pass(version, block_size, src, n, dst, stream):
    """One launch of reduce_kernel<version>: n floats at device address src -> one partial per block at dst."""
    blocks = _reduce_blocks(n, version, block_size)
    shared = block_size * 4 if version <= 5 else 0   # versions 1-5 use an extern __shared__ array
    fn = L.kernel("reduction", f"reduce_kernel{version}", "PPi")
    L.launch(fn, (blocks, 1), (block_size, 1, 1), (dst, src, np.int32(n)), stream, shared_size=shared)
    return blocks


def reduce_pass(x, version, block_size=256, stream=None):
    """One launch of ``reduce_kernel<version>`` (1-6): the per-block partial sums, a 1-D GPUArray."""
    check_version(version, VERSIONS[:-1], "reduce_pass")
    _check_reduce_block(version, block_size)
    x = L.device_array(x)
    n = x.size
    if n == 0:   # an empty array has no device buffer to pass; its sum is 0
        return L.gpuarray().zeros((1,), np.float32)
    partial = L.gpuarray().empty((_reduce_blocks(n, version, block_size),), np.float32)
    _launch_reduce_pass(version, block_size, x.gpudata, n, partial.gpudata, stream)
    return partial


def _reduce_levels(n, version, block_size):
    """The partial-sum counts of the passes of versions 1-6 for n elements, down to the final 1."""
    levels = [_reduce_blocks(n, version, block_size)]
    while levels[-1] > 1:
        levels.append(_reduce_blocks(levels[-1], version, block_size))
    return levels


def reduce_workspace_size(n, version=6, block_size=256):
    """How many floats of workspace ``reduce_sum`` needs for n elements.

    Versions 1-6: every intermediate level of partial sums, each starting on a 16-byte boundary (the
    final value goes to ``out``). Version 7: one partial sum per block, then its ticket (one 32-bit
    counter, which must start at 0: make the workspace with ``reduce_workspace``).
    """
    check_version(version, VERSIONS, "reduce_sum")
    _check_reduce_block(version, block_size)
    if n == 0:
        return 0
    if version == 7:
        return 4 * ceil_div(_reduce_blocks(n, 7, block_size), 4) + 1
    return sum(4 * ceil_div(m, 4) for m in _reduce_levels(n, version, block_size)[:-1])


# Version 7's workspaces made by reduce_workspace, whose ticket is known to be 0 between launches,
# by id (GPUArrays are not hashable); an entry goes when its array is freed, or when a launch on it
# fails part way (its ticket may be mid-count).
_TICKETED = {}


def _is_ticketed(workspace):
    ref = _TICKETED.get(id(workspace))
    return ref is not None and ref() is workspace


def _forget_ticket(workspace):
    if _is_ticketed(workspace):
        del _TICKETED[id(workspace)]


def reduce_workspace(n, version=6, block_size=256):
    """A device buffer for ``reduce_sum(x, version, block_size, workspace=...)`` on arrays of n elements:
    allocate it once, and repeated reductions allocate nothing (on a GPU, cuMemAlloc is slow and
    cuMemFree synchronises with the device). Version 7's comes zeroed: its ticket starts at 0, and
    each launch leaves it at 0 again."""
    size = max(1, reduce_workspace_size(n, version, block_size))
    if version != 7:
        return L.gpuarray().empty((size,), np.float32)
    workspace = L.gpuarray().zeros((size,), np.float32)
    key = id(workspace)
    _TICKETED[key] = weakref.ref(workspace, lambda _ref, key=key: _TICKETED.pop(key, None))
    return workspace


def _check_workspace(workspace, n, version, block_size):
    need = reduce_workspace_size(n, version, block_size)
    if not hasattr(workspace, "gpudata"):
        raise TypeError(f"workspace must be a GPUArray from ops.reduce_workspace(n, version, block_size), "
                        f"got {type(workspace).__name__}")
    if workspace.dtype != np.float32 or workspace.size < need or not L.is_c_contiguous(workspace):
        raise ValueError(f"workspace must be a contiguous float32 GPUArray of at least {need} elements for "
                         f"n={n}, version={version}, block_size={block_size}; got {workspace.dtype} of shape "
                         f"{tuple(workspace.shape)}: make it with ops.reduce_workspace({n}, {version}, {block_size})")
    if version == 7 and not _is_ticketed(workspace):
        raise ValueError("version 7's workspace holds a ticket that must start at 0: pass one made by "
                         f"ops.reduce_workspace({n}, 7, {block_size}) (not another buffer, and not one whose "
                         "launch failed part way, which may have left the ticket mid-count)")


def _ticket_address(workspace, n, block_size):
    """Where version 7's ticket lies in its workspace: after the partial sums, 16-byte aligned."""
    return int(workspace.gpudata) + 4 * 4 * ceil_div(_reduce_blocks(n, 7, block_size), 4)


def _reduce_sum_once(x, n, block_size, out, workspace, stream):
    """Version 7: one launch; the last block to finish adds the blocks' partial sums into out."""
    if workspace is None:
        workspace = reduce_workspace(n, 7, block_size)
    else:
        _check_workspace(workspace, n, 7, block_size)
    blocks = _reduce_blocks(n, 7, block_size)
    fn = L.kernel("reduction", "reduce_kernel7", "PPPPi")
    try:
        L.launch(fn, (blocks, 1), (block_size, 1, 1),
                 (out.gpudata, workspace.gpudata, _ticket_address(workspace, n, block_size), x.gpudata,
                  np.int32(n)), stream)
    except BaseException:
        _forget_ticket(workspace)   # stopped part way: its ticket may no longer be 0
        raise
    return out


def reduce_sum(x, version=6, block_size=256, out=None, workspace=None, stream=None):
    """The sum of all elements of x, as a GPUArray of shape (1,) (read it with ``.get()[0]``).

    Versions 1-6 launch one pass per level, each pass reducing to one value per block, until one
    value is left; version 7 launches once, and its last block to finish adds the blocks' sums.
    ``out`` (shape (1,)) receives the sum; ``workspace`` (``reduce_workspace(x.size, version,
    block_size)``) holds the partial sums. Pass both and the call allocates nothing.
    """
    check_version(version, VERSIONS, "reduce_sum")
    _check_reduce_block(version, block_size)
    x = L.device_array(x)
    out = L.output(out, (1,))
    n = x.size
    if n == 0:
        out.fill(np.float32(0), stream=stream)   # the empty sum
        return out
    if version == 7:
        return _reduce_sum_once(x, n, block_size, out, workspace, stream)
    if workspace is None:
        workspace = reduce_workspace(n, version, block_size)
    else:
        _check_workspace(workspace, n, version, block_size)
    # Level i's partial sums go to the next 16-byte aligned free spot of the workspace; the last
    # level (one value) goes to out. Each pass reads the previous level.
    src, count, offset = x.gpudata, n, 0
    base = int(workspace.gpudata)
    for level in _reduce_levels(n, version, block_size)[:-1]:
        dst = base + 4 * offset
        _launch_reduce_pass(version, block_size, src, count, dst, stream)
        src, count, offset = dst, level, offset + 4 * ceil_div(level, 4)
    _launch_reduce_pass(version, block_size, src, count, out.gpudata, stream)
    return out


# ---- NumPy references -------------------------------------------------------------------------

def reduce_sum_reference(x):
    """The sum of all elements, accumulated in float64 (a float32 sum of 10^6 terms drifts)."""
    return float(np.sum(as_float64(x)))


def sum_tolerance(x):
    """A bound on |float32 tree sum - exact sum| of x: a few float32 ulps times sum |x| times log2 n.

    A reduction's float32 partial sums each round to within eps/2 relative, and a tree sum has
    about log2(n) levels, so the error is at most ~ eps * log2(n) * sum|x|. Used to check kernels
    whose order of additions differs from NumPy's.
    """
    x = as_float64(x)
    n = max(x.size, 2)
    return float(np.finfo(np.float32).eps * (np.log2(n) + 2) * np.sum(np.abs(x)))


def histogram_reference(x, bins):
    """Counts of the integers in ``x`` (each in [0, bins)), as int32: what an atomics histogram makes
    (lesson 03's exercise, beside the reductions: the other pattern of atomics)."""
    x = np.asarray(x)
    if x.size and (x.min() < 0 or x.max() >= bins):
        raise ValueError(f"values must lie in [0, {bins}); got {x.min()}..{x.max()}")
    return np.bincount(x.ravel().astype(np.int64), minlength=bins).astype(np.int32)
