"""The emulator's ``cuTensorMapEncodeTiled``: the 128 bytes of a tensor map, as ``_native/gpuedu_tma.h`` reads them.

The driver's call takes the tensor's data type, rank, address, dimensions (innermost first), the byte strides of
dimensions 1 and up, the box, the element strides, the interleave, swizzle, L2 promotion and out-of-bounds fill, and
writes an opaque ``CUtensorMap``. ``encode_tiled`` takes the same arguments, checks them as the driver does (where
the driver answers CUDA_ERROR_INVALID_VALUE, this says which argument and why), and writes the fields the
emulator's tensor copies read after a magic word: layout in gpuedu_tma.h (keep both in step).
"""
import struct

#: CUtensorMapDataType -> the element's bytes.
DATA_TYPE_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
MAGIC = b"GPUEDUTM"
SIZE = 128
SWIZZLE_BYTES = {0: None, 1: 32, 2: 64, 3: 128}   # CUtensorMapSwizzle -> its span


class TensorMapError(ValueError):
    """Arguments cuTensorMapEncodeTiled refuses (CUDA_ERROR_INVALID_VALUE), with what was wrong."""


def encode_tiled(data_type, rank, global_address, global_dim, global_strides, box_dim, element_strides,
                 interleave=0, swizzle=0, l2_promotion=0, oob_fill=0):
    """The tensor map's 128 bytes, for the arguments of ``cuTensorMapEncodeTiled`` (``global_strides``: rank - 1
    byte strides, of dimensions 1 and up); raises TensorMapError for arguments the driver refuses."""
    if data_type not in DATA_TYPE_BYTES:
        raise TensorMapError(f"tensorDataType {data_type} is not a CUtensorMapDataType (0 to 12)")
    elem = DATA_TYPE_BYTES[data_type]
    if not 1 <= rank <= 5:
        raise TensorMapError(f"tensorRank is {rank}; a tiled tensor map has rank 1 to 5")
    global_dim, box_dim = [int(d) for d in global_dim], [int(b) for b in box_dim]
    global_strides, element_strides = [int(s) for s in global_strides], [int(e) for e in element_strides]
    if (len(global_dim), len(box_dim), len(element_strides), len(global_strides)) != (rank, rank, rank, rank - 1):
        raise TensorMapError(f"a rank-{rank} map takes {rank} dimensions, boxes and element strides and {rank - 1} "
                             f"global strides; got {len(global_dim)}, {len(box_dim)}, {len(element_strides)} and "
                             f"{len(global_strides)}")
    if global_address % 16:
        raise TensorMapError(f"globalAddress 0x{global_address:x} is not 16-byte aligned")
    for d, n in enumerate(global_dim):
        if not 1 <= n <= 1 << 32:
            raise TensorMapError(f"globalDim[{d}] is {n}; each dimension is 1 to 2^32 elements")
    for d, s in enumerate(global_strides, start=1):
        if s % 16 or not 0 < s < 1 << 40:
            raise TensorMapError(f"globalStrides[{d - 1}] (dimension {d}'s stride) is {s} bytes; strides are "
                                 f"multiples of 16 below 2^40 (pad the rows to a multiple of 16 bytes)")
    for d, b in enumerate(box_dim):
        if not 1 <= b <= 256:
            raise TensorMapError(f"boxDim[{d}] is {b}; each side of a box is 1 to 256 elements")
    if box_dim[0] * elem % 16:
        raise TensorMapError(f"the box's inner side is {box_dim[0]} elements of {elem} bytes = {box_dim[0] * elem} "
                             f"bytes, not a multiple of 16")
    for d, e in enumerate(element_strides):
        if e != 1:
            raise TensorMapError(f"elementStrides[{d}] is {e}; the emulator's tensor copies take element strides "
                                 f"of 1 (every element of the box)")
    if interleave != 0:
        raise TensorMapError(f"interleave {interleave}: the emulator's tensor maps are CU_TENSOR_MAP_INTERLEAVE_NONE")
    if swizzle not in SWIZZLE_BYTES:
        raise TensorMapError(f"swizzle {swizzle} is not a CUtensorMapSwizzle (0 none, 1 32B, 2 64B, 3 128B)")
    span = SWIZZLE_BYTES[swizzle]
    if span and box_dim[0] * elem > span:
        raise TensorMapError(f"the box's inner side is {box_dim[0] * elem} bytes, more than the {span}-byte swizzle "
                             f"spans: make it at most {span // elem} elements")
    if l2_promotion not in (0, 1, 2, 3) or oob_fill not in (0, 1):
        raise TensorMapError(f"l2Promotion {l2_promotion} (0 to 3) or oobFill {oob_fill} (0 or 1) is out of range")
    if oob_fill:
        raise TensorMapError("oobFill NAN_REQUEST_ZERO_FMA: the emulator's tensor copies fill with zeros only")
    dims = global_dim + [1] * (5 - rank)
    strides = global_strides + [0] * (4 - len(global_strides))
    boxes = box_dim + [1] * (5 - rank)
    raw = (MAGIC + struct.pack("<Q8B", global_address, rank, data_type, elem, swizzle, interleave, l2_promotion,
                               oob_fill, 0)
           + struct.pack("<5Q4Q5H5B", *dims, *strides, *boxes, *([1] * 5)))
    return raw + bytes(SIZE - len(raw))
