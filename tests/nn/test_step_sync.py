"""A training step never waits for the GPU and never allocates: FP32 (SGD, Adam) and mixed precision.

On a GPU, a copy back (``.get()``, ``memcpy_dtoh``), a copy from pageable host memory (``.set``,
``to_gpu``), an allocation or a free, or an explicit synchronize inside a step stalls the host until the
device drains, so the next kernels cannot be queued while the current ones run.  These tests wrap every
such entry point of the active backend with a counter, run steps after a warm-up, and require zero calls;
then they check that the on-device loss scaler gives exactly what the host-driven loop gave (the same
weights, the same skipped steps, the same scales).
"""
import numpy as np
import pytest

import gpuedu
from gpuedu import nn
from gpuedu.nn import amp
from gpuedu.ops import fp16
from stall_helpers import count_stalls

backend = gpuedu.setup(verbose=False)
drv, ga = backend.driver, backend.gpuarray

WIDTHS = [64, 48, 10]
BATCH = 40


def device_batch(seed=0, rows=BATCH):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, (rows, WIDTHS[0])).astype(np.float32)
    y = rng.integers(0, WIDTHS[-1], rows).astype(np.int32)
    return ga.to_gpu(x), ga.to_gpu(y)


def test_the_counter_sees_a_copy_back_and_an_allocation(monkeypatch):
    # The guard itself: what it must catch, it catches (and names the caller).
    a = ga.to_gpu(np.ones(4, np.float32))
    with count_stalls(monkeypatch) as calls:
        a.get()
        ga.empty(3, np.float32)
        drv.Context.synchronize()
    assert len(calls) >= 3 and any("GPUArray.get from" in c and __file__ in c for c in calls), calls


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_an_fp32_step_does_not_stall(monkeypatch, optimizer):
    # The bench's step (gpuedu/bench/training.py gpuedu_mlp_step) on a batch already on the device.
    model = nn.mlp(WIDTHS, seed=0)
    loss = nn.SoftmaxCrossEntropy()
    opt = (nn.SGD(model.parameters(), lr=0.05, momentum=0.9) if optimizer == "sgd"
           else nn.Adam(model.parameters(), lr=1e-3))
    xb, yb = device_batch()

    def step():
        model.backward(loss(model.forward(xb), yb))
        opt.step()

    step()                                        # warm-up: buffers for this batch size, kernels loaded
    with count_stalls(monkeypatch) as calls:
        for _ in range(3):
            step()
    assert calls == []
    mean_loss, _ = loss.result()
    assert np.isfinite(mean_loss) and loss.rows == 4 * BATCH
    if optimizer == "adam":
        assert opt.t == 4


def mixed_setup(optimizer, init_scale=2.0 ** 17, growth_interval=1, min_scale=2.0 ** 16, max_scale=2.0 ** 17):
    """A mixed-precision MLP whose scaler grows after every good step within [2^16, 2^17]: with the
    batches of ``overflow_batches`` it skips, backs off, grows, and is clamped at both ends."""
    model = amp.MixedPrecisionMLP(nn.mlp(WIDTHS, seed=0))
    opt = (nn.SGD(model.parameters(), lr=0.05, momentum=0.9) if optimizer == "sgd"
           else nn.Adam(model.parameters(), lr=1e-3))
    scaler = amp.LossScaler(init_scale=init_scale, growth_interval=growth_interval, min_scale=min_scale,
                            max_scale=max_scale)
    return model, opt, scaler


def overflow_batches(steps):
    """Device batches; two in every five have inputs 200x larger, whose scaled gradients overflow FP16."""
    batches = []
    for i in range(steps):
        xb, yb = device_batch(seed=i)
        if i % 5 in (3, 4):
            xb = ga.to_gpu(xb.get() * np.float32(200.0))
        batches.append((xb, yb))
    return batches


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_mixed_precision_step_does_not_stall_even_when_it_skips(monkeypatch, optimizer):
    model, opt, scaler = mixed_setup(optimizer)
    trainer = amp.MixedPrecisionTrainer(model, opt, scaler)
    batches = overflow_batches(9)
    trainer.step(*batches[0])                      # warm-up
    with count_stalls(monkeypatch) as calls:
        for xb, yb in batches[1:]:
            trainer.step(xb, yb)
    assert calls == []
    # The window held skipped steps, growth, and both clamps (growing every good step from 2^17, or
    # backing off twice in a row from 2^17, would leave [2^16, 2^17] without them).
    assert 0 < scaler.skipped < scaler.steps == 9
    assert set(trainer.scales) == {2.0 ** 16, 2.0 ** 17}


def host_driven_step(model, optimizer, scaler, x, y):
    """The step as it was written before the scaler moved to the device: the host reads the overflow
    flag and the loss back, decides, then launches the update and the FP16 refresh (or not)."""
    scale = scaler.scale
    loss_rows, dlogits = amp.softmax_xent(model.forward(x), y, grad_scale=scale)
    model.backward(dlogits)
    found_inf = scaler.unscale(model.half_grads())
    applied = scaler.update(found_inf)
    if applied:
        optimizer.step()
        for layer in model.layers:
            fp16.to_half(layer.W.value, out=layer.W16)
            fp16.to_half(layer.b.value, out=layer.b16)
    return float(np.mean(loss_rows.get(), dtype=np.float64)), applied, scale


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_the_device_scaler_steps_exactly_like_the_host_driven_loop(optimizer):
    batches = overflow_batches(12)
    model_d, opt_d, scaler_d = mixed_setup(optimizer)
    trainer = amp.MixedPrecisionTrainer(model_d, opt_d, scaler_d)
    model_h, opt_h, scaler_h = mixed_setup(optimizer)
    for i, (xb, yb) in enumerate(batches):
        loss_h, applied_h, scale_h = host_driven_step(model_h, opt_h, scaler_h, xb, yb)
        result = trainer.step(xb, yb)
        assert result.applied == applied_h, f"step {i}"
        assert result.loss == pytest.approx(loss_h, rel=1e-6), f"step {i}"
        assert (scaler_d.scale, scaler_d.skipped, scaler_d.good_steps) == \
               (scaler_h.scale, scaler_h.skipped, scaler_h.good_steps), f"step {i}"
        for p_d, p_h in zip(model_d.parameters(), model_h.parameters()):
            assert np.array_equal(p_d.numpy(), p_h.numpy()), f"step {i}: {p_d.name}"
        for l_d, l_h in zip(model_d.layers, model_h.layers):
            assert np.array_equal(l_d.W16.get(), l_h.W16.get()) and np.array_equal(l_d.b16.get(), l_h.b16.get())
    assert scaler_d.skipped == 4 and set(trainer.scales) == {2.0 ** 16, 2.0 ** 17}   # skips, growth, clamps
    assert trainer.scales == scaler_h.scales
    if optimizer == "adam":                             # skipped steps did not advance Adam's count
        assert opt_d.t == opt_h.t == 12 - scaler_d.skipped


def test_mean_loss_reads_the_epoch_once_and_step_results_go_stale():
    model, opt, scaler = mixed_setup("sgd", init_scale=256.0, growth_interval=1000, min_scale=1.0)
    trainer = amp.MixedPrecisionTrainer(model, opt, scaler)
    losses = []
    for xb, yb in overflow_batches(3):
        losses.append(trainer.step(xb, yb).loss)
    assert trainer.mean_loss() == pytest.approx(np.mean(losses), rel=1e-6)
    trainer.reset_loss()
    with pytest.raises(RuntimeError, match="no step since the last reset_loss"):
        trainer.mean_loss()
    first = trainer.step(*device_batch(seed=5))
    trainer.step(*device_batch(seed=6))
    with pytest.raises(RuntimeError, match="before the next step"):
        first.loss
