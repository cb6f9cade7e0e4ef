"""Tensor maps for Hopper's Tensor Memory Accelerator (TMA): the host side of ``cp.async.bulk.tensor``.

A TMA copy moves a box (a tile) of a tensor between global and shared memory, described by a tensor map: 128
bytes the driver's ``cuTensorMapEncodeTiled`` writes, which a kernel takes by value::

    extern "C" __global__ void k(const __grid_constant__ CUtensorMap a_map, half* c, int n) { ... }

PyCUDA has no wrapper for that call, so this module is one::

    from gpuedu import tma
    a_map = tma.tensor_map(a_gpu, box=(128, 64), swizzle=128)
    kernel(a_map, c_gpu, np.int32(n), block=..., grid=...)

``tensor_map`` takes the array in NumPy's order (rows, columns) and turns it into the driver's (innermost
dimension first, byte strides of the outer ones). On a GPU it calls the driver through ctypes; on the emulator,
the emulator's equivalent (``gpuedu.emulator.hooks.encode_tensor_map``, the same arguments), whose copies
``_native/gpuedu_tma.h`` runs. Both check the arguments first, here, so that a box the driver would refuse with
CUDA_ERROR_INVALID_VALUE is refused with the reason.

A map is a NumPy structured scalar (``np.void``) of those 128 bytes, which PyCUDA and the emulator both pass to a
kernel by value. It holds the array's address, not the array: keep the array alive while kernels use the map.
``describe(map)`` reads back what an emulator's map says. Pass tensor maps first in a kernel's parameter list: a
CUtensorMap is 64-byte aligned, and PyCUDA packs the arguments one after another.
"""
import ctypes

import numpy as np

from . import backend
from .emulator import hooks

#: NumPy dtype -> CUtensorMapDataType. (A copy moves bits: BF16, kept as uint16 bit patterns, is UINT16.)
DATA_TYPES = {np.dtype(np.uint8): 0, np.dtype(np.int8): 0, np.dtype(np.uint16): 1, np.dtype(np.int16): 1,
              np.dtype(np.uint32): 2, np.dtype(np.int32): 3, np.dtype(np.uint64): 4, np.dtype(np.int64): 5,
              np.dtype(np.float16): 6, np.dtype(np.float32): 7, np.dtype(np.float64): 8}
#: swizzle= in bytes -> CUtensorMapSwizzle.
SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}
CUDA_SUCCESS = 0
TENSOR_MAP_BYTES = 128   # sizeof(CUtensorMap)


def _address(array):
    for name in ("gpudata", "ptr"):
        value = getattr(array, name, None)
        if value is not None:
            try:
                return int(value)
            except TypeError:
                pass
    raise TypeError(f"tensor_map takes a device array (a GPUArray), got {type(array).__name__}; copy a NumPy array "
                    f"to the device first (gpuarray.to_gpu(a))")


def _emulated(address):
    """Whether the tensor at ``address`` lives in the emulator's memory (whose maps the emulator makes), or the
    emulator is the backend; else it is a GPU's, whose driver makes the map."""
    return hooks.holds_address(address) or backend.active().name == "cpu"


def tensor_map(array, box, swizzle=0):
    """The tensor map of ``array`` (a device array of rank 1 to 5, its last dimension contiguous) for boxes of
    ``box`` elements (a tuple in the array's order: (rows, columns) for a matrix), with ``swizzle`` 0, 32, 64 or 128
    bytes (how a box's 16-byte chunks are placed in shared memory; the box's row, columns x itemsize, must be at
    most that). Returns the map, 128 bytes as a ``np.void`` a kernel takes by value. Raises ValueError (the reason
    and the fix) for what the driver would refuse."""
    shape = tuple(int(n) for n in getattr(array, "shape", ()))
    dtype = np.dtype(getattr(array, "dtype", np.uint8))
    address = _address(array)
    box = tuple(int(b) for b in np.atleast_1d(box))
    if not 1 <= len(shape) <= 5:
        raise ValueError(f"a tensor map describes an array of 1 to 5 dimensions; this one has shape {shape}")
    if len(box) != len(shape):
        raise ValueError(f"box {box} has {len(box)} sides, and the array {len(shape)} dimensions {shape}: give one "
                         f"side a dimension, in the array's order")
    if dtype not in DATA_TYPES:
        raise ValueError(f"a tensor map's elements are 1, 2, 4 or 8-byte integers or floats; this array is {dtype}")
    if swizzle not in SWIZZLES:
        raise ValueError(f"swizzle is 0 (none), 32, 64 or 128 bytes, got {swizzle!r}")
    strides = tuple(int(s) for s in getattr(array, "strides", ()))
    if len(strides) != len(shape) or (shape[-1] > 1 and strides[-1] != dtype.itemsize) or any(s <= 0 for s in strides):
        raise ValueError(f"the array's last dimension must be contiguous and its strides positive (strides "
                         f"{strides} for shape {shape} of {dtype}): copy it to a C-ordered array first")
    data_type = DATA_TYPES[dtype]
    dims = shape[::-1]
    outer_strides = strides[-2::-1] if len(shape) > 1 else ()
    args = (data_type, len(shape), address, dims, outer_strides, box[::-1], (1,) * len(shape), 0, SWIZZLES[swizzle],
            0, 0)
    try:
        raw = hooks.encode_tensor_map(*args)
    except hooks.TensorMapError as exc:
        raise ValueError(f"cannot map {shape} {dtype} in boxes of {box} with swizzle {swizzle}: {exc}") from None
    if not _emulated(address):
        raw = _driver_encode(*args)
    return np.void(raw)


def describe(tmap):
    """What a tensor map the emulator made says (a dict: the tensor's address, shape and strides in bytes, in the
    array's order, the element's bytes, the box and the swizzle in bytes); a map the driver made is opaque, and
    this says so (ValueError)."""
    raw = bytes(memoryview(tmap))
    if len(raw) != TENSOR_MAP_BYTES or raw[:8] != b"GPUEDUTM":
        raise ValueError("this tensor map was made by the driver (a GPU's cuTensorMapEncodeTiled), whose 128 bytes "
                         "are opaque; describe() reads the emulator's")
    address, rank, elem, swizzle = int.from_bytes(raw[8:16], "little"), raw[16], raw[18], raw[19]
    dims = [int.from_bytes(raw[24 + 8 * d:32 + 8 * d], "little") for d in range(rank)]
    strides = [elem] + [int.from_bytes(raw[64 + 8 * d:72 + 8 * d], "little") for d in range(rank - 1)]
    box = [int.from_bytes(raw[96 + 2 * d:98 + 2 * d], "little") for d in range(rank)]
    return {"address": address, "shape": tuple(dims[::-1]), "strides": tuple(strides[::-1]), "itemsize": elem,
            "box": tuple(box[::-1]), "swizzle": {0: 0, 1: 32, 2: 64, 3: 128}[swizzle]}


_encode = None


def _driver_encode(data_type, rank, address, dims, strides, box, element_strides, interleave, swizzle, l2, oob):
    """cuTensorMapEncodeTiled from the driver (libcuda), in the current context."""
    global _encode
    if _encode is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            fn = lib.cuTensorMapEncodeTiled
        except (OSError, AttributeError) as exc:
            raise RuntimeError(f"the driver's cuTensorMapEncodeTiled is not available ({exc}): TMA needs CUDA 12 or "
                               f"later and a Hopper GPU") from None
        u32, u64 = ctypes.c_uint32, ctypes.c_uint64
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, u32, ctypes.c_void_p, ctypes.POINTER(u64), ctypes.POINTER(u64),
                       ctypes.POINTER(u32), ctypes.POINTER(u32), ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int]
        fn.restype = ctypes.c_int
        _encode = fn
    room = ctypes.create_string_buffer(TENSOR_MAP_BYTES + 64)   # a CUtensorMap is 64-byte aligned
    at = (ctypes.addressof(room) + 63) // 64 * 64
    u32s, u64s = ctypes.c_uint32 * rank, ctypes.c_uint64 * rank
    status = _encode(at, data_type, rank, address, u64s(*dims), (ctypes.c_uint64 * max(rank - 1, 1))(*strides),
                     u32s(*box), u32s(*element_strides), interleave, swizzle, l2, oob)
    if status != CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed with CUresult {status} for dimensions {dims}, strides "
                           f"{strides}, box {box}, swizzle {swizzle} (innermost first)")
    return ctypes.string_at(at, TENSOR_MAP_BYTES)
