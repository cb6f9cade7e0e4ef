"""The kernels of ``gpuedu/kernels/fp16_amp.cu`` that mixed-precision training (``gpuedu.nn.amp``) adds around
the FP16 layers: unscaling the FP16 gradients, the loss scaler's rules, the FP16 loss, the FP16 bias gradient,
re-rounding the FP16 weights; and the NumPy references of the first and the loss.

The loss scaler's int32 state on the device is indexed by FOUND_INF, SKIP, GOOD_STEPS, STEPS, SKIPPED, read
from fp16_amp.cu's #defines.
"""
import numpy as np

from .. import kernels as _kernels
from .. import launch as L
from ..checks import to_device_labels

THREADS = 256
SUM_THREADS = _kernels.define("fp16_amp", "SUM_THREADS")   # the one block of sum_loss_rows

# The int32 state of a LossScaler on the device, by index.
FOUND_INF, SKIP, GOOD_STEPS, STEPS, SKIPPED = (_kernels.define("fp16_amp", name) for name in
                                               ("FOUND_INF", "SKIP", "GOOD_STEPS", "STEPS", "SKIPPED"))
STATE_SIZE = 1 + max(FOUND_INF, SKIP, GOOD_STEPS, STEPS, SKIPPED)


def unscale(grad, found_inf, g16, scale, stream=None):
    """grad = g16 / S in FP32 (S: the 1-element float32 device array ``scale``), raising the int32 device
    flag ``found_inf`` if any of g16 is Inf or NaN."""
    if g16.dtype != np.float16 or grad.dtype != np.float32 or g16.size != grad.size:
        raise ValueError(f"unscale needs (float16 gradient, float32 parameter) of one size, got "
                         f"{g16.dtype}[{g16.size}] and {grad.dtype}[{grad.size}]")
    f = L.kernel("fp16_amp", "unscale_half_to_float", "PPPPi")
    L.launch(f, (max(1, L.ceil_div(g16.size, THREADS)), 1), (THREADS, 1, 1),
             (L.ptr(grad), L.ptr(found_inf), L.ptr(g16), L.ptr(scale), L.i32(g16.size)), stream)


def update_loss_scale(scale, state, scales, history, dynamic, growth_factor, backoff_factor, growth_interval,
                      min_scale, max_scale, stream=None):
    """The loss scaler's rules, in one thread: the verdict (state[SKIP]), back off or grow S, count the step,
    record S in ``scales`` (at step % history), clear state[FOUND_INF]."""
    f = L.kernel("fp16_amp", "update_loss_scale", "PPPiiffiff")
    L.launch(f, (1, 1), (1, 1, 1),
             (L.ptr(scale), L.ptr(state), L.ptr(scales), L.i32(history), L.i32(dynamic), L.f32(growth_factor),
              L.f32(backoff_factor), L.i32(growth_interval), L.f32(min_scale), L.f32(max_scale)), stream)


def softmax_xent(logits16, labels, grad_scale=1.0, loss_rows=None, dlogits=None, stream=None, bad_labels=None):
    """Cross-entropy of FP16 logits (softmax in FP32).  Returns (loss_rows float32 [B],
    dlogits float16 [B, C] = grad_scale * (softmax - onehot) / B), both on the device.

    ``grad_scale``: a number, or a 1-element float32 GPUArray holding it on the device (a scaler's
    ``scale_on_device``: the host need not know S).  ``loss_rows``/``dlogits``: buffers to reuse.
    Labels on the device are not read by the host: a row whose label is not in [0, C) gets loss 0 and a
    zero gradient, and is counted in ``bad_labels`` (a 1-element int32 GPUArray) when one is given."""
    if logits16.dtype != np.float16 or len(logits16.shape) != 2:
        raise TypeError(f"logits must be a 2-D float16 GPUArray, got {logits16.dtype} {tuple(logits16.shape)}")
    rows, classes = logits16.shape
    labels = to_device_labels(labels, classes, rows)
    if L.is_device_array(grad_scale):
        if grad_scale.dtype != np.float32 or grad_scale.size != 1:
            raise TypeError(f"a device grad_scale must be a 1-element float32 GPUArray, got "
                            f"{grad_scale.dtype}[{grad_scale.size}]")
        host_scale, device_scale = np.float32(1.0), np.uintp(L.ptr(grad_scale))
    else:
        host_scale, device_scale = np.float32(grad_scale), np.uintp(0)
    ga = L.gpuarray()
    loss_rows = ga.empty(rows, np.float32) if loss_rows is None else loss_rows
    dlogits = ga.empty((rows, classes), np.float16) if dlogits is None else dlogits
    if bad_labels is not None and not (L.is_device_array(bad_labels) and bad_labels.dtype == np.int32
                                       and bad_labels.size == 1):
        raise TypeError("bad_labels must be a 1-element int32 GPUArray (the count of rows whose label is not a class)")
    f = L.kernel("fp16_amp", "softmax_xent_half", "PPPPPPiif")
    L.launch(f, (L.ceil_div(rows, 128), 1), (128, 1, 1),
             (L.ptr(dlogits), L.ptr(loss_rows), np.uintp(0) if bad_labels is None else L.ptr(bad_labels),
              L.ptr(logits16), L.ptr(labels), device_scale,
              L.i32(rows), L.i32(classes), host_scale), stream)
    return loss_rows, dlogits


def sum_loss_rows(loss_rows, step_loss, loss_total, stream=None):
    """``step_loss`` = mean of ``loss_rows`` (float32 [1]) and ``loss_total`` += their sum (float64 [1]),
    on the device, in a fixed order (the same sums on every run)."""
    f = L.kernel("fp16_amp", "sum_loss_rows", "PPPi")
    L.launch(f, (1, 1), (SUM_THREADS, 1, 1),
             (L.ptr(step_loss), L.ptr(loss_total), L.ptr(loss_rows), L.i32(loss_rows.size)), stream)


def bias_grad(dz16, out=None, stream=None):
    """Column sums of an FP16 [rows, cols] matrix, summed in FP32, stored as FP16 [cols]."""
    rows, cols = dz16.shape
    out = L.gpuarray().empty(cols, np.float16) if out is None else out
    f = L.kernel("fp16_amp", "bias_grad_half", "PPii")
    L.launch(f, (max(1, L.ceil_div(cols, THREADS)), 1), (THREADS, 1, 1),
             (L.ptr(out), L.ptr(dz16), L.i32(rows), L.i32(cols)), stream)
    return out


def refresh_half_copy(copy, master, skip, round_masters=False, stream=None):
    """copy = the FP16 rounding of the FP32 ``master`` (and master = its FP16 value if ``round_masters``),
    unless the device flag ``skip`` (a kernel argument: ``ops.optim.skip_pointer``) is set."""
    f = L.kernel("fp16_amp", "refresh_half_copy", "PPPii")
    L.launch(f, (max(1, L.ceil_div(master.size, THREADS)), 1), (THREADS, 1, 1),
             (L.ptr(copy), L.ptr(master), skip, L.i32(master.size), L.i32(bool(round_masters))), stream)


def _table_of(table, pairs, dtypes, what):
    """The device table of ``pairs`` of arrays of ``dtypes`` and one size, for a multi-tensor kernel (``what``
    names the pairs in the error)."""
    for first, second in pairs:
        if (first.dtype, second.dtype) != dtypes or first.size != second.size:
            raise ValueError(f"{what} pairs of one size, got {first.dtype}[{first.size}] and "
                             f"{second.dtype}[{second.size}]")
    return table.device_table(pairs)


def unscale_multi(table, pairs, found_inf, scale, stream=None):
    """``unscale`` for every (float32 gradient, float16 gradient) pair of ``pairs`` in one launch;
    ``table``: an ``ops.optim.TensorTable`` kept by the caller (rebuilt only when an address changes)."""
    array = _table_of(table, pairs, (np.float32, np.float16), "unscale needs (float32 parameter, float16 gradient)")
    f = L.kernel("fp16_amp", "unscale_half_to_float_multi", "PPPi")
    L.launch(f, table.grid(), (THREADS, 1, 1), (L.ptr(found_inf), L.ptr(array), L.ptr(scale), L.i32(table.count)),
             stream)


def refresh_half_copy_multi(table, pairs, skip, round_masters=False, stream=None):
    """``refresh_half_copy`` for every (float16 copy, float32 master) pair of ``pairs`` in one launch."""
    array = _table_of(table, pairs, (np.float16, np.float32), "refresh needs (float16 copy, float32 master)")
    f = L.kernel("fp16_amp", "refresh_half_copy_multi", "PPii")
    L.launch(f, table.grid(), (THREADS, 1, 1), (L.ptr(array), skip, L.i32(table.count), L.i32(bool(round_masters))),
             stream)


# ---- NumPy references ----------------------------------------------------------------------------

def unscale_reference(g16, scale):
    """FP16 gradients divided by the loss scale in FP32, and whether any was Inf or NaN."""
    g = np.asarray(g16, np.float16).astype(np.float32)
    return (g * np.float32(1.0 / scale)).astype(np.float32), bool(not np.all(np.isfinite(g)))


def softmax_xent_reference(logits16, labels, grad_scale=1.0):
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
