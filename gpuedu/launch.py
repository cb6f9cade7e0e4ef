"""Running a kernel of ``gpuedu/kernels/``: the one path every launcher takes, on either backend.

    f = launch.kernel("nn_loss", "softmax_xent", "PPPPPPii")      # compiled once per backend, file, options
    launch.launch(f, (launch.ceil_div(rows, 256), 1), (256, 1, 1), args, stream)

``kernel`` compiles ``<file>.cu`` through the active backend (``kernels.load``) and keeps each function,
prepared with its PyCUDA struct signature, in one cache keyed by backend, file, options, name and signature.
``launch`` queues a prepared function on ``stream`` (None: the default stream) and never waits for it.
``device_array`` is the one way a launcher accepts its inputs: a GPUArray, or a NumPy array copied to the
device, of the dtype and rank the kernel reads, C-contiguous, small enough for 32-bit indices; every refusal
names the argument and says what to change. ``output`` makes a result array, or checks the ``out=`` one.
"""
import numpy as np

from . import backend, kernels

i32 = np.int32
f32 = np.float32
NULL = np.uintp(0)        # a null pointer argument (an optional input left out)

_cache = {}
_names = {}   # id(function) -> kernel name, for the functions in _cache (kept alive there, never removed)


def kernel(file, name, signature=None, options=(), arch=None):
    """The kernel ``name`` from ``<file>.cu``, compiled with ``options`` (for ``arch``, e.g. "sm_90a", when
    given; else the device's) and prepared with ``signature`` (PyCUDA's struct letters, e.g. "PPi") when given;
    memoised. A "T" in the signature is a TMA tensor map (``gpuedu.tma``, a 128-byte struct by value), which
    struct letters cannot say alike for PyCUDA and the emulator: such a kernel is left unprepared, for
    ``launch_by_value``, and the signature says its parameters for the checks."""
    options = tuple(options)
    key = (backend.active().name, file, options, arch, name, signature)
    fn = _cache.get(key)
    if fn is None:
        module = kernels.load(file, options, arch=arch) if arch else kernels.load(file, options)
        fn = module.get_function(name)
        if signature is not None and "T" not in signature:
            fn.prepare(signature)
        _cache[key] = fn
        _names[id(fn)] = name
    return fn


def function_name(fn, default="kernel"):
    """A kernel function's name: the emulator's functions carry it; real PyCUDA's do not, so the ones
    ``kernel()`` handed out are looked up by identity. ``default`` for any other function."""
    name = getattr(fn, "function_name", None) or getattr(fn, "name", None)
    if isinstance(name, str) and name:
        return name
    # _cache keeps every function it names alive, so no other object can have its id
    return _names.get(id(fn), default)


def launch(fn, grid, block, args, stream=None, shared_size=0):
    """Queue a prepared kernel on ``stream`` (None: the default stream); the host does not wait for it."""
    if stream is None:
        fn.prepared_call(grid, block, *args, shared_size=shared_size)
    else:
        fn.prepared_async_call(grid, block, stream, *args, shared_size=shared_size)


def launch_by_value(fn, grid, block, args, stream=None, shared_size=0):
    """Queue an unprepared kernel (``kernel(..., signature=None)``) whose arguments include structs passed by
    value, such as ``gpuedu.tma`` tensor maps: PyCUDA's call packs a NumPy array argument as its bytes, which a
    prepared call's struct letters cannot say. Pointers as device allocations (``x.gpudata``), scalars as NumPy
    scalars; the host does not wait for the kernel."""
    fn(*args, grid=grid, block=block, stream=stream, shared=shared_size)


def zero(array, stream=None):
    """Set a contiguous device array to zero (0 and 0.0 are all-zero bytes in every dtype) with a memset,
    in order on ``stream``: PyCUDA's ``GPUArray.fill`` builds a kernel for the dtype and has none for
    float16 ("unable to map dtype 'float16'")."""
    drv = backend.active().driver
    if stream is None:
        drv.memset_d8(array.gpudata, 0, array.nbytes)
    else:
        drv.memset_d8_async(array.gpudata, 0, array.nbytes, stream)
    return array


def ceil_div(n, d):
    """Blocks of ``d`` threads that cover ``n`` items (the last one partial: kernels guard their index)."""
    return -(-int(n) // int(d))


def ptr(array):
    """The device address of a GPUArray as a kernel's pointer argument; None gives a null pointer."""
    return NULL if array is None else np.uintp(int(array.gpudata))


def gpuarray():
    """The active backend's ``pycuda.gpuarray``."""
    return backend.active().gpuarray


def is_device_array(x):
    return hasattr(x, "gpudata") and hasattr(x, "get")


def is_c_contiguous(x):
    flags = getattr(x, "flags", None)
    if flags is not None and hasattr(flags, "c_contiguous"):
        return bool(flags.c_contiguous)
    expected = x.dtype.itemsize
    for size, stride in zip(reversed(x.shape), reversed(x.strides)):
        if size > 1 and stride != expected:
            return False
        expected *= size
    return True


def device_array(x, name="x", dtype=np.float32, ndim=None, hint=None):
    """``x`` as a C-contiguous GPUArray of ``dtype`` (and ``ndim`` dimensions); NumPy arrays (and lists) are
    copied to the device. ``hint`` replaces the advice for a device array of the wrong dtype.

    Raises TypeError (wrong kind or dtype) or ValueError (rank, layout, size) naming ``name``."""
    dtype = np.dtype(dtype)
    if isinstance(x, (np.ndarray, list, tuple)):
        host = np.asarray(x)
        if host.dtype != dtype:
            raise TypeError(f"{name} has dtype {host.dtype}; the kernel takes {dtype.name}: "
                            f"pass {name}.astype(np.{dtype.name})")
        x = gpuarray().to_gpu(np.ascontiguousarray(host))
    elif not is_device_array(x):
        raise TypeError(f"{name} must be a GPUArray or a NumPy array, got {type(x).__name__}")
    if x.dtype != dtype:
        raise TypeError(f"{name} has dtype {x.dtype}; the kernel takes {dtype.name}: "
                        f"{hint or f'pass {name}.astype(np.{dtype.name})'}")
    if not is_c_contiguous(x):
        raise ValueError(f"{name} is not C-contiguous (strides {x.strides} for shape {tuple(x.shape)}); "
                         f"the kernels index it as one dense row-major block: copy it first")
    if ndim is not None and len(x.shape) != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(x.shape)}")
    if x.size >= 2**31:
        raise ValueError(f"{name} has {x.size} elements; the kernels index with 32-bit ints (< 2**31)")
    return x


def output(out, shape, dtype=np.float32, name="out"):
    """A new GPUArray of ``shape`` and ``dtype``, or ``out`` once checked to be exactly that."""
    dtype = np.dtype(dtype)
    if out is None:
        return gpuarray().empty(shape, dtype)
    if not is_device_array(out):
        raise TypeError(f"{name} must be a GPUArray, got {type(out).__name__}")
    if tuple(out.shape) != tuple(shape) or out.dtype != dtype or not is_c_contiguous(out):
        raise ValueError(f"{name} must be a C-contiguous {dtype.name} GPUArray of shape {tuple(shape)}, "
                         f"got {out.dtype} of shape {tuple(out.shape)}")
    return out


def check_aligned16(op, **arrays):
    """float4 accesses need 16-byte aligned addresses: true for whole allocations, not for every view."""
    for name, arr in arrays.items():
        address = int(arr.gpudata)
        if address % 16:
            raise ValueError(f"{op} loads and stores float4s, which need 16-byte aligned arrays, but {name} "
                             f"starts at an address that is {address % 16} bytes past a multiple of 16 (a view "
                             f"into a larger array?): copy it (x.copy()) or use another version")
