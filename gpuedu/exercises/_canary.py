"""Sentinel values that fill the padding around every buffer and every output before a launch.

Each device buffer is allocated with ``pad`` extra elements on both sides.  The padding (and the
body of a pure output) is filled with a sentinel bit pattern that a correct kernel never produces:
afterwards a changed padding element is an out-of-bounds write, and a body element that still holds
the sentinel was never written.  This works the same on a real GPU (where an out-of-bounds write
is otherwise silent) and in the emulator (where writes past the padding also hit a guard page).
"""
import numpy as np

# Floats: a NaN with a payload no arithmetic produces (NaNs computed by a kernel carry other bits).
# Inputs are padded with another pattern than outputs: a kernel without a bounds guard that copies
# from past the end of an input to past the end of an output must still change the output's padding.
_FLOAT_BITS = {"output": {2: 0x7D5A, 4: 0x7FA5A5A5, 8: 0x7FF4A5A5A5A5A5A5},
               "input": {2: 0x7D3C, 4: 0x7FB3C3C3, 8: 0x7FF3C3C3C3C3C3C3}}
_INT_BYTE = {"output": "A5", "input": "C3"}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(array):
    """The array's raw bits as unsigned integers of the same width (for exact comparisons)."""
    return np.ascontiguousarray(array).view(_UINT[array.dtype.itemsize])


def sentinel_bits(dtype, role="output"):
    """The sentinel's bits for ``dtype``; ``role`` is "output" or "input" (another pattern)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype.itemsize in _FLOAT_BITS[role]:
        return _UINT[dtype.itemsize](_FLOAT_BITS[role][dtype.itemsize])
    return _UINT[dtype.itemsize](int(_INT_BYTE[role] * dtype.itemsize, 16))


def pad_length(n_elements):
    """Padding on each side: at least a whole maximal block's worth, and at least the buffer itself,
    so that a missing guard in a 1-D or 2-D launch lands in the padding rather than elsewhere."""
    return max(1024, int(n_elements))


def padded(body, pad, role="output"):
    """A flat host array: ``pad`` sentinels, the body's elements, ``pad`` sentinels."""
    body = np.ascontiguousarray(body)
    out = np.empty(body.size + 2 * pad, dtype=body.dtype)
    bits(out)[:] = sentinel_bits(body.dtype, role)
    out[pad:pad + body.size] = body.ravel()
    return out


def sentinel_filled(shape, dtype):
    out = np.empty(shape, dtype=dtype)
    bits(out.reshape(-1))[:] = sentinel_bits(dtype)
    return out


def is_sentinel(array, role="output"):
    """Boolean mask: elements whose bits are exactly the sentinel's."""
    return bits(array.reshape(-1)).reshape(array.shape) == sentinel_bits(array.dtype, role)


def changed_padding(flat, pad, role="output"):
    """Indices (relative to the body's start) of padding elements that no longer hold the sentinel."""
    size = flat.size - 2 * pad
    hit = ~is_sentinel(flat, role)
    before = np.nonzero(hit[:pad])[0] - pad
    after = np.nonzero(hit[pad + size:])[0] + size
    return before, after
