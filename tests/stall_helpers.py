"""What the tests of "a step never waits" share: a counter on every call that stalls the host.

On a GPU, a copy back (``.get()``, ``memcpy_dtoh``), a copy from pageable host memory (``.set``, ``to_gpu``), an
allocation or a free, or an explicit synchronize stalls the host until the device drains. ``count_stalls``
wraps each such entry point of the active backend and records who called it.
"""
import contextlib
import inspect
import traceback

import gpuedu


def stalling_entry_points():
    """(owner, attribute) of every call that copies between host and device, allocates or synchronises."""
    active = gpuedu.backend.active()
    drv, ga = active.driver, active.gpuarray
    points = [(drv, name) for name in dir(drv) if name.startswith("memcpy_")]
    points += [(drv, name) for name in ("mem_alloc", "mem_alloc_pitch", "pagelocked_empty", "pagelocked_zeros")]
    points += [(drv.Context, "synchronize"), (drv.Event, "synchronize"), (drv.Stream, "synchronize")]
    points += [(ga.GPUArray, name) for name in ("get", "set", "get_async", "set_async", "copy")]
    points += [(ga, name) for name in ("empty", "zeros", "ones", "to_gpu", "to_gpu_async", "empty_like",
                                       "zeros_like", "ones_like")]
    return [(owner, name) for owner, name in points if hasattr(owner, name)]


@contextlib.contextmanager
def count_stalls(monkeypatch):
    """Inside the block every stalling entry point records who called it; yields the list of calls.

    Only the outermost call counts: real PyCUDA's ``GPUArray.get`` calls ``memcpy_dtoh`` itself, and that is
    one copy back, not two (the emulator's does not nest them)."""
    calls, depth = [], [0]

    def wrap(owner, name, original):
        def counted(*args, **kwargs):
            if depth[0] == 0:
                caller = traceback.extract_stack(limit=2)[0]      # the frame that called the entry point
                owner_name = getattr(owner, "__name__", str(owner)).rsplit(".", 1)[-1]
                calls.append(f"{owner_name}.{name} from {caller.filename}:{caller.lineno}")
            depth[0] += 1
            try:
                return original(*args, **kwargs)
            finally:
                depth[0] -= 1
        return counted

    with monkeypatch.context() as patch:
        for owner, name in stalling_entry_points():
            static = inspect.getattr_static(owner, name)
            counted = wrap(owner, name, getattr(owner, name))
            patch.setattr(owner, name, staticmethod(counted) if isinstance(static, staticmethod) else counted)
        yield calls
