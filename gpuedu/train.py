"""The training loop: ``fit(model, loader, epochs, optimizer)`` with a progress bar, history and plots.

Per step: forward, fused loss + gradient, backward, optimizer step, all launched on the device with no
copy back; the loss and accuracy accumulate on the device and are read once per epoch.  Energy per epoch
comes from NVML's energy counter where a GPU reports one; elsewhere the history says why it is
unavailable.
"""
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from .nn.loss import SoftmaxCrossEntropy


@dataclass
class History:
    """What ``fit`` measured, one entry per epoch."""
    loss: list = field(default_factory=list)
    train_accuracy: list = field(default_factory=list)
    test_accuracy: list = field(default_factory=list)
    epoch_seconds: list = field(default_factory=list)
    samples_per_second: list = field(default_factory=list)
    energy_joules: list = field(default_factory=list)
    energy_note: str = ""

    def summary(self):
        last = len(self.loss) - 1
        parts = [f"epochs {len(self.loss)}", f"loss {self.loss[last]:.4f}",
                 f"train accuracy {self.train_accuracy[last]:.4f}"]
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


def fit(model, loader, epochs, optimizer, loss=None, test=None, quiet=False, progress=True):
    """Train ``model`` for ``epochs`` passes over ``loader``; return a ``History``.

    ``test=(x_test, y_test)`` adds the test accuracy after every epoch.  The progress bar goes to
    stderr (``quiet=True`` or ``progress=False`` turns it off; ``quiet`` also silences the epoch lines).
    """
    from . import backend
    if not isinstance(epochs, (int, np.integer)) or epochs < 1:
        raise ValueError(f"epochs must be a positive integer, got {epochs!r}")
    if len(loader) == 0:
        raise ValueError("the loader yields no batches (drop_last with batch_size larger than the data?)")
    if model.in_features is not None and loader.x.shape[1] != model.in_features:
        raise ValueError(f"the data has {loader.x.shape[1]} features per row, the model takes {model.in_features}")
    if loader.y.size and model.out_features is not None and loader.y.max() >= model.out_features:
        raise ValueError(f"the labels go up to {loader.y.max()} but the model has {model.out_features} outputs")
    active = backend.active()
    loss = loss or SoftmaxCrossEntropy()
    # One compute stream for the model, loss and optimizer, so the loader's copies can overlap it.
    stream = active.driver.Stream()
    model.stream = loss.stream = optimizer.stream = stream
    loader.compute_stream = stream
    meter = EnergyMeter(active.name)
    history = History(energy_note=meter.reason)
    bar = None
    if progress and not quiet:
        from tqdm import tqdm  # the plain bar: it writes to stderr even inside Jupyter
        bar = tqdm(total=epochs * len(loader), file=sys.stderr, unit="batch", leave=False)
    try:
        for epoch in range(epochs):
            loss.reset()
            joules0 = meter.read_joules()
            start = time.perf_counter()
            for xb, yb in loader:
                logits = model.forward(xb)
                dlogits = loss(logits, yb)
                model.backward(dlogits)
                optimizer.step()
                if bar is not None:
                    bar.update(1)
            stream.synchronize()
            seconds = time.perf_counter() - start
            joules1 = meter.read_joules()
            mean_loss, accuracy = loss.result()
            history.loss.append(mean_loss)
            history.train_accuracy.append(accuracy)
            history.epoch_seconds.append(seconds)
            history.samples_per_second.append(loss.rows / seconds)
            history.energy_joules.append(None if joules0 is None else joules1 - joules0)
            if test is not None:
                history.test_accuracy.append(model.accuracy(*test))
            if not quiet:
                line = f"epoch {epoch + 1:3d}: loss {mean_loss:.4f}, train accuracy {accuracy:.4f}"
                if test is not None:
                    line += f", test accuracy {history.test_accuracy[-1]:.4f}"
                if bar is not None:
                    bar.write(line, file=sys.stdout)
                else:
                    print(line)
    finally:
        if bar is not None:
            bar.close()
        model.stream = loss.stream = optimizer.stream = None
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
    acc.plot(epochs, history.train_accuracy, "s--", color="tab:blue", label="train accuracy")
    if history.test_accuracy:
        acc.plot(epochs, history.test_accuracy, "^-", color="tab:green", label="test accuracy")
    acc.set_ylabel("accuracy")
    lines = ax.get_lines() + acc.get_lines()
    ax.legend(lines, [l.get_label() for l in lines], loc="center right")
    if title:
        ax.set_title(title)
    return ax


def median_seconds(run, repeats=5, warmup=1, reduce="median"):
    """Median wall-clock seconds of ``run()``, each call followed by a wait for the device to finish.

    What a user of the device experiences: launch overheads included, so small problems show the cost
    of issuing work, large ones the cost of the work.  ``warmup`` calls first (compilation, allocation).
    ``reduce="min"`` returns the fastest repeat instead: on a shared, busy machine the least disturbed one.
    """
    if reduce not in ("median", "min"):
        raise ValueError(f"reduce must be 'median' or 'min', got {reduce!r}")
    from . import backend
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    drv = backend.active().driver
    for _ in range(warmup):
        run()
    drv.Context.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        drv.Context.synchronize()
        times.append(time.perf_counter() - start)
    return float(np.median(times) if reduce == "median" else np.min(times))


def plot_timeline(marks, ax=None, title=None):
    """A copy/compute timeline: ``marks`` holds (copy start, copy end, compute start, compute end) per batch,
    in milliseconds since a common origin (e.g. ``event.time_since(origin)``); one row of bars per engine."""
    import matplotlib.pyplot as plt
    marks = [tuple(float(t) for t in m) for m in marks]
    if any(len(m) != 4 or m[1] < m[0] or m[3] < m[2] for m in marks):
        raise ValueError("each mark must be (copy start, copy end, compute start, compute end) with ends >= starts")
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 1.8))
    ax.broken_barh([(c0, c1 - c0) for c0, c1, _, _ in marks], (10, 8), color="tab:orange")
    ax.broken_barh([(k0, k1 - k0) for _, _, k0, k1 in marks], (0, 8), color="tab:blue")
    ax.set_yticks([4, 14], ["compute", "copy"])
    ax.set_xlabel("milliseconds")
    if title:
        ax.set_title(title, fontsize=10)
    return ax
