"""``pycuda.gpuarray`` on the CPU: a NumPy-like array that lives in device memory.

The API and the rules are PyCUDA's: ``to_gpu``, ``get``, ``empty``/``zeros``, arithmetic
with arrays of the same shape (or 0-d arrays) and scalars, result dtypes as PyCUDA
computes them, ``RuntimeError`` for operations on non-contiguous arrays, and
``sum``/``dot``/``max``/``min`` returning 0-d GPUArrays.

How it is computed differs, on purpose.  PyCUDA runs a generated CUDA kernel for every
operation.  In the emulator the device *is* the CPU and device memory is host memory,
so every operation here wraps the device memory in a NumPy array (no copy) and lets
NumPy compute in place: arithmetic on millions of elements costs what NumPy costs.
Kernels you write yourself (``SourceModule``, ``ElementwiseKernel``,
``ReductionKernel``) still run as compiled CUDA C.
"""
import builtins
import numbers
import warnings

import numpy as np

from . import driver as drv
from . import _activity, _memory
from .tools import get_or_register_dtype

__all__ = [
    "GPUArray", "to_gpu", "to_gpu_async", "empty", "zeros", "ones", "empty_like", "zeros_like",
    "ones_like", "arange", "concatenate", "stack", "transpose", "reshape", "if_positive", "where",
    "minimum", "maximum", "take", "sum", "dot", "max", "min", "any", "all", "subset_sum", "subset_dot",
    "splay", "vec", "logical_and", "logical_or", "logical_not",
]

_NOT_CONTIGUOUS = "only contiguous arrays may be used as arguments to this operation"


# --------------------------------------------------------------------------- vector types

class vec:  # noqa: N801 - PyCUDA's name
    """CUDA's vector types as NumPy structured dtypes (``vec.float4``: fields x, y, z, w of float32),
    each with its maker (``vec.make_float4(1, 2, 3, 4)``, a 0-d array of that dtype)."""


def _create_vector_types():
    bases = [("char", np.int8, 4), ("uchar", np.uint8, 4), ("short", np.int16, 4), ("ushort", np.uint16, 4),
             ("int", np.int32, 4), ("uint", np.uint32, 4), ("long", np.int64, 4), ("ulong", np.uint64, 4),
             ("longlong", np.int64, 2), ("ulonglong", np.uint64, 2), ("float", np.float32, 4),
             ("double", np.float64, 2)]
    for base_name, base_type, most in bases:
        for count in range(1, most + 1):
            name = f"{base_name}{count}"
            dtype = np.dtype([(field, base_type) for field in "xyzw"[:count]])
            get_or_register_dtype(name, dtype)
            setattr(vec, name, dtype)

            def make(*fields, _dtype=dtype, _name=name, _count=count):
                if len(fields) != _count:
                    raise TypeError(f"make_{_name}() takes {_count} values, got {len(fields)}")
                return np.array(tuple(fields), dtype=_dtype)
            make.__name__ = f"make_{name}"
            setattr(vec, make.__name__, staticmethod(make))


_create_vector_types()


# --------------------------------------------------------------------------- helpers

def splay(n, dev=None):
    """``(grid, block)`` for a grid-stride loop over ``n`` elements, as PyCUDA chooses them."""
    warp, max_threads = 32, 128
    max_blocks = 4 * 16  # 4 x thread blocks per multiprocessor x 1 multiprocessor
    if n < warp:
        blocks, threads = 1, warp
    elif n < max_blocks * warp:
        blocks, threads = (n + warp - 1) // warp, warp
    elif n < max_blocks * max_threads:
        blocks = max_blocks
        groups = (n + warp - 1) // warp
        threads = ((groups + max_blocks - 1) // max_blocks) * warp
    else:
        blocks, threads = max_blocks, max_threads
    return (blocks, 1), (threads, 1, 1)


def _c_strides(itemsize, shape):
    strides, stride = [], itemsize
    for dim in reversed(shape):
        strides.append(stride)
        stride *= builtins.max(dim, 1)
    return tuple(reversed(strides))


def _f_strides(itemsize, shape):
    strides, stride = [], itemsize
    for dim in shape:
        strides.append(stride)
        stride *= builtins.max(dim, 1)
    return tuple(strides)


def _is_contiguous(shape, strides, expected):
    # Axes of length 1 may have any stride, as in NumPy.
    return builtins.all(dim <= 1 or s == e for dim, s, e in zip(shape, strides, expected))


class _Flags:
    __slots__ = ("c_contiguous", "f_contiguous", "forc")

    def __init__(self, ary):
        size = ary.size
        self.c_contiguous = size == 0 or _is_contiguous(ary.shape, ary.strides,
                                                        _c_strides(ary.itemsize, ary.shape))
        self.f_contiguous = size == 0 or _is_contiguous(ary.shape, ary.strides,
                                                        _f_strides(ary.itemsize, ary.shape))
        self.forc = self.c_contiguous or self.f_contiguous

    def __repr__(self):
        return f"  C_CONTIGUOUS : {self.c_contiguous}\n  F_CONTIGUOUS : {self.f_contiguous}"


class _DeviceMemory:
    """Exposes device memory to NumPy through the array interface (no copy).

    The NumPy array's ``.base`` is this object, which holds the GPUArray, so the
    allocation stays alive as long as any NumPy view of it does.
    """

    __slots__ = ("__array_interface__", "owner")


def _common_dtype(a, b):
    """The dtype PyCUDA gives ``a op b``: what NumPy gives a 1-element array op ``b``."""
    other = np.zeros(1, b.dtype) if isinstance(b, GPUArray) else b
    try:
        return (np.zeros(1, a.dtype) + other).dtype
    except OverflowError:   # a Python int too big for a's integer dtype: widen, as C would
        return np.result_type(a.dtype, np.asarray(other).dtype)


def _is_scalar(x):
    return np.isscalar(x) or (isinstance(x, np.ndarray) and x.ndim == 0)


def _require_gpuarray(x, what):
    if not isinstance(x, GPUArray):
        raise TypeError(f"{what} takes GPUArrays, got {type(x).__name__}"
                        + ("; copy it to the device first with gpuarray.to_gpu(a)"
                           if isinstance(x, np.ndarray) else ""))


def _mixed_operand_error(other, op):
    hint = ("copy it to the device first with gpuarray.to_gpu(a), or bring the GPUArray back "
            "with .get()" if isinstance(other, np.ndarray) else "use a GPUArray or a number")
    return TypeError(f"unsupported operand for {op}: GPUArray and {type(other).__name__}; {hint}")


def _broadcast_shape(a, b, op):
    # PyCUDA broadcasts only a 0-d array against another array.
    if a.shape == b.shape or b.shape == ():
        return a.shape
    if a.shape == ():
        return b.shape
    raise ValueError(f"operands for {op} are not the same shape: {a.shape} and {b.shape} "
                     "(GPUArray operations do not broadcast; reshape one of them)")


# --------------------------------------------------------------------------- the array

class GPUArray:
    """An array in device memory, used like a ``numpy.ndarray``, element by element."""

    __array_priority__ = 100
    __array_ufunc__ = None   # ndarray op GPUArray must come to us (and get a clear error)

    def __init__(self, shape, dtype, allocator=None, base=None, gpudata=None, strides=None,
                 order="C"):
        dtype = np.dtype(dtype)
        if isinstance(shape, (numbers.Integral, np.integer)) or (
                isinstance(shape, np.ndarray) and shape.ndim == 0):
            shape = (int(shape),)
        try:
            shape = tuple(int(d) for d in shape)
        except TypeError:
            raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r}") from None
        if builtins.any(d < 0 for d in shape):
            raise ValueError(f"negative dimensions are not allowed: {shape}")
        size = 1
        for d in shape:
            size *= d

        if strides is None:
            if order == "C":
                strides = _c_strides(dtype.itemsize, shape)
            elif order == "F":
                strides = _f_strides(dtype.itemsize, shape)
            else:
                raise ValueError(f"invalid order: {order!r} (use 'C' or 'F')")
        else:
            strides = tuple(int(s) for s in strides)
            if len(strides) != len(shape):
                raise ValueError(f"strides {strides} do not match shape {shape}")

        self.shape = shape
        self.dtype = dtype
        self.strides = strides
        self.size = self.mem_size = size
        self.itemsize = dtype.itemsize
        self.nbytes = dtype.itemsize * size
        self.allocator = drv.mem_alloc if allocator is None else allocator
        if gpudata is None:
            if base is not None:
                raise ValueError("base may only be given together with gpudata")
            self.gpudata = self.allocator(self.nbytes) if size else None
        else:
            self.gpudata = gpudata
        self.base = base

    # ----------------------------------------------------------- properties

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def flags(self):
        return _Flags(self)

    @property
    def ptr(self):
        return int(self.gpudata)

    @property
    def _grid(self):
        return splay(self.mem_size)[0]

    @property
    def _block(self):
        return splay(self.mem_size)[1]

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "strides": self.strides, "typestr": self.dtype.str,
                "data": (int(self.gpudata) if self.gpudata is not None else 0, False),
                "stream": None, "version": 3}

    def _host_view(self):
        """A NumPy array over this array's device memory: writes to it change the device data."""
        if self.size == 0:
            return np.empty(self.shape, self.dtype)
        address = int(self.gpudata)   # a freed DeviceAllocation raises LogicError here
        # The bytes the elements span, relative to the first element (strides may be negative).
        low = builtins.sum(s * (d - 1) for s, d in zip(self.strides, self.shape) if s < 0)
        high = builtins.sum(s * (d - 1) for s, d in zip(self.strides, self.shape) if s > 0)
        high += self.itemsize
        found = _memory.find(address + low)
        if found is None:
            raise drv.LogicError(f"this GPUArray's memory (0x{address:x}) is not a live device "
                                 "allocation: it was freed")
        alloc, offset = found
        if offset < 0 or offset + (high - low) > alloc.size:
            raise drv.LogicError(f"this GPUArray spans {high - low} bytes from offset {offset} of an "
                                 f"allocation of {alloc.size} bytes: it does not fit")
        holder = _DeviceMemory()
        holder.__array_interface__ = {
            "data": (address, False), "shape": self.shape, "strides": self.strides,
            "typestr": self.dtype.str, "descr": self.dtype.descr, "version": 3}
        holder.owner = self
        return np.asarray(holder)

    def _contiguous_view(self):
        if not self.flags.forc:
            raise RuntimeError(_NOT_CONTIGUOUS)
        return self._host_view()

    # ----------------------------------------------------------- host <-> device

    def set(self, ary, async_=False, stream=None):
        """Copy the host array ``ary`` (same size and dtype) into this array."""
        if not isinstance(ary, np.ndarray):
            raise TypeError(f"set() takes a numpy array, got {type(ary).__name__}")
        if ary.size != self.size:
            raise ValueError(f"ary and self must be the same size ({ary.size} != {self.size})")
        if ary.shape != self.shape:
            warnings.warn("Setting array from one with different shape.", stacklevel=2)
            ary = ary.reshape(self.shape)
        if ary.dtype != self.dtype:
            raise ValueError(f"ary and self must have the same dtype ({ary.dtype} != {self.dtype}); "
                             f"convert with ary.astype(np.{self.dtype.name})")
        if self.size:
            with _activity.call("copy", direction="htod", stream=_activity.stream_id(stream), is_async=async_,
                                bytes=self.nbytes, pinned=_activity.is_pinned(ary)):
                np.copyto(self._host_view(), ary)

    def set_async(self, ary, stream=None):
        return self.set(ary, async_=True, stream=stream)

    def get(self, ary=None, pagelocked=False, async_=False, stream=None):
        """Copy this array to the host: a new NumPy array, or into ``ary``."""
        if ary is None:
            order = "F" if self.flags.f_contiguous and not self.flags.c_contiguous else "C"
            if pagelocked:
                ary = drv.pagelocked_empty(self.shape, self.dtype, order=order)
            else:
                ary = np.empty(self.shape, self.dtype, order=order)
        else:
            if not isinstance(ary, np.ndarray):
                raise TypeError(f"get() copies into a numpy array, got {type(ary).__name__}")
            if ary.size != self.size:
                raise ValueError(f"self and ary must be the same size ({self.size} != {ary.size})")
            if ary.dtype != self.dtype:
                raise TypeError(f"self and ary must have the same dtype ({self.dtype} != {ary.dtype})")
            if not ary.flags.writeable:
                raise ValueError("get() cannot copy into a read-only array")
            if ary.shape != self.shape:
                warnings.warn("get() between arrays of different shape is deprecated",
                              DeprecationWarning, stacklevel=2)
                ary = ary.reshape(self.shape)
        if self.size:
            with _activity.call("copy", direction="dtoh", stream=_activity.stream_id(stream), is_async=async_,
                                bytes=self.nbytes, pinned=_activity.is_pinned(ary)):
                np.copyto(ary, self._host_view())
        return ary

    def get_async(self, stream=None, ary=None):
        return self.get(ary=ary, async_=True, stream=stream)

    def copy(self, stream=None):
        result = GPUArray(self.shape, self.dtype, self.allocator, strides=self.strides)
        if self.size:
            np.copyto(result._host_view(), self._host_view())
        return result

    def __str__(self):
        return str(self.get())

    def __repr__(self):
        return repr(self.get())

    def __hash__(self):
        raise TypeError("GPUArrays are not hashable.")

    def __bool__(self):
        if self.size == 1:
            return bool(self.get())
        raise ValueError("The truth value of an array with more than one element is ambiguous. "
                         "Use a.any() or a.all()")

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    # ----------------------------------------------------------- arithmetic

    def _new_like_me(self, dtype=None, order="C"):
        strides = None
        if dtype is None:
            dtype = self.dtype
        if np.dtype(dtype) == self.dtype and self.flags.forc:
            strides = self.strides
        return GPUArray(self.shape, dtype, allocator=self.allocator, strides=strides, order=order)

    def _binary(self, other, ufunc, op, reverse=False, out=None, result_dtype=None):
        """``self op other`` (or ``other op self``) computed by NumPy in device memory."""
        mine = self._contiguous_view()
        if isinstance(other, GPUArray):
            theirs = other._contiguous_view()
            shape = _broadcast_shape(self, other, op)
            dtype = _common_dtype(self, other) if result_dtype is None else result_dtype
        elif _is_scalar(other):
            common = _common_dtype(self, other)
            theirs = common.type(other)   # e.g. a Python int too big for int32 is widened first
            shape = self.shape
            dtype = common if result_dtype is None else result_dtype
        else:
            raise _mixed_operand_error(other, op)
        if out is None:
            out = GPUArray(shape, dtype, allocator=self.allocator)
        elif out.shape != shape:
            raise ValueError(f"the result of {op} has shape {shape}, which cannot be stored in place "
                             f"in an array of shape {out.shape}")
        if out.size:
            left, right = (theirs, mine) if reverse else (mine, theirs)
            ufunc(left, right, out=out._contiguous_view(), casting="unsafe")
        return out

    def __add__(self, other):
        return self._binary(other, np.add, "+")

    __radd__ = __add__

    def __sub__(self, other):
        return self._binary(other, np.subtract, "-")

    def __rsub__(self, other):
        return self._binary(other, np.subtract, "-", reverse=True)

    def __mul__(self, other):
        return self._binary(other, np.multiply, "*")

    __rmul__ = __mul__

    def __truediv__(self, other):
        return self._binary(other, np.true_divide, "/")

    def __rtruediv__(self, other):
        return self._binary(other, np.true_divide, "/", reverse=True)

    def __pow__(self, other):
        return self._binary(other, np.power, "**")

    def __rpow__(self, other):
        return self._binary(other, np.power, "**", reverse=True)

    def __iadd__(self, other):
        return self._binary(other, np.add, "+=", out=self)

    def __isub__(self, other):
        return self._binary(other, np.subtract, "-=", out=self)

    def __imul__(self, other):
        return self._binary(other, np.multiply, "*=", out=self)

    def __itruediv__(self, other):
        return self._binary(other, np.true_divide, "/=", out=self)

    def __ipow__(self, other):
        return self._binary(other, np.power, "**=", out=self)

    def mul_add(self, selffac, other, otherfac, add_timer=None, stream=None, out=None):
        """``selffac * self + otherfac * other``."""
        _require_gpuarray(other, "mul_add")
        shape = _broadcast_shape(self, other, "mul_add")
        result = out if out is not None else GPUArray(shape, _common_dtype(self, other), self.allocator)
        if result.size:
            view = result._contiguous_view()
            np.copyto(view, selffac * self._contiguous_view() + otherfac * other._contiguous_view(),
                      casting="unsafe")
        return result

    def __neg__(self):
        result = self._new_like_me()
        if self.size:
            np.negative(self._contiguous_view(), out=result._host_view())
        return result

    def __pos__(self):
        return self

    def __abs__(self):
        dtype = np.abs(np.zeros(1, self.dtype)).dtype   # complex -> real
        result = self._new_like_me(dtype)
        if self.size:
            np.abs(self._contiguous_view(), out=result._host_view())
        return result

    # Comparisons give 1 or 0 in the operands' common dtype (array with array) or in
    # self's dtype (array with scalar), as PyCUDA's comparison kernels do.
    def _compare(self, other, ufunc, op):
        dtype = self.dtype if _is_scalar(other) else None
        return self._binary(other, ufunc, op, result_dtype=dtype)

    def __eq__(self, other):
        return self._compare(other, np.equal, "==")

    def __ne__(self, other):
        return self._compare(other, np.not_equal, "!=")

    def __lt__(self, other):
        return self._compare(other, np.less, "<")

    def __le__(self, other):
        return self._compare(other, np.less_equal, "<=")

    def __gt__(self, other):
        return self._compare(other, np.greater, ">")

    def __ge__(self, other):
        return self._compare(other, np.greater_equal, ">=")

    def fill(self, value, stream=None):
        """Set every element to ``value``; returns self."""
        if self.size:
            self._contiguous_view()[...] = value
        return self

    def reverse(self, stream=None):
        """This array, treated as 1-D, in reverse order."""
        result = self._new_like_me()
        if self.size:
            # "As 1-D" means in memory order, which is F order for an F-contiguous array.
            order = "C" if self.flags.c_contiguous else "F"
            flat = self._contiguous_view().reshape(-1, order=order)
            result._host_view().reshape(-1, order=order)[...] = flat[::-1]
        return result

    def astype(self, dtype, stream=None):
        if np.dtype(dtype) == self.dtype:
            return self.copy(stream=stream)
        result = self._new_like_me(dtype)
        if self.size:
            np.copyto(result._host_view(), self._contiguous_view(), casting="unsafe")
        return result

    def any(self, stream=None, allocator=None):
        return any(self, stream=stream, allocator=allocator)

    def all(self, stream=None, allocator=None):
        return all(self, stream=stream, allocator=allocator)

    # ----------------------------------------------------------- views

    def _view_of_me(self, shape, strides, byte_offset=0, dtype=None):
        gpudata = None if self.gpudata is None else int(self.gpudata) + byte_offset
        return GPUArray(shape, self.dtype if dtype is None else dtype, allocator=self.allocator,
                        base=self, gpudata=gpudata, strides=strides)

    def reshape(self, *shape, order="C"):
        """The same data with a new shape (a view; the array must be contiguous)."""
        if not self.flags.forc:
            raise RuntimeError(_NOT_CONTIGUOUS)
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(int(d) for d in shape)
        if shape.count(-1) > 1:
            raise ValueError("can only specify one unknown dimension")
        if -1 in shape:
            known = 1
            for d in shape:
                if d != -1:
                    known *= d
            if known == 0 or self.size % known:
                raise ValueError(f"cannot reshape array of size {self.size} into shape {shape}")
            shape = tuple(self.size // known if d == -1 else d for d in shape)
        size = 1
        for d in shape:
            size *= d
        if size != self.size:
            raise ValueError(f"total size of new array must be unchanged: cannot reshape array of "
                             f"size {self.size} into shape {shape}")
        same_order = (order == "C" and self.flags.c_contiguous) or (order == "F" and self.flags.f_contiguous)
        if shape == self.shape and same_order:
            return self
        if order not in ("C", "F"):
            raise ValueError(f"invalid order: {order!r}")
        strides = (_c_strides if order == "C" else _f_strides)(self.itemsize, shape)
        return self._view_of_me(shape, strides)

    def ravel(self):
        return self.reshape(self.size)

    def view(self, dtype=None):
        """The same bytes seen as another dtype (the last axis changes length)."""
        if dtype is None:
            return self._view_of_me(self.shape, self.strides)
        dtype = np.dtype(dtype)
        if not self.flags.c_contiguous:
            raise ValueError("view() with a new dtype needs a C-contiguous array")
        old, new = self.itemsize, dtype.itemsize
        last = self.shape[-1] if self.shape else 1
        if (last * old) % new:
            raise ValueError(f"new type not compatible with array: the last axis holds {last * old} "
                             f"bytes, not a multiple of {new}")
        if not self.shape and old != new:
            raise ValueError("a 0-d array can only be viewed as a dtype of the same size")
        shape = self.shape[:-1] + ((last * old) // new,) if self.shape else ()
        return self._view_of_me(shape, _c_strides(new, shape), dtype=dtype)

    def squeeze(self):
        keep = [i for i, d in enumerate(self.shape) if d != 1]
        return self._view_of_me(tuple(self.shape[i] for i in keep), tuple(self.strides[i] for i in keep))

    def transpose(self, axes=None):
        if axes is None:
            axes = range(self.ndim - 1, -1, -1)
        axes = tuple(axes)
        if sorted(axes) != list(range(self.ndim)):
            raise ValueError("axes don't match array")
        return self._view_of_me(tuple(self.shape[a] for a in axes), tuple(self.strides[a] for a in axes))

    @property
    def T(self):  # noqa: N802 - NumPy's name
        return self.transpose()

    def __getitem__(self, index):
        """Basic slicing (ints, slices, ``...``, ``None``) returns a view sharing the memory."""
        if not isinstance(index, tuple):
            index = (index,)
        n_real = builtins.sum(1 for e in index if e is not None and e is not Ellipsis)
        if n_real > self.ndim:
            raise IndexError(f"too many indices: array is {self.ndim}-dimensional, "
                             f"but {n_real} were indexed")
        shape, strides, offset = [], [], 0
        axis = 0
        seen_ellipsis = False
        for entry in index:
            if entry is Ellipsis:
                if seen_ellipsis:
                    raise IndexError("an index can only have a single ellipsis ('...')")
                seen_ellipsis = True
                for _ in range(self.ndim - n_real):
                    shape.append(self.shape[axis])
                    strides.append(self.strides[axis])
                    axis += 1
            elif entry is None:
                shape.append(1)
                strides.append(0)
            elif isinstance(entry, slice):
                start, stop, step = entry.indices(self.shape[axis])
                length = builtins.max(0, (stop - start + (step - (1 if step > 0 else -1))) // step)
                shape.append(length)
                strides.append(step * self.strides[axis])
                if length:
                    offset += start * self.strides[axis]
                axis += 1
            elif isinstance(entry, (numbers.Integral, np.integer)):
                i = int(entry)
                n = self.shape[axis]
                if i < 0:
                    i += n
                if not 0 <= i < n:
                    raise IndexError(f"index {int(entry)} is out of bounds for axis {axis} with size {n}")
                offset += i * self.strides[axis]
                axis += 1
            else:
                raise IndexError(f"GPUArray supports ints, slices, '...' and None as indices, "
                                 f"not {type(entry).__name__}")
        shape.extend(self.shape[axis:])
        strides.extend(self.strides[axis:])
        return self._view_of_me(tuple(shape), tuple(strides), offset)

    def __setitem__(self, index, value):
        target = self[index]
        if target.size == 0:
            return
        view = target._host_view()
        if _is_scalar(value):
            view[...] = value
        elif isinstance(value, GPUArray):
            if value.shape != target.shape:
                raise ValueError(f"cannot assign an array of shape {value.shape} to a slice of shape "
                                 f"{target.shape}")
            if value.dtype != target.dtype:
                raise TypeError(f"src and dst must have same dtype ({value.dtype} != {target.dtype})")
            np.copyto(view, value._host_view())
        elif isinstance(value, np.ndarray):
            if value.shape != target.shape:
                raise ValueError(f"cannot assign an array of shape {value.shape} to a slice of shape "
                                 f"{target.shape}")
            if value.dtype != target.dtype:
                raise TypeError(f"src and dst must have same dtype ({value.dtype} != {target.dtype})")
            np.copyto(view, value)
        else:
            raise TypeError(f"cannot assign a {type(value).__name__} to a GPUArray slice")

    # ----------------------------------------------------------- complex numbers

    @property
    def real(self):
        if not np.issubdtype(self.dtype, np.complexfloating):
            return self
        result = self._new_like_me(np.zeros(1, self.dtype).real.dtype)
        if self.size:
            result._host_view()[...] = self._contiguous_view().real
        return result

    @property
    def imag(self):
        if not np.issubdtype(self.dtype, np.complexfloating):
            return zeros_like(self)
        result = self._new_like_me(np.zeros(1, self.dtype).real.dtype)
        if self.size:
            result._host_view()[...] = self._contiguous_view().imag
        return result

    def conj(self, out=None):
        if not np.issubdtype(self.dtype, np.complexfloating):
            return self
        result = self._new_like_me() if out is None else out
        if self.size:
            np.conjugate(self._contiguous_view(), out=result._host_view())
        return result

    conjugate = conj


# --------------------------------------------------------------------------- creation

def _host_order(ary):
    return "F" if ary.flags.f_contiguous and not ary.flags.c_contiguous else "C"


def to_gpu(ary, allocator=None):
    """A new GPUArray holding a copy of the host array ``ary``."""
    if not isinstance(ary, np.ndarray):
        raise TypeError(f"to_gpu takes a numpy array, got {type(ary).__name__}; "
                        "make one with np.asarray(x, dtype=np.float32)")
    if ary.dtype == object:
        raise TypeError("to_gpu cannot copy an array of Python objects; give it a numeric dtype")
    result = GPUArray(ary.shape, ary.dtype, allocator, order=_host_order(ary))
    result.set(ary)
    return result


def to_gpu_async(ary, allocator=None, stream=None):
    return to_gpu(ary, allocator)


empty = GPUArray


def zeros(shape, dtype=np.float64, allocator=None, order="C"):
    # Fresh device memory happens to be zero here, but on a GPU it is not: always fill.
    return GPUArray(shape, dtype, allocator, order=order).fill(0)


def ones(shape, dtype=np.float64, allocator=None, order="C"):
    return GPUArray(shape, dtype, allocator, order=order).fill(1)


def _like(other, dtype, order):
    if order in ("K", "A"):
        order = "F" if other.flags.f_contiguous and not other.flags.c_contiguous else "C"
    elif order not in ("C", "F"):
        raise ValueError(f"Unsupported order: {order!r}")
    return GPUArray(other.shape, other.dtype if dtype is None else dtype, other.allocator, order=order)


def empty_like(other_ary, dtype=None, order="K"):
    return _like(other_ary, dtype, order)


def zeros_like(other_ary, dtype=None, order="K"):
    return _like(other_ary, dtype, order).fill(0)


def ones_like(other_ary, dtype=None, order="K"):
    return _like(other_ary, dtype, order).fill(1)


def arange(*args, **kwargs):
    """``arange([start,] stop[, step], dtype=None)``: evenly spaced values, as ``numpy.arange``."""
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("stream", None)
    if args and isinstance(args[-1], np.dtype) and dtype is None:
        dtype, args = args[-1], args[:-1]
    if len(args) > 3:
        raise ValueError("too many arguments")
    names = ("stop",) if len(args) == 1 else ("start", "stop", "step")
    values = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in ("start", "stop", "step"):
            raise ValueError(f"unexpected keyword argument {k!r}")
        if k in values:
            raise ValueError(f"may not specify {k!r} by position and keyword")
        values[k] = v
    if "stop" not in values:
        raise ValueError("stop argument required")
    host = np.arange(values.get("start", 0), values["stop"], values.get("step", 1), dtype=dtype)
    return to_gpu(host)


# --------------------------------------------------------------------------- shape functions

def transpose(a, axes=None):
    return a.transpose(axes)


def reshape(a, *shape, **kwargs):
    return a.reshape(*shape, **kwargs)


def concatenate(arrays, axis=0, allocator=None):
    arrays = list(arrays)
    if not arrays:
        raise ValueError("need at least one array to concatenate")
    for a in arrays:
        _require_gpuarray(a, "concatenate")
    host = np.concatenate([a._host_view() for a in arrays], axis=axis)
    return to_gpu(host, allocator or arrays[0].allocator)


def stack(arrays, axis=0, allocator=None):
    arrays = list(arrays)
    if not arrays:
        raise ValueError("need at least one array to stack")
    for a in arrays:
        _require_gpuarray(a, "stack")
    if not builtins.all(a.shape == arrays[0].shape for a in arrays):
        raise ValueError("arrays must have the same shape")
    host = np.stack([a._host_view() for a in arrays], axis=axis)
    return to_gpu(host, allocator or arrays[0].allocator)


def take(a, indices, out=None, stream=None):
    """``out[k] = a[indices[k]]`` for a 1-D GPUArray of integer ``indices``."""
    _require_gpuarray(a, "take")
    _require_gpuarray(indices, "take")
    if indices.ndim != 1 or indices.dtype.kind not in "iu":
        raise ValueError(f"take: indices must be a 1-D integer GPUArray, got {indices.ndim}-D {indices.dtype}")
    idx = indices._contiguous_view()
    flat = a._contiguous_view().reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= flat.size):
        raise IndexError(f"take: an index is outside 0..{flat.size - 1}")
    if out is None:
        out = GPUArray(indices.shape, a.dtype, a.allocator)
    if out.size:
        np.take(flat, idx, out=out._contiguous_view())
    return out


# --------------------------------------------------------------------------- conditionals

def if_positive(criterion, then_, else_, out=None, stream=None):
    if not (criterion.shape == then_.shape == else_.shape):
        raise ValueError("shapes do not match")
    if then_.dtype != else_.dtype:
        raise ValueError("dtypes do not match")
    return _select(criterion, then_, else_, out, positive=True)


def where(criterion, then_, else_, out=None, stream=None):
    if not (criterion.shape == then_.shape == else_.shape):
        raise NotImplementedError("shape broadcast not implemented")
    if then_.dtype != else_.dtype:
        raise NotImplementedError("dtype broadcast not implemented")
    return _select(criterion, then_, else_, out, positive=False)


def _select(criterion, then_, else_, out, positive):
    out = empty_like(then_) if out is None else out
    if out.size:
        c = criterion._contiguous_view()
        np.copyto(out._host_view(), np.where(c > 0 if positive else c != 0,
                                             then_._contiguous_view(), else_._contiguous_view()))
    return out


def _minmax_elementwise(ufunc, name):
    def f(a, b, out=None, stream=None):
        if not isinstance(a, GPUArray):
            a, b = b, a          # the scalar may come first
        _require_gpuarray(a, name)
        if isinstance(b, GPUArray):
            _broadcast_shape(a, b, name)
        elif not _is_scalar(b):
            raise _mixed_operand_error(b, name)
        if out is None:
            out = empty_like(a)
        if out.size:
            ufunc(a._contiguous_view(), b._contiguous_view() if isinstance(b, GPUArray) else b,
                  out=out._contiguous_view(), casting="unsafe")
        return out

    f.__name__ = name
    f.__doc__ = f"Elementwise {name} of two arrays, or of an array and a scalar."
    return f


minimum = _minmax_elementwise(np.minimum, "minimum")
maximum = _minmax_elementwise(np.maximum, "maximum")


# --------------------------------------------------------------------------- logical operations

def _truth(x):
    return x._contiguous_view() if isinstance(x, GPUArray) else x


def _logical(ufunc, name, x1, x2, out, allocator):
    arrays = [x for x in (x1, x2) if isinstance(x, GPUArray)]
    for x in (x1, x2):
        if not isinstance(x, GPUArray) and not np.isscalar(x):
            raise ValueError(f"{name} takes scalars or GPUArrays, got {type(x).__name__}")
    if len(arrays) == 2 and x1.shape != x2.shape:
        raise NotImplementedError(f"{name}: broadcasting is not supported ({x1.shape} and {x2.shape})")
    shape = arrays[0].shape if arrays else ()
    allocator = allocator or (arrays[0].allocator if arrays else None)
    if out is None:
        out = GPUArray(shape, np.bool_, allocator=allocator)
    if out.shape != shape or out.dtype != np.bool_:
        raise ValueError(f"{name}: out must be a bool array of shape {shape}, got {out.dtype} {out.shape}")
    if out.size:
        ufunc(_truth(x1), _truth(x2), out=out._contiguous_view())
    return out


def logical_and(x1, x2, /, out=None, *, allocator=None):
    """Elementwise ``x1 && x2`` of arrays of one shape (or an array and a scalar), as a bool array."""
    return _logical(np.logical_and, "logical_and", x1, x2, out, allocator)


def logical_or(x1, x2, /, out=None, *, allocator=None):
    """Elementwise ``x1 || x2`` of arrays of one shape (or an array and a scalar), as a bool array."""
    return _logical(np.logical_or, "logical_or", x1, x2, out, allocator)


def logical_not(x, /, out=None, *, allocator=None):
    """Elementwise ``!x``, as a bool array."""
    if not isinstance(x, GPUArray) and not np.isscalar(x):
        raise ValueError(f"logical_not takes a scalar or a GPUArray, got {type(x).__name__}")
    shape = x.shape if isinstance(x, GPUArray) else ()
    if out is None:
        out = GPUArray(shape, np.bool_, allocator=allocator or getattr(x, "allocator", None))
    if out.size:
        np.logical_not(_truth(x), out=out._contiguous_view())
    return out


# --------------------------------------------------------------------------- reductions

def _scalar_result(value, dtype, allocator):
    result = GPUArray((), dtype, allocator)
    result._host_view()[...] = value
    return result


def sum(a, dtype=None, stream=None, allocator=None):  # noqa: A001 - PyCUDA's name
    """The sum of all elements, as a 0-d GPUArray (dtype defaults to ``a.dtype``)."""
    _require_gpuarray(a, "sum")
    dtype = a.dtype if dtype is None else np.dtype(dtype)
    total = np.sum(a._contiguous_view(), dtype=dtype) if a.size else dtype.type(0)
    return _scalar_result(total, dtype, allocator or a.allocator)


def subset_sum(subset, a, dtype=None, stream=None, allocator=None):
    """The sum of ``a[subset]`` (``subset`` a GPUArray of indices), as a 0-d GPUArray."""
    _require_gpuarray(subset, "subset_sum")
    _require_gpuarray(a, "subset_sum")
    dtype = a.dtype if dtype is None else np.dtype(dtype)
    picked = a._contiguous_view().reshape(-1)[subset._contiguous_view().reshape(-1)]
    return _scalar_result(np.sum(picked, dtype=dtype), dtype, allocator or a.allocator)


def dot(a, b, dtype=None, stream=None, allocator=None):
    """``sum(a * b)`` over all elements, as a 0-d GPUArray."""
    _require_gpuarray(a, "dot")
    _require_gpuarray(b, "dot")
    if a.shape != b.shape:
        raise ValueError(f"dot: the arrays are not the same shape: {a.shape} and {b.shape}")
    dtype = _common_dtype(a, b) if dtype is None else np.dtype(dtype)
    x = a._contiguous_view().reshape(-1).astype(dtype, copy=False)
    y = b._contiguous_view().reshape(-1).astype(dtype, copy=False)
    # vdot conjugates its first argument; PyCUDA's dot does not.
    total = np.dot(x, y) if a.size else dtype.type(0)
    return _scalar_result(total, dtype, allocator or a.allocator)


def subset_dot(subset, a, b, dtype=None, stream=None, allocator=None):
    _require_gpuarray(subset, "subset_dot")
    idx = subset._contiguous_view().reshape(-1)
    dtype = _common_dtype(a, b) if dtype is None else np.dtype(dtype)
    x = a._contiguous_view().reshape(-1)[idx].astype(dtype)
    y = b._contiguous_view().reshape(-1)[idx].astype(dtype)
    return _scalar_result(np.dot(x, y), dtype, allocator or a.allocator)


def _extreme(ufunc, name):
    def f(a, stream=None):
        _require_gpuarray(a, name)
        if a.size == 0:
            raise ValueError(f"{name}() of an empty array has no value")
        return _scalar_result(ufunc.reduce(a._contiguous_view(), axis=None), a.dtype, a.allocator)

    f.__name__ = name
    f.__doc__ = f"The {name}imum element, as a 0-d GPUArray."
    return f


max = _extreme(np.maximum, "max")  # noqa: A001 - PyCUDA's name
min = _extreme(np.minimum, "min")  # noqa: A001 - PyCUDA's name


def subset_max(subset, a, stream=None):
    idx = subset._contiguous_view().reshape(-1)
    return _scalar_result(a._contiguous_view().reshape(-1)[idx].max(), a.dtype, a.allocator)


def subset_min(subset, a, stream=None):
    idx = subset._contiguous_view().reshape(-1)
    return _scalar_result(a._contiguous_view().reshape(-1)[idx].min(), a.dtype, a.allocator)


def any(a, stream=None, allocator=None):  # noqa: A001 - PyCUDA's name
    _require_gpuarray(a, "any")
    return _scalar_result(np.any(a._contiguous_view()), np.bool_, allocator or a.allocator)


def all(a, stream=None, allocator=None):  # noqa: A001 - PyCUDA's name
    _require_gpuarray(a, "all")
    return _scalar_result(np.all(a._contiguous_view()), np.bool_, allocator or a.allocator)
