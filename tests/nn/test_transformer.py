"""SelfAttention and LayerNorm (gpuedu.nn.transformer) against their float64 twins in gpuedu.nn.reference, whose
analytic gradients are first checked against finite differences; and the errors for bad input."""
import numpy as np
import pytest

import gpuedu
from gpuedu import nn
from gpuedu.nn import reference as ref

backend = gpuedu.setup(verbose=False)
ga = backend.gpuarray


def randn(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def check_reference_against_finite_differences(net, x, r):
    """The reference's analytic gradients of sum(forward(x) * r), for every parameter and the input, against
    central differences in float64."""
    x = x.astype(np.float64)
    r = r.astype(np.float64)
    net.forward(x)
    dx = net.backward(r)
    analytic = [g.copy() for g in net.grads()] + [dx]
    for value, grad in zip(net.parameters() + [x], analytic):
        numeric = ref.numerical_gradient(lambda: float((net.forward(x) * r).sum()), value)
        assert ref.relative_error(grad, numeric) < 1e-6


def device_against_reference(layer, net, x, r, tol=1e-5):
    y = layer.forward(ga.to_gpu(x)).get()
    want = net.forward(x.astype(np.float64))
    assert ref.relative_error(y, want) < tol
    dx = layer.backward(ga.to_gpu(r)).get()
    want_dx = net.backward(r.astype(np.float64))
    assert ref.relative_error(dx, want_dx) < tol
    for p, g in zip(layer.parameters(), net.grads()):
        assert p.grad.shape == g.shape, p.name
        assert ref.relative_error(p.grad.get(), g) < tol, p.name


# ---- SelfAttention --------------------------------------------------------------------------------------

def test_self_attention_has_its_four_projections():
    layer = nn.SelfAttention(12, 3, seed=2)
    params = layer.parameters()
    assert [p.name.split(".")[-1] for p in params] == ["Wq", "Wk", "Wv", "Wo"]
    assert all(p.shape == (12, 12) for p in params)
    assert layer.head_dim == 4 and layer.causal is True
    values = [p.numpy() for p in params]
    assert all(not np.array_equal(a, b) for i, a in enumerate(values) for b in values[i + 1:])
    again = nn.SelfAttention(12, 3, seed=2)
    assert all(np.array_equal(a, p.numpy()) for a, p in zip(values, again.parameters()))


@pytest.mark.parametrize("causal", [True, False])
def test_self_attention_reference_gradients_are_finite_differences(causal):
    layer = nn.SelfAttention(6, 2, causal=causal, seed=3)
    net = ref.SelfAttention.from_layer(layer)
    check_reference_against_finite_differences(net, randn(2, 5, 6, seed=4), randn(2, 5, 6, seed=5))


# (batch, seq, d_model, heads): seq below and above the kernels' 64-row tiles, one head and several
@pytest.mark.parametrize("shape", [(2, 7, 12, 3), (1, 70, 8, 1), (3, 5, 20, 4)])
@pytest.mark.parametrize("causal", [True, False])
def test_self_attention_matches_the_reference(shape, causal):
    batch, seq, d_model, heads = shape
    layer = nn.SelfAttention(d_model, heads, causal=causal, seed=6)
    net = ref.SelfAttention.from_layer(layer)
    device_against_reference(layer, net, randn(batch, seq, d_model, seed=7), randn(batch, seq, d_model, seed=8))


def test_self_attention_causal_output_ignores_later_positions():
    layer = nn.SelfAttention(8, 2, causal=True, seed=9)
    x = randn(1, 10, 8, seed=10)
    first = layer.forward(x).get()
    x[:, 6:] += 3.0
    second = layer.forward(x).get()
    np.testing.assert_array_equal(first[:, :6], second[:, :6])
    assert np.abs(first[:, 6:] - second[:, 6:]).max() > 1e-3


def test_self_attention_without_the_input_gradient_still_fills_the_weight_gradients():
    layer = nn.SelfAttention(8, 2, seed=11)
    net = ref.SelfAttention.from_layer(layer)
    x, r = randn(2, 6, 8, seed=12), randn(2, 6, 8, seed=13)
    layer.forward(x)
    assert layer.backward(ga.to_gpu(r), need_input_grad=False) is None
    net.forward(x.astype(np.float64))
    net.backward(r.astype(np.float64))
    for p, g in zip(layer.parameters(), net.grads()):
        assert ref.relative_error(p.grad.get(), g) < 1e-5


def test_self_attention_bad_input_gets_a_clear_error():
    with pytest.raises(ValueError, match="not divisible by n_heads=5"):
        nn.SelfAttention(12, 5)
    with pytest.raises(ValueError, match="d_model must be a positive integer"):
        nn.SelfAttention(0, 1)
    with pytest.raises(ValueError, match="at most 64"):
        nn.SelfAttention(130, 2)
    layer = nn.SelfAttention(8, 2)
    with pytest.raises(ValueError, match=r"3-D \[batch, seq, d_model\]"):
        layer.forward(randn(4, 8))
    with pytest.raises(ValueError, match="expects d_model=8"):
        layer.forward(randn(1, 4, 6))
    with pytest.raises(TypeError, match="float32"):
        layer.forward(randn(1, 4, 8).astype(np.float64))
    with pytest.raises(TypeError, match="GPUArray or a NumPy array"):
        layer.forward([[[0.0] * 8]])
    with pytest.raises(RuntimeError, match="before forward"):
        layer.backward(ga.to_gpu(randn(1, 4, 8)))
    layer.forward(randn(1, 4, 8))
    with pytest.raises(ValueError, match=r"last forward produced \(1, 4, 8\)"):
        layer.backward(ga.to_gpu(randn(1, 5, 8)))


# ---- LayerNorm ------------------------------------------------------------------------------------------

def set_affine(layer, seed):
    layer.gamma.value.set(randn(layer.features, seed=seed))
    layer.beta.value.set(randn(layer.features, seed=seed + 1))


def test_layer_norm_reference_gradients_are_finite_differences():
    layer = nn.LayerNorm(7)
    set_affine(layer, 14)
    net = ref.LayerNorm.from_layer(layer)
    check_reference_against_finite_differences(net, randn(3, 2, 7, seed=16), randn(3, 2, 7, seed=17))


# rows more than one chunk of the parameter gradients' sums (32 rows), features below and above a warp
@pytest.mark.parametrize("shape", [(2, 5, 7), (3, 40, 33), (70, 100)])
def test_layer_norm_matches_the_reference(shape):
    layer = nn.LayerNorm(shape[-1], eps=1e-3)
    set_affine(layer, 18)
    net = ref.LayerNorm.from_layer(layer)
    assert net.eps == 1e-3
    device_against_reference(layer, net, randn(*shape, seed=20, scale=3.0) + 5.0, randn(*shape, seed=21))


def test_layer_norm_starts_as_the_plain_normalisation_and_is_deterministic():
    layer = nn.LayerNorm(16)
    assert [p.name for p in layer.parameters()] == ["layernorm.gamma", "layernorm.beta"]
    x = randn(50, 16, seed=22, scale=4.0) + 100.0       # a large mean: the variance must not cancel
    y = layer.forward(x).get()
    np.testing.assert_allclose(y.mean(axis=1), 0.0, atol=1e-5)
    np.testing.assert_allclose(y.std(axis=1), 1.0, rtol=1e-3)
    r = ga.to_gpu(randn(50, 16, seed=23))
    first = [layer.backward(r).get(), layer.gamma.grad.get(), layer.beta.grad.get()]
    second = [layer.backward(r).get(), layer.gamma.grad.get(), layer.beta.grad.get()]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


def test_layer_norm_bad_input_gets_a_clear_error():
    with pytest.raises(ValueError, match="features must be a positive integer"):
        nn.LayerNorm(0)
    with pytest.raises(ValueError, match="eps must be a positive number"):
        nn.LayerNorm(4, eps=0)
    layer = nn.LayerNorm(4)
    with pytest.raises(ValueError, match=r"must be \[\.\.\., 4\]"):
        layer.forward(randn(3, 5))
    with pytest.raises(ValueError, match="at least 2-D"):
        layer.forward(randn(4))
    with pytest.raises(TypeError, match="float32"):
        layer.forward(randn(3, 4).astype(np.float16))
    layer.forward(randn(3, 4))
    with pytest.raises(ValueError, match="last forward produced"):
        layer.backward(ga.to_gpu(randn(2, 4)))


# ---- the transformer block and a small character model ---------------------------------------------------

def test_transformer_block_reference_gradients_are_finite_differences():
    block = nn.TransformerBlock(6, 2, d_hidden=10, seed=24)
    net = ref.TransformerBlock.from_layer(block)
    check_reference_against_finite_differences(net, randn(2, 4, 6, seed=25), randn(2, 4, 6, seed=26))


@pytest.mark.parametrize("shape", [(2, 7, 12, 3), (1, 66, 8, 2)])
def test_transformer_block_matches_the_reference(shape):
    batch, seq, d_model, heads = shape
    block = nn.TransformerBlock(d_model, heads, seed=27)
    assert len(block.parameters()) == 2 + 4 + 2 + 2 + 2
    set_affine(block.norm1, 28)
    set_affine(block.norm2, 30)
    net = ref.TransformerBlock.from_layer(block)
    device_against_reference(block, net, randn(batch, seq, d_model, seed=32), randn(batch, seq, d_model, seed=33))


def test_char_transformer_one_hot_and_bad_tokens():
    model = nn.CharTransformer(vocab_size=5, seq_len=4, d_model=8, n_heads=2)
    x = model.one_hot(np.array([[1, 4, 0]], np.int32))
    assert x.shape == (3, 5 + 4)
    np.testing.assert_array_equal(x.argmax(axis=1), [1, 4, 0])                 # the token
    np.testing.assert_array_equal(x[:, 5:].argmax(axis=1), [0, 1, 2])          # its position
    assert (x.sum(axis=1) == 2).all()
    with pytest.raises(ValueError, match=r"tokens must be in \[0, 5\)"):
        model.forward(np.array([[1, 5]], np.int32))
    with pytest.raises(ValueError, match="seq_len=4"):
        model.forward(np.zeros((1, 5), np.int32))
    with pytest.raises(TypeError, match="integer array"):
        model.forward(np.zeros((1, 3), np.float32))
    with pytest.raises(RuntimeError, match="before forward"):
        nn.CharTransformer(5, 4, d_model=8).backward(None)


def test_char_transformer_learns_the_words_well_below_the_unigram_baseline():
    from gpuedu import data
    task = data.char_task(seq_len=32, train=512, test=128, seed=0)
    baseline = data.unigram_loss(task.y_train, task.y_test, task.vocab_size)
    model = nn.CharTransformer(task.vocab_size, 32, d_model=32, n_heads=2, n_blocks=1, seed=0)
    optimizer = nn.Adam(model.parameters(), lr=3e-3)
    loss = nn.SoftmaxCrossEntropy()
    rng = np.random.default_rng(0)
    for _ in range(150):
        rows = rng.integers(0, len(task.x_train), 16)
        model.backward(loss(model.forward(task.x_train[rows]), task.y_train[rows].reshape(-1)))
        optimizer.step()
    test = nn.SoftmaxCrossEntropy()
    for i in range(0, len(task.x_test), 32):
        test(model.forward(task.x_test[i:i + 32]), task.y_test[i:i + 32].reshape(-1))
    test_loss, _ = test.result()
    # The best model that sees only the previous character (add-one smoothed bigram counts): beating it
    # means the model reads further back, which only attention lets it do.
    counts = np.ones((task.vocab_size, task.vocab_size))
    np.add.at(counts, (task.x_train.reshape(-1), task.y_train.reshape(-1)), 1.0)
    bigram = -np.log((counts / counts.sum(axis=1, keepdims=True))[task.x_test.reshape(-1), task.y_test.reshape(-1)])
    assert 2.0 < baseline < 3.0 and bigram.mean() < baseline
    assert test_loss < 0.5 * baseline, (test_loss, baseline)
    assert test_loss < 0.9 * bigram.mean(), (test_loss, bigram.mean())
