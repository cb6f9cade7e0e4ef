"""Device layers against the NumPy float64 reference: values, gradients, updates, and bad input."""
import numpy as np
import pytest

import gpuedu
from gpuedu import nn
from gpuedu.nn import reference as ref

backend = gpuedu.setup(verbose=False)
ga = backend.gpuarray

ACTS = [None, "relu", "sigmoid", "tanh", "gelu"]


def batch(rows=9, features=13, classes=6, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, features)).astype(np.float32),
            rng.integers(0, classes, rows).astype(np.int32))


def device_grads(model, x, y):
    loss = nn.SoftmaxCrossEntropy()
    dlogits = loss(model.forward(x), y)
    model.backward(dlogits)
    return loss.result()[0], [p.grad.get() for p in model.parameters()]


# Sizes that are not multiples of the 16-wide tile, so every edge guard is exercised.
@pytest.mark.parametrize("activation", ACTS)
def test_dense_mlp_gradients(activation):
    x, y = batch()
    model = nn.mlp([13, 21, 6], activation=activation, seed=1)
    net = ref.Sequential.from_model(model)
    x64 = x.astype(np.float64)
    # 1) the reference's analytic gradients against float64 finite differences
    ref_loss, ref_grads = net.loss_and_grads(x64, y)
    ref_grads = [g.copy() for g in ref_grads]
    for param, grad in zip(net.parameters(), ref_grads):
        numeric = ref.numerical_gradient(lambda: net.loss(x64, y), param)
        assert ref.relative_error(grad, numeric) < 1e-4
    # 2) the device's float32 gradients against the reference's analytic ones
    dev_loss, dev_grads = device_grads(model, x, y)
    assert abs(dev_loss - ref_loss) < 1e-5 * max(1.0, abs(ref_loss))
    for p, d, r in zip(model.parameters(), dev_grads, ref_grads):
        assert d.shape == r.shape, p.name
        assert ref.relative_error(d, r) < 1e-5, p.name


@pytest.mark.parametrize("layer_class", [nn.ReLU, nn.Sigmoid, nn.Tanh, nn.GELU])
def test_standalone_activation_layers(layer_class):
    x, y = batch(rows=7, features=5, classes=4, seed=2)
    model = nn.Sequential(nn.Dense(5, 18, seed=3), layer_class(), nn.Dense(18, 4, seed=4))
    net = ref.Sequential.from_model(model)
    ref_loss, ref_grads = net.loss_and_grads(x.astype(np.float64), y)
    dev_loss, dev_grads = device_grads(model, x, y)
    assert abs(dev_loss - ref_loss) < 1e-5 * max(1.0, abs(ref_loss))
    for d, r in zip(dev_grads, ref_grads):
        assert ref.relative_error(d, r) < 1e-5


def test_forward_matches_reference_on_a_large_batch():
    x, _ = batch(rows=300, features=64, seed=5)
    model = nn.mlp([64, 40, 10], activation="tanh", seed=6)
    out = model.forward(x).get()
    np.testing.assert_allclose(out, ref.Sequential.from_model(model).forward(x.astype(np.float64)),
                               rtol=1e-4, atol=1e-5)


def test_softmax_cross_entropy_is_stable_and_counts_correct_rows():
    logits = np.array([[1000.0, 0.0, -1000.0], [0.0, 3.0, 1.0], [5.0, 5.0, 1.0]], np.float32)
    labels = np.array([0, 2, 1], np.int32)
    loss = nn.SoftmaxCrossEntropy()
    grad = loss(ga.to_gpu(logits), labels).get()
    ref_loss, ref_grad = ref.softmax_cross_entropy(logits.astype(np.float64), labels)
    mean, accuracy = loss.result()
    assert np.isfinite(mean) and abs(mean - ref_loss) < 1e-4
    assert accuracy == pytest.approx(1 / 3)       # row 0 right; row 1 wrong; row 2 a tie -> class 0, wrong
    np.testing.assert_allclose(grad, ref_grad, atol=1e-6)
    loss(ga.to_gpu(logits), labels)                # accumulates until reset
    assert loss.rows == 6 and loss.result()[0] == pytest.approx(mean, rel=1e-6)
    loss.reset()
    with pytest.raises(RuntimeError, match="no batch"):
        loss.result()


def test_sgd_momentum_and_adam_match_numpy():
    rng = np.random.default_rng(7)
    w0, g = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    for opt_class, kwargs in ((nn.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
                              (nn.Adam, dict(lr=0.01, weight_decay=0.0))):
        p = nn.Parameter("w", w0)
        p.grad.set(g.astype(np.float32))
        opt = opt_class([p], **kwargs)
        opt.step()
        opt.step()
        w, v, m, s = w0.copy(), np.zeros_like(w0), np.zeros_like(w0), np.zeros_like(w0)
        for t in (1, 2):
            if opt_class is nn.SGD:
                v = 0.9 * v + g + 0.01 * w
                w = w - 0.1 * v
            else:
                m = 0.9 * m + 0.1 * g
                s = 0.999 * s + 0.001 * g * g
                w = w - 0.01 * (m / (1 - 0.9 ** t)) / (np.sqrt(s / (1 - 0.999 ** t)) + 1e-8)
        np.testing.assert_allclose(p.numpy(), w, rtol=1e-5, atol=1e-6)


def test_plain_sgd_is_the_update_rule():
    p = nn.Parameter("w", np.ones(4))
    p.grad.set(np.array([1, 2, 3, 4], np.float32))
    nn.SGD([p], lr=0.5).step()
    assert p.numpy().tolist() == [0.5, 0.0, -0.5, -1.0]


def test_predict_and_accuracy():
    x, _ = batch(rows=50, features=8, seed=8)
    model = nn.mlp([8, 16, 3], seed=9)
    logits = ref.Sequential.from_model(model).forward(x.astype(np.float64))
    pred = model.predict(x)
    assert pred.dtype == np.int32 and np.array_equal(pred, logits.argmax(axis=1))
    assert model.accuracy(x, pred) == 1.0
    assert model.accuracy(x, (pred + 1) % 3) == 0.0


def test_initialisers_are_seeded_and_scaled():
    a = nn.init.he_normal(400, 300, seed=1)
    assert np.array_equal(a, nn.init.he_normal(400, 300, seed=1))
    assert a.std() == pytest.approx(np.sqrt(2 / 400), rel=0.02)
    b = nn.init.xavier_uniform(400, 300, seed=1)
    limit = np.sqrt(6 / 700)
    assert np.abs(b).max() <= limit and b.std() == pytest.approx(limit / np.sqrt(3), rel=0.02)
    assert nn.Dense(4, 3, activation="relu").W.numpy().std() != nn.Dense(4, 3, activation="tanh").W.numpy().std()


# ---- bad input --------------------------------------------------------------------------------
def test_shapes_that_do_not_chain_fail_at_construction():
    with pytest.raises(ValueError, match="takes 20 features but"):
        nn.Sequential(nn.Dense(10, 30), nn.ReLU(), nn.Dense(20, 5))
    with pytest.raises(TypeError, match="not a layer"):
        nn.Sequential(nn.Dense(3, 4), "relu")
    with pytest.raises(ValueError, match="positive integer"):
        nn.Dense(0, 4)
    with pytest.raises(ValueError, match="unknown activation"):
        nn.Dense(3, 4, activation="swish")
    with pytest.raises(ValueError, match="at least an input"):
        nn.mlp([5])


def test_bad_batches_fail_at_forward_with_a_clear_message():
    model = nn.mlp([4, 8, 3])
    good = np.ones((5, 4), np.float32)
    with pytest.raises(ValueError, match="has 5 features per row, the model expects 4"):
        model.forward(np.ones((2, 5), np.float32))
    with pytest.raises(TypeError, match="astype"):
        model.forward(good.astype(np.float64))
    with pytest.raises(ValueError, match="C-contiguous"):
        model.forward(np.ones((4, 5), np.float32).T)
    bad = good.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="row 3"):
        model.forward(bad)
    with pytest.raises(ValueError, match="no rows"):
        model.forward(np.ones((0, 4), np.float32))
    with pytest.raises(ValueError, match="2-D"):
        model.forward(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="features per row, the layer expects 4"):
        model.forward(ga.to_gpu(np.ones((2, 6), np.float32)))
    with pytest.raises(TypeError, match="dtype float64"):
        model.forward(ga.to_gpu(np.ones((2, 4))))
    assert model.forward(good).shape == (5, 3)         # and the process carries on


def test_bad_labels_and_optimizer_arguments():
    loss = nn.SoftmaxCrossEntropy()
    logits = ga.to_gpu(np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        loss(logits, np.array([0, 4, 1], np.int32))
    with pytest.raises(TypeError, match="int32"):
        loss(logits, np.array([0, 1, 1]))
    with pytest.raises(ValueError, match="3 rows"):
        loss(logits, np.array([0, 1], np.int32))
    with pytest.raises(ValueError, match="learning rate"):
        nn.SGD(nn.mlp([2, 2]).parameters(), lr=-1)
    with pytest.raises(ValueError, match="no parameters"):
        nn.Adam([], lr=0.1)
    with pytest.raises(RuntimeError, match="before forward"):
        nn.Dense(2, 2).backward(logits)


def test_labels_on_the_device_outside_the_classes_are_left_out_and_reported_with_the_metrics():
    loss = nn.SoftmaxCrossEntropy()
    logits = ga.to_gpu(np.zeros((4, 3), np.float32))
    dlogits = loss(logits, ga.to_gpu(np.array([0, 3, 2, -1], np.int32)))   # checked on the device only
    grad = dlogits.get()
    assert (grad[1] == 0).all() and (grad[3] == 0).all() and grad[0, 0] < 0 and grad[2, 2] < 0
    with pytest.raises(ValueError, match=r"2 of the 4 rows .* label outside \[0, 3\).*reset\(\) to go on"):
        loss.result()
    loss.reset()
    loss(logits, ga.to_gpu(np.array([0, 1, 2, 1], np.int32)))
    assert loss.result()[0] == pytest.approx(np.log(3), rel=1e-6)    # and the loss carries on


def test_logits_that_are_nan_on_the_device_are_reported_with_the_metrics():
    loss = nn.SoftmaxCrossEntropy()
    logits = np.zeros((3, 4), np.float32)
    logits[1, 2] = np.nan
    loss(ga.to_gpu(logits), ga.to_gpu(np.array([0, 1, 2], np.int32)))
    with pytest.raises(ValueError, match="logits of 1 of the 3 rows .* NaN or infinite.*lower the learning rate"):
        loss.result()


def test_on_a_stream_the_results_are_the_same():
    x, y = batch(rows=11, features=9, classes=5, seed=10)
    plain = nn.mlp([9, 17, 5], activation="gelu", seed=2)
    streamed = nn.mlp([9, 17, 5], activation="gelu", seed=2)
    stream = backend.driver.Stream()
    streamed.stream = stream
    assert all(layer.stream is stream for layer in streamed.layers)
    loss_a, grads_a = device_grads(plain, x, y)
    loss_b, grads_b = device_grads(streamed, x, y)
    stream.synchronize()
    assert loss_a == loss_b and all(np.array_equal(a, b) for a, b in zip(grads_a, grads_b))


def test_forward_returns_the_layers_buffer_reused_for_the_same_batch_size():
    model = nn.mlp([3, 4], seed=0)
    first = model.forward(np.ones((2, 3), np.float32))
    kept = first.get()
    second = model.forward(np.zeros((2, 3), np.float32))
    assert second is first and not np.array_equal(second.get(), kept)
    assert model.forward(np.ones((5, 3), np.float32)) is not first


# ---- the warp-tiled GEMMs of nn_dense.cu: every tile, every layout, split K, ragged shapes --------

from gpuedu.ops import dense as _dense  # noqa: E402

TILES = _dense.GEMM_TILES + (_dense.NARROW_TILE,)
# (rows, in, out): 1s, sizes that are no multiple of any tile or of 4 (scalar loads), K < 16, and
# multiples of 4 with partial tiles (float4 loads with guarded edges); K = 100 and 70 split unevenly.
DENSE_SHAPES = [(1, 1, 1), (37, 50, 70), (19, 7, 10), (130, 36, 24), (66, 129, 3), (40, 100, 33)]


def _dense_step_numpy(x, W, b, dy, activation):
    """Forward and backward of one dense layer in float64 (the values the kernels must reproduce)."""
    x64, W64 = x.astype(np.float64), W.astype(np.float64)
    z = x64 @ W64 + b.astype(np.float64)
    y = ref.act_forward(activation, z)
    dz = dy.astype(np.float64) * ref.act_derivative(activation, z, y)
    return y, x64.T @ dz, dz.sum(axis=0), dz @ W64.T


def _dense_step_device(layer, x, dy):
    y = layer.forward(ga.to_gpu(x)).get()
    dx = layer.backward(ga.to_gpu(dy)).get()
    return y, layer.W.grad.get(), layer.b.grad.get(), dx


def _force_plan(monkeypatch, tile, splits):
    """Every GEMM of the layers runs with this tile and (at most, K allowing) this many K splits."""
    monkeypatch.setattr(_dense, "gemm_plan", lambda M, N, K: (tile, splits))


@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("tile", TILES, ids=[t[0] for t in TILES])
@pytest.mark.parametrize("activation", ACTS)
def test_dense_forward_and_backward_against_float64(monkeypatch, tile, splits, activation):
    _force_plan(monkeypatch, tile, splits)
    rng = np.random.default_rng(11)
    for rows, n_in, n_out in DENSE_SHAPES:
        layer = nn.Dense(n_in, n_out, activation=activation, seed=3)
        layer.b.value.set(rng.standard_normal(n_out).astype(np.float32))
        x = rng.standard_normal((rows, n_in)).astype(np.float32)
        dy = rng.standard_normal((rows, n_out)).astype(np.float32)
        got = _dense_step_device(layer, x, dy)
        want = _dense_step_numpy(x, layer.W.numpy(), layer.b.numpy(), dy, activation)
        for name, g, w in zip(("Y", "dW", "db", "dX"), got, want):
            assert g.shape == w.shape, name
            scale = 1e-5 * (1 + max(n_in, n_out, rows))
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=scale, err_msg=f"{name} tile={tile[0]} "
                                       f"splits={splits} act={activation} shape={rows, n_in, n_out}")


def test_every_tile_gives_the_same_bits_and_a_split_the_same_bits_every_run(monkeypatch):
    """Unsplit, each output sums in ascending k into one register whatever the tile: the tile is
    invisible. Split, the pieces are added in a fixed order: run twice, the same bits."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal((45, 68)).astype(np.float32)
    dy = rng.standard_normal((45, 36)).astype(np.float32)

    def step(tile, splits):
        _force_plan(monkeypatch, tile, splits)
        return _dense_step_device(nn.Dense(68, 36, activation="gelu", seed=5), x, dy)
    unsplit = [step(tile, 1) for tile in TILES]
    for other in unsplit[1:]:
        for a, b in zip(unsplit[0], other):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(step(TILES[1], 4), step(TILES[1], 4)):
        np.testing.assert_array_equal(a, b)


def test_bias_gradient_is_deterministic_and_sums_every_chunk():
    # 100 rows = 3 full chunks of 32 and a short one; two backward passes must agree bit for bit.
    rng = np.random.default_rng(13)
    layer = nn.Dense(20, 33, activation="relu", seed=2)
    x = rng.standard_normal((100, 20)).astype(np.float32)
    dy = rng.standard_normal((100, 33)).astype(np.float32)
    first = _dense_step_device(layer, x, dy)[2]
    second = _dense_step_device(layer, x, dy)[2]
    np.testing.assert_array_equal(first, second)
    want = _dense_step_numpy(x, layer.W.numpy(), layer.b.numpy(), dy, "relu")[2]
    np.testing.assert_allclose(first, want, rtol=1e-5, atol=1e-5)


def test_gemm_plan_fills_the_gpu_and_fits_narrow_outputs():
    def plan(M, N, K):
        tile, splits = _dense.gemm_plan(M, N, K)
        return tile[0], splits
    # the MLP 784-1024-1024-10 at batch 4096: forward, then dW = X^T dZ (K = batch)
    assert plan(4096, 1024, 784) == ("128x128", 1)     # 256 big blocks fill 132 SMs
    assert plan(1024, 1024, 4096) == ("128x128", 3)    # 64 big blocks, K = 4096 split in 3
    assert plan(4096, 10, 1024) == ("64x16", 3)        # 10 logits: not a 128-wide tile
    # batch 128: small outputs, long K
    assert plan(128, 1024, 1024) == ("64x64", 5)       # 32 blocks x 5 pieces of K
    assert plan(128, 10, 1024) == ("64x16", 16)        # 2 blocks: the most splits
    assert plan(784, 1024, 128) == ("64x64", 1)        # 208 blocks; K = 128 is too short to split
    assert plan(1, 1, 1) == ("64x16", 1)
    for M, N, K in [(4096, 1024, 784), (128, 10, 1024), (100, 37, 1000), (7, 300, 33)]:
        tile, splits = _dense.gemm_plan(M, N, K)
        k_split, pieces = _dense._split_k(K, splits)
        assert k_split % _dense.SLAB == 0 and (pieces - 1) * k_split < K <= pieces * k_split


def test_dense_forward_runs_a_named_tile_unsplit_with_the_plans_bits():
    """tile= runs one of the GEMM tiles whatever gemm_plan would pick (the profiler counts the kernel a large
    layer uses at a size the emulator affords): unsplit, each output is the same ascending sum, so the same bits."""
    rng = np.random.default_rng(14)
    x = ga.to_gpu(rng.standard_normal((40, 70)).astype(np.float32))
    w = ga.to_gpu(rng.standard_normal((70, 33)).astype(np.float32))
    b = ga.to_gpu(rng.standard_normal(33).astype(np.float32))
    relu = _dense.activation_code("relu")
    outputs = {}
    for tile in [None] + [t[0] for t in _dense.GEMM_TILES]:
        y, z = ga.empty((40, 33), np.float32), ga.empty((40, 33), np.float32)
        with gpuedu.profile() as prof:
            _dense.dense_forward(y, z, x, w, b, relu, _dense.Scratch(), tile=tile)
        if tile is not None:
            (launch,) = prof.kernels                              # one launch: K is not split
            assert launch.name == f"dense_forward_{tile}"
        outputs[tile] = y.get()
    want = np.maximum(x.get().astype(np.float64) @ w.get() + b.get(), 0)
    np.testing.assert_allclose(outputs[None], want, rtol=1e-4, atol=1e-4)
    for tile, got in outputs.items():
        np.testing.assert_array_equal(got, outputs[None], err_msg=str(tile))
    with pytest.raises(ValueError, match="tile must be one of '128x128', '64x64', '32x32'"):
        _dense.dense_forward(y, z, x, w, b, relu, _dense.Scratch(), tile="16x16")
