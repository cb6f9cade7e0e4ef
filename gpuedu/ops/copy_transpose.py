"""The transpose ladder of ``gpuedu/kernels/copy_transpose.cu`` and the copy it is measured against.

    ops.transpose(x, version=3)      ops.copy2d(x)

Every kernel of the file covers a ``TILE`` x ``TILE`` tile with a (TILE, BLOCK_ROWS) block: both read from
the file. ``transpose_reference`` is the NumPy answer.
"""
import numpy as np

from .. import kernels as _kernels
from .. import launch as L
from ..launch import ceil_div
from ._common import check_version

VERSIONS = (1, 2, 3)
TILE = _kernels.define("copy_transpose", "TILE")
BLOCK_ROWS = _kernels.define("copy_transpose", "BLOCK_ROWS")


def _launch_tiled_2d(name, x, out, stream):
    rows, cols = x.shape
    if rows and cols:
        grid = (ceil_div(cols, TILE), ceil_div(rows, TILE))
        fn = L.kernel("copy_transpose", name, "PPii")
        L.launch(fn, grid, (TILE, BLOCK_ROWS, 1), (out.gpudata, x.gpudata, np.int32(rows), np.int32(cols)), stream)
    return out


def transpose(x, version=3, out=None, stream=None):
    """x^T for a 2-D matrix, as a new contiguous (cols, rows) GPUArray."""
    check_version(version, VERSIONS, "transpose")
    x = L.device_array(x, ndim=2)
    out = L.output(out, (x.shape[1], x.shape[0]))
    return _launch_tiled_2d(f"transpose_kernel{version}", x, out, stream)


def copy2d(x, out=None, stream=None):
    """A copy of a 2-D matrix with the transposes' launch shape: the roof they are measured against."""
    x = L.device_array(x, ndim=2)
    out = L.output(out, x.shape)
    return _launch_tiled_2d("copy_kernel0", x, out, stream)


def transpose_reference(x):
    """The transpose of a 2-D matrix, as a new contiguous array."""
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32).T)
