"""The training loop: ``fit(model, loader, epochs, optimizer)`` with a progress bar, history and plots.

One loop serves every precision: it runs a *training step* over the loader's batches, epoch after epoch,
and returns a ``History``. ``fit(model, ...)`` builds the FP32 step (``Step``: forward, the fused loss and
gradient, backward, the optimizer's update); ``fit(trainer, ...)`` runs a step object given whole, such as
``nn.amp.MixedPrecisionTrainer`` (FP16 compute, loss scaling, FP32 master weights). A step object has:

- ``model`` (with ``accuracy(x, y)``, and ``in_features``/``out_features`` where it has them), a settable
  ``stream`` that every launch of the step goes to;
- ``step(x, labels)``, which queues one step and reads nothing back;
- ``reset_loss()``, which starts an epoch's sums on the device; ``epoch_result()``, which reads them back once:
  ``(mean loss, train accuracy)``, the accuracy None where the step does not count it; ``rows`` seen since.

Everything of a step runs on the device with no copy back; the loss (and accuracy) accumulate there and are
read once per epoch. So does the FP32 step's check of the activations: after each layer of a ``Sequential`` model
(the output of any other model), a kernel counts the NaN and infinite values among that layer's outputs and keeps
the earliest step and layer that had any. When the epoch's figures are read, a count above zero stops training with
``NonFiniteActivations`` (a ``ValueError``), which names the epoch, the step and the layer where they first
appeared, and holds the ``History`` of the epochs before it; a layer whose NaN a ReLU turns into zeros further on
is caught there too, where the loss alone would never see it. Energy per epoch comes from NVML's energy counter where a GPU reports one; elsewhere the
history says why it is unavailable. Timing helpers (``median_seconds``) and timelines are in ``gpuedu.timing``.
"""
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from .nn.loss import SoftmaxCrossEntropy
from .nn.model import Sequential
from .ops import dense as _dense


@dataclass
class History:
    """What ``fit`` measured, one entry per epoch (``train_accuracy`` holds None where the step does not count it)."""
    loss: list = field(default_factory=list)
    train_accuracy: list = field(default_factory=list)
    test_accuracy: list = field(default_factory=list)
    epoch_seconds: list = field(default_factory=list)
    samples_per_second: list = field(default_factory=list)
    energy_joules: list = field(default_factory=list)
    energy_note: str = ""
    #: Data-parallel training only (``distributed.fit_data_parallel``): the seconds of each epoch this process
    #: spent computing (forward, backward, optimizer), the rest being the all-reduce and the loop around it.
    busy_seconds: list = field(default_factory=list)

    def summary(self):
        last = len(self.loss) - 1
        parts = [f"epochs {len(self.loss)}", f"loss {self.loss[last]:.4f}"]
        if self.train_accuracy[last] is not None:
            parts.append(f"train accuracy {self.train_accuracy[last]:.4f}")
        if self.test_accuracy:
            parts.append(f"test accuracy {self.test_accuracy[last]:.4f}")
        return ", ".join(parts)


class EnergyMeter:
    """Energy from NVML's total-energy counter (millijoules, Volta and later) for device 0.

    ``available`` says whether it works; ``reason`` says why not (no pynvml, no GPU, the emulator...).
    """

    def __init__(self, backend_name):
        self.available, self.reason, self._handle, self._nvml = False, "", None, None
        if backend_name != "cuda":
            self.reason = "unavailable: the CPU emulator has no power sensor"
            return
        try:
            import pynvml
        except ImportError:
            self.reason = "unavailable: pynvml is not installed (pip install nvidia-ml-py)"
            return
        try:
            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
        except Exception as e:     # NVML raises its own error classes per failure
            self.reason = f"unavailable: NVML cannot read the energy counter ({e})"
            return
        self._nvml, self.available, self.reason = pynvml, True, "NVML total energy counter"

    def read_joules(self):
        if not self.available:
            return None
        return self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle) / 1000.0


#: The activation check's key is step * CHECK_LAYERS + layer, kept as a rank (RANK_TOP - key) that the kernel
#: raises to the largest it sees, so that the earliest key wins and one fill of zeros starts an epoch afresh.
CHECK_LAYERS = 256
RANK_TOP = 2 ** 31 - 1
_LAST_STEP = RANK_TOP // CHECK_LAYERS - 1


class NonFiniteActivations(ValueError):
    """Training stopped: a layer's outputs held NaN or inf (``epoch``, ``step`` and ``layer`` say where they first
    appeared, all counted from 1 but ``layer``, an index into the model's layers; ``count`` how many values in
    that epoch; ``history`` what the epochs before it gave)."""

    def __init__(self, message, epoch, step, layer, count):
        super().__init__(message)
        self.epoch, self.step, self.layer, self.count = epoch, step, layer, count
        self.history = None


class Step:
    """The FP32 training step: forward, the fused softmax cross-entropy and its gradient, backward, update; the
    count of NaN and inf among each layer's outputs kept on the device beside the loss."""

    def __init__(self, model, optimizer, loss=None):
        if optimizer is None:
            raise TypeError("training a model needs an optimizer, e.g. nn.SGD(model.parameters(), lr=0.1); "
                            "or pass a training step such as nn.amp.MixedPrecisionTrainer instead of the model")
        self.model, self.optimizer = model, optimizer
        self.loss = loss or SoftmaxCrossEntropy()
        self._stream = None
        # [values that were NaN or inf, the rank of the earliest (step, layer) that had one] on the device: in the
        # loss's metrics buffer, read back with them in one copy (a loss of another kind: a buffer of the step's)
        self._health = getattr(self.loss, "activation_status", None)
        self._own_health = None
        if self._health is None:
            from . import launch
            self._health = self._own_health = launch.gpuarray().zeros(2, np.int32)
        self._steps = 0                 # steps queued this epoch
        self._epoch = 0                 # epochs begun (reset_loss)
        self._sequential = isinstance(model, Sequential)

    @property
    def stream(self):
        return self._stream

    @stream.setter
    def stream(self, stream):
        """The model, the loss and the optimizer launch on ``stream``: each reads what the one before wrote."""
        self._stream = self.model.stream = self.loss.stream = self.optimizer.stream = stream

    def step(self, x, labels):
        if self._sequential:
            logits = self.model.forward(x, check=self._check)
        else:
            logits = self.model.forward(x)
            self._check(0, logits)
        self._steps += 1
        dlogits = self.loss(logits, labels)
        self.model.backward(dlogits)
        self.optimizer.step()

    def _check(self, layer, output):
        """Queue the count of NaN and inf among ``output``, layer ``layer``'s, in this step (float32 outputs)."""
        if getattr(output, "dtype", None) != np.float32 or not output.size:
            return
        key = min(self._steps, _LAST_STEP) * CHECK_LAYERS + min(layer, CHECK_LAYERS - 1)
        _dense.count_nonfinite(self._health, output, RANK_TOP - key, self._stream)

    def reset_loss(self):
        self.loss.reset()                      # (which zeroes the activation status it holds)
        if self._own_health is not None:
            self._own_health.fill(0, stream=self._stream)
        self._steps = 0
        self._epoch += 1

    def epoch_result(self):
        if self._own_health is None:
            metrics = self.loss.read()
            count, rank = int(metrics[4]), int(metrics[5])
        else:
            metrics = None
            count, rank = (int(v) for v in self._own_health.get())
        if count:
            step, layer = divmod(RANK_TOP - rank, CHECK_LAYERS)
            if self._sequential:
                where = f"the output of layer {layer} ({self.model.layers[layer]!r})"
            else:
                where = f"the output of the model ({type(self.model).__name__})"
            raise NonFiniteActivations(
                f"training stopped: {count} activations were NaN or infinite in epoch {self._epoch}; the first "
                f"appeared in step {step + 1} of that epoch, in {where}. A NaN spreads to every later layer, "
                f"the loss and the weights (a ReLU after it hides it as zeros). Check the inputs "
                f"(np.isfinite(x).all()), lower the learning rate, or look at that layer's weights "
                f"(its parameters(), .get())", self._epoch, step + 1, layer, count)
        return self.loss.result() if metrics is None else self.loss.result(metrics)

    @property
    def rows(self):
        return self.loss.rows


def _is_step(candidate):
    return all(callable(getattr(candidate, name, None)) for name in ("step", "reset_loss", "epoch_result"))


def fit(model, loader, epochs, optimizer=None, loss=None, test=None, quiet=False, progress=True):
    """Train for ``epochs`` passes over ``loader``; return a ``History``.

    ``model``: a model, trained in FP32 by ``optimizer`` (and ``loss``, softmax cross-entropy by default), or a
    training step object such as ``nn.amp.MixedPrecisionTrainer``, which brings its own optimizer and loss.
    ``test=(x_test, y_test)`` adds the test accuracy after every epoch. NaN or inf among a layer's outputs (the
    FP32 step counts them on the device) stops training when that epoch's figures are read, with
    ``NonFiniteActivations`` naming the epoch, step and layer where they first appeared.  The progress bar goes to stderr
    (``quiet=True`` or ``progress=False`` turns it off; ``quiet`` also silences the epoch lines).
    """
    from . import backend
    if _is_step(model):
        if optimizer is not None or loss is not None:
            raise TypeError(f"{type(model).__name__} brings its own optimizer and loss: call fit(trainer, loader, "
                            f"epochs) without optimizer= or loss=")
        step = model
    else:
        step = Step(model, optimizer, loss)
    model = step.model
    if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
        raise ValueError(f"epochs must be a positive integer, got {epochs!r}")
    if len(loader) == 0:
        raise ValueError("the loader yields no batches (drop_last with batch_size larger than the data?)")
    in_features = getattr(model, "in_features", None)
    if in_features is not None and loader.x.shape[1] != in_features:
        raise ValueError(f"the data has {loader.x.shape[1]} features per row, the model takes {in_features}")
    out_features = getattr(model, "out_features", None)
    if loader.y.size and out_features is not None and loader.y.max() >= out_features:
        raise ValueError(f"the labels go up to {loader.y.max()} but the model has {out_features} outputs")
    active = backend.active()
    # One compute stream for the whole step, so the loader's copies can overlap it.
    stream = active.driver.Stream()
    step.stream = stream
    loader.compute_stream = stream
    meter = EnergyMeter(active.name)
    history = History(energy_note=meter.reason)
    bar = None
    if progress and not quiet:
        from tqdm import tqdm  # the plain bar: it writes to stderr even inside Jupyter
        bar = tqdm(total=epochs * len(loader), file=sys.stderr, unit="batch", leave=False)
    try:
        for epoch in range(epochs):
            step.reset_loss()
            joules0 = meter.read_joules()
            start = time.perf_counter()
            for xb, yb in loader:
                step.step(xb, yb)
                if bar is not None:
                    bar.update(1)
            stream.synchronize()               # the epoch's last step is done before its loss is read
            seconds = time.perf_counter() - start
            joules1 = meter.read_joules()
            try:
                mean_loss, accuracy = step.epoch_result()
            except NonFiniteActivations as exc:
                exc.history = history          # what the epochs before this one gave
                raise
            history.loss.append(mean_loss)
            history.train_accuracy.append(accuracy)
            history.epoch_seconds.append(seconds)
            history.samples_per_second.append(step.rows / seconds)
            history.energy_joules.append(None if joules0 is None else joules1 - joules0)
            if test is not None:
                history.test_accuracy.append(model.accuracy(*test))
            if not quiet:
                line = f"epoch {epoch + 1:3d}: loss {mean_loss:.4f}"
                if accuracy is not None:
                    line += f", train accuracy {accuracy:.4f}"
                if test is not None:
                    line += f", test accuracy {history.test_accuracy[-1]:.4f}"
                if bar is not None:
                    bar.write(line, file=sys.stdout)
                else:
                    print(line)
    finally:
        if bar is not None:
            bar.close()
        step.stream = None
        loader.compute_stream = None
    return history


def plot_history(history, ax=None, title=None):
    """Learning curves: the loss (left axis) and the accuracies (right axis) against the epoch."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    epochs = np.arange(1, len(history.loss) + 1)
    ax.plot(epochs, history.loss, "o-", color="tab:red", label="training loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    acc = ax.twinx()
    if any(a is not None for a in history.train_accuracy):
        acc.plot(epochs, history.train_accuracy, "s--", color="tab:blue", label="train accuracy")
    if history.test_accuracy:
        acc.plot(epochs, history.test_accuracy, "^-", color="tab:green", label="test accuracy")
    acc.set_ylabel("accuracy")
    lines = ax.get_lines() + acc.get_lines()
    ax.legend(lines, [l.get_label() for l in lines], loc="center right")
    if title:
        ax.set_title(title)
    return ax
