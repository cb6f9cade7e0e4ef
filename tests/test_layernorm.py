"""nn_layernorm.cu's launchers (gpuedu.ops.layernorm) against the float64 references; the layer built on them
is tested in tests/nn/test_transformer.py."""
import numpy as np
import pytest

import gpuedu
from gpuedu.ops import layernorm as LN

backend = gpuedu.setup(verbose=False)
ga = backend.gpuarray


def test_forward_and_backward_match_the_references_over_several_chunks():
    rng = np.random.default_rng(0)
    rows, features = 3 * LN.LN_CHUNK_ROWS + 5, 45
    x = (rng.standard_normal((rows, features)) * 2 + 1).astype(np.float32)
    gamma, beta = (rng.standard_normal(features).astype(np.float32) for _ in range(2))
    dy = rng.standard_normal((rows, features)).astype(np.float32)
    y, mean, rstd = (ga.empty(s, np.float32) for s in ((rows, features), (rows,), (rows,)))
    LN.layernorm_forward(y, mean, rstd, ga.to_gpu(x), ga.to_gpu(gamma), ga.to_gpu(beta), eps=1e-4)
    want_y, want_mean, want_rstd = LN.layernorm_reference(x, gamma, beta, eps=1e-4)
    np.testing.assert_allclose(y.get(), want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean.get(), want_mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rstd.get(), want_rstd, rtol=1e-5)
    dx, dgamma, dbeta = ga.empty((rows, features), np.float32), ga.empty(features, np.float32), ga.empty(features, np.float32)
    partials = ga.empty((2, LN.chunks(rows), features), np.float32)
    LN.layernorm_backward(dx, dgamma, dbeta, ga.to_gpu(dy), ga.to_gpu(x), mean, rstd, ga.to_gpu(gamma), partials)
    want = LN.layernorm_backward_reference(dy, x, gamma, eps=1e-4)
    for got, w in zip((dx, dgamma, dbeta), want):
        np.testing.assert_allclose(got.get(), w, rtol=1e-4, atol=1e-5)
    # dx left out: the parameter gradients alone, the same bits
    before = dgamma.get()
    LN.layernorm_backward(None, dgamma, dbeta, ga.to_gpu(dy), ga.to_gpu(x), mean, rstd, ga.to_gpu(gamma), partials)
    np.testing.assert_array_equal(dgamma.get(), before)
    assert LN.chunks(rows) == 4
    with pytest.raises(ValueError, match=r"partials must be \[2, 4, 45\]"):
        LN.layernorm_backward(dx, dgamma, dbeta, ga.to_gpu(dy), ga.to_gpu(x), mean, rstd, ga.to_gpu(gamma),
                              ga.empty((2, 3, features), np.float32))
