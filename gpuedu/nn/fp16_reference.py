"""NumPy references for the FP16 kernels (``gpuedu/kernels/fp16_*.cu``, ``wmma_gemm.cu``).

``numpy.float16`` is IEEE-754 binary16 with round-to-nearest-even, the same format and rounding as
CUDA's ``__half``, so for the elementwise kernels the reference is bit-exact.  For the GEMMs with
FP32 accumulation only the order of the sums differs, so they are compared with a tolerance.
"""
import numpy as np

#: Facts about binary16 (what ``np.finfo(np.float16)`` says, spelled out for the lesson).
HALF_MAX = float(np.finfo(np.float16).max)                  # 65504
HALF_EPS = float(np.finfo(np.float16).eps)                  # 2**-10, the gap after 1.0
HALF_MIN_NORMAL = float(np.finfo(np.float16).tiny)          # 2**-14
HALF_MIN_SUBNORMAL = float(np.float16(2.0 ** -24))          # the smallest positive half


def to_half(x):
    """float32 -> float16, round to nearest even (what ``__float2half_rn`` does); too large -> Inf."""
    with np.errstate(over="ignore"):   # overflowing to Inf is the defined result, not an accident
        return np.asarray(x, dtype=np.float32).astype(np.float16)


def to_half_bits(x):
    """The 16-bit patterns of ``to_half(x)``, as uint16."""
    return to_half(x).view(np.uint16)


def axpy(a, x, y):
    """a*x + y with a single rounding to float16, as ``__hfma`` does (``a`` is first rounded to half).

    Why float64 suffices: a*x has at most 22 significant bits, and whenever the exact a*x + y needs
    more than 53 bits, the smaller term is far below the result's half-ulp, so the double result
    rounds to the same half.
    """
    a16 = np.float16(a)
    exact = np.float64(a16) * np.asarray(x, np.float64) + np.asarray(y, np.float64)
    return exact.astype(np.float16)


def relu(x):
    return np.maximum(np.asarray(x, np.float16), np.float16(0))


def relu_backward(dy, z):
    """dy where z > 0, else 0."""
    return np.where(np.asarray(z, np.float16) > 0, np.asarray(dy, np.float16), np.float16(0))


def bias_add(x, bias):
    """x + bias broadcast over rows, rounded to half (numpy adds halves with one rounding too)."""
    return (np.asarray(x, np.float16) + np.asarray(bias, np.float16)).astype(np.float16)


def matmul(a, b, alpha=1.0, out_dtype=np.float16):
    """alpha * a @ b of two float16 matrices, summed exactly (float64), then rounded to ``out_dtype``."""
    exact = alpha * (np.asarray(a, np.float64) @ np.asarray(b, np.float64))
    return exact.astype(np.float32).astype(out_dtype)


def matmul_half_accum(a, b, alpha=1.0):
    """What a GEMM that keeps its running sum in float16 computes: for k = 0..K-1,
    ``s = fma(a[:, k], b[k, :], s)`` rounded to half every step (bit-exact with ``__hfma``)."""
    a = np.asarray(a, np.float16)
    b = np.asarray(b, np.float16)
    s = np.zeros((a.shape[0], b.shape[1]), np.float16)
    for k in range(a.shape[1]):
        exact = a[:, k, None].astype(np.float64) * b[None, k, :].astype(np.float64) + s.astype(np.float64)
        s = exact.astype(np.float16)
    return (np.float32(alpha) * s.astype(np.float32)).astype(np.float16)


def matmul_tolerance(a, b, alpha=1.0, out_dtype=np.float16):
    """An elementwise bound on |kernel - matmul(a, b)|: one rounding of the output (a full ulp, as an
    FP32 sum that differs slightly from the exact one may round the other way) plus FP32
    accumulation error, K * 2**-24 * sum_k |a_ik b_kj|."""
    exact = np.abs(alpha) * np.abs(np.asarray(a, np.float64) @ np.asarray(b, np.float64))
    magnitude = np.abs(alpha) * (np.abs(np.asarray(a, np.float64)) @ np.abs(np.asarray(b, np.float64)))
    k = np.asarray(a).shape[1]
    unit = 2.0 ** -10 if np.dtype(out_dtype) == np.float16 else 2.0 ** -23
    tiny = HALF_MIN_SUBNORMAL if np.dtype(out_dtype) == np.float16 else 0.0
    return unit * exact + (k + 1) * 2.0 ** -24 * magnitude + tiny


def unscale(g16, scale):
    """FP16 gradients divided by the loss scale in FP32, and whether any was Inf or NaN."""
    g = np.asarray(g16, np.float16).astype(np.float32)
    return (g * np.float32(1.0 / scale)).astype(np.float32), bool(not np.all(np.isfinite(g)))


def softmax_xent(logits16, labels, grad_scale=1.0):
    """Per-row cross-entropy (float64) of float16 logits and its scaled gradient
    ``grad_scale * (softmax - onehot) / batch`` (float64; the kernel rounds it to half)."""
    z = np.asarray(logits16, np.float16).astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    log_sum = np.log(np.exp(z).sum(axis=1))
    rows = np.arange(z.shape[0])
    loss_rows = log_sum - z[rows, labels]
    p = np.exp(z - log_sum[:, None])
    p[rows, labels] -= 1.0
    return loss_rows, grad_scale * p / z.shape[0]
