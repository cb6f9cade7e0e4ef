"""The NumPy references: checked against independent definitions, since every kernel test trusts them."""
import math

import numpy as np
import pytest

from gpuedu import reference as ref

rng = np.random.default_rng(0)
X = rng.standard_normal(1000).astype(np.float32) * 4


def test_activations_match_scalar_definitions():
    scalar = {
        "relu": lambda v: max(v, 0.0),
        "leaky_relu": lambda v: v if v > 0 else 0.01 * v,
        "sigmoid": lambda v: 1 / (1 + math.exp(-v)),
        "tanh": math.tanh,
        "silu": lambda v: v / (1 + math.exp(-v)),
        "elu": lambda v: v if v > 0 else math.exp(v) - 1,
        # the exact GELU, x * Phi(x); the reference is the tanh approximation, within 1e-3 of it
        "gelu": lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))),
    }
    for name in ref.ACTIVATIONS:
        got = ref.activation(X, name)
        assert got.dtype == np.float32 and got.shape == X.shape
        want = np.array([scalar[name](float(v)) for v in X])
        tol = 1e-3 if name == "gelu" else 1e-6
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)


def test_alpha_is_passed_through():
    np.testing.assert_allclose(ref.activation(X, "leaky_relu", 0.2), np.where(X > 0, X, 0.2 * X), rtol=1e-6)
    assert ref.activation(np.float32([-50.0]), "elu", 2.0)[0] == pytest.approx(-2.0)


def test_unknown_activation():
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        ref.activation(X, "swish")


def test_reduce_sum_is_exact_enough():
    x = rng.standard_normal(100_001).astype(np.float32)
    assert ref.reduce_sum(x) == pytest.approx(math.fsum(map(float, x)), abs=1e-9)


def test_sum_tolerance_bounds_a_float32_pairwise_sum_but_not_gross_errors():
    x = (rng.random(1 << 16).astype(np.float32) + 1.0)
    exact = ref.reduce_sum(x)
    tol = ref.sum_tolerance(x)
    assert abs(float(np.sum(x, dtype=np.float32)) - exact) <= tol
    # dropping one element (an off-by-one in a kernel) is far outside the tolerance
    assert abs(exact - ref.reduce_sum(x[:-1])) > tol


def test_softmax_rows_sum_to_one_and_ignore_shifts():
    x = rng.standard_normal((7, 33)).astype(np.float32)
    s = ref.softmax_rows(x)
    np.testing.assert_allclose(s.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(ref.softmax_rows(x.astype(np.float64) + 1000.0), s, rtol=1e-6)   # no overflow
    assert np.all(np.argmax(s, axis=1) == np.argmax(x, axis=1))
    with pytest.raises(ValueError, match="2-D"):
        ref.softmax_rows(x[0])


def test_matmul_and_transpose():
    a = rng.standard_normal((5, 3)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    want = [[sum(float(a[i, k]) * float(b[k, j]) for k in range(3)) for j in range(4)] for i in range(5)]
    np.testing.assert_allclose(ref.matmul(a, b), want, rtol=1e-6)
    t = ref.transpose(a)
    assert t.flags.c_contiguous and t.shape == (3, 5) and t[2, 4] == a[4, 2]


def test_histogram():
    x = rng.integers(0, 10, 500)
    h = ref.histogram(x, 10)
    assert h.dtype == np.int32 and h.sum() == 500
    assert all(h[b] == np.count_nonzero(x == b) for b in range(10))
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        ref.histogram(x, 5)
