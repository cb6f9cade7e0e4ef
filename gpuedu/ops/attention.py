"""The attention ladder of ``gpuedu/kernels/attention.cu``: its launchers, the tiled kernel's backward, and
the NumPy float64 references.

    out = ops.attention.attention(q, k, v, heads=1, causal=False, version=3)
    out, lse = ops.attention.attention(q, k, v, version=3, return_lse=True)
    dq, dk, dv = ops.attention.attention_backward(dout, q, k, v, out, lse, heads=1, causal=False)

q, k, v are [batch, seq, heads * head_dim] (the heads side by side along the last axis), head_dim at most
MAX_HEAD_DIM; it is compiled into the kernels (-DHEAD_DIM=...), once per head size. What each version takes is
``DTYPES``: float32 (versions 1-3), float16 with float32 arithmetic (versions 3 and 4), and bfloat16 (version 4:
uint16 arrays of bfloat16 bit patterns, ``dtype="bfloat16"``; ``fp16.to_bfloat16_bits_reference`` makes them).

Version 1: scores to memory, softmax (softmax.cu, version 3), then P V: three launches, S and P (N x N each)
in global memory. Version 2: scores, mask and softmax fused in one launch (P written, S never), then P V.
Version 3: the tiled (FlashAttention-style) kernel: one launch, nothing N x N in memory, and the row
log-sum-exp that ``attention_backward`` recomputes the probabilities from.
Version 4: version 3's algorithm on the tensor cores (FlashAttention-2's layout: a warp per 16 query rows,
mma.sync m16n8k16, K and V double-buffered by cp.async): FP16 or BF16 inputs, FP32 sums, head_dim one of
MMA_HEAD_DIMS, a GPU of compute capability 8.0 or later (or the emulator); it saves the log-sum-exp too.
"""
import math

import numpy as np

from .. import backend
from .. import kernels as _kernels
from .. import launch as L
from ..launch import ceil_div
from ._common import check_version
from .elementwise import as_float64
from .softmax import softmax_rows

VERSIONS = (1, 2, 3, 4)
#: The element types each version takes (the arithmetic is float32 in every one).
DTYPES = {1: ("float32",), 2: ("float32",), 3: ("float32", "float16"), 4: ("float16", "bfloat16")}
FLOAT32_VERSIONS = tuple(v for v in VERSIONS if "float32" in DTYPES[v])

DEFAULT_HEAD_DIM = _kernels.define("attention", "HEAD_DIM")
MAX_HEAD_DIM = _kernels.define("attention", "MAX_HEAD_DIM")
FLASH_ROWS = _kernels.define("attention", "FLASH_ROWS")     # rows a block of the tiled kernels owns
FLASH_KEYS = _kernels.define("attention", "FLASH_KEYS")     # key and value rows a shared tile of version 3
BWD_TILE = _kernels.define("attention", "BWD_TILE")         # rows a streamed tile of the backward
PAIR_TILE = _kernels.define("attention", "PAIR_TILE")       # versions 1-2's 16 x 16 blocks
ROW_WARPS = _kernels.define("attention", "ROW_WARPS")       # warps a block of the one-warp-a-row kernels
MMA_WARPS = _kernels.define("attention", "MMA_WARPS")       # version 4: warps a block, 16 query rows each
MMA_ROWS = _kernels.define("attention", "MMA_ROWS")         # version 4: query rows a block owns
MMA_KEYS = _kernels.define("attention", "MMA_KEYS")         # version 4: key and value rows a shared tile
#: version 4's head sizes: its products take the features 16 at a time (mma m16n8k16's k)
MMA_HEAD_DIMS = tuple(range(16, MAX_HEAD_DIM + 1, 16))


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


def _inputs(op, heads, dtype=np.float32, **arrays):
    """The arrays as 3-D device arrays of one shape and of ``dtype``; (arrays, batch, seq, heads, head_dim)."""
    out = {}
    shape = None
    for name, x in arrays.items():
        if getattr(x, "dtype", None) == np.uint16 and dtype != np.uint16:
            raise TypeError(f"{op}: {name} is uint16; if it holds bfloat16 bit patterns, pass q, k, v all so with "
                            f"dtype='bfloat16' (version 4), else convert it to {np.dtype(dtype).name}")
        if dtype == np.uint16 and getattr(x, "dtype", np.uint16) != np.uint16:
            raise TypeError(f"{op}: {name} has dtype {x.dtype}, but bfloat16 inputs are uint16 bit patterns: make "
                            f"them from float32 with ops.fp16.to_bfloat16_bits_reference({name})")
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


def _element_type(q, dtype, version, op):
    """The element type a call asks for: "float32", "float16" (from q's dtype) or "bfloat16" (``dtype``), checked
    against what the version takes."""
    if dtype is None:
        if getattr(q, "dtype", None) == np.uint16:
            raise TypeError(f"{op}: q is uint16; if it holds bfloat16 bit patterns, pass dtype='bfloat16' "
                            f"(version 4), else convert it to float32")
        name = "float16" if getattr(q, "dtype", None) == np.float16 else "float32"
    elif dtype == "bfloat16":
        name = "bfloat16"
    else:
        raise ValueError(f"{op}: dtype={dtype!r}; leave it out (q's dtype decides: float32 or float16) or "
                         f"pass dtype='bfloat16' for uint16 arrays of bfloat16 bit patterns")
    if name not in DTYPES[version]:
        takes = [str(v) for v in VERSIONS if name in DTYPES[v]]
        which = f"versions {', '.join(takes[:-1])} and {takes[-1]}" if len(takes) > 1 else f"version {takes[0]}"
        advice = {"float32": "convert q, k, v with .astype(np.float16) (or to bfloat16 patterns with "
                             "ops.fp16.to_bfloat16_bits_reference and dtype='bfloat16'), or use version 3 for float32",
                  "float16": "convert q, k, v to float32",
                  "bfloat16": "use version 4"}[name]
        raise TypeError(f"{op} takes {' or '.join(DTYPES[version])}, not {name} ({name} is for {which}): {advice}")
    return name


def _check_tensor_cores(op, head_dim, arrays):
    """Version 4's own conditions: a head size its k16 steps divide, 16-byte aligned arrays (its cp.async
    copies and its stores move 16 bytes at a time), and a GPU that has mma m16n8k16 and cp.async (compute
    capability 8.0 on; the emulator's default device is 8.0)."""
    if head_dim not in MMA_HEAD_DIMS:
        raise ValueError(f"{op}: head_dim = {head_dim}, but the tensor-core products take the features 16 at a "
                         f"time: head_dim must be one of {', '.join(map(str, MMA_HEAD_DIMS))} (version 3 takes "
                         f"any head_dim up to {MAX_HEAD_DIM})")
    for name, x in arrays.items():
        address = int(x.gpudata)
        if address % 16:
            raise ValueError(f"{op} copies and stores 16-byte chunks (cp.async), which need 16-byte aligned arrays, "
                             f"but {name} starts at an address that is {address % 16} bytes past a multiple of 16 "
                             f"(a view into a larger array?): copy it (x.copy()) or use version 3")
    capability = tuple(backend.active().driver.Context.get_device().compute_capability())
    if capability < (8, 0):
        raise RuntimeError(f"{op} needs a GPU of compute capability 8.0 or later (mma.sync m16n8k16 and cp.async, "
                           f"from Ampere on); this one is {capability[0]}.{capability[1]}: use version 3")


def _scale(scale, head_dim):
    return np.float32(1.0 / math.sqrt(head_dim) if scale is None else scale)


def attention(q, k, v, heads=1, causal=False, version=3, scale=None, out=None, lse=None, return_lse=False,
              workspace=None, dtype=None, stream=None):
    """softmax(mask(Q K^T * scale)) V for each batch and head; scale defaults to 1 / sqrt(head_dim).

    Versions 3 and 4 also take float16 q, k, v (all three), and version 4 bfloat16 ones (uint16 arrays of
    bfloat16 bit patterns, with ``dtype="bfloat16"``): the products and sums are float32 and O is rounded to
    the inputs' type once (version 4 also rounds the probabilities to it, as the tensor cores' P V operand);
    the log-sum-exp stays float32. Version 4 takes only those two (``DTYPES``).

    ``lse`` (versions 3 and 4): a float32 [batch, heads, seq] array for the rows' log-sum-exp, which
    ``attention_backward`` needs; ``return_lse=True`` makes one and returns ``(out, lse)``.
    ``workspace`` (versions 1-2): a float32 array of batch * heads * seq * seq floats (two for version 1)
    for the N x N matrices, so that a timed call allocates nothing."""
    op = f"attention version {version}"
    check_version(version, VERSIONS, "attention")
    element = _element_type(q, dtype, version, op)
    storage = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}[element]
    arrays, batch, seq, heads, head_dim = _inputs(op, heads, dtype=storage, q=q, k=k, v=v)
    q, k, v = arrays["q"], arrays["k"], arrays["v"]
    out = L.output(out, q.shape, dtype=q.dtype)
    problems = batch * heads
    if (lse is not None or return_lse) and version < 3:
        raise ValueError(f"{op}: only versions 3 and 4 save the log-sum-exp (the backward is theirs)")
    if version == 4:
        _check_tensor_cores(op, head_dim, dict(q=q, k=k, v=v, out=out))
    if return_lse and lse is None:
        lse = L.gpuarray().empty((batch, heads, seq), np.float32)
    elif lse is not None:
        lse = L.output(lse, (batch, heads, seq), name="lse")
    result = (out, lse) if return_lse else out
    if problems == 0 or seq == 0:
        return result
    s = _scale(scale, head_dim)
    flag = L.i32(1 if causal else 0)
    args = (L.ptr(out), L.ptr(lse), L.ptr(q), L.ptr(k), L.ptr(v), L.i32(seq), L.i32(heads), s, flag)
    if version == 4:
        if element == "bfloat16":
            fn = L.kernel("attention", "attention_mma_forward_bf16", "PPPPPiifi", _options(head_dim))
        else:
            fn = L.kernel("attention", "attention_mma_forward", "PPPPPiifi", _options(head_dim))
        L.launch(fn, (ceil_div(seq, MMA_ROWS), problems), (MMA_WARPS * 32, 1, 1), args, stream)
        return result
    if version == 3:
        if element == "float16":
            fn = L.kernel("attention", "attention_flash_forward_half", "PPPPPiifi", _options(head_dim))
        else:
            fn = L.kernel("attention", "attention_flash_forward", "PPPPPiifi", _options(head_dim))
        L.launch(fn, (ceil_div(seq, FLASH_ROWS), problems), (FLASH_ROWS, 1, 1), args, stream)
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
    """The gradients (dq, dk, dv) of the tiled forward (version 3, or version 4), recomputing the probabilities
    from its saved log-sum-exp ``lse`` (attention.cu explains the three launches). ``out`` and ``lse`` are that
    forward's results for the same q, k, v, heads, causal and scale, all float32 here: a 16-bit forward's
    inputs and ``out`` converted (``fp16.to_float``; bfloat16 patterns with ``fp16.bfloat16_bits_to_float``).
    ``workspace``: a float32 [batch, heads, seq] array for the rows' dO . O (made when absent)."""
    op = "attention_backward"
    for name, x in (("dout", dout), ("q", q), ("k", k), ("v", v), ("out", out)):
        if getattr(x, "dtype", None) in (np.float16, np.uint16):
            raise TypeError(f"{op} takes float32 arrays, but {name} is {x.dtype}: the 16-bit kernels (versions 3 "
                            f"and 4) are forward only. Convert it with ops.fp16.to_float (float16) or "
                            f"ops.fp16.bfloat16_bits_to_float (bfloat16 patterns), or train in float32")
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
