"""The kernels of ``gpuedu/kernels/nn_optim.cu``: the optimizers' update rules, per tensor or for every tensor
in one launch (``*_update_multi``, which read their tensors' addresses from a ``TensorTable``).

``skip`` (every launcher) is the kernel argument of an optional int32 device flag (``skip_pointer``): when it
holds a nonzero value on the device, the kernels leave the parameters and the optimizer's state untouched.
"""
import numpy as np

from .. import launch as L

THREADS = 256
MAX_BLOCKS = 1024    # blocks of a multi-tensor launch: about one full wave of an H200 (132 SMs x 2048 threads)


def skip_pointer(skip):
    """The kernel argument for an optional device skip flag: its address, or 0 (NULL: never skip)."""
    if skip is None:
        return L.NULL
    if getattr(skip, "dtype", None) != np.int32 or getattr(skip, "size", 0) != 1 or not hasattr(skip, "gpudata"):
        raise TypeError("skip must be None or a 1-element int32 GPUArray (a device flag: nonzero = skip), "
                        f"got {type(skip).__name__} {getattr(skip, 'dtype', '')}")
    return L.ptr(skip)


class TensorTable:
    """The device table a multi-tensor kernel reads: int64 offsets[count + 1] (prefix sums of the sizes),
    then each tensor's array addresses.  Rebuilt (an allocation and a copy) only when an address changes,
    so after the first step it costs the host a tuple comparison."""

    def __init__(self):
        self._addresses = None
        self.array, self.count, self.total = None, 0, 0

    def device_table(self, rows):
        """``rows``: per tensor, the arrays the kernel reads (equal sizes); returns the device table."""
        addresses = tuple(L.ptr(a) for row in rows for a in row)
        if addresses != self._addresses:
            offsets = np.concatenate([[0], np.cumsum([row[0].size for row in rows])]).astype(np.int64)
            self.array = L.gpuarray().to_gpu(np.concatenate([offsets, np.array(addresses, np.int64)]))
            self._addresses, self.count, self.total = addresses, len(rows), int(offsets[-1])
        return self.array

    def grid(self):
        return (max(1, min(L.ceil_div(self.total, THREADS), MAX_BLOCKS)), 1)


def sgd_update_multi(table, rows, skip, lr, momentum, weight_decay, stream=None):
    """SGD with momentum on every tensor at once; ``rows``: (value, grad, velocity) per tensor."""
    array = table.device_table(rows)
    f = L.kernel("nn_optim", "sgd_update_multi", "PPifff")
    L.launch(f, table.grid(), (THREADS, 1, 1),
             (L.ptr(array), skip, L.i32(table.count), L.f32(lr), L.f32(momentum), L.f32(weight_decay)), stream)


def sgd_update(value, velocity, grad, skip, lr, momentum, weight_decay, stream=None):
    """v = mu v + g (+ weight decay); w = w - lr v, on one tensor."""
    f = L.kernel("nn_optim", "sgd_update", "PPPPifff")
    L.launch(f, (L.ceil_div(value.size, THREADS), 1), (THREADS, 1, 1),
             (L.ptr(value), L.ptr(velocity), L.ptr(grad), skip, L.i32(value.size),
              L.f32(lr), L.f32(momentum), L.f32(weight_decay)), stream)


def adam_begin_step(t, corrections, skip, beta1, beta2, stream=None):
    """Count the step on the device (unless skipped) and set the bias corrections (1 - beta^t)."""
    f = L.kernel("nn_optim", "adam_begin_step", "PPPdd")
    L.launch(f, (1, 1), (1, 1, 1), (L.ptr(t), L.ptr(corrections), skip, np.float64(beta1), np.float64(beta2)),
             stream)


def adam_update_multi(table, rows, corrections, skip, lr, beta1, beta2, eps, weight_decay, stream=None):
    """Adam on every tensor at once; ``rows``: (value, grad, m, v) per tensor."""
    array = table.device_table(rows)
    f = L.kernel("nn_optim", "adam_update_multi", "PPPifffff")
    L.launch(f, table.grid(), (THREADS, 1, 1),
             (L.ptr(array), L.ptr(corrections), skip, L.i32(table.count), L.f32(lr),
              L.f32(beta1), L.f32(beta2), L.f32(eps), L.f32(weight_decay)), stream)


def adam_update(value, m, v, grad, corrections, skip, lr, beta1, beta2, eps, weight_decay, stream=None):
    """Adam on one tensor."""
    f = L.kernel("nn_optim", "adam_update", "PPPPPPifffff")
    L.launch(f, (L.ceil_div(value.size, THREADS), 1), (THREADS, 1, 1),
             (L.ptr(value), L.ptr(m), L.ptr(v), L.ptr(grad), L.ptr(corrections), skip, L.i32(value.size),
              L.f32(lr), L.f32(beta1), L.f32(beta2), L.f32(eps), L.f32(weight_decay)), stream)
