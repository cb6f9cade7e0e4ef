"""Layers: each one's forward and its local backward side by side, every FLOP in a gpuedu kernel.

Dense:      forward   Z = X W + b, Y = act(Z)                 one launch (GEMM with a fused epilogue)
            backward  dZ = dY * act'(Z), db = sum_batch dZ     one launch
                      dW = X^T dZ                              one GEMM launch
                      dX = dZ W^T                              one GEMM launch (skipped for the first layer)
Activation: forward   Y = act(X);  backward dX = dY * act'(X)  one launch each
"""
import numpy as np

from . import _kernels as K
from . import init as _init
from .checks import check_device_features, gpuarray_module

#: Activation names and the codes the kernels use (nn_activations.cuh).
ACTIVATIONS = {None: 0, "none": 0, "relu": 1, "sigmoid": 2, "tanh": 3, "gelu": 4}

TILE = 16            # the GEMM tile of nn_dense.cu
THREADS = 256        # threads per block of the one-thread-per-item kernels


def activation_code(name):
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of "
                         f"{', '.join(repr(k) for k in ACTIVATIONS if k is not None)} or None")
    return ACTIVATIONS[name]


class Parameter:
    """A trainable tensor on the device and its gradient (same shape, float32)."""

    def __init__(self, name, value):
        value = np.ascontiguousarray(value, dtype=np.float32)
        ga = gpuarray_module()
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


class _Buffers:
    """Device buffers reused across steps, one set per batch size (the last batch may be smaller)."""

    def __init__(self):
        self._by_rows = {}

    def get(self, rows, **shapes):
        bufs = self._by_rows.get(rows)
        if bufs is None:
            ga = gpuarray_module()
            bufs = {name: ga.empty((rows, cols), np.float32) for name, cols in shapes.items()}
            self._by_rows[rows] = bufs
        return bufs


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
        self._x = None

    def parameters(self):
        return [self.W, self.b]

    # ---- forward: one launch, GEMM + bias + activation -------------------------------------------
    def forward(self, x):
        check_device_features(x, "the dense layer's input", self.in_features)
        rows = x.shape[0]
        bufs = self._buffers.get(rows, Z=self.out_features, Y=self.out_features,
                                 dZ=self.out_features, dX=self.in_features)
        f = K.function("nn_dense", "dense_forward", "PPPPPiiii")
        grid = (K.blocks_for(self.out_features, TILE), K.blocks_for(rows, TILE))
        K.launch(f, grid, (TILE, TILE, 1),
                 (K.ptr(x), K.ptr(self.W.value), K.ptr(self.b.value), K.ptr(bufs["Z"]), K.ptr(bufs["Y"]),
                  K.i32(rows), K.i32(self.in_features), K.i32(self.out_features), K.i32(self.act)),
                 self.stream)
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
        f = K.function("nn_dense", "dense_backward_bias", "PPPPPiii")
        K.launch(f, (K.blocks_for(n_out, THREADS), 1), (THREADS, 1, 1),
                 (K.ptr(dy), K.ptr(bufs["Z"]), K.ptr(bufs["Y"]), K.ptr(bufs["dZ"]), K.ptr(self.b.grad),
                  K.i32(rows), K.i32(n_out), K.i32(self.act)), self.stream)
        gemm = K.function("nn_dense", "gemm_strided", "PPPiiiiiii")
        # dW[n_in, n_out] = X^T dZ: A(i, b) = X[b*n_in + i] -> strides (1, n_in); dZ is row-major.
        K.launch(gemm, (K.blocks_for(n_out, TILE), K.blocks_for(n_in, TILE)), (TILE, TILE, 1),
                 (K.ptr(x), K.ptr(bufs["dZ"]), K.ptr(self.W.grad), K.i32(n_in), K.i32(n_out), K.i32(rows),
                  K.i32(1), K.i32(n_in), K.i32(n_out), K.i32(1)), self.stream)
        if not need_input_grad:
            return None
        # dX[rows, n_in] = dZ W^T: B(o, i) = W[i*n_out + o] -> strides (1, n_out).
        K.launch(gemm, (K.blocks_for(n_in, TILE), K.blocks_for(rows, TILE)), (TILE, TILE, 1),
                 (K.ptr(bufs["dZ"]), K.ptr(self.W.value), K.ptr(bufs["dX"]), K.i32(rows), K.i32(n_in),
                  K.i32(n_out), K.i32(n_out), K.i32(1), K.i32(1), K.i32(n_out)), self.stream)
        return bufs["dX"]

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
        f = K.function("nn_activations", "activation_forward", "PPii")
        K.launch(f, (K.blocks_for(n, THREADS), 1), (THREADS, 1, 1),
                 (K.ptr(x), K.ptr(bufs["Y"]), K.i32(n), K.i32(self.act)), self.stream)
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
        f = K.function("nn_activations", "activation_backward", "PPPPii")
        K.launch(f, (K.blocks_for(n, THREADS), 1), (THREADS, 1, 1),
                 (K.ptr(self._x), K.ptr(self._bufs["Y"]), K.ptr(dy), K.ptr(self._bufs["dX"]), K.i32(n),
                  K.i32(self.act)), self.stream)
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
