"""The kernels of ``gpuedu.nn``'s dense and activation layers: ``gpuedu/kernels/nn_dense.cu`` and
``nn_activations.cu``, their launchers, and how each GEMM is run (``gemm_plan``).

nn_dense.cu:        dense_forward     Z = X W + b, Y = act(Z)                 one launch (GEMM, fused epilogue)
                    dense_backward    dZ = dY * act'(Z), chunk sums of dZ      one launch
                                      db = the sum of the chunk sums           one launch (fixed order)
                                      dW = X^T dZ                              one GEMM launch
                                      dX = dZ W^T                              one GEMM launch (if asked)
                    weight_grad, input_grad, sum_parts: the same GEMMs and sum for layers without a bias
                                      (gpuedu.nn.SelfAttention's projections)
nn_activations.cu:  activation_forward Y = act(X);  activation_backward dX = dY * act'(X)   one launch each
                    residual_add Y = A + B (skip connections)                            one launch
                    count_nonfinite: NaN and inf among a layer's outputs, for the training loop   one launch

The three GEMMs share one warp-tiled main loop (gpuedu/kernels/gemm_warptile.cuh); ``gemm_plan`` picks
each one's block tile from its shape, and splits K among blocks (one more, elementwise launch) when the
output alone has too few tiles to fill the GPU. The tiles' sizes are read from gemm_warptile.cuh.
The float64 twins of these layers are in ``gpuedu.nn.reference``.
"""
import functools

import numpy as np

from .. import kernels as _kernels
from .. import launch as L
from ._common import warp_tile

#: The activations the layers' kernels apply (nn_activations.cuh), with their codes from the one table
#: (activations.cuh, read as gpuedu.kernels.ACTIVATIONS); None means "none".
ACTIVATIONS = {None: _kernels.ACTIVATIONS["none"],
               **{name: _kernels.ACTIVATIONS[name] for name in ("none", "relu", "sigmoid", "tanh", "gelu")}}

THREADS = 256        # threads per block of the one-thread-per-item kernels


def _tile(name):
    """(name, BM, BN, threads a block) of gemm_warptile.cuh's Tile<name>, whose kernels are ``*_<name>``."""
    t = warp_tile(f"Tile{name}")
    return name, t["BM"], t["BN"], t["THREADS"]


#: The GEMM block tiles of nn_dense.cu, largest first: (name, BM, BN, threads a block).
GEMM_TILES = tuple(_tile(name) for name in ("128x128", "64x64", "32x32"))
NARROW_TILE = _tile("64x16")   # for outputs at most 16 wide (a classifier's logits)
#: A grid with fewer blocks than this leaves SMs idle: 132 is an H200's SM count. Below it the launcher
#: takes a smaller tile (more, smaller blocks), or splits K among blocks (nn_dense.cu, "Split K").
FILL_BLOCKS = 132
SLAB = warp_tile("Tile128x128")["BK"]   # the K depth of a shared-memory slab (every tile's BK)
MIN_SPLIT_SLABS = 4          # split K only into pieces of at least this many slabs ...
MIN_SLABS_TO_SPLIT = 16      # ... and only a K this deep (shorter: the extra pass costs more than it saves)
MAX_SPLITS = 16
# dense_act_grad_partial's block
BIAS_COLS, BIAS_ROWS = _kernels.define("nn_dense", "BIAS_COLS"), _kernels.define("nn_dense", "BIAS_ROWS")
BIAS_CHUNK_ROWS = 32           # rows of the batch summed by one block of dense_act_grad_partial


@functools.lru_cache(maxsize=None)   # a pure function of three ints, asked several times a step
def gemm_plan(M, N, K_depth):
    """How to run an (M x K) (K x N) GEMM: ``(tile, splits)``, with tile = (name, BM, BN, threads).

    The first tile, largest first, whose grid reaches FILL_BLOCKS blocks, splitting K into up to
    MAX_SPLITS pieces if its tiles alone are too few; failing that, the smallest tile with the most
    splits. Outputs at most 16 wide take the 64 x 16 tile. Unsplit, each output is one ascending sum over
    K whatever the tile; split, it is the ascending sum of the pieces' sums (the same every run)."""
    slabs = L.ceil_div(K_depth, SLAB)
    most = min(MAX_SPLITS, slabs // MIN_SPLIT_SLABS) if slabs >= MIN_SLABS_TO_SPLIT else 1
    tiles = (NARROW_TILE,) if N <= NARROW_TILE[2] else GEMM_TILES
    for tile in tiles:
        blocks = L.ceil_div(M, tile[1]) * L.ceil_div(N, tile[2])
        splits = max(1, min(most, L.ceil_div(FILL_BLOCKS, blocks)))
        if blocks * splits >= FILL_BLOCKS or tile is tiles[-1]:
            return tile, _split_k(K_depth, splits)[1]


@functools.lru_cache(maxsize=None)
def _split_k(K_depth, splits):
    """(k_split, splits): the K of one piece, a whole number of slabs, and how many pieces then cover K."""
    k_split = SLAB * L.ceil_div(L.ceil_div(K_depth, splits), SLAB)
    return k_split, L.ceil_div(K_depth, k_split)


def activation_code(name):
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of "
                         f"{', '.join(repr(k) for k in ACTIVATIONS if k is not None)} or None")
    return ACTIVATIONS[name]


class Scratch:
    """The device buffers one layer's launches reuse every step: split-K partial products (one per size)
    and the bias gradient's chunk sums (one per chunk count)."""

    def __init__(self):
        self._buffers = {}

    def split(self, splits, count):
        """The device address of a buffer for ``splits`` partial products of ``count`` floats each; 0 (NULL)
        when K is not split."""
        if splits == 1:
            return np.uintp(0)
        need = splits * count
        buf = self._buffers.get(("split", need))
        if buf is None:
            buf = L.gpuarray().empty((need,), np.float32)
            self._buffers[("split", need)] = buf
        return np.uintp(L.ptr(buf))

    def chunks(self, chunks, cols):
        """The [chunks, cols] buffer of the bias gradient's chunk sums."""
        buf = self._buffers.get((chunks, cols))
        if buf is None:
            buf = L.gpuarray().empty((chunks, cols), np.float32)
            self._buffers[(chunks, cols)] = buf
        return buf


def dense_forward(y, z, x, w, bias, act, scratch, stream=None, tile=None):
    """Z = X W + b and Y = act(Z) for X [rows, K], W [K, N]: one launch (two when K is split).

    ``tile``: the name of one of GEMM_TILES ("128x128", "64x64", "32x32") to run instead of gemm_plan's
    choice, with K not split: how the profiler counts, at sizes the emulator affords, the kernel that
    gemm_plan picks for a large layer."""
    rows, n_in = x.shape
    n_out = w.shape[1]
    if tile is None:
        (name, bm, bn, threads), splits = gemm_plan(rows, n_out, n_in)
    else:
        by_name = {t[0]: t for t in GEMM_TILES}
        if tile not in by_name:
            raise ValueError(f"tile must be one of {', '.join(repr(t) for t in by_name)} (nn_dense.cu's GEMM tiles), "
                             f"got {tile!r}; or leave it None to let gemm_plan choose")
        (name, bm, bn, threads), splits = by_name[tile], 1
    k_split, splits = _split_k(n_in, splits)
    partial = scratch.split(splits, rows * n_out)
    f = L.kernel("nn_dense", f"dense_forward_{name}", "PPPPPPiiiii")
    L.launch(f, (L.ceil_div(n_out, bn), L.ceil_div(rows, bm), splits), (threads, 1, 1),
             (L.ptr(y), L.ptr(z), partial, L.ptr(x), L.ptr(w), L.ptr(bias),
              L.i32(rows), L.i32(n_in), L.i32(n_out), L.i32(k_split), L.i32(act)), stream)
    if splits > 1:   # the second pass: add the splits, then bias and activation
        f = L.kernel("nn_dense", "dense_splitk_epilogue", "PPPPiiii")
        L.launch(f, (L.ceil_div(rows * n_out, THREADS), 1), (THREADS, 1, 1),
                 (L.ptr(y), L.ptr(z), partial, L.ptr(bias), L.i32(rows), L.i32(n_out), L.i32(splits), L.i32(act)),
                 stream)


def dense_backward(dz, db, dw, dx, dy, x, z, y, w, act, scratch, stream=None):
    """dZ = dY * act'(Z), db (the fixed-order sum of chunk sums), dW = X^T dZ, and dX = dZ W^T unless
    ``dx`` is None (the first layer)."""
    rows = x.shape[0]
    n_out = w.shape[1]
    # dZ and the bias gradient: chunk sums over BIAS_CHUNK_ROWS rows each, then their fixed-order sum.
    chunks = L.ceil_div(rows, BIAS_CHUNK_ROWS)
    partial = scratch.chunks(chunks, n_out)
    f = L.kernel("nn_dense", "dense_act_grad_partial", "PPPPPiiii")
    L.launch(f, (L.ceil_div(n_out, BIAS_COLS), chunks), (BIAS_COLS, BIAS_ROWS, 1),
             (L.ptr(dz), L.ptr(partial), L.ptr(dy), L.ptr(z), L.ptr(y),
              L.i32(rows), L.i32(n_out), L.i32(BIAS_CHUNK_ROWS), L.i32(act)), stream)
    f = L.kernel("nn_dense", "dense_bias_grad", "PPii")
    L.launch(f, (L.ceil_div(n_out, THREADS), 1), (THREADS, 1, 1),
             (L.ptr(db), L.ptr(partial), L.i32(chunks), L.i32(n_out)), stream)
    weight_grad(dw, x, dz, scratch, stream)
    if dx is not None:
        input_grad(dx, dz, w, scratch, stream)


def weight_grad(dw, x, dy, scratch, stream=None):
    """dW = X^T dY for X [rows, n_in] and dY [rows, n_out], over the batch (a dense layer's with dY = dZ): X is
    read as the transpose of its [rows, n_in] storage."""
    rows, n_in = x.shape
    n_out = dy.shape[1]
    _gemm("gemm_tn", x, dy, dw, n_in, n_out, rows, n_in, n_out, scratch, stream)


def input_grad(dx, dy, w, scratch, stream=None):
    """dX = dY W^T for dY [rows, n_out] and W [n_in, n_out], over n_out: W is read as the transpose of its
    [n_in, n_out] storage."""
    rows, n_out = dy.shape
    n_in = w.shape[0]
    _gemm("gemm_nt", dy, w, dx, rows, n_in, n_out, n_out, n_out, scratch, stream)


def sum_parts(out, parts, stream=None):
    """out = parts[0] + parts[1] + ..., in that order (the same bits every run), for ``parts`` a float32
    device array [count, *out.shape]: gemm_splitk_sum, which adds split-K partial products the same way."""
    _sum_splits(L.ptr(out), L.ptr(parts), int(out.size), parts.shape[0], stream)


def _sum_splits(out, parts, count, splits, stream):
    """out = parts[0] + ... + parts[splits - 1] (``count`` floats each, device pointers), in that order."""
    L.launch(L.kernel("nn_dense", "gemm_splitk_sum", "PPii"), (L.ceil_div(count, THREADS), 1), (THREADS, 1, 1),
             (out, parts, L.i32(count), L.i32(splits)), stream)


def _gemm(role, a, b, c, M, N, K_depth, lda, ldb, scratch, stream):
    """C = op(A) op(B) with the ``role`` kernel (gemm_tn, gemm_nt) at the tile and split gemm_plan picks."""
    (name, bm, bn, threads), splits = gemm_plan(M, N, K_depth)
    k_split, splits = _split_k(K_depth, splits)
    # split K: the pieces go to the partials' buffer, then gemm_splitk_sum adds them into C
    target = scratch.split(splits, M * N) if splits > 1 else L.ptr(c)
    L.launch(L.kernel("nn_dense", f"{role}_{name}", "PPPiiiiii"),
             (L.ceil_div(N, bn), L.ceil_div(M, bm), splits), (threads, 1, 1),
             (target, L.ptr(a), L.ptr(b), L.i32(M), L.i32(N), L.i32(K_depth), L.i32(lda), L.i32(ldb),
              L.i32(k_split)), stream)
    if splits > 1:
        _sum_splits(L.ptr(c), target, M * N, splits, stream)


def activation_forward(y, x, act, stream=None):
    """Y = act(X) elementwise (nn_activations.cu), one thread an element."""
    n = int(x.size)
    f = L.kernel("nn_activations", "activation_forward", "PPii")
    L.launch(f, (L.ceil_div(n, THREADS), 1), (THREADS, 1, 1), (L.ptr(y), L.ptr(x), L.i32(n), L.i32(act)), stream)


def residual_add(y, a, b, stream=None):
    """y = a + b elementwise (nn_activations.cu): a skip connection, forward and backward."""
    n = int(y.size)
    f = L.kernel("nn_activations", "residual_add", "PPPi")
    L.launch(f, (L.ceil_div(n, THREADS), 1), (THREADS, 1, 1), (L.ptr(y), L.ptr(a), L.ptr(b), L.i32(n)), stream)


def activation_backward(dx, dy, x, y, act, stream=None):
    """dX = dY * act'(X) (from X or from Y = act(X), whichever the activation's derivative needs)."""
    n = int(x.size)
    f = L.kernel("nn_activations", "activation_backward", "PPPPii")
    L.launch(f, (L.ceil_div(n, THREADS), 1), (THREADS, 1, 1),
             (L.ptr(dx), L.ptr(dy), L.ptr(x), L.ptr(y), L.i32(n), L.i32(act)), stream)


#: Blocks of count_nonfinite at most: a grid-stride loop, so a layer of any size is a few blocks' work.
CHECK_BLOCKS = 64


def count_nonfinite(status, x, rank, stream=None):
    """Adds to ``status[0]`` (int32) how many elements of the float32 array ``x`` are NaN or infinite, and where
    any are, raises ``status[1]`` to ``rank`` (nn_activations.cu); nothing is read back."""
    n = int(x.size)
    f = L.kernel("nn_activations", "count_nonfinite", "PPii")
    L.launch(f, (max(1, min(CHECK_BLOCKS, L.ceil_div(n, THREADS))), 1), (THREADS, 1, 1),
             (L.ptr(status), L.ptr(x), L.i32(n), L.i32(rank)), stream)
