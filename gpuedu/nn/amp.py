"""Mixed-precision training: FP16 storage and arithmetic where it is safe, FP32 where it is not.

Introduced in lessons/07_mixed_precision.ipynb.

The recipe (what deep-learning frameworks call automatic mixed precision):

1. Weights and activations are stored in FP16 (half the bytes to move; tensor cores take FP16).
2. Every GEMM sums its products in FP32: summing in FP16 loses the small terms.  The layers' GEMMs
   run on tensor cores (``mma_gemm.cu``'s version 10 in PTX, through ``ops.fp16.matmul(version=10)``: every
   layout, so dW = X^T dZ and dX = dZ W^T need no transposed copy; on a GPU older than sm_80, WMMA's
   ``version=4``); any other version of ``ops.fp16.GEMM_VERSIONS`` remains a choice (``gemm_version=3``,
   the tiled CUDA-core one of ``fp16_gemm.cu``).
3. The optimizer keeps FP32 *master* weights and updates them; the FP16 copy used by the forward and
   backward passes is re-rounded from the master after every step.  An update lr*g is often smaller
   than half an FP16 ulp of the weight and would vanish if applied to the FP16 copy.
4. Loss scaling: the loss (so every gradient) is multiplied by S before the backward pass, which
   lifts small gradients out of FP16's underflow range (at or below 2**-25 they become 0); the FP16
   gradients are divided by S again in FP32 before the update.  If any of them overflowed to Inf or
   became NaN (detected on the device), the step is skipped: a dynamic scaler then halves S, and
   doubles it again after ``growth_interval`` good steps in a row.

Nothing of a training step comes back to the host: S, the overflow flag and the counters live on the
device, a one-thread kernel (``update_loss_scale``) applies the scaler's rules, and the optimizer's
kernels read the resulting skip flag themselves.  A host that read the flag back would wait for the GPU
to finish the step before it could queue the next one; at small batches that wait is most of the time.

Pieces:
``LossScaler``           static or dynamic scale, the unscale-and-check kernel, the state machine
``HalfDense``            an ``nn.Dense`` in FP16 (its parameters become FP32 masters)
``MixedPrecisionMLP``    an ``nn`` MLP converted layer by layer: a ``Sequential`` of ``HalfDense`` whose
                         forward takes float32 input
``MixedPrecisionTrainer``  one training step: forward, scaled loss, backward, unscale, step or skip; the
                         training loop is ``gpuedu.train.fit(trainer, loader, epochs)``, as for FP32

Streams: ``trainer.stream = s`` (as ``train.fit`` does) queues every launch of a step -- the model's, the
scaler's, the loss's and the optimizer's -- on the one stream ``s``, so a ``DataLoader`` with
``compute_stream = s`` copies the next batch while the step runs.  Every read back (``StepResult.loss``,
``mean_loss()``, the scaler's properties, ``predict``) synchronises that stream first.  On real PyCUDA a
``GPUArray.get()`` is a synchronous copy on the legacy default stream, and a ``drv.Stream()`` is created
blocking (flags 0, not ``CU_STREAM_NON_BLOCKING``), so the copy would already wait for the stream's
kernels; the explicit ``stream.synchronize()`` keeps the reads correct for a non-blocking stream too, and
costs nothing more, since the copy waits for the device anyway.  Steps never synchronise.

The master ``Parameter`` objects are ordinary ``gpuedu.nn`` parameters (float32 ``.value``/``.grad``),
so any ``gpuedu.nn`` optimizer (``SGD``, ``Adam``) updates them unchanged.
"""
import numpy as np

from .. import launch as L
from ..ops import amp as _amp
from ..ops import fp16
from ..ops.optim import TensorTable
# nn.amp's loss and bias gradient, and the scaler's state indices, are ops.amp's
from ..ops.amp import FOUND_INF, GOOD_STEPS, SKIP, SKIPPED, STEPS  # noqa: F401
from ..ops.amp import bias_grad, softmax_xent, sum_loss_rows  # noqa: F401
from .loss import bad_labels_message
from .layers import Dense, Parameter
from .model import Sequential
from .optim import skip_pointer

SCALE_HISTORY = 65536        # steps whose loss scale a LossScaler remembers, for plots


def _synchronize(stream):
    """Wait for the kernels queued on ``stream`` before a copy back.  None (the default stream) needs no
    call: a ``.get()`` is a synchronous copy on the default stream, ordered after its kernels."""
    if stream is not None:
        stream.synchronize()


# ---- loss scaling ---------------------------------------------------------------------------------
class LossScaler:
    """The loss scale S and what happens to it, kept on the device.

    ``dynamic=False``: S stays ``init_scale``; a step whose gradients overflow is still skipped.
    ``dynamic=True``:  an overflow skips the step and multiplies S by ``backoff_factor`` (0.5);
    ``growth_interval`` good steps in a row multiply it by ``growth_factor`` (2); S stays within
    [``min_scale``, ``max_scale``].

    What a training step uses (nothing comes back to the host):
    ``unscale_on_device(pairs)``  FP16 gradients / S into the FP32 masters' ``.grad``; raises the device flag
    ``update_on_device()``        the rules above, in a one-thread kernel; sets ``skip_flag`` for the optimizer
    ``scale_on_device``           S, a 1-element float32 GPUArray (the loss kernel multiplies by it)

    Looking at it step by step (each of these waits for the GPU, then copies back):
    ``found_inf = scaler.unscale(pairs)`` then ``if scaler.update(found_inf): optimizer.step()``;
    ``scale``, ``steps``, ``skipped``, ``good_steps``, ``scales`` (the scale of each step, the last
    ``history`` of them).  ``update`` launches the same kernel as ``update_on_device``: one set of rules.

    ``stream``: the stream its kernels go to (None: the default stream); the reads synchronise it first.
    """

    def __init__(self, init_scale=2.0 ** 16, dynamic=True, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, min_scale=2.0 ** -24, max_scale=2.0 ** 24, history=SCALE_HISTORY):
        for label, v in (("init_scale", init_scale), ("min_scale", min_scale), ("max_scale", max_scale)):
            # S is a float32 on the device: it must be a positive normal float32.
            if not (isinstance(v, (int, float, np.floating, np.integer)) and np.isfinite(v) and v > 0
                    and float(np.finfo(np.float32).tiny) <= v <= float(np.finfo(np.float32).max)):
                raise ValueError(f"{label} must be a positive finite number within float32's normal range, "
                                 f"got {v!r}")
        if not growth_factor > 1.0:
            raise ValueError(f"growth_factor must be > 1, got {growth_factor!r}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"backoff_factor must be between 0 and 1, got {backoff_factor!r}")
        for label, v in (("growth_interval", growth_interval), ("history", history)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= v < 2 ** 31:
                raise ValueError(f"{label} must be a positive integer, got {v!r}")
        if not min_scale <= init_scale <= max_scale:
            raise ValueError(f"init_scale {init_scale} must lie in [min_scale, max_scale] = "
                             f"[{min_scale}, {max_scale}]")
        self.dynamic = bool(dynamic)
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.min_scale, self.max_scale = float(min_scale), float(max_scale)
        self.history = int(history)
        ga = L.gpuarray()
        self.scale_on_device = ga.to_gpu(np.array([init_scale], np.float32))
        self._state = ga.zeros(_amp.STATE_SIZE, np.int32)  # FOUND_INF, SKIP, GOOD_STEPS, STEPS, SKIPPED
        self._found_inf = self._state[FOUND_INF:FOUND_INF + 1]
        self.skip_flag = self._state[SKIP:SKIP + 1]       # 1 after an overflowed step: optimizer.step(skip=...)
        self._scales = ga.zeros(self.history, np.float32)  # the scale of step i at i % history
        self._unscale_table = TensorTable()
        self.stream = None

    # -- the training step's path: launches only ----------------------------------------------------
    def unscale_on_device(self, pairs):
        """For each (FP16 gradient, FP32 ``Parameter``): ``param.grad = g16 / S`` on the device, raising
        the device overflow flag if any FP16 gradient holds Inf or NaN.  Returns nothing: no copy back."""
        # every pair in one launch (a table of their addresses, rebuilt only when one changes)
        _amp.unscale_multi(self._unscale_table, [(param.grad, g16) for g16, param in pairs], self._found_inf,
                           self.scale_on_device, self.stream)

    def update_on_device(self):
        """Run the scaler's rules on the device after this step's unscale: set ``skip_flag``, back off or
        grow S, count the step, clear the overflow flag for the next one."""
        _amp.update_loss_scale(self.scale_on_device, self._state, self._scales, self.history, self.dynamic,
                               self.growth_factor, self.backoff_factor, self.growth_interval, self.min_scale,
                               self.max_scale, self.stream)

    # -- one step at a time, for looking at it: each call waits for the GPU --------------------------
    def unscale(self, pairs):
        """``param.grad = g16 / S`` for each pair, and whether any FP16 gradient held Inf or NaN (the
        flag is cleared first and copied back after: this call waits for the GPU)."""
        self._found_inf.fill(0, stream=self.stream)
        self.unscale_on_device(pairs)
        _synchronize(self.stream)
        return bool(self._found_inf.get()[0])

    def update(self, found_inf):
        """Advance the state machine after one backward pass; True when the step should be applied.
        The same kernel as ``update_on_device``, fed ``found_inf`` from the host and read back."""
        # A fill is a kernel on the scaler's stream, so it lands after that stream's earlier kernels and
        # before the update (a synchronous .set() from the host would be ordered by the default stream only).
        self._found_inf.fill(1 if found_inf else 0, stream=self.stream)
        self.update_on_device()
        _synchronize(self.stream)
        return not bool(self.skip_flag.get()[0])

    def _read_state(self, index):
        _synchronize(self.stream)
        return int(self._state.get()[index])

    @property
    def scale(self):
        """The current loss scale S (copied back from the device: waits for the GPU)."""
        _synchronize(self.stream)
        return float(self.scale_on_device.get()[0])

    @property
    def steps(self):
        """Steps so far (``update`` / ``update_on_device`` calls); a synchronising read."""
        return self._read_state(STEPS)

    @property
    def skipped(self):
        """Steps skipped for an overflow; a synchronising read."""
        return self._read_state(SKIPPED)

    @property
    def good_steps(self):
        """Good steps since the last overflow or growth; a synchronising read."""
        return self._read_state(GOOD_STEPS)

    @property
    def scales(self):
        """The loss scale each step used, oldest first (the last ``history`` steps); a synchronising read."""
        steps = self.steps                      # synchronises the stream
        recorded = self._scales.get()
        if steps <= self.history:
            return [float(s) for s in recorded[:steps]]
        oldest = steps % self.history
        return [float(s) for s in np.concatenate([recorded[oldest:], recorded[:oldest]])]

    def __repr__(self):
        kind = "dynamic" if self.dynamic else "static"
        _synchronize(self.stream)
        state = self._state.get()
        return (f"LossScaler({kind}, scale={self.scale:g}, steps={state[STEPS]}, skipped={state[SKIPPED]}, "
                f"good_steps={state[GOOD_STEPS]})")


# ---- layers ---------------------------------------------------------------------------------------
class HalfDense:
    """``Y = act(X W + b)`` with X, W, b, Y in FP16 and FP32 sums; ``act`` is ReLU or none.

    Built from an FP32 ``nn.Dense``: its weights are copied into new FP32 master ``Parameter``s
    (``parameters()`` returns them, for the optimizer) and rounded once into the FP16 copies the
    kernels read.  ``backward`` leaves the (scaled) gradients in FP16 buffers (``half_grads()``);
    ``LossScaler.unscale_on_device`` turns them into the masters' FP32 ``.grad``.

    ``gemm_version`` picks the three GEMMs' kernel (a version of ``ops.fp16.matmul``,
    ``ops.fp16.GEMM_VERSIONS``; each takes every layout but 6-9 and 11-13, which take the plain one only). None (the
    default): ``ops.fp16.tensor_gemm_version()``, the top tensor-core rung the device runs: 10 (tensor cores
    in PTX, a 64x64 warp tile) from sm_80 on, 4 (WMMA) before; 3 is the tiled CUDA-core one of ``fp16_gemm.cu``.
    ``stream``: the stream its kernels go to (None: the default stream).
    """

    def __init__(self, dense, gemm_version=None):
        if not isinstance(dense, Dense):
            raise TypeError(f"HalfDense is built from a gpuedu.nn.Dense, got {type(dense).__name__}")
        if dense.activation not in (None, "relu"):
            raise ValueError(f"HalfDense supports activation 'relu' or None, not {dense.activation!r}")
        if gemm_version is None:
            gemm_version = fp16.tensor_gemm_version()
        if isinstance(gemm_version, bool) or gemm_version not in fp16.GEMM_VERSIONS:
            raise ValueError(f"gemm_version must be one of {', '.join(map(repr, fp16.GEMM_VERSIONS))} "
                             f"(gpuedu.ops.fp16.GEMM_VERSIONS says what each is), got {gemm_version!r}")
        if gemm_version in fp16.PLAIN_LAYOUT_VERSIONS:
            raise ValueError(f"gemm_version {gemm_version} multiplies the plain layout only, and a layer's backward "
                             f"pass needs X^T dZ and dZ W^T: use {fp16.MMA_LAYOUTS_VERSION} (tensor cores in PTX, "
                             "every layout), 4 or 5 (WMMA) or 3 (CUDA cores)")
        self.gemm_version = gemm_version
        self.in_features, self.out_features = dense.in_features, dense.out_features
        self.activation = dense.activation
        self.W = Parameter(dense.W.name, dense.W.numpy())       # FP32 masters (copies)
        self.b = Parameter(dense.b.name, dense.b.numpy())
        self.W16 = fp16.to_half(self.W.value)
        self.b16 = fp16.to_half(self.b.value)
        ga = L.gpuarray()
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

    def refresh_half(self, skip=None, round_masters=False):
        """Re-round the FP16 copies from the FP32 masters (after every optimizer step).

        ``skip``: the scaler's device flag; nothing is done where it is set (the masters did not move).
        ``round_masters=True`` also overwrites the masters with their FP16 values (the no-master-weights
        ablation)."""
        for master, copy in ((self.W, self.W16), (self.b, self.b16)):
            _amp.refresh_half_copy(copy, master.value, skip_pointer(skip), round_masters, self.stream)

    def _bufs(self, rows):
        bufs = self._buffers.get(rows)
        if bufs is None:
            ga = L.gpuarray()
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
        s = self.stream
        z = fp16.matmul(x16, self.W16, out=bufs["Z"], version=self.gemm_version,   # FP32 sums, FP16 result
                            stream=s)
        fp16.bias_add(z, self.b16, out=z, stream=s)
        y = fp16.relu(z, out=bufs["Y"], stream=s) if self.activation == "relu" else z
        self._x, self._z = x16, z
        return y

    def backward(self, dy16, need_input_grad=True):
        if self._x is None:
            raise RuntimeError("backward() before forward(): run a forward pass first")
        bufs = self._bufs(self._x.shape[0])
        s = self.stream
        dz = (fp16.relu_backward(dy16, self._z, out=bufs["dZ"], stream=s) if self.activation == "relu"
              else dy16)
        fp16.matmul(self._x, dz, transpose_a=True, out=self.W_grad16,           # dW = X^T dZ
                        version=self.gemm_version, stream=s)
        bias_grad(dz, out=self.b_grad16, stream=s)                          # db = sum over the batch
        if not need_input_grad:
            return None
        return fp16.matmul(dz, self.W16, transpose_b=True, out=bufs["dX"],     # dX = dZ W^T
                               version=self.gemm_version, stream=s)

    def __repr__(self):
        return f"HalfDense({self.in_features}, {self.out_features}, activation={self.activation!r})"


class MixedPrecisionMLP(Sequential):
    """An ``nn`` MLP (a ``Sequential`` of ``Dense`` layers, e.g. ``nn.mlp([64, 128, 10])``) in FP16.

    The FP32 model is left untouched: the mixed-precision one starts from copies of its weights. It is a
    ``Sequential`` of ``HalfDense`` layers whose input is converted to FP16 on the device (into a buffer
    kept per batch size); ``predict`` and ``accuracy`` convert the FP16 logits back to float32.
    """

    def __init__(self, model, gemm_version=None):
        layers = getattr(model, "layers", None)
        if not layers or not all(isinstance(l, Dense) for l in layers):
            raise TypeError("MixedPrecisionMLP converts a Sequential of gpuedu.nn.Dense layers (as nn.mlp "
                            "builds); separate activation layers are not supported: use Dense(..., "
                            "activation='relu')")
        super().__init__([HalfDense(l, gemm_version) for l in layers])
        self._inputs = {}            # rows -> the FP16 input buffer, reused every step
        self._refresh_table = TensorTable()

    def _device_input(self, x):
        if x.dtype != np.float32:
            raise TypeError(f"x must be float32 (it is converted to float16 on the device), got {x.dtype}")
        if len(x.shape) != 2 or x.shape[1] != self.in_features:
            raise ValueError(f"x must have shape [batch, {self.in_features}], got {tuple(x.shape)}")
        rows = x.shape[0]
        x16 = self._inputs.get(rows)
        if x16 is None:
            x16 = self._inputs[rows] = L.gpuarray().empty((rows, self.in_features), np.float16)
        return fp16.to_half(x, out=x16, stream=self._stream)

    def half_grads(self):
        return [pair for l in self.layers for pair in l.half_grads()]

    def refresh_half(self, skip=None, round_masters=False):
        """Every layer's ``refresh_half``, in one launch for the whole model."""
        pairs = [(copy, master.value) for l in self.layers for master, copy in ((l.W, l.W16), (l.b, l.b16))]
        _amp.refresh_half_copy_multi(self._refresh_table, pairs, skip_pointer(skip), round_masters, self._stream)

    def __repr__(self):
        return "MixedPrecisionMLP(\n  " + ",\n  ".join(repr(l) for l in self.layers) + "\n)"


# ---- training ----------------------------------------------------------------------------------
class StepResult:
    """What one ``MixedPrecisionTrainer.step`` did, read from the device only when asked.

    ``loss`` (the batch's mean loss) and ``applied`` (False if the step was skipped for an overflow)
    copy back on first use, so reading them waits for the GPU; a loop that never reads them never
    waits.  Read them before the next step: it reuses the device buffers they come from.
    """

    def __init__(self, trainer, step):
        self._trainer, self._step, self._values = trainer, step, None

    def _read(self):
        if self._values is None:
            current = self._trainer.steps
            if current != self._step:
                raise RuntimeError(f"this is the result of step {self._step}, but the trainer has run step "
                                   f"{current} since, which overwrote it: read .loss / .applied before the "
                                   f"next step, or use trainer.mean_loss() for the mean over many steps")
            _synchronize(self._trainer.stream)
            loss = float(self._trainer._step_loss.get()[0])
            applied = not bool(self._trainer.scaler.skip_flag.get()[0])
            self._values = (loss, applied)
        return self._values

    @property
    def loss(self):
        return self._read()[0]

    @property
    def applied(self):
        return self._read()[1]

    def __repr__(self):
        if self._values is None:
            return f"<StepResult of step {self._step} (not read yet: .loss, .applied)>"
        return f"<StepResult of step {self._step}: loss {self._values[0]:.4f}, applied {self._values[1]}>"


class MixedPrecisionTrainer:
    """One mixed-precision training step: forward in FP16, loss scaled by S, backward in FP16,
    unscale into the FP32 master gradients, then the optimizer step, or a skip on overflow.

    The whole step is launched without waiting for the GPU and without allocating (after the first step
    of each batch size): S and the skip decision stay on the device.  ``step`` returns a ``StepResult``
    whose ``.loss`` / ``.applied`` are read only if asked; ``mean_loss()`` reads the mean over all steps
    since ``reset_loss()`` in one copy, the way ``nn.SoftmaxCrossEntropy.result()`` does for FP32.
    Pass device batches (a ``DataLoader``'s): a NumPy batch must be copied to the device every step.

    ``stream``: set it to launch the whole step (model, loss, scaler, optimizer) on one stream, as
    ``train.fit`` does; None (the default) is the default stream.  Reads back synchronise it first.

    ``master_weights=False`` is an ablation for experiments: after every step the FP32 weights are
    re-rounded to FP16, as if the model had no FP32 copy (updates below half an FP16 gap are lost).
    """

    def __init__(self, model, optimizer, scaler=None, master_weights=True):
        self.model = model
        self.optimizer = optimizer
        self.scaler = LossScaler() if scaler is None else scaler
        self.master_weights = bool(master_weights)
        masters = {id(p) for p in model.parameters()}
        if not all(id(p) in masters for p in optimizer.params):
            raise ValueError("the optimizer must update the mixed-precision model's FP32 masters: "
                             "build it with optimizer = SGD(model.parameters(), ...)")
        ga = L.gpuarray()
        self._step_loss = ga.zeros(1, np.float32)      # the last step's mean loss
        # One device buffer, so that reading the epoch's metrics is one copy back: the summed row losses since
        # reset_loss() (a float64's 8 bytes) and the rows whose label is not a class.
        self._metrics = ga.zeros(4, np.int32)
        self._loss_total, self._bad_labels = self._metrics[0:2], self._metrics[2:3]
        self._rows = 0                                 # rows since reset_loss() (the host knows them)
        self._classes = None
        self._buffers = {}                             # (rows, classes) -> (loss_rows, dlogits)
        self.steps = 0
        self._stream = None

    @property
    def stream(self):
        return self._stream

    @stream.setter
    def stream(self, stream):
        """Launch every kernel of a step on ``stream``: the model's, the scaler's and the optimizer's
        (None: the default stream).  They must share one stream: each reads what the one before wrote."""
        self._stream = stream
        self.model.stream = self.scaler.stream = self.optimizer.stream = stream

    @property
    def scales(self):
        """The loss scale used at every step, for plots (a synchronising read of the scaler's history)."""
        return self.scaler.scales

    def _loss_buffers(self, rows, classes):
        bufs = self._buffers.get((rows, classes))
        if bufs is None:
            ga = L.gpuarray()
            bufs = self._buffers[(rows, classes)] = (ga.empty(rows, np.float32),
                                                     ga.empty((rows, classes), np.float16))
        return bufs

    def step(self, x, labels):
        """One training step on a batch; returns a ``StepResult`` (nothing is read back unless asked)."""
        scaler = self.scaler
        logits = self.model.forward(x)
        loss_rows, dlogits = softmax_xent(logits, labels, scaler.scale_on_device,
                                          *self._loss_buffers(*logits.shape), stream=self._stream,
                                          bad_labels=self._bad_labels)
        sum_loss_rows(loss_rows, self._step_loss, self._loss_total, stream=self._stream)
        self.model.backward(dlogits)
        scaler.unscale_on_device(self.model.half_grads())
        scaler.update_on_device()                       # decides: apply, or skip and back off
        self.optimizer.step(skip=scaler.skip_flag)      # on the FP32 masters, unless skipped
        self.model.refresh_half(scaler.skip_flag, round_masters=not self.master_weights)
        self._rows += logits.shape[0]
        self._classes = logits.shape[1]
        self.steps += 1
        return StepResult(self, self.steps)

    def mean_loss(self):
        """The mean loss of every row since ``reset_loss()`` (skipped steps count: their forward pass was
        computed); one copy back, so it waits for the GPU."""
        if self._rows == 0:
            raise RuntimeError("no step since the last reset_loss(): call trainer.step(x, labels) first")
        _synchronize(self._stream)
        metrics = self._metrics.get()
        total, bad = float(metrics[0:2].view(np.float64)[0]), int(metrics[2])
        if bad:
            raise ValueError(bad_labels_message(bad, self._rows, self._classes, "reset_loss()"))
        if not np.isfinite(total):
            raise ValueError(f"the loss since the last reset_loss() is {total}: the forward pass gave NaN or infinite "
                             f"logits (an FP16 activation past 65504, NaN or inf in the inputs, or training diverged: "
                             f"lower the learning rate). reset_loss() to go on")
        return total / self._rows

    def reset_loss(self):
        """Start a new mean (e.g. at each epoch); launched on the device, no copy."""
        self._metrics.fill(0, stream=self._stream)
        self._rows = 0

    def epoch_result(self):
        """For ``train.fit``: the mean loss since ``reset_loss()`` and None for the train accuracy, which the
        mixed-precision loss kernel does not count (``model.accuracy(x, y)`` measures it)."""
        return self.mean_loss(), None

    @property
    def rows(self):
        """Rows trained on since ``reset_loss()``."""
        return self._rows

