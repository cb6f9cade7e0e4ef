"""Layer normalisation over the last axis: ``gpuedu/kernels/nn_layernorm.cu``'s launchers and the float64
references (the kernels ``gpuedu.nn.LayerNorm`` launches).

    layernorm_forward(y, mean, rstd, x, gamma, beta, eps)          one launch, a warp a row
    layernorm_backward(dx, dgamma, dbeta, dy, x, mean, rstd, gamma) dx: one launch, a warp a row;
                                                                    dgamma, dbeta: chunk sums, then their
                                                                    fixed-order sum (two more launches each
                                                                    pair), the same bits every run

x, y, dy, dx are float32 [rows, F] device arrays; gamma, beta, dgamma, dbeta [F]; mean, rstd [rows] (saved by
the forward for the backward).
"""
import numpy as np

from .. import kernels as _kernels
from .. import launch as L
from .dense import THREADS as SUM_THREADS   # dense_bias_grad's block: a thread a column
from .elementwise import as_float64

LN_WARPS = _kernels.define("nn_layernorm", "LN_WARPS")
LN_COLS = _kernels.define("nn_layernorm", "LN_COLS")
LN_CHUNK_ROWS = _kernels.define("nn_layernorm", "LN_CHUNK_ROWS")


def chunks(rows):
    """How many chunks of LN_CHUNK_ROWS rows the parameter gradients are summed in."""
    return L.ceil_div(rows, LN_CHUNK_ROWS)


def layernorm_forward(y, mean, rstd, x, gamma, beta, eps=1e-5, stream=None):
    """y = gamma (x - mean) / sqrt(var + eps) + beta over each row; saves each row's mean and 1 / sqrt(var + eps)."""
    rows, features = x.shape
    f = L.kernel("nn_layernorm", "layernorm_forward", "PPPPPPiif")
    L.launch(f, (L.ceil_div(rows, LN_WARPS), 1), (LN_WARPS * 32, 1, 1),
             (L.ptr(y), L.ptr(mean), L.ptr(rstd), L.ptr(x), L.ptr(gamma), L.ptr(beta), L.i32(rows),
              L.i32(features), L.f32(eps)), stream)


def layernorm_backward(dx, dgamma, dbeta, dy, x, mean, rstd, gamma, partials, stream=None):
    """dx (skipped when None), dgamma and dbeta from dy and the forward's x, mean and rstd. ``partials`` is a
    float32 [2, chunks(rows), F] device buffer for the chunk sums."""
    rows, features = x.shape
    n_chunks = chunks(rows)
    if tuple(partials.shape) != (2, n_chunks, features):
        raise ValueError(f"partials must be [2, {n_chunks}, {features}] for {rows} rows, got {tuple(partials.shape)}")
    if dx is not None:
        f = L.kernel("nn_layernorm", "layernorm_backward_input", "PPPPPPii")
        L.launch(f, (L.ceil_div(rows, LN_WARPS), 1), (LN_WARPS * 32, 1, 1),
                 (L.ptr(dx), L.ptr(dy), L.ptr(x), L.ptr(mean), L.ptr(rstd), L.ptr(gamma), L.i32(rows),
                  L.i32(features)), stream)
    dgamma_partial, dbeta_partial = partials[0], partials[1]
    f = L.kernel("nn_layernorm", "layernorm_param_grad_partial", "PPPPPPii")
    L.launch(f, (L.ceil_div(features, LN_COLS), n_chunks), (LN_COLS, 1, 1),
             (L.ptr(dgamma_partial), L.ptr(dbeta_partial), L.ptr(dy), L.ptr(x), L.ptr(mean), L.ptr(rstd),
              L.i32(rows), L.i32(features)), stream)
    f = L.kernel("nn_dense", "dense_bias_grad", "PPii")
    for grad, partial in ((dgamma, dgamma_partial), (dbeta, dbeta_partial)):
        L.launch(f, (L.ceil_div(features, SUM_THREADS), 1), (SUM_THREADS, 1, 1),
                 (L.ptr(grad), L.ptr(partial), L.i32(n_chunks), L.i32(features)), stream)


def layernorm_reference(x, gamma, beta, eps=1e-5):
    """(y, mean, rstd) in float64, normalising over the last axis."""
    x = as_float64(x)
    mean = x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + eps)
    y = (x - mean) * rstd * as_float64(gamma) + as_float64(beta)
    return y, mean[..., 0], rstd[..., 0]


def layernorm_backward_reference(dy, x, gamma, eps=1e-5):
    """(dx, dgamma, dbeta) in float64 for y = layernorm_reference(x, gamma, beta, eps)[0]."""
    dy, x, gamma = as_float64(dy), as_float64(x), as_float64(gamma)
    _, mean, rstd = layernorm_reference(x, gamma, np.zeros_like(gamma), eps)
    xhat = (x - mean[..., None]) * rstd[..., None]
    g = dy * gamma
    dx = rstd[..., None] * (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    axes = tuple(range(dy.ndim - 1))
    return dx, (dy * xhat).sum(axis=axes), dy.sum(axis=axes)
