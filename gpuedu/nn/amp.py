"""Mixed-precision training: FP16 storage and arithmetic where it is safe, FP32 where it is not.

Introduced in lessons/07_mixed_precision.ipynb.

The recipe (what deep-learning frameworks call automatic mixed precision):

1. Weights and activations are stored in FP16 (half the bytes to move; tensor cores take FP16).
2. Every GEMM sums its products in FP32 (``fp16_gemm.cu``): summing in FP16 loses the small terms.
3. The optimizer keeps FP32 *master* weights and updates them; the FP16 copy used by the forward and
   backward passes is re-rounded from the master after every step.  An update lr*g is often smaller
   than half an FP16 ulp of the weight and would vanish if applied to the FP16 copy.
4. Loss scaling: the loss (so every gradient) is multiplied by S before the backward pass, which
   lifts small gradients out of FP16's underflow range (at or below 2**-25 they become 0); the FP16
   gradients are divided by S again in FP32 before the update.  If any of them overflowed to Inf or
   became NaN (detected on the device), the step is skipped: a dynamic scaler then halves S, and
   doubles it again after ``growth_interval`` good steps in a row.

Pieces:
``LossScaler``           static or dynamic scale, the unscale-and-check kernel, the state machine
``HalfDense``            an ``nn.Dense`` in FP16 (its parameters become FP32 masters)
``MixedPrecisionMLP``    an ``nn`` MLP converted layer by layer; forward takes float32 input
``MixedPrecisionTrainer``  one training step: forward, scaled loss, backward, unscale, step or skip
``train_mixed``          epochs over a ``gpuedu.data.DataLoader`` (the FP32 counterpart is
                         ``gpuedu.train.fit``)

The master ``Parameter`` objects are ordinary ``gpuedu.nn`` parameters (float32 ``.value``/``.grad``),
so any ``gpuedu.nn`` optimizer (``SGD``, ``Adam``) updates them unchanged.
"""
import numpy as np

from . import _kernels as K
from . import fp16_ops
from .checks import gpuarray_module, is_device_array, to_device_labels
from .layers import Dense, Parameter

THREADS = 256


# ---- loss scaling ---------------------------------------------------------------------------------
class LossScaler:
    """The loss scale S and what happens to it.

    ``dynamic=False``: S stays ``init_scale``; a step whose gradients overflow is still skipped.
    ``dynamic=True``:  an overflow skips the step and multiplies S by ``backoff_factor`` (0.5);
    ``growth_interval`` good steps in a row multiply it by ``growth_factor`` (2).

    Use: ``found_inf = scaler.unscale(pairs)`` then ``if scaler.update(found_inf): optimizer.step()``.
    """

    def __init__(self, init_scale=2.0 ** 16, dynamic=True, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, min_scale=2.0 ** -24, max_scale=2.0 ** 24):
        for label, v in (("init_scale", init_scale), ("min_scale", min_scale), ("max_scale", max_scale)):
            if not (isinstance(v, (int, float, np.floating, np.integer)) and np.isfinite(v) and v > 0):
                raise ValueError(f"{label} must be a positive finite number, got {v!r}")
        if not growth_factor > 1.0:
            raise ValueError(f"growth_factor must be > 1, got {growth_factor!r}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"backoff_factor must be between 0 and 1, got {backoff_factor!r}")
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, (int, np.integer)) \
                or growth_interval < 1:
            raise ValueError(f"growth_interval must be a positive integer, got {growth_interval!r}")
        if not min_scale <= init_scale <= max_scale:
            raise ValueError(f"init_scale {init_scale} must lie in [min_scale, max_scale] = "
                             f"[{min_scale}, {max_scale}]")
        self.scale = float(init_scale)
        self.dynamic = bool(dynamic)
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.min_scale, self.max_scale = float(min_scale), float(max_scale)
        self.good_steps = 0        # good steps since the last overflow or growth
        self.steps = 0             # update() calls
        self.skipped = 0           # steps skipped for an overflow
        self._found_inf = None     # the device flag, made on first use

    def update(self, found_inf):
        """Advance the state machine after one backward pass; True when the step should be applied."""
        self.steps += 1
        if found_inf:
            self.skipped += 1
            self.good_steps = 0
            if self.dynamic:
                self.scale = max(self.scale * self.backoff_factor, self.min_scale)
            return False
        self.good_steps += 1
        if self.dynamic and self.good_steps >= self.growth_interval:
            self.scale = min(self.scale * self.growth_factor, self.max_scale)
            self.good_steps = 0
        return True

    def unscale(self, pairs):
        """For each (FP16 gradient, FP32 ``Parameter``): ``param.grad = g16 / S`` on the device, and
        return whether any FP16 gradient held Inf or NaN (one int copied back, for all of them)."""
        ga = gpuarray_module()
        if self._found_inf is None:
            self._found_inf = ga.zeros(1, np.int32)
        else:
            self._found_inf.set(np.zeros(1, np.int32))
        f = K.function("fp16_amp", "unscale_half_to_float", "iPfPP")
        inv_scale = np.float32(1.0 / self.scale)
        for g16, param in pairs:
            if g16.dtype != np.float16 or param.grad.dtype != np.float32 or g16.size != param.grad.size:
                raise ValueError(f"unscale needs (float16 gradient, float32 parameter) of one size, got "
                                 f"{g16.dtype}[{g16.size}] and {param.grad.dtype}[{param.grad.size}]")
            K.launch(f, (max(1, K.blocks_for(g16.size, THREADS)), 1), (THREADS, 1, 1),
                     (K.i32(g16.size), K.ptr(g16), inv_scale, K.ptr(param.grad), K.ptr(self._found_inf)))
        return bool(self._found_inf.get()[0])

    def __repr__(self):
        kind = "dynamic" if self.dynamic else "static"
        return (f"LossScaler({kind}, scale={self.scale:g}, steps={self.steps}, skipped={self.skipped}, "
                f"good_steps={self.good_steps})")


def softmax_xent(logits16, labels, grad_scale=1.0, loss_rows=None, dlogits=None):
    """Cross-entropy of FP16 logits (softmax in FP32).  Returns (loss_rows float32 [B],
    dlogits float16 [B, C] = grad_scale * (softmax - onehot) / B), both on the device."""
    if logits16.dtype != np.float16 or len(logits16.shape) != 2:
        raise TypeError(f"logits must be a 2-D float16 GPUArray, got {logits16.dtype} {tuple(logits16.shape)}")
    rows, classes = logits16.shape
    labels = to_device_labels(labels, classes, rows)
    ga = gpuarray_module()
    loss_rows = ga.empty(rows, np.float32) if loss_rows is None else loss_rows
    dlogits = ga.empty((rows, classes), np.float16) if dlogits is None else dlogits
    f = K.function("fp16_amp", "softmax_xent_half", "iiPPfPP")
    K.launch(f, (K.blocks_for(rows, 128), 1), (128, 1, 1),
             (K.i32(rows), K.i32(classes), K.ptr(logits16), K.ptr(labels), np.float32(grad_scale),
              K.ptr(loss_rows), K.ptr(dlogits)))
    return loss_rows, dlogits


def bias_grad(dz16, out=None):
    """Column sums of an FP16 [rows, cols] matrix, summed in FP32, stored as FP16 [cols]."""
    rows, cols = dz16.shape
    out = gpuarray_module().empty(cols, np.float16) if out is None else out
    f = K.function("fp16_amp", "bias_grad_half", "iiPP")
    K.launch(f, (max(1, K.blocks_for(cols, THREADS)), 1), (THREADS, 1, 1),
             (K.i32(rows), K.i32(cols), K.ptr(dz16), K.ptr(out)))
    return out


# ---- layers ---------------------------------------------------------------------------------------
class HalfDense:
    """``Y = act(X W + b)`` with X, W, b, Y in FP16 and FP32 sums; ``act`` is ReLU or none.

    Built from an FP32 ``nn.Dense``: its weights are copied into new FP32 master ``Parameter``s
    (``parameters()`` returns them, for the optimizer) and rounded once into the FP16 copies the
    kernels read.  ``backward`` leaves the (scaled) gradients in FP16 buffers (``half_grads()``);
    ``LossScaler.unscale`` turns them into the masters' FP32 ``.grad``.
    """

    def __init__(self, dense):
        if not isinstance(dense, Dense):
            raise TypeError(f"HalfDense is built from a gpuedu.nn.Dense, got {type(dense).__name__}")
        if dense.activation not in (None, "relu"):
            raise ValueError(f"HalfDense supports activation 'relu' or None, not {dense.activation!r}")
        self.in_features, self.out_features = dense.in_features, dense.out_features
        self.activation = dense.activation
        self.W = Parameter(dense.W.name, dense.W.numpy())       # FP32 masters (copies)
        self.b = Parameter(dense.b.name, dense.b.numpy())
        self.W16 = fp16_ops.to_half(self.W.value)
        self.b16 = fp16_ops.to_half(self.b.value)
        ga = gpuarray_module()
        self.W_grad16 = ga.empty(self.W.shape, np.float16)
        self.b_grad16 = ga.empty(self.b.shape, np.float16)
        self.stream = None
        self._buffers = {}
        self._x = None

    def parameters(self):
        return [self.W, self.b]

    def half_grads(self):
        """(FP16 gradient, FP32 master parameter) pairs, for ``LossScaler.unscale``."""
        return [(self.W_grad16, self.W), (self.b_grad16, self.b)]

    def refresh_half(self):
        """Re-round the FP16 copies from the FP32 masters (after every optimizer step)."""
        fp16_ops.to_half(self.W.value, out=self.W16)
        fp16_ops.to_half(self.b.value, out=self.b16)

    def round_masters_to_half(self):
        """Overwrite the FP32 masters with their FP16 copies (the no-master-weights ablation)."""
        fp16_ops.to_float(self.W16, out=self.W.value)
        fp16_ops.to_float(self.b16, out=self.b.value)

    def _bufs(self, rows):
        bufs = self._buffers.get(rows)
        if bufs is None:
            ga = gpuarray_module()
            bufs = {name: ga.empty((rows, cols), np.float16) for name, cols in
                    (("Z", self.out_features), ("Y", self.out_features), ("dZ", self.out_features),
                     ("dX", self.in_features))}
            self._buffers[rows] = bufs
        return bufs

    def forward(self, x16):
        if x16.dtype != np.float16 or len(x16.shape) != 2 or x16.shape[1] != self.in_features:
            raise ValueError(f"HalfDense expects a float16 [batch, {self.in_features}] input, got "
                             f"{x16.dtype} {tuple(x16.shape)}")
        bufs = self._bufs(x16.shape[0])
        z = fp16_ops.matmul(x16, self.W16, out=bufs["Z"])           # FP32 sums, FP16 result
        fp16_ops.bias_add(z, self.b16, out=z)
        y = fp16_ops.relu(z, out=bufs["Y"]) if self.activation == "relu" else z
        self._x, self._z = x16, z
        return y

    def backward(self, dy16, need_input_grad=True):
        if self._x is None:
            raise RuntimeError("backward() before forward(): run a forward pass first")
        bufs = self._bufs(self._x.shape[0])
        dz = fp16_ops.relu_backward(dy16, self._z, out=bufs["dZ"]) if self.activation == "relu" else dy16
        fp16_ops.matmul(self._x, dz, transpose_a=True, out=self.W_grad16)   # dW = X^T dZ
        bias_grad(dz, out=self.b_grad16)                                    # db = sum over the batch
        if not need_input_grad:
            return None
        return fp16_ops.matmul(dz, self.W16, transpose_b=True, out=bufs["dX"])   # dX = dZ W^T

    def __repr__(self):
        return f"HalfDense({self.in_features}, {self.out_features}, activation={self.activation!r})"


class MixedPrecisionMLP:
    """An ``nn`` MLP (a ``Sequential`` of ``Dense`` layers, e.g. ``nn.mlp([64, 128, 10])``) in FP16.

    The FP32 model is left untouched: the mixed-precision one starts from copies of its weights.
    """

    def __init__(self, model):
        layers = getattr(model, "layers", None)
        if not layers or not all(isinstance(l, Dense) for l in layers):
            raise TypeError("MixedPrecisionMLP converts a Sequential of gpuedu.nn.Dense layers (as nn.mlp "
                            "builds); separate activation layers are not supported: use Dense(..., "
                            "activation='relu')")
        self.layers = [HalfDense(l) for l in layers]
        self.in_features = self.layers[0].in_features
        self.out_features = self.layers[-1].out_features

    def parameters(self):
        return [p for l in self.layers for p in l.parameters()]

    def half_grads(self):
        return [pair for l in self.layers for pair in l.half_grads()]

    def refresh_half(self):
        for l in self.layers:
            l.refresh_half()

    def round_masters_to_half(self):
        for l in self.layers:
            l.round_masters_to_half()

    def forward(self, x):
        """Logits in FP16 for a float32 batch (NumPy or GPUArray), converted to FP16 on the device."""
        if x.dtype != np.float32:
            raise TypeError(f"x must be float32 (it is converted to float16 on the device), got {x.dtype}")
        if len(x.shape) != 2 or x.shape[1] != self.in_features:
            raise ValueError(f"x must have shape [batch, {self.in_features}], got {tuple(x.shape)}")
        h = fp16_ops.to_half(x)
        for layer in self.layers:
            h = layer.forward(h)
        return h

    __call__ = forward

    def backward(self, dlogits16):
        grad = dlogits16
        for i in range(len(self.layers) - 1, -1, -1):
            grad = self.layers[i].backward(grad, need_input_grad=i > 0)

    def predict(self, x):
        """Class indices (int32, host) for every row of ``x``."""
        logits = fp16_ops.to_float(self.forward(x)).get()
        return logits.argmax(axis=1).astype(np.int32)

    def accuracy(self, x, labels):
        labels = labels.get() if is_device_array(labels) else np.asarray(labels)
        return float(np.mean(self.predict(x) == labels))

    def __repr__(self):
        return "MixedPrecisionMLP(\n  " + ",\n  ".join(repr(l) for l in self.layers) + "\n)"


# ---- training -------------------------------------------------------------------------------------
class MixedPrecisionTrainer:
    """One mixed-precision training step: forward in FP16, loss scaled by S, backward in FP16,
    unscale into the FP32 master gradients, then the optimizer step, or a skip on overflow.

    ``master_weights=False`` is an ablation for experiments: after every step the FP32 weights are
    re-rounded to FP16, as if the model had no FP32 copy (updates below half an FP16 gap are lost).
    """

    def __init__(self, model, optimizer, scaler=None, master_weights=True):
        self.model = model
        self.optimizer = optimizer
        self.scaler = LossScaler() if scaler is None else scaler
        self.master_weights = bool(master_weights)
        self.scales = []                   # the loss scale used at every step, for plots
        masters = {id(p) for p in model.parameters()}
        if not all(id(p) in masters for p in optimizer.params):
            raise ValueError("the optimizer must update the mixed-precision model's FP32 masters: "
                             "build it with optimizer = SGD(model.parameters(), ...)")

    def step(self, x, labels):
        """Returns (mean loss of the batch, True if the update was applied / False if skipped)."""
        scale = self.scaler.scale
        self.scales.append(scale)
        logits = self.model.forward(x)
        loss_rows, dlogits = softmax_xent(logits, labels, grad_scale=scale)
        self.model.backward(dlogits)
        found_inf = self.scaler.unscale(self.model.half_grads())
        applied = self.scaler.update(found_inf)
        if applied:
            self.optimizer.step()          # on the FP32 masters
            self.model.refresh_half()      # then the FP16 copies follow
            if not self.master_weights:
                self.model.round_masters_to_half()
        return float(np.mean(loss_rows.get(), dtype=np.float64)), applied


def train_mixed(trainer, loader, epochs):
    """Mixed-precision training; returns the mean training loss of each epoch (skipped steps' losses
    count: the forward pass was still computed)."""
    history = []
    for _ in range(epochs):
        total, rows = 0.0, 0
        for xb, yb in loader:
            batch_loss, _ = trainer.step(xb, yb)
            total += batch_loss * xb.shape[0]
            rows += xb.shape[0]
        history.append(total / rows)
    return history
