"""Layers: each one's forward and its local backward side by side, every FLOP in a gpuedu kernel.

Dense:      forward   Z = X W + b, Y = act(Z)                 one launch (GEMM with a fused epilogue)
            backward  dZ = dY * act'(Z), chunk sums of dZ      one launch
                      db = the sum of the chunk sums           one launch (fixed order: deterministic)
                      dW = X^T dZ                              one GEMM launch
                      dX = dZ W^T                              one GEMM launch (skipped for the first layer)
Activation: forward   Y = act(X);  backward dX = dY * act'(X)  one launch each

The launches are ``gpuedu.ops.dense``'s (nn_dense.cu, nn_activations.cu): the three GEMMs share one
warp-tiled main loop (gpuedu/kernels/gemm_warptile.cuh), and ``ops.dense.gemm_plan`` picks each one's block
tile from its shape, and splits K among blocks (one more, elementwise launch) when the output alone has too
few tiles to fill the GPU.
"""
import numpy as np

from .. import launch as L
from ..ops import dense as _dense
from ..ops.dense import ACTIVATIONS, activation_code  # noqa: F401  (nn.ACTIVATIONS: the layers' activations)
from . import init as _init
from ..checks import check_device_features


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
        self._scratch = _dense.Scratch()
        self._x = None

    def parameters(self):
        return [self.W, self.b]

    # ---- forward: one launch, GEMM + bias + activation -------------------------------------------
    def forward(self, x):
        check_device_features(x, "the dense layer's input", self.in_features)
        rows = x.shape[0]
        bufs = self._buffers.get(rows, Z=self.out_features, Y=self.out_features,
                                 dZ=self.out_features, dX=self.in_features)
        _dense.dense_forward(bufs["Y"], bufs["Z"], x, self.W.value, self.b.value, self.act, self._scratch,
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
        dx = bufs["dX"] if need_input_grad else None
        _dense.dense_backward(bufs["dZ"], self.b.grad, self.W.grad, dx, dy, x, bufs["Z"], bufs["Y"], self.W.value,
                              self.act, self._scratch, self.stream)
        return dx

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
        _dense.activation_forward(bufs["Y"], x, self.act, self.stream)
        self._x, self._bufs = x, bufs
        return bufs["Y"]

    def backward(self, dy, need_input_grad=True):
        if self._x is None:
            raise RuntimeError("backward() before forward(): run a forward pass first")
        if tuple(dy.shape) != tuple(self._x.shape):
            raise ValueError(f"the gradient has shape {tuple(dy.shape)}, the last forward had {tuple(self._x.shape)}")
        if not need_input_grad:
            return None
        _dense.activation_backward(self._bufs["dX"], dy, self._x, self._bufs["Y"], self.act, self.stream)
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
