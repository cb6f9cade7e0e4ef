"""Layers: each one's forward and its local backward side by side, every FLOP in a gpuedu kernel.

Dense:      forward   Z = X W + b, Y = act(Z)                 one launch (GEMM with a fused epilogue)
            backward  dZ = dY * act'(Z), chunk sums of dZ      one launch
                      db = the sum of the chunk sums           one launch (fixed order: deterministic)
                      dW = X^T dZ                              one GEMM launch
                      dX = dZ W^T                              one GEMM launch (skipped for the first layer)
Activation: forward   Y = act(X);  backward dX = dY * act'(X)  one launch each

The three GEMMs share one warp-tiled main loop (gpuedu/kernels/gemm_warptile.cuh); ``gemm_plan`` picks
each one's block tile from its shape, and splits K among blocks (one more, elementwise launch) when the
output alone has too few tiles to fill the GPU.
"""
import functools

import numpy as np

from .. import kernels as _kernels
from .. import launch as L
from . import init as _init
from ..checks import check_device_features

#: The activations the layers' kernels apply (nn_activations.cuh), with their codes from the one table
#: (activations.cuh, read as gpuedu.kernels.ACTIVATIONS); None means "none".
ACTIVATIONS = {None: _kernels.ACTIVATIONS["none"],
               **{name: _kernels.ACTIVATIONS[name] for name in ("none", "relu", "sigmoid", "tanh", "gelu")}}

THREADS = 256        # threads per block of the one-thread-per-item kernels

#: The GEMM block tiles of nn_dense.cu, largest first: (name, BM, BN, threads a block).
GEMM_TILES = (("128x128", 128, 128, 256), ("64x64", 64, 64, 128), ("32x32", 32, 32, 64))
NARROW_TILE = ("64x16", 64, 16, 64)   # for outputs at most 16 wide (a classifier's logits)
#: A grid with fewer blocks than this leaves SMs idle: 132 is an H200's SM count. Below it the launcher
#: takes a smaller tile (more, smaller blocks), or splits K among blocks (nn_dense.cu, "Split K").
FILL_BLOCKS = 132
SLAB = 16                    # the K depth of a shared-memory slab (BK of gemm_warptile.cuh's tiles)
MIN_SPLIT_SLABS = 4          # split K only into pieces of at least this many slabs ...
MIN_SLABS_TO_SPLIT = 16      # ... and only a K this deep (shorter: the extra pass costs more than it saves)
MAX_SPLITS = 16
BIAS_COLS, BIAS_ROWS = 32, 8   # dense_act_grad_partial's block, as #defined in nn_dense.cu
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


class Parameter:
    """A trainable tensor on the device and its gradient (same shape, float32)."""

    def __init__(self, name, value):
        value = np.ascontiguousarray(value, dtype=np.float32)
        ga = L.gpuarray()
        self.name = name
        self.value = ga.to_gpu(value)
        self.grad = ga.zeros(value.shape, np.float32)

    @property
    def shape(self):
        return tuple(self.value.shape)

    @property
    def size(self):
        return int(np.prod(self.shape))

    def numpy(self):
        """A host copy of the value."""
        return self.value.get()

    def __repr__(self):
        return f"Parameter({self.name!r}, shape={self.shape})"


class _Cache:
    """Device buffers reused across steps, one set per key (an input shape: the last batch may be smaller)."""

    def __init__(self):
        self._by_key = {}

    def get(self, key, **shapes):
        """{name: GPUArray} for ``key``, made once from ``shapes`` = {name: (shape, dtype)}."""
        bufs = self._by_key.get(key)
        if bufs is None:
            ga = L.gpuarray()
            bufs = {name: ga.empty(shape, dtype) for name, (shape, dtype) in shapes.items()}
            self._by_key[key] = bufs
        return bufs


class _Buffers(_Cache):
    """The dense layers' buffers: float32 [rows, cols] each, one set per batch size."""

    def get(self, rows, **widths):
        return super().get(rows, **{name: ((rows, cols), np.float32) for name, cols in widths.items()})


class Dense:
    """A fully connected layer ``Y = act(X W + b)``; W is [in_features, out_features]."""

    def __init__(self, in_features, out_features, activation=None, init=None, seed=0, name="dense"):
        for label, v in (("in_features", in_features), ("out_features", out_features)):
            if not isinstance(v, (int, np.integer)) or v <= 0:
                raise ValueError(f"{label} must be a positive integer, got {v!r}")
        self.act = activation_code(activation)
        self.activation = None if activation in (None, "none") else activation
        init = init or _init.default_for(self.activation)
        if init not in _init.INITIALISERS:
            raise ValueError(f"unknown init {init!r}; choose one of {', '.join(_init.INITIALISERS)}")
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.W = Parameter(f"{name}.W", _init.INITIALISERS[init](self.in_features, self.out_features, seed))
        self.b = Parameter(f"{name}.b", np.zeros(self.out_features, np.float32))
        self.stream = None
        self._buffers = _Buffers()
        self._partials = {}
        self._x = None

    def parameters(self):
        return [self.W, self.b]

    # ---- forward: one launch, GEMM + bias + activation -------------------------------------------
    def forward(self, x):
        check_device_features(x, "the dense layer's input", self.in_features)
        rows = x.shape[0]
        bufs = self._buffers.get(rows, Z=self.out_features, Y=self.out_features,
                                 dZ=self.out_features, dX=self.in_features)
        n_in, n_out = self.in_features, self.out_features
        (name, bm, bn, threads), splits = gemm_plan(rows, n_out, n_in)
        k_split, splits = _split_k(n_in, splits)
        partial = self._split_partial(splits, rows * n_out)
        f = L.kernel("nn_dense", f"dense_forward_{name}", "PPPPPPiiiii")
        L.launch(f, (L.ceil_div(n_out, bn), L.ceil_div(rows, bm), splits), (threads, 1, 1),
                 (L.ptr(bufs["Y"]), L.ptr(bufs["Z"]), partial, L.ptr(x), L.ptr(self.W.value), L.ptr(self.b.value),
                  L.i32(rows), L.i32(n_in), L.i32(n_out), L.i32(k_split), L.i32(self.act)),
                 self.stream)
        if splits > 1:   # the second pass: add the splits, then bias and activation
            f = L.kernel("nn_dense", "dense_splitk_epilogue", "PPPPiiii")
            L.launch(f, (L.ceil_div(rows * n_out, THREADS), 1), (THREADS, 1, 1),
                     (L.ptr(bufs["Y"]), L.ptr(bufs["Z"]), partial, L.ptr(self.b.value), L.i32(rows),
                      L.i32(n_out), L.i32(splits), L.i32(self.act)), self.stream)
        self._x, self._bufs = x, bufs       # backward needs X and Z
        return bufs["Y"]

    # ---- backward: the chain rule through act, then the two GEMMs ---------------------------------
    def backward(self, dy, need_input_grad=True):
        if self._x is None:
            raise RuntimeError("backward() before forward(): run a forward pass first")
        x, bufs = self._x, self._bufs
        rows, n_in, n_out = x.shape[0], self.in_features, self.out_features
        if tuple(dy.shape) != (rows, n_out):
            raise ValueError(f"the gradient has shape {tuple(dy.shape)}, the last forward produced {(rows, n_out)}")
        # dZ and the bias gradient: chunk sums over BIAS_CHUNK_ROWS rows each, then their fixed-order sum.
        chunks = L.ceil_div(rows, BIAS_CHUNK_ROWS)
        partial = self._bias_partial(chunks)
        f = L.kernel("nn_dense", "dense_act_grad_partial", "PPPPPiiii")
        L.launch(f, (L.ceil_div(n_out, BIAS_COLS), chunks), (BIAS_COLS, BIAS_ROWS, 1),
                 (L.ptr(bufs["dZ"]), L.ptr(partial), L.ptr(dy), L.ptr(bufs["Z"]), L.ptr(bufs["Y"]),
                  L.i32(rows), L.i32(n_out), L.i32(BIAS_CHUNK_ROWS), L.i32(self.act)), self.stream)
        f = L.kernel("nn_dense", "dense_bias_grad", "PPii")
        L.launch(f, (L.ceil_div(n_out, THREADS), 1), (THREADS, 1, 1),
                 (L.ptr(self.b.grad), L.ptr(partial), L.i32(chunks), L.i32(n_out)), self.stream)
        # dW[n_in, n_out] = X^T dZ over the batch: X is read as the transpose of its [rows, n_in] storage.
        self._gemm("gemm_tn", x, bufs["dZ"], self.W.grad, n_in, n_out, rows, lda=n_in, ldb=n_out)
        if not need_input_grad:
            return None
        # dX[rows, n_in] = dZ W^T over n_out: W is read as the transpose of its [n_in, n_out] storage.
        self._gemm("gemm_nt", bufs["dZ"], self.W.value, bufs["dX"], rows, n_in, n_out, lda=n_out, ldb=n_out)
        return bufs["dX"]

    def _gemm(self, role, a, b, c, M, N, K_depth, lda, ldb):
        """C = op(A) op(B) with the ``role`` kernel (gemm_tn, gemm_nt) at the tile and split gemm_plan picks."""
        (name, bm, bn, threads), splits = gemm_plan(M, N, K_depth)
        k_split, splits = _split_k(K_depth, splits)
        # split K: the pieces go to the partials' buffer, then gemm_splitk_sum adds them into C
        target = self._split_partial(splits, M * N) if splits > 1 else L.ptr(c)
        L.launch(L.kernel("nn_dense", f"{role}_{name}", "PPPiiiiii"),
                 (L.ceil_div(N, bn), L.ceil_div(M, bm), splits), (threads, 1, 1),
                 (target, L.ptr(a), L.ptr(b), L.i32(M), L.i32(N), L.i32(K_depth), L.i32(lda), L.i32(ldb),
                  L.i32(k_split)), self.stream)
        if splits > 1:
            L.launch(L.kernel("nn_dense", "gemm_splitk_sum", "PPii"), (L.ceil_div(M * N, THREADS), 1),
                     (THREADS, 1, 1), (L.ptr(c), target, L.i32(M * N), L.i32(splits)), self.stream)

    def _split_partial(self, splits, count):
        """The device address of a buffer for ``splits`` partial products of ``count`` floats each, one per
        size, allocated once and reused every step; 0 (NULL) when K is not split."""
        if splits == 1:
            return np.uintp(0)
        need = splits * count
        buf = self._partials.get(("split", need))
        if buf is None:
            buf = L.gpuarray().empty((need,), np.float32)
            self._partials[("split", need)] = buf
        return np.uintp(L.ptr(buf))

    def _bias_partial(self, chunks):
        """The [chunks, out_features] buffer of the bias gradient's chunk sums, reused across steps."""
        buf = self._partials.get(chunks)
        if buf is None:
            buf = L.gpuarray().empty((chunks, self.out_features), np.float32)
            self._partials[chunks] = buf
        return buf

    def __repr__(self):
        return f"Dense({self.in_features}, {self.out_features}, activation={self.activation!r})"


class Activation:
    """An activation on its own (shape-preserving): ``Y = act(X)``."""

    name = None
    in_features = out_features = None

    def __init__(self):
        self.act = activation_code(self.name)
        self.stream = None
        self._buffers = _Buffers()
        self._x = None

    def parameters(self):
        return []

    def forward(self, x):
        check_device_features(x, f"the {self.name} layer's input")
        rows, cols = x.shape
        bufs = self._buffers.get(rows, Y=cols, dX=cols)
        n = rows * cols
        f = L.kernel("nn_activations", "activation_forward", "PPii")
        L.launch(f, (L.ceil_div(n, THREADS), 1), (THREADS, 1, 1),
                 (L.ptr(bufs["Y"]), L.ptr(x), L.i32(n), L.i32(self.act)), self.stream)
        self._x, self._bufs = x, bufs
        return bufs["Y"]

    def backward(self, dy, need_input_grad=True):
        if self._x is None:
            raise RuntimeError("backward() before forward(): run a forward pass first")
        if tuple(dy.shape) != tuple(self._x.shape):
            raise ValueError(f"the gradient has shape {tuple(dy.shape)}, the last forward had {tuple(self._x.shape)}")
        if not need_input_grad:
            return None
        n = int(np.prod(self._x.shape))
        f = L.kernel("nn_activations", "activation_backward", "PPPPii")
        L.launch(f, (L.ceil_div(n, THREADS), 1), (THREADS, 1, 1),
                 (L.ptr(self._bufs["dX"]), L.ptr(dy), L.ptr(self._x), L.ptr(self._bufs["Y"]), L.i32(n),
                  L.i32(self.act)), self.stream)
        return self._bufs["dX"]

    def __repr__(self):
        return f"{type(self).__name__}()"


class ReLU(Activation):
    name = "relu"


class Sigmoid(Activation):
    name = "sigmoid"


class Tanh(Activation):
    name = "tanh"


class GELU(Activation):
    name = "gelu"
