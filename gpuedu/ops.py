"""Python launchers for the kernels in ``gpuedu/kernels/``: check, allocate, size the grid, launch.

One function per op, with the kernel version as a parameter (the ladders are described at the top
of each ``.cu`` file):

    ops.activation(x, "gelu", version=3)     ops.relu(x), ops.sigmoid(x), ...   (elementwise.cu)
    ops.transpose(x, version=3)              ops.copy2d(x)                       (copy_transpose.cu)
    ops.reduce_sum(x, version=6)                                                 (reduction.cu)
    ops.reduce_sum(x, 7, out=out, workspace=ops.reduce_workspace(x.size, 7))    (allocation-free)
    ops.softmax_rows(x, version=3)                                               (softmax.cu)
    ops.matmul(a, b, version=7)                                                  (matmul.cu)

Inputs are GPUArrays or NumPy arrays (copied to the device first), float32 and C-contiguous;
anything else gets an error that says what to change (``gpuedu.launch.device_array``). Results are new
GPUArrays, or the ``out=`` array you pass (handy when timing, so that allocation is not timed). Every
launcher takes ``stream=`` (None: the default stream) and returns without waiting for the device.
"""
import numpy as np

from . import kernels as _kernels
from . import launch as L
from .launch import ceil_div  # noqa: F401  (lessons size their grids with ops.ceil_div)

MAX_THREADS_PER_BLOCK = 1024
#: The activations elementwise.cu applies, with their codes from the kernels' one table (activations.cuh).
ACTIVATION_CODES = {name: code for name, code in _kernels.ACTIVATIONS.items() if name != "none"}
#: Default alpha of the activations that take one (leaky ReLU's slope, ELU's scale).
DEFAULT_ALPHA = {"leaky_relu": 0.01, "elu": 1.0}


# ----------------------------------------------------------------------------------------------
# checking arguments

def _check_version(version, versions, op):
    if version not in versions:
        raise ValueError(f"{op} has versions {', '.join(map(str, versions))}; got version={version!r}")


def _check_block(block_size, op, power_of_two=False, multiple_of=1, minimum=1):
    if not isinstance(block_size, (int, np.integer)) or isinstance(block_size, bool):
        raise TypeError(f"{op}: block_size must be an int, got {block_size!r}")
    if not minimum <= block_size <= MAX_THREADS_PER_BLOCK:
        raise ValueError(f"{op}: block_size must be in [{minimum}, {MAX_THREADS_PER_BLOCK}], got {block_size}")
    if power_of_two and block_size & (block_size - 1):
        raise ValueError(f"{op}: this version halves the block at each step, so block_size must be "
                         f"a power of two (e.g. 128, 256); got {block_size}")
    if block_size % multiple_of:
        raise ValueError(f"{op}: block_size must be a multiple of {multiple_of} (whole warps), got {block_size}")


# ----------------------------------------------------------------------------------------------
# elementwise.cu

ACTIVATION_VERSIONS = (1, 2, 3)
GRID_STRIDE_MAX_BLOCKS = 1024   # versions 2 and 3: enough blocks to fill a large GPU, then loop


def activation(x, name="relu", version=1, alpha=None, block_size=256, out=None, stream=None):
    """phi(x) elementwise; ``name`` is one of ``ACTIVATION_CODES`` (relu, gelu, ...)."""
    if name not in ACTIVATION_CODES:
        raise ValueError(f"unknown activation {name!r}; choose one of {', '.join(ACTIVATION_CODES)}")
    _check_version(version, ACTIVATION_VERSIONS, "activation")
    _check_block(block_size, "activation")
    x = L.device_array(x)
    out = L.output(out, x.shape)
    n = x.size
    if n == 0:
        return out
    alpha = DEFAULT_ALPHA.get(name, 0.0) if alpha is None else alpha
    if version == 3:
        L.check_aligned16("activation version 3", x=x, out=out)
    if version == 1:
        grid = ceil_div(n, block_size)
    elif version == 2:
        grid = min(ceil_div(n, block_size), GRID_STRIDE_MAX_BLOCKS)
    else:  # one thread per float4; at least one block for the scalar tail
        grid = max(1, min(ceil_div(n // 4, block_size), GRID_STRIDE_MAX_BLOCKS))
    fn = L.kernel("elementwise", f"activation_kernel{version}", "PPiif")
    L.launch(fn, (grid, 1), (block_size, 1, 1),
             (out.gpudata, x.gpudata, np.int32(n), np.int32(ACTIVATION_CODES[name]), np.float32(alpha)), stream)
    return out


def relu(x, version=1, **kw):
    return activation(x, "relu", version, **kw)


def leaky_relu(x, version=1, alpha=0.01, **kw):
    return activation(x, "leaky_relu", version, alpha=alpha, **kw)


def sigmoid(x, version=1, **kw):
    return activation(x, "sigmoid", version, **kw)


def tanh(x, version=1, **kw):
    return activation(x, "tanh", version, **kw)


def gelu(x, version=1, **kw):
    return activation(x, "gelu", version, **kw)


def silu(x, version=1, **kw):
    return activation(x, "silu", version, **kw)


def elu(x, version=1, alpha=1.0, **kw):
    return activation(x, "elu", version, alpha=alpha, **kw)


# ----------------------------------------------------------------------------------------------
# copy_transpose.cu

TRANSPOSE_VERSIONS = (1, 2, 3)
TRANSPOSE_TILE, TRANSPOSE_BLOCK_ROWS = 32, 8   # as #defined in copy_transpose.cu


def _launch_tiled_2d(name, x, out, stream):
    rows, cols = x.shape
    if rows and cols:
        grid = (ceil_div(cols, TRANSPOSE_TILE), ceil_div(rows, TRANSPOSE_TILE))
        fn = L.kernel("copy_transpose", name, "PPii")
        L.launch(fn, grid, (TRANSPOSE_TILE, TRANSPOSE_BLOCK_ROWS, 1),
                 (out.gpudata, x.gpudata, np.int32(rows), np.int32(cols)), stream)
    return out


def transpose(x, version=3, out=None, stream=None):
    """x^T for a 2-D matrix, as a new contiguous (cols, rows) GPUArray."""
    _check_version(version, TRANSPOSE_VERSIONS, "transpose")
    x = L.device_array(x, ndim=2)
    out = L.output(out, (x.shape[1], x.shape[0]))
    return _launch_tiled_2d(f"transpose_kernel{version}", x, out, stream)


def copy2d(x, out=None, stream=None):
    """A copy of a 2-D matrix with the transposes' launch shape: the roof they are measured against."""
    x = L.device_array(x, ndim=2)
    out = L.output(out, x.shape)
    return _launch_tiled_2d("copy_kernel0", x, out, stream)


# ----------------------------------------------------------------------------------------------
# reduction.cu

REDUCE_VERSIONS = (1, 2, 3, 4, 5, 6, 7)
REDUCE_MAX_BLOCKS = 1024   # versions 6 and 7: grid-stride over at most this many blocks


def _reduce_blocks(n, version, block_size):
    """How many blocks (= partial sums) one pass of ``version`` makes from n elements."""
    if version <= 3:
        return ceil_div(n, block_size)
    if version <= 5:
        return ceil_div(n, 2 * block_size)    # two elements per thread in the first add
    return min(ceil_div(n, block_size), REDUCE_MAX_BLOCKS)


def _check_reduce_block(version, block_size):
    op = f"reduce_sum version {version}"
    if version <= 4:   # a 1-thread block would make one partial sum per element: no progress
        _check_block(block_size, op, power_of_two=True, minimum=2)
    elif version == 5:
        _check_block(block_size, op, power_of_two=True, minimum=32)
    else:
        _check_block(block_size, op, multiple_of=32, minimum=32)


def _launch_reduce_pass(version, block_size, src, n, dst, stream):
    """One launch of reduce_kernel<version>: n floats at device address src -> one partial per block at dst."""
    blocks = _reduce_blocks(n, version, block_size)
    shared = block_size * 4 if version <= 5 else 0   # versions 1-5 use an extern __shared__ array
    fn = L.kernel("reduction", f"reduce_kernel{version}", "PPi")
    L.launch(fn, (blocks, 1), (block_size, 1, 1), (dst, src, np.int32(n)), stream, shared_size=shared)
    return blocks


def reduce_pass(x, version, block_size=256, stream=None):
    """One launch of ``reduce_kernel<version>`` (1-6): the per-block partial sums, a 1-D GPUArray."""
    _check_version(version, REDUCE_VERSIONS[:-1], "reduce_pass")
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
    """How many floats of workspace ``reduce_sum`` needs for n elements: every intermediate level of
    partial sums, each starting on a 16-byte boundary (the final value goes to ``out``). 0 for
    version 7, which adds the blocks' sums straight into ``out`` with atomics."""
    _check_version(version, REDUCE_VERSIONS, "reduce_sum")
    _check_reduce_block(version, block_size)
    if version == 7 or n == 0:
        return 0
    return sum(4 * ceil_div(m, 4) for m in _reduce_levels(n, version, block_size)[:-1])


def reduce_workspace(n, version=6, block_size=256):
    """A device buffer for ``reduce_sum(x, version, block_size, workspace=...)`` on arrays of n elements:
    allocate it once, and repeated reductions allocate nothing (on a GPU, cuMemAlloc is slow and
    cuMemFree synchronises with the device)."""
    return L.gpuarray().empty((max(1, reduce_workspace_size(n, version, block_size)),), np.float32)


def _check_workspace(workspace, n, version, block_size):
    need = reduce_workspace_size(n, version, block_size)
    if not hasattr(workspace, "gpudata"):
        raise TypeError(f"workspace must be a GPUArray from ops.reduce_workspace(n, version, block_size), "
                        f"got {type(workspace).__name__}")
    if workspace.dtype != np.float32 or workspace.size < need or not L.is_c_contiguous(workspace):
        raise ValueError(f"workspace must be a contiguous float32 GPUArray of at least {need} elements for "
                         f"n={n}, version={version}, block_size={block_size}; got {workspace.dtype} of shape "
                         f"{tuple(workspace.shape)}: make it with ops.reduce_workspace({n}, {version}, {block_size})")


def reduce_sum(x, version=6, block_size=256, out=None, workspace=None, stream=None):
    """The sum of all elements of x, as a GPUArray of shape (1,) (read it with ``.get()[0]``).

    Versions 1-6 launch one pass per level, each pass reducing to one value per block, until one
    value is left; version 7 launches once and adds the blocks' sums with atomicAdd.
    ``out`` (shape (1,)) receives the sum; ``workspace`` (``reduce_workspace(x.size, version,
    block_size)``) holds the intermediate partial sums. Pass both and the call allocates nothing.
    """
    _check_version(version, REDUCE_VERSIONS, "reduce_sum")
    _check_reduce_block(version, block_size)
    x = L.device_array(x)
    out = L.output(out, (1,))
    n = x.size
    if n == 0 or version == 7:
        out.fill(np.float32(0), stream=stream)   # the empty sum; version 7's atomicAdds accumulate onto 0
        if n:
            blocks = _reduce_blocks(n, 7, block_size)
            fn = L.kernel("reduction", "reduce_kernel7", "PPi")
            L.launch(fn, (blocks, 1), (block_size, 1, 1), (out.gpudata, x.gpudata, np.int32(n)), stream)
        return out
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


# ----------------------------------------------------------------------------------------------
# softmax.cu

SOFTMAX_VERSIONS = (1, 2, 3, 4)


def softmax_rows(x, version=3, block_size=None, out=None, stream=None):
    """Softmax over each row of a 2-D matrix.

    ``block_size`` defaults to 128 (versions 1-3: 128 rows or 4 warps a block) or 256 (version 4).
    """
    _check_version(version, SOFTMAX_VERSIONS, "softmax_rows")
    if block_size is None:
        block_size = 256 if version == 4 else 128
    op = f"softmax_rows version {version}"
    if version <= 2:
        _check_block(block_size, op)
    else:
        _check_block(block_size, op, multiple_of=32, minimum=32)
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


# ----------------------------------------------------------------------------------------------
# matmul.cu

MATMUL_VERSIONS = (1, 2, 3, 4, 5, 6, 7)
MATMUL4_TILE = dict(BM=64, BN=64, TM=8)           # as #defined in matmul.cu (BM4, BN4, TM4)
MATMUL5_TILE = dict(BM=128, BN=128, TM=8, TN=8)   # (BM5, BN5, TM, TN), also version 6's
MATMUL7_TILE = dict(BM=128, BN=128, THREADS=256)  # Tile128x128 of gemm_warptile.cuh


def matmul(a, b, version=5, block_size=16, tile=32, out=None, stream=None):
    """C = A @ B for 2-D float32 matrices A (M x K) and B (K x N).

    ``block_size`` is the side of the square thread block of versions 1-2 (at most 32);
    ``tile`` the side of version 3's shared-memory tile (compiled in with -DTILE=tile).
    Versions 4 to 7 use the block tiles fixed in matmul.cu (7: gemm_warptile.cuh's 128 x 128).
    """
    _check_version(version, MATMUL_VERSIONS, "matmul")
    a = L.device_array(a, "a", ndim=2)
    b = L.device_array(b, "b", ndim=2)
    (M, K), (K2, N) = a.shape, b.shape
    if K != K2:
        raise ValueError(f"matmul: inner dimensions differ: a is {M}x{K}, b is {K2}x{N} "
                         f"(a's columns must equal b's rows)")
    out = L.output(out, (M, N))
    if M == 0 or N == 0:
        return out
    if K == 0:   # an empty sum: C is zero, and no kernel needs to run
        out.fill(np.float32(0), stream=stream)
        return out
    args = (out.gpudata, a.gpudata, b.gpudata, np.int32(M), np.int32(N), np.int32(K))
    options = ()
    if version in (1, 2):
        if not isinstance(block_size, (int, np.integer)) or not 1 <= block_size <= 32:
            raise ValueError(f"matmul version {version}: block_size is the side of a square block "
                             f"of block_size**2 threads, so 1..32; got {block_size!r}")
        block = (block_size, block_size, 1)
        if version == 1:   # x runs down the rows of C
            grid = (ceil_div(M, block_size), ceil_div(N, block_size))
        else:              # x runs along the rows of C
            grid = (ceil_div(N, block_size), ceil_div(M, block_size))
    elif version == 3:
        if tile not in (8, 16, 32):
            raise ValueError(f"matmul version 3: tile must be 8, 16 or 32 (tile**2 threads), got {tile!r}")
        options = () if tile == 32 else (f"-DTILE={tile}",)   # 32 is the file's default
        block = (tile, tile, 1)
        grid = (ceil_div(N, tile), ceil_div(M, tile))
    elif version == 4:
        t = MATMUL4_TILE
        block = (t["BM"] * t["BN"] // t["TM"], 1, 1)
        grid = (ceil_div(N, t["BN"]), ceil_div(M, t["BM"]))
    elif version == 7:
        L.check_aligned16("matmul version 7", a=a, b=b, out=out)
        t = MATMUL7_TILE
        block = (t["THREADS"], 1, 1)
        grid = (ceil_div(N, t["BN"]), ceil_div(M, t["BM"]))
    else:
        if version == 6:
            L.check_aligned16("matmul version 6", a=a, b=b, out=out)
        t = MATMUL5_TILE
        block = (t["BM"] * t["BN"] // (t["TM"] * t["TN"]), 1, 1)
        grid = (ceil_div(N, t["BN"]), ceil_div(M, t["BM"]))
    fn = L.kernel("matmul", f"matmul_kernel{version}", "PPPiii", options)
    L.launch(fn, grid, block, args, stream)
    return out


def matmul_flops(M, N, K):
    """FLOPs of an (M x K) @ (K x N) product: one multiply and one add per term."""
    return 2 * M * N * K

