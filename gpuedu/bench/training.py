"""Training steps: the gpuedu MLP against PyTorch eager (GPU) or NumPy (CPU), and mixed precision vs FP32.

A step is forward, softmax cross-entropy, backward and an SGD-with-momentum update on one fixed
mini-batch already on the device; throughput is batch / seconds per step (samples/s).  Neither the FP32
nor the mixed-precision step copies anything back, allocates or synchronises (tests/nn/test_step_sync.py),
so the host can queue the next step while the device runs this one. Both sides
of a comparison use the same widths, batch, precision, optimizer and initial scale of weights.
"""
import numpy as np

from . import stats
from .records import Skipped

LEARNING_RATE = 0.01
MOMENTUM = 0.9


def _batch(widths, batch, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, widths[0])).astype(np.float32)
    labels = rng.integers(0, widths[-1], size=batch).astype(np.int32)
    return x, labels


def _widths_text(widths):
    return "-".join(str(w) for w in widths)


def gpuedu_mlp_step(run, widths, batch):
    """A closure doing one FP32 training step of ``gpuedu.nn.mlp(widths)`` on a fixed device batch."""
    if run.drv is None:
        raise Skipped("pycuda.driver is not available on this backend")
    try:
        from gpuedu import nn, train
        model = nn.mlp(widths, activation="relu", seed=0)
        step = train.Step(model, nn.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM))
    except (ImportError, AttributeError) as exc:
        raise Skipped(f"gpuedu.nn (mlp, SGD) or gpuedu.train.Step is not available: {exc}") from None
    x, labels = _batch(widths, batch)
    gpuarray = run.backend.gpuarray
    xb, yb = gpuarray.to_gpu(x), gpuarray.to_gpu(labels)
    return lambda: step.step(xb, yb)


class NumpyMLP:
    """The same MLP and SGD-with-momentum step in NumPy float32: the CPU backend's yardstick."""

    def __init__(self, widths, seed=0):
        rng = np.random.default_rng(seed)
        # He-normal weights like gpuedu.nn's default; the values do not change the work done.
        self.weights = [(rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
                        for a, b in zip(widths[:-1], widths[1:])]
        self.biases = [np.zeros(b, np.float32) for b in widths[1:]]
        self.velocity = [np.zeros_like(p) for p in self.weights + self.biases]

    def step(self, x, labels):
        inputs, h = [], x
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            inputs.append(h)
            z = h @ w + b
            h = z if i == len(self.weights) - 1 else np.maximum(z, 0)
        # dL/dlogits of the mean softmax cross-entropy: (softmax - onehot) / batch.
        p = np.exp(h - h.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(len(labels)), labels] -= 1
        d = p / len(labels)
        grads_w, grads_b = [], []
        for i in reversed(range(len(self.weights))):
            grads_w.append(inputs[i].T @ d)
            grads_b.append(d.sum(axis=0))
            if i > 0:
                # ReLU's derivative is 1 where its output (the next layer's input) is positive.
                d = (d @ self.weights[i].T) * (inputs[i] > 0)
        grads = grads_w[::-1] + grads_b[::-1]
        for param, grad, v in zip(self.weights + self.biases, grads, self.velocity):
            v *= MOMENTUM
            v += grad
            param -= LEARNING_RATE * v


def torch_mlp_step(torch, widths, batch):
    """A closure doing one PyTorch eager training step of the same MLP on the GPU."""
    torch.backends.cuda.matmul.allow_tf32 = False   # FP32 means FP32 on both sides
    torch.backends.cudnn.allow_tf32 = False
    layers = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(widths) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    criterion = torch.nn.CrossEntropyLoss()
    x, labels = _batch(widths, batch)
    xb = torch.from_numpy(x).cuda()
    yb = torch.from_numpy(labels.astype(np.int64)).cuda()

    def step():
        optimizer.zero_grad(set_to_none=True)
        criterion(model(xb), yb).backward()
        optimizer.step()
    return step


def measure_mlp(run):
    """The gpuedu MLP training step at each batch of the mode, with its yardstick."""
    widths = run.sizes["mlp_widths"]
    for batch in run.sizes["mlp_batches"]:
        sizes = {"widths": list(widths), "batch": batch, "precision": "float32"}
        yardstick = f"torch_mlp_step_b{batch}" if run.on_gpu else f"numpy_mlp_step_b{batch}"
        with run.figure(f"mlp_step_b{batch}", "training", "samples/s", sizes, [yardstick],
                        note=f"gpuedu.nn.mlp({_widths_text(widths)}), softmax cross-entropy, "
                             "SGD momentum 0.9; one step on a fixed device batch") as fig:
            step = gpuedu_mlp_step(run, widths, batch)
            seconds = run.time(step)
            fig.record(stats.rates(seconds, batch), seconds)
        if run.on_gpu:
            run.later(lambda name=yardstick, sizes=sizes, batch=batch: _measure_torch_mlp(run, name, sizes, batch))
        else:
            with run.figure(yardstick, "training", "samples/s", sizes,
                            note="the same MLP step in NumPy float32 on the host") as fig:
                model = NumpyMLP(widths)
                x, labels = _batch(widths, batch)
                seconds = run.time(lambda: model.step(x, labels))
                fig.record(stats.rates(seconds, batch), seconds)


def _measure_torch_mlp(run, name, sizes, batch):
    from . import baselines as _baselines
    with run.figure(name, "training", "samples/s", sizes,
                    note="PyTorch eager, same widths, batch, FP32 (TF32 off), SGD momentum 0.9") as fig:
        torch, why = _baselines.torch_module(run)
        if torch is None:
            raise Skipped(why)
        step = torch_mlp_step(torch, sizes["widths"], batch)
        seconds = run.time(step, timer=_baselines.vendor_timer(run, "torch", torch))
        fig.record(stats.rates(seconds, batch), seconds)


def measure_amp(run):
    """The mixed-precision training step (gpuedu.nn.amp) against gpuedu's own FP32 step, same widths and batch."""
    widths, batch = run.sizes["amp_widths"], run.sizes["amp_batch"]
    sizes = {"widths": list(widths), "batch": batch}
    with run.figure("fp32_step", "training", "samples/s", dict(sizes, precision="float32"),
                    note="gpuedu.nn.mlp FP32 step, SGD momentum 0.9") as fig:
        step = gpuedu_mlp_step(run, widths, batch)
        seconds = run.time(step)
        fig.record(stats.rates(seconds, batch), seconds)
    with run.figure("amp_step", "training", "samples/s", dict(sizes, precision="mixed float16/float32"),
                    ["fp32_step"], note="gpuedu.nn.amp: FP16 storage, FP32 accumulation and master weights, "
                                        "dynamic loss scaling kept on the device (the scaler's state machine "
                                        "and the skip flag the optimizer reads): the step copies nothing back "
                                        "and allocates nothing") as fig:
        step = gpuedu_amp_step(run, widths, batch)
        seconds = run.time(step)
        fig.record(stats.rates(seconds, batch), seconds)


def gpuedu_amp_step(run, widths, batch):
    """A closure doing one mixed-precision training step with ``gpuedu.nn.amp`` on a fixed device batch.

    The step's result (loss, applied) is not read: reading it would wait for the GPU every step."""
    if run.drv is None:
        raise Skipped("pycuda.driver is not available on this backend")
    try:
        from gpuedu import nn
        from gpuedu.nn import amp
        model = amp.MixedPrecisionMLP(nn.mlp(widths, activation="relu", seed=0))
        optimizer = nn.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
        trainer = amp.MixedPrecisionTrainer(model, optimizer)
    except (ImportError, AttributeError) as exc:
        raise Skipped(f"gpuedu.nn.amp (MixedPrecisionMLP, MixedPrecisionTrainer) is not available: {exc}") from None
    x, labels = _batch(widths, batch)
    gpuarray = run.backend.gpuarray
    xb, yb = gpuarray.to_gpu(x), gpuarray.to_gpu(labels)
    return lambda: trainer.step(xb, yb)
