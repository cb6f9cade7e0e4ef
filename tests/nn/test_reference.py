"""The NumPy reference's analytic gradients against central finite differences, in float64."""
import numpy as np
import pytest

from gpuedu.nn import reference as ref

ACTS = [None, "relu", "sigmoid", "tanh", "gelu"]


def small_net(activation, seed=0):
    rng = np.random.default_rng(seed)
    layers = [ref.Dense(rng.standard_normal((5, 7)) * 0.5, rng.standard_normal(7) * 0.1, activation),
              ref.Dense(rng.standard_normal((7, 4)) * 0.5, rng.standard_normal(4) * 0.1, None)]
    x = rng.standard_normal((6, 5))
    y = rng.integers(0, 4, 6)
    return ref.Sequential(layers), x, y


@pytest.mark.parametrize("activation", ACTS)
def test_dense_gradients_match_finite_differences(activation):
    net, x, y = small_net(activation)
    _, grads = net.loss_and_grads(x, y)
    grads = [g.copy() for g in grads]
    for param, grad in zip(net.parameters(), grads):
        numeric = ref.numerical_gradient(lambda: net.loss(x, y), param)
        assert ref.relative_error(grad, numeric) < 1e-4


@pytest.mark.parametrize("activation", ["relu", "sigmoid", "tanh", "gelu"])
def test_standalone_activation_gradient(activation):
    rng = np.random.default_rng(1)
    layer = ref.Activation(activation)
    x = rng.standard_normal((4, 6))
    w = rng.standard_normal((4, 6))          # L = sum(w * act(x)), so dL/dy = w
    layer.forward(x)
    analytic = layer.backward(w)
    numeric = ref.numerical_gradient(lambda: float((w * ref.act_forward(activation, x)).sum()), x)
    assert ref.relative_error(analytic, numeric) < 1e-4


def test_softmax_cross_entropy_gradient_and_stability():
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((5, 3))
    labels = np.array([0, 2, 1, 1, 0])
    loss, grad = ref.softmax_cross_entropy(logits, labels)
    numeric = ref.numerical_gradient(lambda: ref.softmax_cross_entropy(logits, labels)[0], logits)
    assert ref.relative_error(grad, numeric) < 1e-4
    # Shifting every logit of a row by a constant changes nothing, even by 1000 (naive exp overflows).
    loss_shifted, _ = ref.softmax_cross_entropy(logits + 1000.0, labels)
    assert np.isfinite(loss_shifted) and abs(loss_shifted - loss) < 1e-9


def test_relative_error_detects_a_wrong_gradient():
    net, x, y = small_net("tanh")
    _, grads = net.loss_and_grads(x, y)
    numeric = ref.numerical_gradient(lambda: net.loss(x, y), net.parameters()[0])
    assert ref.relative_error(grads[0] * 1.01, numeric) > 1e-3
