"""NumPy references for every op in ``gpuedu.ops``: what each kernel must compute.

They are written for clarity, in float64 where the order of a float32 sum would otherwise change
the answer, and return float32 arrays (the kernels' dtype) unless the name says otherwise.
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
