"""Layers for images [batch, channels, height, width]: Conv2D, MaxPool2D and Flatten (kernels: conv2d.cu).
Introduced in lessons/11_convolution.ipynb.

Conv2D:    forward   Y = relu?(W * X + b)          one launch (implicit GEMM, bias and ReLU in the epilogue)
           backward  dZ = dY masked by Y > 0       one launch (only with the fused ReLU)
                     dW, db                        one launch each (a block per weight / per filter)
                     dX                            one launch (skipped for the first layer)
MaxPool2D: forward   Y = window maxima, argmax     one launch;  backward: one launch (a gather)
Flatten:   [batch, C, H, W] -> [batch, C * H * W]  a reshape of the same device memory, no launch
Reshape:   [batch, C * H * W] -> [batch, C, H, W]  the other way (a CNN fed by a loader of flat rows)

Each layer keeps in_channels / out_channels (None where it keeps the channel count), so Sequential can check
that a stack chains before it runs; spatial sizes depend on the input and are checked at the first forward.
Their kernels are launched on the layer's ``stream``, as the dense layers' are (Conv2D version 3's GEMM
excepted: it runs on the default stream).
"""
import numpy as np

from ..ops import conv as _conv
from .. import launch as L
from .layers import Parameter, _Cache


def _positive(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _pair(value, name):
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{name} must be an int or a pair (height, width), got {value!r}")
        return _positive(value[0], name), _positive(value[1], name)
    v = _positive(value, name)
    return v, v


def check_images(x, name, channels=None):
    """A device batch of images: float32, 4-D [batch, C, H, W], contiguous, the expected channel count."""
    if not hasattr(x, "gpudata"):
        raise TypeError(f"{name} must be a GPUArray [batch, channels, height, width], got {type(x).__name__}")
    if x.dtype != np.float32:
        raise TypeError(f"{name} has dtype {x.dtype}, the kernels compute in float32")
    if len(x.shape) != 4:
        raise ValueError(f"{name} must be 4-D [batch, channels, height, width], got shape {tuple(x.shape)}; "
                         f"grey images [N, H, W] become x.reshape(N, 1, H, W), flat rows [N, H*W] too")
    if x.shape[0] == 0:
        raise ValueError(f"{name} has no images: a batch needs at least one")
    if channels is not None and x.shape[1] != channels:
        raise ValueError(f"{name} has {x.shape[1]} channels, the layer expects {channels}")
    return x


class Conv2D:
    """A 2-D convolution layer: ``Y = act(W * X + b)``, W [out, in, kh, kw] (He-initialised), b [out]."""

    in_features = out_features = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, seed=0, activation=None,
                 version=4, name="conv"):
        self.in_channels = _positive(in_channels, "in_channels")
        self.out_channels = _positive(out_channels, "out_channels")
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _positive(stride, "stride")
        if isinstance(padding, bool) or not isinstance(padding, (int, np.integer)) or padding < 0:
            raise ValueError(f"padding must be a non-negative integer, got {padding!r}")
        self.padding = int(padding)
        if activation not in (None, "none", "relu"):
            raise ValueError(f"Conv2D fuses only a ReLU: activation must be None or 'relu', got {activation!r}; "
                             f"add a separate activation layer for anything else")
        self.activation = "relu" if activation == "relu" else None
        if version not in _conv.VERSIONS:
            raise ValueError(f"Conv2D version must be one of {_conv.VERSIONS}, got {version!r}")
        self.version = version
        kh, kw = self.kernel_size
        fan_in = self.in_channels * kh * kw
        rng = np.random.default_rng(seed)
        w = rng.standard_normal((self.out_channels, self.in_channels, kh, kw)) * np.sqrt(2.0 / fan_in)
        self.W = Parameter(f"{name}.W", w.astype(np.float32))
        self.b = Parameter(f"{name}.b", np.zeros(self.out_channels, np.float32))
        self.stream = None
        self._cache = _Cache()
        self._x = None

    def parameters(self):
        return [self.W, self.b]

    def output_shape(self, x_shape):
        """[batch, out_channels, P, Q] for an input of ``x_shape``, or a ValueError that says why not."""
        P, Q = _conv.check_shapes(tuple(x_shape), self.W.shape, self.stride, self.padding, "Conv2D")
        return (int(x_shape[0]), self.out_channels, P, Q)

    def forward(self, x):
        check_images(x, "the Conv2D layer's input", self.in_channels)
        shape = self.output_shape(x.shape)
        bufs = self._cache.get(tuple(x.shape), Y=(shape, np.float32), dZ=(shape, np.float32),
                               dX=(tuple(x.shape), np.float32))
        _conv.conv2d(x, self.W.value, self.b.value, self.stride, self.padding, relu=self.activation == "relu",
                     version=self.version, out=bufs["Y"], stream=self.stream)
        self._x, self._bufs = x, bufs
        return bufs["Y"]

    def backward(self, dy, need_input_grad=True):
        if self._x is None:
            raise RuntimeError("backward() before forward(): run a forward pass first")
        y = self._bufs["Y"]
        if tuple(dy.shape) != tuple(y.shape):
            raise ValueError(f"the gradient has shape {tuple(dy.shape)}, the last forward produced {tuple(y.shape)}")
        if self.activation == "relu":
            dy = _conv.relu_grad(dy, y, out=self._bufs["dZ"], stream=self.stream)
        dx, _, _ = _conv.conv2d_backward(dy, self._x, self.W.value, self.stride, self.padding, need_input_grad,
                                         dx=self._bufs["dX"], dw=self.W.grad, db=self.b.grad, stream=self.stream)
        return dx

    def __repr__(self):
        kh, kw = self.kernel_size
        return (f"Conv2D({self.in_channels}, {self.out_channels}, kernel_size=({kh}, {kw}), stride={self.stride}, "
                f"padding={self.padding}, activation={self.activation!r})")


class MaxPool2D:
    """Max pooling over kernel_size x kernel_size windows every ``stride`` pixels (default: kernel_size)."""

    in_features = out_features = in_channels = out_channels = None

    def __init__(self, kernel_size=2, stride=None):
        self.kernel_size = _positive(kernel_size, "kernel_size")
        self.stride = self.kernel_size if stride is None else _positive(stride, "stride")
        self.stream = None
        self._cache = _Cache()
        self._x = None

    def parameters(self):
        return []

    def output_shape(self, x_shape):
        _, _, P, Q = _conv.pool_shape(tuple(x_shape), self.kernel_size, self.stride)
        return (int(x_shape[0]), int(x_shape[1]), P, Q)

    def forward(self, x):
        check_images(x, "the MaxPool2D layer's input")
        shape = self.output_shape(x.shape)
        bufs = self._cache.get(tuple(x.shape), Y=(shape, np.float32), arg=(shape, np.int32),
                               dX=(tuple(x.shape), np.float32))
        _conv.maxpool2d(x, self.kernel_size, self.stride, out=bufs["Y"], argmax=bufs["arg"], stream=self.stream)
        self._x, self._bufs = x, bufs
        return bufs["Y"]

    def backward(self, dy, need_input_grad=True):
        if self._x is None:
            raise RuntimeError("backward() before forward(): run a forward pass first")
        if tuple(dy.shape) != tuple(self._bufs["Y"].shape):
            raise ValueError(f"the gradient has shape {tuple(dy.shape)}, the last forward produced "
                             f"{tuple(self._bufs['Y'].shape)}")
        if not need_input_grad:
            return None
        return _conv.maxpool2d_backward(dy, self._bufs["arg"], tuple(self._x.shape), self.kernel_size,
                                        self.stride, out=self._bufs["dX"], stream=self.stream)

    def __repr__(self):
        return f"MaxPool2D({self.kernel_size}, stride={self.stride})"


class Flatten:
    """[batch, C, H, W] -> [batch, C * H * W], the same device memory seen as rows (for a Dense layer)."""

    in_features = out_features = in_channels = out_channels = None

    def __init__(self):
        self.stream = None
        self._shape = None

    def parameters(self):
        return []

    def forward(self, x):
        if not hasattr(x, "gpudata"):
            raise TypeError(f"Flatten's input must be a GPUArray, got {type(x).__name__}")
        if len(x.shape) < 2:
            raise ValueError(f"Flatten needs a batch dimension and at least one more, got shape {tuple(x.shape)}")
        self._shape = tuple(x.shape)
        return x.reshape(x.shape[0], int(np.prod(x.shape[1:])))

    def backward(self, dy, need_input_grad=True):
        if self._shape is None:
            raise RuntimeError("backward() before forward(): run a forward pass first")
        if dy.shape[0] != self._shape[0] or int(np.prod(dy.shape)) != int(np.prod(self._shape)):
            raise ValueError(f"the gradient has shape {tuple(dy.shape)}, the last forward flattened {self._shape}")
        return dy.reshape(self._shape) if need_input_grad else None

    def __repr__(self):
        return "Flatten()"


class Reshape:
    """[batch, C * H * W] rows -> [batch, C, H, W] images (no launch): puts a CNN behind a loader of flat rows.

    ``in_features`` is C * H * W, so ``Sequential`` and ``train.fit`` check the data's width as for an MLP."""

    out_features = in_channels = None

    def __init__(self, channels, height, width):
        self.shape = (_positive(channels, "channels"), _positive(height, "height"), _positive(width, "width"))
        self.in_features = int(np.prod(self.shape))
        self.out_channels = self.shape[0]
        self.stream = None
        self._rows = None

    def parameters(self):
        return []

    def forward(self, x):
        if not hasattr(x, "gpudata"):
            raise TypeError(f"Reshape's input must be a GPUArray, got {type(x).__name__}")
        if len(x.shape) != 2 or x.shape[1] != self.in_features:
            raise ValueError(f"Reshape{self.shape} takes rows of {self.in_features} features "
                             f"[batch, {self.in_features}], got shape {tuple(x.shape)}")
        self._rows = x.shape[0]
        return x.reshape(x.shape[0], *self.shape)

    def backward(self, dy, need_input_grad=True):
        if self._rows is None:
            raise RuntimeError("backward() before forward(): run a forward pass first")
        if tuple(dy.shape) != (self._rows, *self.shape):
            raise ValueError(f"the gradient has shape {tuple(dy.shape)}, the last forward produced "
                             f"{(self._rows, *self.shape)}")
        return dy.reshape(self._rows, self.in_features) if need_input_grad else None

    def __repr__(self):
        return f"Reshape{self.shape}"


def to_device_images(x, name="x", channels=None):
    """Check a batch of images and return it as a GPUArray (copying a NumPy array to the device)."""
    if isinstance(x, np.ndarray):
        if x.dtype != np.float32:
            raise TypeError(f"{name} has dtype {x.dtype}, the kernels compute in float32: "
                            f"pass {name}.astype(np.float32)")
        if x.ndim != 4:
            raise ValueError(f"{name} must be 4-D [batch, channels, height, width] for a model that starts with "
                             f"a convolution, got shape {x.shape}; grey images [N, H, W] become "
                             f"{name}.reshape(N, 1, H, W)")
        if not np.isfinite(x).all():
            raise ValueError(f"{name} contains NaN or inf; clean the data before training")
        x = L.gpuarray().to_gpu(np.ascontiguousarray(x))
    return check_images(x, name, channels)


__all__ = ["Conv2D", "Flatten", "MaxPool2D", "Reshape", "check_images", "to_device_images"]
