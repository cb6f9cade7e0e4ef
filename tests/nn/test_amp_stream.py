"""Mixed precision on one compute stream, like FP32 ``fit``: every launch of a step goes to the stream
the trainer was given, the results are those of the default stream bit for bit, reads back synchronise
the stream first, and ``train.fit(trainer, ...)`` hands the stream to the loader and takes it back afterwards.

The emulator runs every launch when it is issued, so it cannot show a race; what it can show is where each
launch was sent.  The recorder below wraps the active backend's launch entry points (a prepared kernel's
``prepared_call`` / ``prepared_async_call`` / ``__call__``, and ``GPUArray.fill``) and notes the stream of
every outermost launch (a launch made inside another, as the emulator's ``prepared_async_call`` calls its
``prepared_call``, is the same launch).
"""
import contextlib
import functools
import inspect

import numpy as np
import pytest

import gpuedu
from gpuedu import data, nn, train
from gpuedu import launch as K
from gpuedu.nn import amp
from gpuedu.ops import fp16

backend = gpuedu.setup(verbose=False)
drv, ga = backend.driver, backend.gpuarray

WIDTHS = [64, 48, 10]
BATCH = 40
DEFAULT = "default stream"


def function_class():
    """The backend's kernel class (``pycuda.driver.Function`` or the emulator's)."""
    return type(K.kernel("fp16_elementwise", "half2_relu", "PPi"))


@contextlib.contextmanager
def record_launches(monkeypatch):
    """Inside the block, every kernel launch (and memset) appends the stream it went to (``DEFAULT`` for none)."""
    streams, depth = [], [0]

    def wrap(original, stream_of):
        def recorded(*args, **kwargs):
            depth[0] += 1
            try:
                if depth[0] == 1:
                    stream = stream_of(args, kwargs)
                    streams.append(DEFAULT if stream is None else stream)
                return original(*args, **kwargs)
            finally:
                depth[0] -= 1
        return recorded

    fn = function_class()
    entry_points = [
        (fn, "prepared_call", lambda a, kw: None),
        # the stream argument: prepared_async_call(self, grid, block, stream, *args), fill(self, value, stream)
        (fn, "prepared_async_call", lambda a, kw: a[3] if len(a) > 3 else kw.get("stream")),
        (fn, "__call__", lambda a, kw: kw.get("stream")),
        (ga.GPUArray, "fill", lambda a, kw: a[2] if len(a) > 2 else kw.get("stream")),
        # zeros by memset (launch.zero): memset_d8(dest, value, count), memset_d8_async(..., stream)
        (drv, "memset_d8", lambda a, kw: None),
        (drv, "memset_d8_async", lambda a, kw: a[3] if len(a) > 3 else kw.get("stream")),
    ]
    with monkeypatch.context() as patch:
        for owner, name, stream_of in entry_points:
            static = inspect.getattr_static(owner, name)
            if isinstance(static, staticmethod):
                raise TypeError(f"{owner.__name__}.{name} is a staticmethod: the recorder wraps methods only")
            patch.setattr(owner, name, wrap(getattr(owner, name), stream_of))
        yield streams


def device_batch(seed, scale=1.0):
    rng = np.random.default_rng(seed)
    x = (rng.uniform(0, 1, (BATCH, WIDTHS[0])) * scale).astype(np.float32)
    y = rng.integers(0, WIDTHS[-1], BATCH).astype(np.int32)
    return ga.to_gpu(x), ga.to_gpu(y)


def batches(steps):
    """Device batches; every third one 200x larger, so its scaled FP16 gradients overflow (a skipped step)."""
    return [device_batch(i, 200.0 if i % 3 == 2 else 1.0) for i in range(steps)]


def make_trainer(optimizer, gemm_version=None):
    model = amp.MixedPrecisionMLP(nn.mlp(WIDTHS, seed=0), gemm_version=gemm_version)
    opt = (nn.SGD(model.parameters(), lr=0.05, momentum=0.9) if optimizer == "sgd"
           else nn.Adam(model.parameters(), lr=1e-3))
    scaler = amp.LossScaler(init_scale=2.0 ** 17, growth_interval=2, min_scale=2.0 ** 10)
    return amp.MixedPrecisionTrainer(model, opt, scaler)


# ---- the launchers ---------------------------------------------------------------------------------
def halves(shape, seed):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float16)


def gemm(version, stream):
    if version in fp16.HOPPER_GEMMS:    # 11-13: the plain layout, K and N multiples of 8 (TMA's row pitch)
        return fp16.matmul(halves((20, 32), 1), halves((32, 24), 2), version=version, stream=stream)
    if version in fp16.PLAIN_LAYOUT_VERSIONS:   # 6-9: the plain layout only
        return fp16.matmul(halves((20, 33), 1), halves((33, 18), 2), version=version, stream=stream)
    return fp16.matmul(halves((33, 20), 1), halves((33, 18), 2), transpose_a=True, version=version, stream=stream)


def wmma(version, stream):
    return fp16.wmma_matmul(halves((33, 20), 1), halves((20, 18), 2), version=version, stream=stream)


LAUNCHERS = {
    "to_half": lambda s: fp16.to_half(np.linspace(-3, 3, 301, dtype=np.float32), stream=s),
    "to_float": lambda s: fp16.to_float(halves(301, 1), stream=s),
    "to_half_bits": lambda s: fp16.to_half_bits(np.linspace(-3, 3, 301, dtype=np.float32), stream=s),
    "axpy v1": lambda s: fp16.axpy(0.5, halves(301, 1), ga.to_gpu(halves(301, 2)), version=1, stream=s),
    "axpy v2": lambda s: fp16.axpy(0.5, halves(301, 1), ga.to_gpu(halves(301, 2)), version=2, stream=s),
    "relu": lambda s: fp16.relu(halves(301, 1), stream=s),
    "relu_backward": lambda s: fp16.relu_backward(halves(301, 1), halves(301, 2), stream=s),
    "bias_add": lambda s: fp16.bias_add(halves((7, 9), 1), halves(9, 2), stream=s),
    **{f"matmul {v}": functools.partial(gemm, v) for v in fp16.GEMM_VERSIONS},
    "matmul tensor, k = 0": lambda s: fp16.matmul(np.zeros((16, 0), np.float16), np.zeros((0, 16), np.float16),
                                                 version=4, stream=s),
    **{f"wmma_matmul v{v}": functools.partial(wmma, v) for v in (1, 2, 3)},
}


@pytest.mark.parametrize("name", list(LAUNCHERS))
def test_every_fp16_launcher_launches_on_the_stream_it_is_given(monkeypatch, name):
    launch = LAUNCHERS[name]
    expected = launch(None).get()
    stream = drv.Stream()
    with record_launches(monkeypatch) as launches:
        got = launch(stream)
    stream.synchronize()
    assert launches and all(s is stream for s in launches), launches
    assert got.dtype == expected.dtype and np.array_equal(got.get(), expected, equal_nan=True)
    with record_launches(monkeypatch) as launches:
        launch(None)
    assert launches and set(launches) == {DEFAULT}          # the recorder sees default launches too


# ---- a training step -----------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer, gemm_version", [("sgd", None), ("adam", None), ("sgd", 4), ("sgd", 3)])
def test_no_launch_of_a_mixed_precision_step_goes_to_the_default_stream(monkeypatch, optimizer, gemm_version):
    trainer = make_trainer(optimizer, gemm_version)
    steps = batches(4)
    trainer.step(*steps[0])                          # warm-up on the default stream: kernels loaded, buffers made
    with record_launches(monkeypatch) as launches:
        trainer.step(*steps[1])
    on_default = len(launches)
    assert on_default > 0 and set(launches) == {DEFAULT}
    stream = drv.Stream()
    trainer.stream = stream
    assert trainer.model.stream is trainer.scaler.stream is trainer.optimizer.stream is stream
    assert all(layer.stream is stream for layer in trainer.model.layers)
    with record_launches(monkeypatch) as launches:
        trainer.reset_loss()
        for xb, yb in steps[2:]:                     # the second of them overflows: a skipped step
            trainer.step(xb, yb)
    defaults = [i for i, s in enumerate(launches) if s is not stream]
    assert defaults == [], f"launches {defaults} of {len(launches)} did not go to the trainer's stream"
    assert len(launches) == 2 * on_default + 1       # the same launches as before, plus reset_loss's fill
    assert trainer.scaler.skipped == 1
    trainer.stream = None
    assert trainer.model.stream is trainer.scaler.stream is trainer.optimizer.stream is None
    assert all(layer.stream is None for layer in trainer.model.layers)


def state(trainer):
    """Everything a step leaves on the device, copied back."""
    model = trainer.model
    return ([p.numpy() for p in model.parameters()] + [l.W16.get() for l in model.layers]
            + [l.b16.get() for l in model.layers] + [trainer.scaler._state.get(), trainer.scaler.scale_on_device.get()])


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_stream_changes_no_bit_of_the_training(optimizer):
    on_default, on_stream = make_trainer(optimizer), make_trainer(optimizer)
    on_stream.stream = drv.Stream()
    for i, (xb, yb) in enumerate(batches(6)):
        a, b = on_default.step(xb, yb), on_stream.step(xb, yb)
        assert (a.loss, a.applied) == (b.loss, b.applied), f"step {i}"
        for x, y in zip(state(on_default), state(on_stream)):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), f"step {i}"
    assert on_default.mean_loss() == on_stream.mean_loss()
    assert on_default.scales == on_stream.scales and on_stream.scaler.skipped == 2
    x = np.random.default_rng(9).uniform(0, 1, (13, WIDTHS[0])).astype(np.float32)
    assert np.array_equal(on_default.model.predict(x), on_stream.model.predict(x))


@pytest.mark.parametrize("read", ["StepResult.loss", "StepResult.applied", "mean_loss", "scale", "steps",
                                  "scales", "predict", "unscale", "update"])
def test_every_read_back_synchronises_the_stream_first(monkeypatch, read):
    # A copy back of memory written on a stream is ordered after its kernels only once the stream is
    # synchronised (the emulator's streams are always done, so the order of the calls is what is checked).
    trainer = make_trainer("sgd")
    stream = trainer.stream = drv.Stream()
    result = trainer.step(*device_batch(0))
    events = []
    original_sync, original_get = drv.Stream.synchronize, ga.GPUArray.get

    def synchronize(self):
        events.append(("synchronize", self))
        return original_sync(self)

    def get(self, *args, **kwargs):
        events.append(("get", None))
        return original_get(self, *args, **kwargs)

    monkeypatch.setattr(drv.Stream, "synchronize", synchronize)
    monkeypatch.setattr(ga.GPUArray, "get", get)
    x = np.zeros((3, WIDTHS[0]), np.float32)
    reads = {"StepResult.loss": lambda: result.loss, "StepResult.applied": lambda: result.applied,
             "mean_loss": trainer.mean_loss, "scale": lambda: trainer.scaler.scale,
             "steps": lambda: trainer.scaler.steps, "scales": lambda: trainer.scales,
             "predict": lambda: trainer.model.predict(x),
             "unscale": lambda: trainer.scaler.unscale(trainer.model.half_grads()),
             "update": lambda: trainer.scaler.update(False)}
    reads[read]()
    gets = [i for i, (kind, _) in enumerate(events) if kind == "get"]
    assert gets, f"{read} copied nothing back"
    assert events[0] == ("synchronize", stream), events   # before the first copy back, on the trainer's stream


def test_a_step_on_a_stream_still_never_waits(monkeypatch):
    # test_step_sync's guard with a stream set: a stream synchronise belongs to reads, never to steps.
    from stall_helpers import count_stalls
    trainer = make_trainer("adam")
    trainer.stream = drv.Stream()
    steps = batches(4)
    trainer.step(*steps[0])
    with count_stalls(monkeypatch) as calls:
        for xb, yb in steps[1:]:
            trainer.step(xb, yb)
    assert calls == []


# ---- train.fit(trainer, ...) ---------------------------------------------------------------------
def loader(rows=200, batch=32):
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, (rows, WIDTHS[0])).astype(np.float32)
    y = rng.integers(0, WIDTHS[-1], rows).astype(np.int32)
    return data.DataLoader(x, y, batch, seed=0)


def test_fit_runs_a_mixed_step_on_one_stream_shared_with_the_loader_and_gives_it_back(monkeypatch):
    trainer, batches_seen = make_trainer("sgd"), []
    step = trainer.step

    def watched_step(xb, yb):
        batches_seen.append((trainer.stream, trainer.optimizer.stream, loop.compute_stream))
        return step(xb, yb)

    loop = loader()
    monkeypatch.setattr(trainer, "step", watched_step)
    with record_launches(monkeypatch) as launches:
        history = train.fit(trainer, loop, 2, quiet=True)
    stream = batches_seen[0][0]
    assert isinstance(stream, drv.Stream) and len(batches_seen) == 2 * len(loop)
    assert all(seen == (stream, stream, stream) for seen in batches_seen)
    assert launches and all(s is stream for s in launches)      # reset_loss included
    assert trainer.stream is None and trainer.model.stream is None and trainer.scaler.stream is None
    assert trainer.optimizer.stream is None and loop.compute_stream is None
    # the same epochs on the default stream, by hand, give the same losses bit for bit
    by_hand, reference = make_trainer("sgd"), []
    loop = loader()
    for _ in range(2):
        by_hand.reset_loss()
        for xb, yb in loop:
            by_hand.step(xb, yb)
        reference.append(by_hand.mean_loss())
    assert history.loss == reference and history.train_accuracy == [None, None]
    assert history.summary().startswith("epochs 2, loss ") and "train accuracy" not in history.summary()


def test_fit_gives_a_mixed_steps_streams_back_when_a_step_raises(monkeypatch):
    trainer, loop, calls = make_trainer("sgd"), loader(), []
    step = trainer.step

    def failing_step(xb, yb):
        calls.append(trainer.stream)
        if len(calls) == 3:
            raise RuntimeError("a step failed")
        return step(xb, yb)

    monkeypatch.setattr(trainer, "step", failing_step)
    with pytest.raises(RuntimeError, match="a step failed"):
        train.fit(trainer, loop, 1, quiet=True)
    assert len(calls) == 3 and calls[0] is not None
    assert trainer.stream is None and trainer.model.stream is None and trainer.scaler.stream is None
    assert trainer.optimizer.stream is None and loop.compute_stream is None


@pytest.mark.parametrize("epochs", [0, -1, 1.5, True])
def test_fit_refuses_a_bad_number_of_epochs_for_a_mixed_step(epochs):
    trainer, loop = make_trainer("sgd"), loader()
    with pytest.raises(ValueError, match="epochs must be a positive integer"):
        train.fit(trainer, loop, epochs, quiet=True)
    assert trainer.stream is None and loop.compute_stream is None
