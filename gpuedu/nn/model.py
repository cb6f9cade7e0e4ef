"""Sequential: layers applied in order; backward walks them in reverse (the chain rule)."""
import itertools

import numpy as np

from .. import launch as L
from ..ops import fp16 as _fp16
from ..ops import loss as _loss
from ..checks import check_host_labels, to_device_features
from .conv_layers import Flatten, MaxPool2D, Reshape, to_device_images
from .layers import Dense

PREDICT_CHUNK = 4096   # rows per forward pass when predicting on a whole data set


def _takes_images(layer):
    """An image layer: its input is [batch, C, H, W]: any layer with ``in_channels`` (a convolution, yours too)
    or a pooling layer, which takes whatever channels it is given."""
    return getattr(layer, "in_channels", None) is not None or isinstance(layer, MaxPool2D)


class Sequential:
    """Layers applied in order, all launching on one ``stream``."""

    _stream = None

    def __init__(self, *layers):
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        if not layers:
            raise ValueError("Sequential needs at least one layer")
        for layer in layers:
            for method in ("forward", "backward", "parameters"):
                if not callable(getattr(layer, method, None)):
                    raise TypeError(f"{layer!r} is not a layer: it has no {method}() method")
        # The shapes must chain: each layer's output width is the next one's input width, each convolution's
        # input channels the previous convolution's output channels, and no image layer may follow a Dense
        # one (a Dense layer's output is rows, not images: a Flatten goes between them, the other way round).
        width, source = None, None
        channels, channel_source = None, None
        dense_seen = None
        for i, layer in enumerate(layers):
            n_in = getattr(layer, "in_features", None)
            if n_in is not None and width is not None and n_in != width:
                raise ValueError(f"layer {i} ({layer!r}) takes {n_in} features but {source!r} gives {width}")
            n_out = getattr(layer, "out_features", None)
            if n_out is not None:
                width, source = n_out, layer
                dense_seen = dense_seen or layer
            if _takes_images(layer):
                if dense_seen is not None:
                    raise ValueError(f"layer {i} ({layer!r}) takes images [batch, C, H, W] but comes after "
                                     f"{dense_seen!r}, whose output is rows: put the image layers first, then "
                                     f"Flatten(), then the Dense layers")
                c_in = getattr(layer, "in_channels", None)
                if c_in is not None and channels is not None and c_in != channels:
                    raise ValueError(f"layer {i} ({layer!r}) takes {c_in} channels but {channel_source!r} "
                                     f"gives {channels}")
            c_out = getattr(layer, "out_channels", None)
            if c_out is not None:
                channels, channel_source = c_out, layer
            # Flatten's width and Reshape's images depend on the input's height and width: checked at run time.
            if isinstance(layer, Flatten):
                channels, channel_source, width, source = None, None, None, None
            if isinstance(layer, Reshape):     # rows become images again: image layers may follow
                dense_seen, width, source = None, None, None
        self.layers = list(layers)

    @property
    def stream(self):
        return self._stream

    @stream.setter
    def stream(self, stream):
        """Launch every layer's kernels on ``stream`` (None: the default stream)."""
        self._stream = stream
        for layer in self.layers:
            layer.stream = stream

    @property
    def in_features(self):
        if self.takes_images:
            return None
        return next((l.in_features for l in self.layers if getattr(l, "in_features", None)), None)

    @property
    def out_features(self):
        return next((l.out_features for l in reversed(self.layers) if getattr(l, "out_features", None)), None)

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]

    @property
    def takes_images(self):
        """True when the first layer with a shape is an image layer: the input is then [batch, C, H, W]."""
        for layer in self.layers:
            if _takes_images(layer):
                return True
            if getattr(layer, "in_features", None) is not None:
                return False
        return False

    @property
    def in_channels(self):
        return next((l.in_channels for l in self.layers if getattr(l, "in_channels", None)), None)

    def _device_input(self, x):
        """The batch as the first layer takes it: on the device, its shape and dtype checked."""
        if self.takes_images:
            return to_device_images(x, "x", self.in_channels)
        return to_device_features(x, "x", self.in_features)

    def forward(self, x, check=None):
        """The layers applied in order; ``check(i, output)``, if given, is called with each layer's output as it is
        queued (the training loop counts NaN and inf there, on the device)."""
        x = self._device_input(x)
        for i, layer in enumerate(self.layers):
            x = layer.forward(x)
            if check is not None:
                check(i, x)
        return x

    __call__ = forward

    def backward(self, dlogits):
        grad = dlogits
        for i in range(len(self.layers) - 1, -1, -1):
            # The first layer's input is the data: nobody needs its gradient, so skip that GEMM.
            grad = self.layers[i].backward(grad, need_input_grad=i > 0)

    def predict(self, x):
        """Class indices (int32, on the host) for every row of ``x``."""
        if isinstance(x, np.ndarray):
            rows = x.shape[0] if x.ndim else 0
            chunks = [x[i:i + PREDICT_CHUNK] for i in range(0, rows, PREDICT_CHUNK)] or [x]
        else:
            chunks = [x]
        ga = L.gpuarray()
        out = []
        for chunk in chunks:
            logits = self.forward(chunk)
            if logits.dtype == np.float16:      # a mixed-precision model's logits
                logits = _fp16.to_float(logits, stream=self._stream)
            pred = ga.empty(logits.shape[0], np.int32)
            _loss.argmax_rows(pred, logits, self._stream)
            if self._stream is not None:     # the copy back must follow the stream's kernels
                self._stream.synchronize()
            out.append(pred.get())
        return np.concatenate(out)

    def accuracy(self, x, labels):
        """Fraction of rows whose predicted class equals the label."""
        labels = labels.get() if hasattr(labels, "gpudata") else labels
        check_host_labels(labels, self.out_features, len(x) if isinstance(x, np.ndarray) else x.shape[0])
        return float(np.mean(self.predict(x) == labels))

    def __repr__(self):
        inner = ",\n  ".join(repr(l) for l in self.layers)
        return f"Sequential(\n  {inner}\n)"


def mlp(sizes, activation="relu", seed=0, init=None):
    """A multilayer perceptron: Dense layers of the given widths, ``activation`` on all but the last.

    ``mlp([64, 128, 10])`` is Dense(64, 128, relu) -> Dense(128, 10) (logits).  Layer i draws its weights
    with seed ``seed + i``, so the same call gives the same network.
    """
    sizes = list(sizes)
    if len(sizes) < 2:
        raise ValueError(f"mlp needs at least an input and an output width, got {sizes}")
    layers = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        last = i == len(sizes) - 2
        layers.append(Dense(n_in, n_out, activation=None if last else activation, init=init,
                            seed=seed + i, name=f"dense{i}"))
    return Sequential(layers)
