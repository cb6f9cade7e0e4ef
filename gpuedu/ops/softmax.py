"""The row-softmax ladder of ``gpuedu/kernels/softmax.cu``: its launcher and NumPy reference.

    ops.softmax_rows(x, version=3)
"""
import numpy as np

from .. import launch as L
from ..launch import ceil_div
from ._common import check_block, check_version
from .elementwise import as_float64

VERSIONS = (1, 2, 3, 4)


def softmax_rows(x, version=3, block_size=None, out=None, stream=None):
    """Softmax over each row of a 2-D matrix.

    ``block_size`` defaults to 128 (versions 1-3: 128 rows or 4 warps a block) or 256 (version 4).
    """
    check_version(version, VERSIONS, "softmax_rows")
    if block_size is None:
        block_size = 256 if version == 4 else 128
    op = f"softmax_rows version {version}"
    if version <= 2:
        check_block(block_size, op)
    else:
        check_block(block_size, op, multiple_of=32, minimum=32)
    x = L.device_array(x, ndim=2)
    out = L.output(out, x.shape)
    rows, cols = x.shape
    if rows == 0 or cols == 0:
        return out
    if version <= 2:
        grid = ceil_div(rows, block_size)                 # a thread per row
    elif version == 3:
        grid = ceil_div(rows, block_size // 32)           # a warp per row
    else:
        grid = rows                                       # a block per row
    fn = L.kernel("softmax", f"softmax_kernel{version}", "PPii")
    L.launch(fn, (grid, 1), (block_size, 1, 1), (out.gpudata, x.gpudata, np.int32(rows), np.int32(cols)), stream)
    return out


def softmax_rows_reference(x):
    """Softmax of each row of a 2-D matrix, with the row maximum subtracted first."""
    x = as_float64(x)
    if x.ndim != 2:
        raise ValueError(f"softmax_rows expects a 2-D matrix, got shape {x.shape}")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
