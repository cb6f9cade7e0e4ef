"""NumPy references for every op in ``gpuedu.ops``: what each kernel must compute.

They are written for clarity, in float64 where the order of a float32 sum would otherwise change
the answer, and return float32 arrays (the kernels' dtype) unless the name says otherwise; the
convolution references at the end (``conv2d``, ``im2col``, ``maxpool2d`` and their backward passes)
return float64, since gradient checks compare them with finite differences.
"""
import numpy as np

#: Activation names understood by ``activation`` (and by ``gpuedu.ops.activation``).
ACTIVATIONS = ("relu", "leaky_relu", "sigmoid", "tanh", "gelu", "silu", "elu")


def _as_float64(x):
    return np.asarray(x, dtype=np.float64)


def relu(x):
    return np.maximum(_as_float64(x), 0.0).astype(np.float32)


def leaky_relu(x, alpha=0.01):
    x = _as_float64(x)
    return np.where(x > 0, x, alpha * x).astype(np.float32)


def sigmoid(x):
    x = _as_float64(x)
    return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


def tanh(x):
    return np.tanh(_as_float64(x)).astype(np.float32)


def gelu(x):
    """The tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    x = _as_float64(x)
    return (0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))).astype(np.float32)


def silu(x):
    x = _as_float64(x)
    return (x / (1.0 + np.exp(-x))).astype(np.float32)


def elu(x, alpha=1.0):
    x = _as_float64(x)
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0))).astype(np.float32)


def activation(x, name, alpha=None):
    """The activation called ``name`` (one of ``ACTIVATIONS``) applied elementwise."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {', '.join(ACTIVATIONS)}")
    fn = globals()[name]
    if name in ("leaky_relu", "elu") and alpha is not None:
        return fn(x, alpha)
    return fn(x)


def transpose(x):
    """The transpose of a 2-D matrix, as a new contiguous array."""
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32).T)


def reduce_sum(x):
    """The sum of all elements, accumulated in float64 (a float32 sum of 10^6 terms drifts)."""
    return float(np.sum(_as_float64(x)))


def softmax_rows(x):
    """Softmax of each row of a 2-D matrix, with the row maximum subtracted first."""
    x = _as_float64(x)
    if x.ndim != 2:
        raise ValueError(f"softmax_rows expects a 2-D matrix, got shape {x.shape}")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def matmul(a, b):
    """A @ B computed in float64, returned as float32."""
    return (_as_float64(a) @ _as_float64(b)).astype(np.float32)


def histogram(x, bins):
    """Counts of the integers in ``x`` (each in [0, bins)), as int32: what an atomics histogram makes."""
    x = np.asarray(x)
    if x.size and (x.min() < 0 or x.max() >= bins):
        raise ValueError(f"values must lie in [0, {bins}); got {x.min()}..{x.max()}")
    return np.bincount(x.ravel().astype(np.int64), minlength=bins).astype(np.int32)


def sum_tolerance(x):
    """A bound on |float32 tree sum - exact sum| of x: a few float32 ulps times sum |x| times log2 n.

    A reduction's float32 partial sums each round to within eps/2 relative, and a tree sum has
    about log2(n) levels, so the error is at most ~ eps * log2(n) * sum|x|. Used to check kernels
    whose order of additions differs from NumPy's.
    """
    x = _as_float64(x)
    n = max(x.size, 2)
    return float(np.finfo(np.float32).eps * (np.log2(n) + 2) * np.sum(np.abs(x)))


# ----------------------------------------------------------------------------------------------
# convolution (conv2d.cu), NCHW, in float64: the reference of gpuedu.conv and of the nn layers

def conv_output_size(size, ksize, stride=1, padding=0):
    """The output length along one axis: (size + 2 * padding - ksize) // stride + 1."""
    return (size + 2 * padding - ksize) // stride + 1


def im2col(x, R, S, stride=1, padding=0):
    """The lowered matrix cols [C * R * S, N * P * Q] of x [N, C, H, W] (float64).

    Row (c, r, s), column (n, p, q) holds x[n, c, p * stride - padding + r, q * stride - padding + s]
    (zero in the padding), so that the convolution is ``w.reshape(K, -1) @ cols``.
    """
    x = _as_float64(x)
    N, C, H, W = x.shape
    P, Q = conv_output_size(H, R, stride, padding), conv_output_size(W, S, stride, padding)
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    cols = np.empty((C, R, S, N, P, Q))
    for r in range(R):
        for s in range(S):
            window = xp[:, :, r:r + stride * (P - 1) + 1:stride, s:s + stride * (Q - 1) + 1:stride]
            cols[:, r, s] = window.transpose(1, 0, 2, 3)
    return cols.reshape(C * R * S, N * P * Q)


def col2im(cols, x_shape, R, S, stride=1, padding=0):
    """The adjoint of im2col: every column entry added back to the input element it was copied from."""
    N, C, H, W = x_shape
    P, Q = conv_output_size(H, R, stride, padding), conv_output_size(W, S, stride, padding)
    cols = _as_float64(cols).reshape(C, R, S, N, P, Q)
    xp = np.zeros((N, C, H + 2 * padding, W + 2 * padding))
    for r in range(R):
        for s in range(S):
            xp[:, :, r:r + stride * (P - 1) + 1:stride, s:s + stride * (Q - 1) + 1:stride] += \
                cols[:, r, s].transpose(1, 0, 2, 3)
    return xp[:, :, padding:padding + H, padding:padding + W]


def conv2d(x, w, b=None, stride=1, padding=0, relu=False):
    """y [N, K, P, Q] = w * x (+ b), optionally through a ReLU, in float64 via im2col."""
    x, w = _as_float64(x), _as_float64(w)
    N, C, H, W = x.shape
    K, C2, R, S = w.shape
    if C != C2:
        raise ValueError(f"x has {C} channels but w expects {C2}")
    P, Q = conv_output_size(H, R, stride, padding), conv_output_size(W, S, stride, padding)
    y = (w.reshape(K, -1) @ im2col(x, R, S, stride, padding)).reshape(K, N, P, Q).transpose(1, 0, 2, 3)
    if b is not None:
        y = y + _as_float64(b)[None, :, None, None]
    if relu:
        y = np.maximum(y, 0.0)
    return np.ascontiguousarray(y)


def conv2d_backward(dy, x, w, stride=1, padding=0):
    """(dx, dw, db) of y = conv2d(x, w, b) given dy = dL/dy (no ReLU: mask dy first), in float64."""
    dy, x, w = _as_float64(dy), _as_float64(x), _as_float64(w)
    K, C, R, S = w.shape
    dy2 = dy.transpose(1, 0, 2, 3).reshape(K, -1)               # [K, N * P * Q]
    dw = (dy2 @ im2col(x, R, S, stride, padding).T).reshape(w.shape)
    dx = col2im(w.reshape(K, -1).T @ dy2, x.shape, R, S, stride, padding)
    return dx, dw, dy2.sum(axis=1)


def maxpool2d(x, ksize=2, stride=None):
    """(y, argmax): the maximum of each ksize x ksize window (no padding) and the flat index h * W + w of
    the winner within its plane (the first in row-major order on a tie)."""
    x = _as_float64(x)
    stride = ksize if stride is None else stride
    N, C, H, W = x.shape
    P, Q = conv_output_size(H, ksize, stride), conv_output_size(W, ksize, stride)
    y = np.full((N, C, P, Q), -np.inf)
    arg = np.zeros((N, C, P, Q), np.int64)
    for i in range(ksize):
        for j in range(ksize):
            v = x[:, :, i:i + stride * (P - 1) + 1:stride, j:j + stride * (Q - 1) + 1:stride]
            idx = (np.arange(P)[:, None] * stride + i) * W + np.arange(Q)[None, :] * stride + j
            better = v > y
            y = np.where(better, v, y)
            arg = np.where(better, idx, arg)
    return y, arg


def maxpool2d_backward(dy, argmax, x_shape):
    """dx: each output's gradient added to the input element that won its window."""
    N, C, H, W = x_shape
    dx = np.zeros((N * C, H * W))
    dy2, arg2 = _as_float64(dy).reshape(N * C, -1), np.asarray(argmax).reshape(N * C, -1)
    for row in range(N * C):
        np.add.at(dx[row], arg2[row], dy2[row])
    return dx.reshape(x_shape)
