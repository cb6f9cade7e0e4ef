"""The attention ladder of ``gpuedu/kernels/attention.cu``: its launchers, the tiled kernel's backward, and
the NumPy float64 references.

    out = ops.attention.attention(q, k, v, heads=1, causal=False, version=3)
    out, lse = ops.attention.attention(q, k, v, version=3, return_lse=True)
    dq, dk, dv = ops.attention.attention_backward(dout, q, k, v, out, lse, heads=1, causal=False)

q, k, v are float32 (version 3: or float16, with float32 arithmetic) [batch, seq, heads * head_dim] (the heads side by side along the last axis), head_dim
at most MAX_HEAD_DIM; it is compiled into the kernels (-DHEAD_DIM=...), once per head size.

Version 1: scores to memory, softmax (softmax.cu, version 3), then P V: three launches, S and P (N x N each)
in global memory. Version 2: scores, mask and softmax fused in one launch (P written, S never), then P V.
Version 3: the tiled (FlashAttention-style) kernel: one launch, nothing N x N in memory, and the row
log-sum-exp that ``attention_backward`` recomputes the probabilities from.
"""
import math

import numpy as np

from .. import kernels as _kernels
from .. import launch as L
from ..launch import ceil_div
from ._common import check_version
from .elementwise import as_float64
from .softmax import softmax_rows

VERSIONS = (1, 2, 3)

DEFAULT_HEAD_DIM = _kernels.define("attention", "HEAD_DIM")
MAX_HEAD_DIM = _kernels.define("attention", "MAX_HEAD_DIM")
FLASH_ROWS = _kernels.define("attention", "FLASH_ROWS")     # rows a block of the tiled kernels owns
FLASH_KEYS = _kernels.define("attention", "FLASH_KEYS")     # key and value rows a shared tile of version 3
BWD_TILE = _kernels.define("attention", "BWD_TILE")         # rows a streamed tile of the backward
PAIR_TILE = _kernels.define("attention", "PAIR_TILE")       # versions 1-2's 16 x 16 blocks
ROW_WARPS = _kernels.define("attention", "ROW_WARPS")       # warps a block of the one-warp-a-row kernels


def _options(head_dim):
    """The compiler options that build attention.cu for heads of ``head_dim`` floats."""
    return () if head_dim == DEFAULT_HEAD_DIM else (f"-DHEAD_DIM={head_dim}",)


def _check_heads(heads, width, op):
    if not isinstance(heads, (int, np.integer)) or isinstance(heads, bool) or heads < 1:
        raise ValueError(f"{op}: heads must be a positive integer, got {heads!r}")
    if width % heads:
        raise ValueError(f"{op}: the last axis ({width}) holds the heads side by side, so it must be a "
                         f"multiple of heads={heads}")
    head_dim = width // heads
    if head_dim > MAX_HEAD_DIM:
        raise ValueError(f"{op}: head_dim = {width} / {heads} = {head_dim}, but the kernels hold a head's rows "
                         f"in shared memory for head_dim <= {MAX_HEAD_DIM}: use more heads")
    return int(heads), head_dim


def _inputs(op, heads, half=False, **arrays):
    """The arrays as 3-D device arrays of one shape and dtype, float32 (or float16 when ``half`` allows it and
    the first array is float16); (arrays, batch, seq, heads, head_dim)."""
    out = {}
    shape = None
    first = next(iter(arrays.values()))
    dtype = np.float16 if half and getattr(first, "dtype", None) == np.float16 else np.float32
    for name, x in arrays.items():
        x = L.device_array(x, name, dtype=dtype, ndim=3)
        if shape is None:
            shape = tuple(x.shape)
        elif tuple(x.shape) != shape:
            first = next(iter(arrays))
            raise ValueError(f"{op}: {name} has shape {tuple(x.shape)} but {first} has {shape}; "
                             f"all must be [batch, seq, heads * head_dim]")
        out[name] = x
    batch, seq, width = shape
    if width == 0:
        raise ValueError(f"{op}: the last axis is empty (shape {shape}); a head needs at least one feature")
    heads, head_dim = _check_heads(heads, width, op)
    return out, batch, seq, heads, head_dim


def _scale(scale, head_dim):
    return np.float32(1.0 / math.sqrt(head_dim) if scale is None else scale)


def attention(q, k, v, heads=1, causal=False, version=3, scale=None, out=None, lse=None, return_lse=False,
              workspace=None, stream=None):
    """softmax(mask(Q K^T * scale)) V for each batch and head; scale defaults to 1 / sqrt(head_dim).

    Version 3 also takes float16 q, k, v (all three): the kernel computes in float32 and rounds O to float16
    once; the log-sum-exp stays float32.

    ``lse`` (version 3 only): a float32 [batch, heads, seq] array for the rows' log-sum-exp, which
    ``attention_backward`` needs; ``return_lse=True`` makes one and returns ``(out, lse)``.
    ``workspace`` (versions 1-2): a float32 array of batch * heads * seq * seq floats (two for version 1)
    for the N x N matrices, so that a timed call allocates nothing."""
    op = f"attention version {version}"
    check_version(version, VERSIONS, "attention")
    if version != 3 and getattr(q, "dtype", None) == np.float16:
        raise TypeError(f"{op} takes float32; FP16 inputs (with float32 arithmetic inside) are version 3's")
    arrays, batch, seq, heads, head_dim = _inputs(op, heads, half=True, q=q, k=k, v=v)
    q, k, v = arrays["q"], arrays["k"], arrays["v"]
    half = q.dtype == np.float16
    out = L.output(out, q.shape, dtype=q.dtype)
    problems = batch * heads
    if (lse is not None or return_lse) and version != 3:
        raise ValueError(f"{op}: only version 3 saves the log-sum-exp (the backward is version 3's)")
    if return_lse and lse is None:
        lse = L.gpuarray().empty((batch, heads, seq), np.float32)
    elif lse is not None:
        lse = L.output(lse, (batch, heads, seq), name="lse")
    result = (out, lse) if return_lse else out
    if problems == 0 or seq == 0:
        return result
    s = _scale(scale, head_dim)
    flag = L.i32(1 if causal else 0)
    if version == 3:
        if half:
            fn = L.kernel("attention", "attention_flash_forward_half", "PPPPPiifi", _options(head_dim))
        else:
            fn = L.kernel("attention", "attention_flash_forward", "PPPPPiifi", _options(head_dim))
        L.launch(fn, (ceil_div(seq, FLASH_ROWS), problems), (FLASH_ROWS, 1, 1),
                 (L.ptr(out), L.ptr(lse), L.ptr(q), L.ptr(k), L.ptr(v), L.i32(seq), L.i32(heads), s, flag), stream)
        return result
    matrices = 2 if version == 1 else 1
    need = matrices * problems * seq * seq
    if workspace is None:
        workspace = L.gpuarray().empty((need,), np.float32)
    elif not (L.is_device_array(workspace) and workspace.dtype == np.float32 and workspace.size >= need
              and L.is_c_contiguous(workspace)):
        raise ValueError(f"{op}: workspace must be a contiguous float32 GPUArray of at least {need} floats "
                         f"({matrices} x batch * heads * seq * seq)")
    flat = workspace.reshape(-1) if len(workspace.shape) != 1 else workspace
    p = flat[problems * seq * seq * (matrices - 1):][:problems * seq * seq]
    if version == 1:
        scores = flat[:problems * seq * seq]
        fn = L.kernel("attention", "attention_scores", "PPPiifi", _options(head_dim))
        L.launch(fn, (ceil_div(seq, PAIR_TILE), ceil_div(seq, PAIR_TILE), problems), (PAIR_TILE, PAIR_TILE, 1),
                 (L.ptr(scores), L.ptr(q), L.ptr(k), L.i32(seq), L.i32(heads), s, flag), stream)
        softmax_rows(scores.reshape(problems * seq, seq), version=3, out=p.reshape(problems * seq, seq),
                     stream=stream)
    else:
        fn = L.kernel("attention", "attention_scores_softmax", "PPPiiifi", _options(head_dim))
        L.launch(fn, (ceil_div(problems * seq, ROW_WARPS), 1), (ROW_WARPS * 32, 1, 1),
                 (L.ptr(p), L.ptr(q), L.ptr(k), L.i32(problems), L.i32(seq), L.i32(heads), s, flag), stream)
    fn = L.kernel("attention", "attention_pv", "PPPii", _options(head_dim))
    L.launch(fn, (ceil_div(head_dim, PAIR_TILE), ceil_div(seq, PAIR_TILE), problems), (PAIR_TILE, PAIR_TILE, 1),
             (L.ptr(out), L.ptr(p), L.ptr(v), L.i32(seq), L.i32(heads)), stream)
    return result


def attention_backward(dout, q, k, v, out, lse, heads=1, causal=False, scale=None, dq=None, dk=None, dv=None,
                       workspace=None, stream=None):
    """The gradients (dq, dk, dv) of version 3's forward, recomputing the probabilities from its saved
    log-sum-exp ``lse`` (attention.cu explains the three launches). ``out`` and ``lse`` are that forward's
    results for the same q, k, v, heads, causal and scale. ``workspace``: a float32 [batch, heads, seq] array
    for the rows' dO . O (made when absent)."""
    op = "attention_backward"
    if getattr(q, "dtype", None) == np.float16:
        raise TypeError(f"{op} takes float32 arrays; the FP16 kernel is forward only (convert with "
                        f"ops.fp16.to_float, or train in float32)")
    arrays, batch, seq, heads, head_dim = _inputs(op, heads, dout=dout, q=q, k=k, v=v, out=out)
    dout, q, k, v, out = (arrays[n] for n in ("dout", "q", "k", "v", "out"))
    problems = batch * heads
    lse = L.device_array(lse, "lse", ndim=3)
    if tuple(lse.shape) != (batch, heads, seq):
        raise ValueError(f"{op}: lse has shape {tuple(lse.shape)}, expected {(batch, heads, seq)} "
                         f"([batch, heads, seq], as attention(..., return_lse=True) makes it)")
    dq = L.output(dq, q.shape, name="dq")
    dk = L.output(dk, q.shape, name="dk")
    dv = L.output(dv, q.shape, name="dv")
    row_dot = L.output(workspace, (batch, heads, seq), name="workspace")
    if problems == 0 or seq == 0:
        return dq, dk, dv
    s = _scale(scale, head_dim)
    flag = L.i32(1 if causal else 0)
    fn = L.kernel("attention", "attention_backward_rowdot", "PPPiii", _options(head_dim))
    L.launch(fn, (ceil_div(problems * seq, ROW_WARPS), 1), (ROW_WARPS * 32, 1, 1),
             (L.ptr(row_dot), L.ptr(dout), L.ptr(out), L.i32(problems), L.i32(seq), L.i32(heads)), stream)
    grid = (ceil_div(seq, FLASH_ROWS), problems)
    fn = L.kernel("attention", "attention_backward_dkdv", "PPPPPPPPiifi", _options(head_dim))
    L.launch(fn, grid, (FLASH_ROWS, 1, 1),
             (L.ptr(dk), L.ptr(dv), L.ptr(q), L.ptr(k), L.ptr(v), L.ptr(dout), L.ptr(lse), L.ptr(row_dot),
              L.i32(seq), L.i32(heads), s, flag), stream)
    fn = L.kernel("attention", "attention_backward_dq", "PPPPPPPiifi", _options(head_dim))
    L.launch(fn, grid, (FLASH_ROWS, 1, 1),
             (L.ptr(dq), L.ptr(q), L.ptr(k), L.ptr(v), L.ptr(dout), L.ptr(lse), L.ptr(row_dot),
              L.i32(seq), L.i32(heads), s, flag), stream)
    return dq, dk, dv


def attention_flops(batch, seq, heads, head_dim, causal=False):
    """The multiply-adds of Q K^T and P V, two FLOPs each (softmax's exponentials not counted); causal
    masking halves them (the visible pairs: seq (seq + 1) / 2)."""
    pairs = seq * (seq + 1) // 2 if causal else seq * seq
    return 2 * 2 * batch * heads * pairs * head_dim


# ---- references -----------------------------------------------------------------------------------------

def _split_heads(x, heads):
    """[batch, seq, heads * d] -> [batch, heads, seq, d], float64."""
    x = as_float64(x)
    if x.ndim != 3 or x.shape[2] % heads:
        raise ValueError(f"expected [batch, seq, heads * head_dim] with heads={heads}, got shape {x.shape}")
    b, n, w = x.shape
    return x.reshape(b, n, heads, w // heads).transpose(0, 2, 1, 3)


def _merge_heads(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def _probabilities(q, k, causal, scale):
    """P [batch, heads, seq, seq] and the rows' log-sum-exp, from head-split float64 q and k."""
    s = scale * q @ k.transpose(0, 1, 3, 2)
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    return e / total, (m + np.log(total))[..., 0]


def attention_reference(q, k, v, heads=1, causal=False, scale=None, return_lse=False):
    """softmax(mask(Q K^T * scale)) V in float64, as a float64 [batch, seq, heads * head_dim] array (and the
    rows' log-sum-exp [batch, heads, seq] with ``return_lse``)."""
    qh, kh, vh = (_split_heads(x, heads) for x in (q, k, v))
    scale = 1.0 / math.sqrt(qh.shape[-1]) if scale is None else float(scale)
    p, lse = _probabilities(qh, kh, causal, scale)
    out = _merge_heads(p @ vh)
    return (out, lse) if return_lse else out


def attention_backward_reference(dout, q, k, v, heads=1, causal=False, scale=None):
    """(dq, dk, dv) in float64 from the full probability matrix: dV = P^T dO, dP = dO V^T,
    dS = P o (dP - rowsum(dP o P)), dQ = scale dS K, dK = scale dS^T Q."""
    qh, kh, vh, doh = (_split_heads(x, heads) for x in (q, k, v, dout))
    scale = 1.0 / math.sqrt(qh.shape[-1]) if scale is None else float(scale)
    p, _ = _probabilities(qh, kh, causal, scale)
    dv = p.transpose(0, 1, 3, 2) @ doh
    dp = doh @ vh.transpose(0, 1, 3, 2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    dq = scale * ds @ kh
    dk = scale * ds.transpose(0, 1, 3, 2) @ qh
    return _merge_heads(dq), _merge_heads(dk), _merge_heads(dv)
