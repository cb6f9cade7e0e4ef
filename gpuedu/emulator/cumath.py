"""``pycuda.cumath``: elementwise math functions on GPUArrays (``cumath.exp(a)``).

As in ``gpuarray``, the emulator computes them with NumPy directly in device memory.
Results keep the input's dtype, as PyCUDA's generated kernels do.
"""
import numpy as np

from .driver import Stream
from .gpuarray import GPUArray

__all__ = ["fabs", "ceil", "floor", "exp", "log", "log10", "sqrt", "sin", "cos", "tan", "asin", "acos",
           "atan", "sinh", "cosh", "tanh", "fmod", "ldexp", "modf", "frexp"]


def _check(array, name):
    if not isinstance(array, GPUArray):
        raise TypeError(f"cumath.{name} takes a GPUArray, got {type(array).__name__}"
                        + ("; copy it with gpuarray.to_gpu(a)" if isinstance(array, np.ndarray) else ""))
    if not array.flags.forc:
        raise RuntimeError("only contiguous arrays may be used as arguments to this operation")


def _unary(ufunc, name):
    def f(array, stream_or_out=None, *, out=None, stream=None):
        _check(array, name)
        # PyCUDA's older positional form: a stream or an out array. The stream needs nothing here: the work is
        # done when the call returns, whichever stream it was queued on.
        if stream_or_out is not None and not isinstance(stream_or_out, Stream):
            out = stream_or_out
        result = array._new_like_me() if out is None else out
        if result.shape != array.shape or result.dtype != array.dtype:
            raise ValueError(f"cumath.{name}: out must have the input's shape and dtype")
        if array.size:
            with np.errstate(all="ignore"):   # a GPU gives nan/inf silently; so do we
                ufunc(array._host_view(), out=result._host_view(), casting="unsafe")
        return result

    f.__name__ = name
    f.__doc__ = (f"Elementwise {name} of a GPUArray (same dtype), as ``numpy.{ufunc.__name__}``; "
                 "``out=`` an array to write, ``stream=`` the stream to queue it on.")
    return f


fabs = _unary(np.fabs, "fabs")
ceil = _unary(np.ceil, "ceil")
floor = _unary(np.floor, "floor")
exp = _unary(np.exp, "exp")
log = _unary(np.log, "log")
log10 = _unary(np.log10, "log10")
sqrt = _unary(np.sqrt, "sqrt")
sin = _unary(np.sin, "sin")
cos = _unary(np.cos, "cos")
tan = _unary(np.tan, "tan")
asin = _unary(np.arcsin, "asin")
acos = _unary(np.arccos, "acos")
atan = _unary(np.arctan, "atan")
sinh = _unary(np.sinh, "sinh")
cosh = _unary(np.cosh, "cosh")
tanh = _unary(np.tanh, "tanh")


def fmod(arg, mod, stream=None):
    """``arg - trunc(arg / mod) * mod`` elementwise (C's fmod)."""
    _check(arg, "fmod")
    _check(mod, "fmod")
    if arg.shape != mod.shape:
        raise ValueError(f"cumath.fmod: the arrays are not the same shape: {arg.shape} and {mod.shape}")
    result = arg._new_like_me()
    if arg.size:
        with np.errstate(all="ignore"):
            np.fmod(arg._host_view(), mod._host_view(), out=result._host_view(), casting="unsafe")
    return result


def frexp(arg, stream=None):
    """``(significand, exponent)`` arrays with ``arg = significand * 2**exponent``."""
    _check(arg, "frexp")
    significand, exponent = arg._new_like_me(), arg._new_like_me()
    if arg.size:
        m, e = np.frexp(arg._host_view())
        significand._host_view()[...] = m
        exponent._host_view()[...] = e
    return significand, exponent


def ldexp(significand, exponent, stream=None):
    """``significand * 2**exponent`` elementwise."""
    _check(significand, "ldexp")
    _check(exponent, "ldexp")
    result = significand._new_like_me()
    if significand.size:
        np.copyto(result._host_view(),
                  np.ldexp(significand._host_view(), exponent._host_view().astype(np.int32)),
                  casting="unsafe")
    return result


def modf(arg, stream=None):
    """``(fractional, integral)`` parts, both with the sign of ``arg``."""
    _check(arg, "modf")
    fractional, integral = arg._new_like_me(), arg._new_like_me()
    if arg.size:
        np.modf(arg._host_view(), out=(fractional._host_view(), integral._host_view()))
    return fractional, integral
