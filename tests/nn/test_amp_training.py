"""Mixed precision on the device: unscale-and-check, underflow rescued by loss scaling, overflow
handled by the scaler (not by a NaN model), and FP16 training within 0.5 points of FP32 on digits."""
import numpy as np
import pytest

import gpuedu
from gpuedu import data, nn, train
from gpuedu.nn import amp
from gpuedu.ops import fp16
from gpuedu.ops import amp as amp_ops
from gpuedu.nn import reference as nn_reference

backend = gpuedu.setup(verbose=False)
ga = backend.gpuarray


def test_unscale_divides_in_fp32_and_raises_the_flag_on_inf_or_nan():
    scaler = amp.LossScaler(init_scale=1024.0)
    p1 = nn.Parameter("p1", np.zeros(5, np.float32))
    p2 = nn.Parameter("p2", np.zeros((2, 3), np.float32))
    g1 = np.array([1024, -2048, 1, 0, 65504], np.float16)
    g2 = np.arange(6, dtype=np.float16).reshape(2, 3)
    assert scaler.unscale([(ga.to_gpu(g1), p1), (ga.to_gpu(g2), p2)]) is False
    assert np.array_equal(p1.grad.get(), amp_ops.unscale_reference(g1, 1024.0)[0])
    assert np.array_equal(p2.grad.get(), g2.astype(np.float32) / 1024)
    for bad in (np.inf, -np.inf, np.nan):
        g2_bad = g2.copy()
        g2_bad[1, 2] = bad
        assert scaler.unscale([(ga.to_gpu(g1), p1), (ga.to_gpu(g2_bad), p2)]) is True
    # the flag is cleared between calls
    assert scaler.unscale([(ga.to_gpu(g1), p1)]) is False


def confident_logits(rows=256, classes=10, margin=13.0, seed=0):
    """Logits of a model that is sure of every answer: p(wrong class) ~ e^-13 ~ 2e-6, so the
    gradient (p - onehot) / 256 is ~ 1e-8, below FP16's smallest subnormal (6e-8)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, rows).astype(np.int32)
    logits = rng.uniform(-0.2, 0.2, (rows, classes))
    logits[np.arange(rows), labels] += margin
    return logits.astype(np.float16), labels


def test_unscaled_fp16_gradients_underflow_and_loss_scaling_rescues_them():
    logits, labels = confident_logits()
    _, exact = amp_ops.softmax_xent_reference(logits, labels)          # float64, every entry nonzero
    assert np.all(exact != 0) and np.abs(exact).max() < 2.0 ** -22

    _, plain = amp.softmax_xent(ga.to_gpu(logits), labels, grad_scale=1.0)
    plain = plain.get()
    assert np.mean(plain == 0) > 0.85                    # most of the gradient is gone

    scale = 2.0 ** 14
    _, scaled = amp.softmax_xent(ga.to_gpu(logits), labels, grad_scale=scale)
    scaled = scaled.get()
    assert np.all(scaled != 0)
    rel = np.abs(scaled.astype(np.float64) / scale - exact) / np.abs(exact)
    assert rel.max() < 2.0 ** -10                        # one FP16 rounding, nothing lost

    # The same through a layer's weight gradient dW = X^T dZ.
    x = data.load_digits().x_train[:256].astype(np.float16)
    layer = amp.HalfDense(nn.Dense(64, 10, seed=0))
    dw_exact = x.astype(np.float64).T @ exact
    errors = {}
    for name, dz, s in (("plain", plain, 1.0), ("scaled", scaled, scale)):
        layer.forward(ga.to_gpu(x))
        layer.backward(ga.to_gpu(dz), need_input_grad=False)
        dw = layer.W_grad16.get().astype(np.float64) / s
        errors[name] = np.linalg.norm(dw - dw_exact) / np.linalg.norm(dw_exact)
    assert errors["scaled"] < 2e-3
    assert errors["plain"] > 0.2


def small_batch(rows=64):
    d = data.load_digits()
    return d, d.x_train[:rows], d.y_train[:rows]


def test_overflow_skips_steps_and_halves_the_scale_instead_of_poisoning_the_weights():
    d, x, y = small_batch()
    model = amp.MixedPrecisionMLP(nn.mlp([64, 32, 10], seed=0))
    scaler = amp.LossScaler(init_scale=2.0 ** 24, growth_interval=1000)
    trainer = amp.MixedPrecisionTrainer(model, nn.SGD(model.parameters(), lr=0.1), scaler)
    before = [p.numpy() for p in model.parameters()]
    # 2**24 * (p - onehot) / 64 is ~2e5 > 65504: the FP16 gradient is Inf
    result = trainer.step(x, y)
    assert not result.applied and scaler.scale == 2.0 ** 23 and scaler.skipped == 1
    assert all(np.array_equal(b, p.numpy()) for b, p in zip(before, model.parameters()))
    skipped_in_a_row = 1
    while not trainer.step(x, y).applied:
        skipped_in_a_row += 1
        assert skipped_in_a_row < 20, "the scaler never found a scale without overflow"
    assert scaler.scale == 2.0 ** (24 - skipped_in_a_row)
    for _ in range(10):
        result = trainer.step(x, y)
    assert np.isfinite(result.loss) and result.applied
    assert all(np.all(np.isfinite(p.numpy())) for p in model.parameters())
    assert all(np.all(np.isfinite(l.W16.get())) for l in model.layers)


def test_without_the_skip_an_overflowing_step_would_make_the_model_nan():
    # What the scaler prevents: apply the update although the FP16 gradients hold Inf.
    d, x, y = small_batch()
    model = amp.MixedPrecisionMLP(nn.mlp([64, 32, 10], seed=0))
    optimizer = nn.SGD(model.parameters(), lr=0.1)
    scaler = amp.LossScaler(init_scale=2.0 ** 24)
    _, dlogits = amp.softmax_xent(model.forward(x), y, grad_scale=scaler.scale)
    model.backward(dlogits)
    assert scaler.unscale(model.half_grads()) is True
    optimizer.step()
    assert not all(np.all(np.isfinite(p.numpy())) for p in model.parameters())


def test_the_optimizer_must_own_the_fp32_masters():
    model = amp.MixedPrecisionMLP(nn.mlp([64, 16, 10], seed=0))
    other = nn.mlp([64, 16, 10], seed=0)
    with pytest.raises(ValueError, match="masters"):
        amp.MixedPrecisionTrainer(model, nn.SGD(other.parameters(), lr=0.1))


def test_master_weights_keep_updates_smaller_than_half_an_fp16_ulp():
    # w = 1.0, update 1e-4: FP16 alone would round 1.0 - 1e-4 back to 1.0 (ulp 2**-10 ~ 1e-3).
    dense = nn.Dense(1, 1, seed=0)
    dense.W.value.set(np.ones((1, 1), np.float32))
    layer = amp.HalfDense(dense)
    optimizer = nn.SGD(layer.parameters(), lr=1e-4)
    for _ in range(10):
        layer.W.grad.set(np.ones((1, 1), np.float32))
        layer.b.grad.set(np.zeros(1, np.float32))
        optimizer.step()
        layer.refresh_half()
    assert np.float16(1.0) - np.float16(1e-4) == np.float16(1.0)      # the update alone vanishes
    assert abs(layer.W.numpy()[0, 0] - (1.0 - 10e-4)) < 1e-6              # the master kept all ten
    assert layer.W16.get()[0, 0] == np.float16(1.0 - 10e-4)               # and the copy follows it


@pytest.mark.slow
def test_mixed_precision_accuracy_is_within_half_a_point_of_fp32_on_digits():
    d = data.load_digits(seed=0)
    sizes, epochs, batch, lr = [64, 64, 10], 12, 64, 0.1
    fp32 = nn.mlp(sizes, seed=0)
    mixed = amp.MixedPrecisionMLP(fp32)          # copies the same initial weights
    train.fit(fp32, data.DataLoader(d.x_train, d.y_train, batch, seed=0), epochs,
              nn.SGD(fp32.parameters(), lr=lr, momentum=0.9), quiet=True)
    trainer = amp.MixedPrecisionTrainer(mixed, nn.SGD(mixed.parameters(), lr=lr, momentum=0.9),
                                        amp.LossScaler(growth_interval=20))
    history = train.fit(trainer, data.DataLoader(d.x_train, d.y_train, batch, seed=0), epochs, quiet=True).loss
    acc32 = fp32.accuracy(d.x_test, d.y_test)
    acc16 = mixed.accuracy(d.x_test, d.y_test)
    assert acc32 > 0.9 and history[-1] < history[0]
    # the short growth interval makes the scale overflow now and then: those steps were skipped
    assert 0 < trainer.scaler.skipped < trainer.scaler.steps // 10
    assert abs(acc16 - acc32) <= 0.005, f"FP32 {acc32:.4f} vs mixed {acc16:.4f}"


@pytest.mark.parametrize("gemm_version", [10, 4, 3])
def test_half_mlp_gradients_match_the_float64_reference_of_its_fp16_weights(gemm_version):
    # Sizes off every GEMM tile (and rows not a multiple of 8 halves: the tensor-core GEMM's
    # element-by-element path); the reference runs on the very values the FP16 model holds.
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 1, (37, 13)).astype(np.float32)
    y = rng.integers(0, 6, 37).astype(np.int32)
    model = amp.MixedPrecisionMLP(nn.mlp([13, 21, 6], seed=3), gemm_version=gemm_version)
    assert all(layer.gemm_version == gemm_version for layer in model.layers)
    net = nn_reference.Sequential([nn_reference.Dense(l.W16.get().astype(np.float64), l.b16.get().astype(np.float64),
                                                      l.activation) for l in model.layers])
    loss_ref, grads_ref = net.loss_and_grads(x.astype(np.float16).astype(np.float64), y)

    scaler = amp.LossScaler(init_scale=1024.0)
    loss_rows, dlogits = amp.softmax_xent(model.forward(x), y, grad_scale=scaler.scale)
    model.backward(dlogits)
    assert scaler.unscale(model.half_grads()) is False
    assert abs(float(np.mean(loss_rows.get(), dtype=np.float64)) - loss_ref) < 5e-3 * abs(loss_ref)
    for param, g_ref in zip(model.parameters(), grads_ref):
        err = np.linalg.norm(param.grad.get() - g_ref) / np.linalg.norm(g_ref)
        assert err < 1e-2, f"{param.name}: relative error {err:.2e}"


def test_half_dense_gemm_paths_agree_and_a_bad_version_is_refused():
    rng = np.random.default_rng(8)
    x = rng.uniform(-1, 1, (64, 48)).astype(np.float32)     # aligned rows: the 16-byte cp.async path
    logits = {v: fp16.to_float(amp.MixedPrecisionMLP(nn.mlp([48, 40, 8], seed=5), gemm_version=v).forward(x)).get()
              for v in (10, 4, 3)}
    # the same FP16 inputs and FP32 sums, in another order: at most one FP16 rounding step apart
    assert np.allclose(logits[10], logits[3], rtol=2e-3, atol=2e-3)
    assert np.allclose(logits[4], logits[3], rtol=2e-3, atol=2e-3)
    with pytest.raises(ValueError, match="gemm_version must be one of"):
        amp.MixedPrecisionMLP(nn.mlp([4, 2], seed=0), gemm_version="tensor")
    # 6-9 multiply the plain layout only: a layer's backward pass needs both transposes
    with pytest.raises(ValueError, match="gemm_version 9 multiplies the plain layout only.*use 10"):
        amp.MixedPrecisionMLP(nn.mlp([4, 2], seed=0), gemm_version=9)


def test_every_gemm_of_the_step_runs_on_version_10_by_default(monkeypatch):
    # The forward GEMM (X W), and the backward's X^T dZ and dZ W^T: all on mma_gemm.cu's version 10 (the
    # emulator is an sm_80), in the layouts they need.
    calls = []
    matmul = fp16.matmul

    def recording(*args, **kwargs):
        calls.append((kwargs.get("version"), kwargs.get("transpose_a", False), kwargs.get("transpose_b", False)))
        return matmul(*args, **kwargs)
    monkeypatch.setattr(fp16, "matmul", recording)
    model = amp.MixedPrecisionMLP(nn.mlp([24, 16, 8], seed=2))
    assert [layer.gemm_version for layer in model.layers] == [fp16.MMA_LAYOUTS_VERSION] * 2 == [10, 10]
    rng = np.random.default_rng(9)
    _, dlogits = amp.softmax_xent(model.forward(rng.uniform(0, 1, (16, 24)).astype(np.float32)),
                                  rng.integers(0, 8, 16).astype(np.int32), grad_scale=1.0)
    model.backward(dlogits)
    assert sorted(set(calls)) == [(10, False, False), (10, False, True), (10, True, False)]


def test_bias_grad_sums_columns_in_fp32():
    rng = np.random.default_rng(8)
    dz = rng.standard_normal((300, 7)).astype(np.float16)
    got = amp.bias_grad(ga.to_gpu(dz)).get()
    exact = dz.astype(np.float64).sum(axis=0)
    assert got.dtype == np.float16
    assert np.all(np.abs(got - exact) <= 2.0 ** -10 * np.abs(exact) + 1e-3)
    # 4096 ones: an FP16 running sum would stall at 2048 (2048 + 1 rounds back to 2048)
    ones = np.ones((4096, 1), np.float16)
    assert amp.bias_grad(ga.to_gpu(ones)).get()[0] == 4096


def test_softmax_xent_loss_rows_and_bad_labels():
    rng = np.random.default_rng(9)
    logits = (3 * rng.standard_normal((20, 10))).astype(np.float16)
    labels = rng.integers(0, 10, 20).astype(np.int32)
    loss_rows, dlogits = amp.softmax_xent(ga.to_gpu(logits), labels, grad_scale=8.0)
    ref_rows, ref_grad = amp_ops.softmax_xent_reference(logits, labels, grad_scale=8.0)
    assert np.allclose(loss_rows.get(), ref_rows, rtol=1e-5, atol=1e-5)
    assert np.all(np.abs(dlogits.get() - ref_grad) <= 2.0 ** -10 * np.abs(ref_grad) + 1e-6)
    with pytest.raises(ValueError, match=r"\[0, 10\)"):
        amp.softmax_xent(ga.to_gpu(logits), np.full(20, 10, np.int32))
    with pytest.raises(TypeError, match="float16"):
        amp.softmax_xent(ga.to_gpu(logits.astype(np.float32)), labels)


def test_device_labels_outside_the_classes_are_left_out_counted_and_reported():
    rng = np.random.default_rng(4)
    logits = (3 * rng.standard_normal((6, 10))).astype(np.float16)
    labels = np.array([1, 10, 3, -1, 9, 12], np.int32)          # rows 1, 3 and 5 are not classes
    count = ga.zeros(1, np.int32)
    loss_rows, dlogits = amp.softmax_xent(ga.to_gpu(logits), ga.to_gpu(labels), grad_scale=4.0, bad_labels=count)
    assert count.get()[0] == 3
    bad = [1, 3, 5]
    assert (loss_rows.get()[bad] == 0).all() and (dlogits.get()[bad] == 0).all()
    good = [0, 2, 4]
    ref_rows, ref_grad = amp_ops.softmax_xent_reference(logits[good], labels[good], grad_scale=4.0 * 3 / 6)
    assert np.allclose(loss_rows.get()[good], ref_rows, rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="bad_labels must be a 1-element int32 GPUArray"):
        amp.softmax_xent(ga.to_gpu(logits), ga.to_gpu(labels), bad_labels=ga.zeros(2, np.int32))
    # the trainer reads the count with the loss, says what was wrong, and goes on after reset_loss()
    d, x, y = small_batch()
    model = amp.MixedPrecisionMLP(nn.mlp([64, 32, 10], seed=0))
    trainer = amp.MixedPrecisionTrainer(model, nn.SGD(model.parameters(), lr=0.1))
    wrong = y.copy()
    wrong[:5] = 10
    trainer.step(x, ga.to_gpu(wrong))
    with pytest.raises(ValueError, match=r"5 of the 64 rows since the last reset_loss\(\) had a label outside \[0, 10\)"):
        trainer.mean_loss()
    trainer.reset_loss()
    trainer.step(x, y)
    assert np.isfinite(trainer.mean_loss())


def test_a_diverged_forward_pass_is_reported_by_the_mean_loss():
    # lr 1e5 with a fixed scale: the first step's update throws the FP32 masters far past FP16's 65504, so the
    # next forward pass computes inf - inf = NaN logits (NaN inputs alone would not do: ReLU's fmaxf drops NaN)
    d, x, y = small_batch()
    model = amp.MixedPrecisionMLP(nn.mlp([64, 32, 10], seed=0))
    trainer = amp.MixedPrecisionTrainer(model, nn.SGD(model.parameters(), lr=1e5), amp.LossScaler(1.0, dynamic=False))
    trainer.step(x, y)
    assert np.isfinite(trainer.mean_loss())
    trainer.reset_loss()
    trainer.step(x, y)
    with pytest.raises(ValueError, match=r"the loss since the last reset_loss\(\) is nan: the forward pass gave NaN"):
        trainer.mean_loss()


def test_without_master_weights_small_updates_are_lost():
    # The ablation: weights re-rounded to FP16 after every step.  With a tiny learning rate most
    # updates fall below half an FP16 gap: without the FP32 masters they are lost, with them they
    # accumulate until the FP16 copy moves.
    d, x, y = small_batch()
    moved = {}
    for master in (True, False):
        model = amp.MixedPrecisionMLP(nn.mlp([64, 32, 10], seed=0))
        trainer = amp.MixedPrecisionTrainer(model, nn.SGD(model.parameters(), lr=1e-4),
                                            amp.LossScaler(1024.0, dynamic=False), master_weights=master)
        start = [l.W16.get() for l in model.layers]
        for _ in range(20):
            trainer.step(x, y)
        moved[master] = [np.mean(l.W16.get() != w) for l, w in zip(model.layers, start)]
        if not master:   # the masters hold exactly the FP16 values
            assert all(np.array_equal(l.W.numpy(), l.W16.get().astype(np.float32)) for l in model.layers)
    assert min(moved[True]) > 0.1                            # ~20% of the FP16 weights moved
    assert max(moved[False]) < 0.25 * min(moved[True])      # ~2%: most updates were rounded away
