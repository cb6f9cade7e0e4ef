"""The convolution family, ``gpuedu/kernels/conv2d.cu``: its ladder, gradients, max pooling, and their NumPy
references (NCHW). Introduced in lessons/11_convolution.ipynb (``from gpuedu.ops import conv``).

    conv.conv2d(x, w, b=None, stride=1, padding=0, relu=False, version=4)   the ladder's versions 1-4
    conv.im2col(x, R, S, stride=1, padding=0)                               the lowered matrix of version 3
    conv.conv2d_backward(dy, x, w, stride=1, padding=0) -> (dx, dw, db)
    conv.maxpool2d(x, ksize=2, stride=None) -> (y, argmax);  conv.maxpool2d_backward(dy, argmax, x_shape)

x is [N, C, H, W], w is [K, C, R, S] (K filters), b is [K]; the output is [N, K, P, Q] with
P = (H + 2 * padding - R) // stride + 1 (and Q alike). Inputs are GPUArrays or float32 NumPy arrays
(copied to the device); ``stream=`` launches every kernel of a call on that stream (default: the default
stream). A shape that cannot work raises a ValueError that says what is wrong and
how to fix it. The references (``conv2d_reference``, ``im2col_reference``, ``col2im_reference``,
``conv2d_backward_reference``, ``maxpool2d_reference``, ``maxpool2d_backward_reference``) compute in float64
and return float64, since gradient checks compare them with finite differences.
"""
import numpy as np

from .. import backend, kernels
from .. import launch as L
from ..launch import ceil_div
from . import gemm
from ._common import check_version
from .elementwise import as_float64

VERSIONS = (1, 2, 3, 4)
THREADS = 256                 # the one-thread-per-item kernels' block


def _define(macro):
    return kernels.define("conv2d", macro)


TILE_H, TILE_W = _define("TILE_H"), _define("TILE_W")    # version 2's output tile
# version 2's shared tile is sized for kernels and strides up to these
MAX_KSIZE, MAX_STRIDE = _define("CONV_MAX_KSIZE"), _define("CONV_MAX_STRIDE")
CONST_FLOATS = _define("CONV_CONST_FLOATS")              # version 2's __constant__ filter bank
GT = _define("GT")                                       # version 4's GEMM tile
REDUCE_THREADS = _define("REDUCE_THREADS")               # the backward sums' blocks
GEMM_VERSION = 5              # the matmul.cu version that version 3 multiplies with


def _int(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def output_size(size, ksize, stride=1, padding=0):
    """The output length along one axis: (size + 2 * padding - ksize) // stride + 1."""
    return (size + 2 * padding - ksize) // stride + 1


def check_shapes(x_shape, w_shape, stride=1, padding=0, op="conv2d"):
    """(P, Q) for an [N, C, H, W] input and a [K, C, R, S] filter bank, or a ValueError that says why not."""
    stride, padding = _int(stride, "stride", 1), _int(padding, "padding", 0)
    if len(x_shape) != 4:
        raise ValueError(f"{op}: x must be 4-D [batch, channels, height, width], got shape {tuple(x_shape)}; "
                         f"a batch of grey images [N, H, W] becomes x.reshape(N, 1, H, W)")
    if len(w_shape) != 4:
        raise ValueError(f"{op}: w must be 4-D [filters, channels, kh, kw], got shape {tuple(w_shape)}")
    N, C, H, W = x_shape
    K, C2, R, S = w_shape
    if min(N, C, H, W) < 1 or min(K, C2, R, S) < 1:
        raise ValueError(f"{op}: every dimension must be at least 1, got x {tuple(x_shape)} and w {tuple(w_shape)}")
    if C != C2:
        raise ValueError(f"{op}: x has {C} channels but the filters expect {C2}: the second dimension of w "
                         f"must equal x's channel count")
    if R > H + 2 * padding or S > W + 2 * padding:
        raise ValueError(f"{op}: a {R}x{S} kernel does not fit in the {H}x{W} input padded by {padding} "
                         f"({H + 2 * padding}x{W + 2 * padding}): use a smaller kernel or more padding")
    return output_size(H, R, stride, padding), output_size(W, S, stride, padding)


def _bias(b, K):
    if b is None:
        return None
    b = L.device_array(b, "b", ndim=1)
    if b.shape[0] != K:
        raise ValueError(f"conv2d: b has {b.shape[0]} entries but there are {K} filters: one bias per filter")
    return b


def conv2d(x, w, b=None, stride=1, padding=0, relu=False, version=4, out=None, stream=None):
    """y = w * x + b (cross-correlation, NCHW), through a ReLU if ``relu``; ``version`` picks the kernel."""
    check_version(version, VERSIONS, "conv2d")
    x, w = L.device_array(x, "x"), L.device_array(w, "w")
    P, Q = check_shapes(x.shape, w.shape, stride, padding)
    N, C, H, W = (int(v) for v in x.shape)
    K, _, R, S = (int(v) for v in w.shape)
    b = _bias(b, K)
    y = L.output(out, (N, K, P, Q))
    dims = tuple(np.int32(v) for v in (N, C, H, W, K, R, S, stride, padding, P, Q, int(bool(relu))))
    if version == 1:
        L.launch(L.kernel("conv2d", "conv_kernel1", "PPPPiiiiiiiiiiii"), (ceil_div(N * K * P * Q, THREADS), 1),
                 (THREADS, 1, 1), (y.gpudata, x.gpudata, w.gpudata, L.ptr(b), *dims), stream)
    elif version == 2:
        if R > MAX_KSIZE or S > MAX_KSIZE or stride > MAX_STRIDE:
            raise ValueError(f"conv2d version 2 sizes its shared tile for kernels up to {MAX_KSIZE}x{MAX_KSIZE} "
                             f"and strides up to {MAX_STRIDE}; got {R}x{S}, stride {stride}: use version 1, 3 or 4")
        if w.size > CONST_FLOATS:
            raise ValueError(f"conv2d version 2 keeps the filter bank in constant memory, {CONST_FLOATS} floats; "
                             f"this one has {w.size} (K*C*R*S = {K}*{C}*{R}*{S}): use version 3 or 4")
        module = kernels.load("conv2d")
        address, _size = module.get_global("conv_filter")
        drv = backend.active().driver
        if stream is None:
            drv.memcpy_dtod(address, w.gpudata, w.size * 4)
        else:   # in stream order, so that a launch already queued still sees the filters it was given
            drv.memcpy_dtod_async(address, w.gpudata, w.size * 4, stream)
        L.launch(L.kernel("conv2d", "conv_kernel2", "PPPiiiiiiiiiiii"),
                 (ceil_div(Q, TILE_W), ceil_div(P, TILE_H), N * K), (TILE_W, TILE_H, 1),
                 (y.gpudata, x.gpudata, L.ptr(b), *dims), stream)
    elif version == 3:
        cols = im2col(x, R, S, stride, padding, stream=stream)
        g = gemm.matmul(w.reshape(K, C * R * S), cols, version=GEMM_VERSION, stream=stream)
        L.launch(L.kernel("conv2d", "conv_bias_act_nkpq", "PPPiiii"), (ceil_div(N * K * P * Q, THREADS), 1),
                 (THREADS, 1, 1), (y.gpudata, g.gpudata, L.ptr(b),
                                   np.int32(N), np.int32(K), np.int32(P * Q), np.int32(int(bool(relu)))), stream)
    else:
        L.launch(L.kernel("conv2d", "conv_kernel4", "PPPPiiiiiiiiiiii"), (ceil_div(N * P * Q, GT), ceil_div(K, GT)),
                 (GT, GT, 1), (y.gpudata, x.gpudata, w.gpudata, L.ptr(b), *dims), stream)
    return y


def im2col(x, R, S, stride=1, padding=0, out=None, stream=None):
    """The lowered matrix cols [C * R * S, N * P * Q] of x [N, C, H, W] (version 3's first step)."""
    x = L.device_array(x, "x")
    R, S = _int(R, "R", 1), _int(S, "S", 1)
    P, Q = check_shapes(x.shape, (1, x.shape[1] if len(x.shape) == 4 else 1, R, S), stride, padding, "im2col")
    N, C, H, W = (int(v) for v in x.shape)
    cols = L.output(out, (C * R * S, N * P * Q), name="out")
    L.launch(L.kernel("conv2d", "conv_im2col", "PPiiiiiiiiii"), (ceil_div(cols.size, THREADS), 1), (THREADS, 1, 1),
             (cols.gpudata, x.gpudata, *(np.int32(v) for v in (N, C, H, W, R, S, stride, padding, P, Q))),
             stream)
    return cols


def relu_grad(dy, y, out=None, stream=None):
    """dz = dy where y > 0, else 0: the gradient through a fused ReLU, from its output y."""
    dy, y = L.device_array(dy, "dy"), L.device_array(y, "y")
    if tuple(dy.shape) != tuple(y.shape):
        raise ValueError(f"relu_grad: dy has shape {tuple(dy.shape)} but y has {tuple(y.shape)}")
    dz = L.output(out, tuple(y.shape), name="out")
    L.launch(L.kernel("conv2d", "conv_relu_grad", "PPPi"), (ceil_div(y.size, THREADS), 1), (THREADS, 1, 1),
             (dz.gpudata, dy.gpudata, y.gpudata, np.int32(y.size)), stream)
    return dz


def conv2d_backward(dy, x, w, stride=1, padding=0, need_input_grad=True, dx=None, dw=None, db=None,
                    stream=None):
    """(dx, dw, db) of y = conv2d(x, w, b) for dy = dL/dy (apply ``relu_grad`` first if the ReLU was fused).

    dx is None when ``need_input_grad`` is False (the first layer: nobody needs the data's gradient)."""
    x, w, dy = L.device_array(x, "x"), L.device_array(w, "w"), L.device_array(dy, "dy")
    P, Q = check_shapes(x.shape, w.shape, stride, padding, "conv2d_backward")
    N, C, H, W = (int(v) for v in x.shape)
    K, _, R, S = (int(v) for v in w.shape)
    if tuple(dy.shape) != (N, K, P, Q):
        raise ValueError(f"conv2d_backward: dy has shape {tuple(dy.shape)}, the convolution's output is {(N, K, P, Q)}")
    dims = tuple(np.int32(v) for v in (N, C, H, W, K, R, S, stride, padding, P, Q))
    dw = L.output(dw, tuple(w.shape), name="dw")
    db = L.output(db, (K,), name="db")
    L.launch(L.kernel("conv2d", "conv_backward_filter", "PPPiiiiiiiiiii"), (w.size, 1), (REDUCE_THREADS, 1, 1),
             (dw.gpudata, dy.gpudata, x.gpudata, *dims), stream)
    L.launch(L.kernel("conv2d", "conv_backward_bias", "PPiii"), (K, 1), (REDUCE_THREADS, 1, 1),
             (db.gpudata, dy.gpudata, np.int32(N), np.int32(K), np.int32(P * Q)), stream)
    if not need_input_grad:
        return None, dw, db
    dx = L.output(dx, tuple(x.shape), name="dx")
    L.launch(L.kernel("conv2d", "conv_backward_input", "PPPiiiiiiiiiii"), (ceil_div(x.size, THREADS), 1),
             (THREADS, 1, 1), (dx.gpudata, dy.gpudata, w.gpudata, *dims), stream)
    return dx, dw, db


def pool_shape(x_shape, ksize, stride):
    """(P, Q) of a ksize x ksize max pooling with step ``stride``, or a ValueError that says why not."""
    ksize = _int(ksize, "kernel_size", 1)
    stride = ksize if stride is None else _int(stride, "stride", 1)
    if len(x_shape) != 4:
        raise ValueError(f"maxpool2d: x must be 4-D [batch, channels, height, width], got shape {tuple(x_shape)}")
    H, W = int(x_shape[2]), int(x_shape[3])
    if ksize > H or ksize > W:
        raise ValueError(f"maxpool2d: a {ksize}x{ksize} window does not fit in a {H}x{W} input: "
                         f"use a smaller kernel_size or pool earlier in the network")
    return ksize, stride, output_size(H, ksize, stride), output_size(W, ksize, stride)


def maxpool2d(x, ksize=2, stride=None, out=None, argmax=None, stream=None):
    """(y, argmax) of max pooling over ksize x ksize windows every ``stride`` (default ``ksize``) pixels;
    argmax (int32, same shape as y) holds each winner's flat index h * W + w in its plane."""
    x = L.device_array(x, "x")
    ksize, stride, P, Q = pool_shape(x.shape, ksize, stride)
    N, C, H, W = (int(v) for v in x.shape)
    y = L.output(out, (N, C, P, Q), name="out")
    if argmax is None:
        argmax = L.gpuarray().empty((N, C, P, Q), np.int32)
    L.launch(L.kernel("conv2d", "maxpool_forward", "PPPiiiiiii"), (ceil_div(y.size, THREADS), 1), (THREADS, 1, 1),
             (y.gpudata, argmax.gpudata, x.gpudata, *(np.int32(v) for v in (N * C, H, W, ksize, stride, P, Q))),
             stream)
    return y, argmax


def maxpool2d_backward(dy, argmax, x_shape, ksize=2, stride=None, out=None, stream=None):
    """dx: each window's gradient sent to the input element that won it (zero elsewhere)."""
    ksize, stride, P, Q = pool_shape(x_shape, ksize, stride)
    dy = L.device_array(dy, "dy")
    N, C, H, W = (int(v) for v in x_shape)
    if tuple(dy.shape) != (N, C, P, Q) or tuple(argmax.shape) != (N, C, P, Q):
        raise ValueError(f"maxpool2d_backward: dy {tuple(dy.shape)} and argmax {tuple(argmax.shape)} must both "
                         f"have the pooled shape {(N, C, P, Q)}")
    dx = L.output(out, (N, C, H, W), name="out")
    L.launch(L.kernel("conv2d", "maxpool_backward", "PPPiiiiiii"), (ceil_div(dx.size, THREADS), 1), (THREADS, 1, 1),
             (dx.gpudata, dy.gpudata, argmax.gpudata, *(np.int32(v) for v in (N * C, H, W, ksize, stride, P, Q))),
             stream)
    return dx


def im2col_bytes(x_shape, w_shape, stride=1, padding=0):
    """Bytes of float32 the lowered matrix of version 3 takes, against the input's own bytes."""
    P, Q = check_shapes(x_shape, w_shape, stride, padding)
    N, C, H, W = x_shape
    _, _, R, S = w_shape
    return 4 * C * R * S * N * P * Q, 4 * N * C * H * W


def conv2d_flops(x_shape, w_shape, stride=1, padding=0):
    """2 * N * K * P * Q * C * R * S: one multiply and one add per term."""
    P, Q = check_shapes(x_shape, w_shape, stride, padding)
    N = x_shape[0]
    K, C, R, S = w_shape
    return 2 * N * K * P * Q * C * R * S


# ---- NumPy references, in float64 (also those of the nn layers Conv2D and MaxPool2D) ----------------

def im2col_reference(x, R, S, stride=1, padding=0):
    """The lowered matrix cols [C * R * S, N * P * Q] of x [N, C, H, W] (float64).

    Row (c, r, s), column (n, p, q) holds x[n, c, p * stride - padding + r, q * stride - padding + s]
    (zero in the padding), so that the convolution is ``w.reshape(K, -1) @ cols``.
    """
    x = as_float64(x)
    N, C, H, W = x.shape
    P, Q = output_size(H, R, stride, padding), output_size(W, S, stride, padding)
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    cols = np.empty((C, R, S, N, P, Q))
    for r in range(R):
        for s in range(S):
            window = xp[:, :, r:r + stride * (P - 1) + 1:stride, s:s + stride * (Q - 1) + 1:stride]
            cols[:, r, s] = window.transpose(1, 0, 2, 3)
    return cols.reshape(C * R * S, N * P * Q)


def col2im_reference(cols, x_shape, R, S, stride=1, padding=0):
    """The adjoint of ``im2col_reference``: every column entry added back to the input element it was copied from."""
    N, C, H, W = x_shape
    P, Q = output_size(H, R, stride, padding), output_size(W, S, stride, padding)
    cols = as_float64(cols).reshape(C, R, S, N, P, Q)
    xp = np.zeros((N, C, H + 2 * padding, W + 2 * padding))
    for r in range(R):
        for s in range(S):
            xp[:, :, r:r + stride * (P - 1) + 1:stride, s:s + stride * (Q - 1) + 1:stride] += \
                cols[:, r, s].transpose(1, 0, 2, 3)
    return xp[:, :, padding:padding + H, padding:padding + W]


def conv2d_reference(x, w, b=None, stride=1, padding=0, relu=False):
    """y [N, K, P, Q] = w * x (+ b), optionally through a ReLU, in float64 via im2col."""
    x, w = as_float64(x), as_float64(w)
    N, C, H, W = x.shape
    K, C2, R, S = w.shape
    if C != C2:
        raise ValueError(f"x has {C} channels but w expects {C2}")
    P, Q = output_size(H, R, stride, padding), output_size(W, S, stride, padding)
    y = (w.reshape(K, -1) @ im2col_reference(x, R, S, stride, padding)).reshape(K, N, P, Q).transpose(1, 0, 2, 3)
    if b is not None:
        y = y + as_float64(b)[None, :, None, None]
    if relu:
        y = np.maximum(y, 0.0)
    return np.ascontiguousarray(y)


def conv2d_backward_reference(dy, x, w, stride=1, padding=0):
    """(dx, dw, db) of y = conv2d(x, w, b) given dy = dL/dy (no ReLU: mask dy first), in float64."""
    dy, x, w = as_float64(dy), as_float64(x), as_float64(w)
    K, C, R, S = w.shape
    dy2 = dy.transpose(1, 0, 2, 3).reshape(K, -1)               # [K, N * P * Q]
    dw = (dy2 @ im2col_reference(x, R, S, stride, padding).T).reshape(w.shape)
    dx = col2im_reference(w.reshape(K, -1).T @ dy2, x.shape, R, S, stride, padding)
    return dx, dw, dy2.sum(axis=1)


def maxpool2d_reference(x, ksize=2, stride=None):
    """(y, argmax): the maximum of each ksize x ksize window (no padding) and the flat index h * W + w of
    the winner within its plane (the first in row-major order on a tie)."""
    x = as_float64(x)
    stride = ksize if stride is None else stride
    N, C, H, W = x.shape
    P, Q = output_size(H, ksize, stride), output_size(W, ksize, stride)
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


def maxpool2d_backward_reference(dy, argmax, x_shape):
    """dx: each output's gradient added to the input element that won its window."""
    N, C, H, W = x_shape
    dx = np.zeros((N * C, H * W))
    dy2, arg2 = as_float64(dy).reshape(N * C, -1), np.asarray(argmax).reshape(N * C, -1)
    for row in range(N * C):
        np.add.at(dx[row], arg2[row], dy2[row])
    return dx.reshape(x_shape)
