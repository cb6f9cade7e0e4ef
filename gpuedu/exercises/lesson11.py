"""Exercises of lessons/11_convolution.ipynb: a direct convolution with a zero-padded halo, and im2col.

The images and filters hold small integers stored as float32, so every sum is exact whatever the order of
the additions: a correct kernel matches NumPy bit for bit.  The shapes have odd sizes, several channels,
stride 1 and 2 and padding 0 to 2, so every guard of the halo is exercised.
"""
import numpy as np

from . import Case, Exercise, ceil_div, register

THREADS = 128


def _small_ints(rng, shape):
    return rng.integers(-3, 4, shape).astype(np.float32)


def _out(size, k, stride, pad):
    return (size + 2 * pad - k) // stride + 1


def _shapes(rng):
    """(label, C, H, W, K, R, S, stride, pad)."""
    h, w = (int(v) for v in rng.integers(9, 20, 2))
    return [("1 channel, 5 x 5, 3 x 3 filter, no padding", 1, 5, 5, 1, 3, 3, 1, 0),
            ("1 channel, 4 x 4, 3 x 3 filter, padding 1 (same size out)", 1, 4, 4, 1, 3, 3, 1, 1),
            ("3 channels, 7 x 9, 2 filters of 3 x 3, padding 1", 3, 7, 9, 2, 3, 3, 1, 1),
            ("2 channels, 9 x 8, 3 filters of 3 x 2, stride 2, padding 1", 2, 9, 8, 3, 3, 2, 2, 1),
            ("1 channel, 3 x 3, 5 x 5 filter, padding 2 (the filter larger than the image)", 1, 3, 3, 2, 5, 5, 1, 2),
            (f"2 channels, {h} x {w}, 4 filters of 5 x 5, stride 2, padding 2 (random)", 2, h, w, 4, 5, 5, 2, 2)]


def _ints(**values):
    return {k: np.int32(v) for k, v in values.items()}


# ---------------------------------------------------------------------------------------------- direct
def conv_spec(x, w, C, H, W, K, R, S, stride, pad):
    from .. import reference
    return reference.conv2d(x.reshape(1, C, H, W), w, stride=int(stride), padding=int(pad))[0].astype(np.float32)


def conv_cases(rng):
    for label, C, H, W, K, R, S, stride, pad in _shapes(rng):
        P, Q = _out(H, R, stride, pad), _out(W, S, stride, pad)
        yield Case(label, {"x": _small_ints(rng, (C, H, W)), "w": _small_ints(rng, (K, C, R, S)),
                           **_ints(C=C, H=H, W=W, K=K, R=R, S=S, stride=stride, pad=pad)},
                   block=(THREADS, 1, 1), grid=(ceil_div(K * P * Q, THREADS), 1))


def _padding_ignored(case, expected, got):
    """The padding read as if it were the image's own border: outputs shifted by ``pad``."""
    if int(case.inputs["pad"]) > 0 and not np.isnan(got["y"]).any():
        inner = expected["y"]
        if got["y"].shape == inner.shape and np.array_equal(got["y"][..., 1:-1, 1:-1], inner[..., 1:-1, 1:-1]) \
                and not np.array_equal(got["y"], inner):
            return ("the inside of the output is right but its border is wrong: the border outputs read the "
                    "halo, the padding. An input position h = p * stride - pad + r outside [0, H) must add 0 "
                    "(skip it), not be clamped or wrapped.")
    return None


def _stride_ignored(case, expected, got):
    """The output computed as if the stride were 1 (its first P x Q outputs)."""
    from .. import reference
    i = case.inputs
    stride = int(i["stride"])
    if stride == 1:
        return None
    C, H, W, R, S, pad = (int(i[k]) for k in ("C", "H", "W", "R", "S", "pad"))
    x = i["x"].reshape(1, C, H, W)
    name = next(iter(expected))
    if name == "y":
        K, P, Q = expected["y"].shape
        unit = reference.conv2d(x, i["w"], padding=pad)[0][:, :P, :Q]
    else:
        P, Q = _out(H, R, stride, pad), _out(W, S, stride, pad)
        unit = reference.im2col(x, R, S, 1, pad).reshape(C * R * S, _out(H, R, 1, pad), -1)[:, :P, :Q]
    if np.array_equal(got[name].reshape(unit.shape), unit.astype(np.float32)):
        return (f"the stride is missing: output p reads input rows p * stride - pad + r (here stride = {stride}), "
                f"not p - pad + r.")
    return None


CONV_STUB = r"""
// y[k][p][q] = sum over c, r, s of w[k][c][r][s] * x[c][p*stride - pad + r][q*stride - pad + s],
// where reads outside the H x W image are the zero padding (the halo). One image: x is C x H x W,
// w is K x C x R x S, y is K x P x Q with P = (H + 2*pad - R)/stride + 1, Q = (W + 2*pad - S)/stride + 1.
// One thread per output element; the grid covers K * P * Q threads (rounded up to whole blocks).
__global__ void conv_direct(float* y, const float* x, const float* w, int C, int H, int W,
                            int K, int R, int S, int stride, int pad) {
    int P = (H + 2 * pad - R) / stride + 1, Q = (W + 2 * pad - S) / stride + 1;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    // FILL ME IN (roughly 14 lines): guard idx, split it into (k, p, q), loop over c, r, s,
    // skip the taps that fall in the padding, write y[idx].
}
"""

CONV_SOLUTION = r"""
__global__ void conv_direct(float* y, const float* x, const float* w, int C, int H, int W,
                            int K, int R, int S, int stride, int pad) {
    int P = (H + 2 * pad - R) / stride + 1, Q = (W + 2 * pad - S) / stride + 1;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= K * P * Q) return;                // the last block sticks out past y
    int q = idx % Q, p = (idx / Q) % P, k = idx / (P * Q);
    float acc = 0.0f;
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++) {
            int h = p * stride - pad + r;
            if (h < 0 || h >= H) continue;       // a row of the halo: adds 0
            for (int s = 0; s < S; s++) {
                int col = q * stride - pad + s;
                if (col < 0 || col >= W) continue;
                acc += x[(c * H + h) * W + col] * w[((k * C + c) * R + r) * S + s];
            }
        }
    y[idx] = acc;
}
"""

register(Exercise(
    id="11.conv_direct",
    title="A direct convolution with a zero-padded halo",
    text="One thread computes one output y[k][p][q]: the dot product of filter k with the R x S x C window "
         "of the image whose top-left corner is (p * stride - pad, q * stride - pad). Near the edges part of "
         "the window lies in the halo, the zero padding around the image: those taps add nothing, so skip "
         "them (never read x there: that is out of bounds). Index y flat, idx = (k * P + p) * Q + q, and "
         "guard idx against the rounded-up grid.",
    kernel="conv_direct", params=("y", "x", "w", "C", "H", "W", "K", "R", "S", "stride", "pad"),
    outputs=("y",), reference=conv_spec, cases=conv_cases, stub=CONV_STUB, solution=CONV_SOLUTION,
    launch=f"block = ({THREADS}, 1, 1), grid = (ceil_div(K * P * Q, {THREADS}), 1)",
    diagnoses=(_padding_ignored, _stride_ignored),
))


# ---------------------------------------------------------------------------------------------- im2col
def im2col_spec(x, C, H, W, R, S, stride, pad):
    from .. import reference
    return reference.im2col(x.reshape(1, C, H, W), int(R), int(S), int(stride), int(pad)).astype(np.float32)


def im2col_cases(rng):
    for label, C, H, W, _K, R, S, stride, pad in _shapes(rng):
        P, Q = _out(H, R, stride, pad), _out(W, S, stride, pad)
        yield Case(label, {"x": _small_ints(rng, (C, H, W)),
                           **_ints(C=C, H=H, W=W, R=R, S=S, stride=stride, pad=pad)},
                   block=(THREADS, 1, 1), grid=(ceil_div(C * R * S * P * Q, THREADS), 1))


def _transposed_cols(case, expected, got):
    e, g = expected["cols"], got["cols"]
    if g.size == e.size and np.array_equal(g.reshape(e.shape[1], e.shape[0]).T, e):
        return ("every value is there but transposed: cols has C * R * S rows (one per filter tap) and P * Q "
                "columns (one per output pixel), so element (row, col) sits at cols[row * (P * Q) + col].")
    return None


IM2COL_STUB = r"""
// The lowered matrix of one image: cols has C*R*S rows and P*Q columns, and
// cols[(c*R + r)*S + s][p*Q + q] = x[c][p*stride - pad + r][q*stride - pad + s]  (0 in the padding),
// so that the convolution is the GEMM  y [K x P*Q] = w [K x C*R*S] @ cols.
// One thread per element of cols; the grid covers C*R*S * P*Q threads (rounded up).
__global__ void im2col(float* cols, const float* x, int C, int H, int W, int R, int S, int stride, int pad) {
    int P = (H + 2 * pad - R) / stride + 1, Q = (W + 2 * pad - S) / stride + 1;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    // FILL ME IN (roughly 8 lines): guard idx, split it into (row, col), then row into (c, r, s) and
    // col into (p, q); write the input value there, or 0 in the padding.
}
"""

IM2COL_SOLUTION = r"""
__global__ void im2col(float* cols, const float* x, int C, int H, int W, int R, int S, int stride, int pad) {
    int P = (H + 2 * pad - R) / stride + 1, Q = (W + 2 * pad - S) / stride + 1;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= C * R * S * P * Q) return;
    int col = idx % (P * Q), row = idx / (P * Q);
    int q = col % Q, p = col / Q;
    int s = row % S, r = (row / S) % R, c = row / (R * S);
    int h = p * stride - pad + r, w = q * stride - pad + s;
    cols[idx] = (h >= 0 && h < H && w >= 0 && w < W) ? x[(c * H + h) * W + w] : 0.0f;
}
"""

register(Exercise(
    id="11.im2col",
    title="im2col: lower an image to a matrix so that convolution becomes a GEMM",
    text="Each column of cols is one output pixel's receptive field, unrolled: its C * R * S input values in "
         "the order of the filter's weights (c, then r, then s). Each row is one filter tap (c, r, s) slid over "
         "every output pixel. An input value appears in up to R * S columns: that duplication is im2col's "
         "memory cost. Taps that fall in the padding are 0.",
    kernel="im2col", params=("cols", "x", "C", "H", "W", "R", "S", "stride", "pad"), outputs=("cols",),
    reference=im2col_spec, cases=im2col_cases, stub=IM2COL_STUB, solution=IM2COL_SOLUTION,
    launch=f"block = ({THREADS}, 1, 1), grid = (ceil_div(C * R * S * P * Q, {THREADS}), 1)",
    diagnoses=(_transposed_cols, _stride_ignored),
))
