"""The FP32 GEMM ladder of ``gpuedu/kernels/matmul.cu``: ``ops.matmul(a, b, version=k)`` and its reference.

Versions 1-2: one thread per element of C; 3: shared-memory tiles (``TILE``, compiled in); 4 and 5: block
tiles with register tiles (``TILE4``, ``TILE5``, also version 6's, with float4 loads); 7: the warp-tiled
main loop of ``gemm_warptile.cuh`` (``TILE7``). Every tile size is read from the kernels' source.
"""
import numpy as np

from .. import kernels as _kernels
from .. import launch as L
from ..launch import ceil_div
from ._common import check_version, warp_tile
from .elementwise import as_float64

VERSIONS = (1, 2, 3, 4, 5, 6, 7)


def _defines(**names):
    return {key: _kernels.define("matmul", macro) for key, macro in names.items()}


TILE = _kernels.define("matmul", "TILE")                  # version 3's default tile side (-DTILE=... changes it)
TILE4 = _defines(BM="BM4", BN="BN4", TM="TM4")            # version 4's block tile
TILE5 = _defines(BM="BM5", BN="BN5", TM="TM", TN="TN")    # versions 5 and 6
TILE7 = warp_tile("Tile128x128")                          # version 7: gemm_warptile.cuh's 128 x 128


def matmul(a, b, version=5, block_size=16, tile=32, out=None, stream=None):
    """C = A @ B for 2-D float32 matrices A (M x K) and B (K x N).

    ``block_size`` is the side of the square thread block of versions 1-2 (at most 32);
    ``tile`` the side of version 3's shared-memory tile (compiled in with -DTILE=tile).
    Versions 4 to 7 use the block tiles fixed in matmul.cu (7: gemm_warptile.cuh's 128 x 128).
    """
    check_version(version, VERSIONS, "matmul")
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
        options = () if tile == TILE else (f"-DTILE={tile}",)   # the file's default needs no option
        block = (tile, tile, 1)
        grid = (ceil_div(N, tile), ceil_div(M, tile))
    elif version == 4:
        t = TILE4
        block = (t["BM"] * t["BN"] // t["TM"], 1, 1)
        grid = (ceil_div(N, t["BN"]), ceil_div(M, t["BM"]))
    elif version == 7:
        L.check_aligned16("matmul version 7", a=a, b=b, out=out)
        t = TILE7
        block = (t["THREADS"], 1, 1)
        grid = (ceil_div(N, t["BN"]), ceil_div(M, t["BM"]))
    else:
        if version == 6:
            L.check_aligned16("matmul version 6", a=a, b=b, out=out)
        t = TILE5
        block = (t["BM"] * t["BN"] // (t["TM"] * t["TN"]), 1, 1)
        grid = (ceil_div(N, t["BN"]), ceil_div(M, t["BM"]))
    fn = L.kernel("matmul", f"matmul_kernel{version}", "PPPiii", options)
    L.launch(fn, grid, block, args, stream)
    return out


def matmul_flops(M, N, K):
    """FLOPs of an (M x K) @ (K x N) product: one multiply and one add per term."""
    return 2 * M * N * K


def matmul_reference(a, b):
    """A @ B computed in float64, returned as float32."""
    return (as_float64(a) @ as_float64(b)).astype(np.float32)
