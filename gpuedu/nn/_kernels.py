"""Load, prepare and launch the nn kernels (``gpuedu/kernels/nn_*.cu``) through the active backend."""
import numpy as np

from .. import backend, kernels

_prepared = {}


def function(file, name, signature):
    """The kernel ``name`` from ``<file>.cu``, prepared with PyCUDA's struct ``signature`` (memoised)."""
    key = (backend.active().name, file, name)
    func = _prepared.get(key)
    if func is None:
        func = kernels.load(file).get_function(name)
        func.prepare(signature)
        _prepared[key] = func
    return func


def launch(func, grid, block, args, stream=None):
    """Launch a prepared kernel; asynchronous with respect to the host either way (no synchronisation)."""
    if stream is None:
        func.prepared_call(grid, block, *args)
    else:
        func.prepared_async_call(grid, block, stream, *args)


def ptr(array):
    """The device address of a GPUArray, as a kernel's pointer argument."""
    return int(array.gpudata)


def blocks_for(n, threads):
    """Blocks of ``threads`` that cover ``n`` items (the last one partial: kernels guard their index)."""
    return (int(n) + threads - 1) // threads


i32 = np.int32
f32 = np.float32
