"""What the emulated device is asked to do, for a recorder that wants to know (``gpuedu.trace()``).

The emulator runs every copy and kernel at once, in issue order, on the CPU. A recorder set here
hears of each call that a GPU would queue or wait on (copies, launches, events, stream waits and
synchronisations) with its stream, so that it can lay them out as a GPU's streams would run them.
"""
import contextlib
import time

_recorder = [None]


def set_recorder(recorder):
    """``recorder(kind, info)`` hears of every device call (None: nobody listens); returns the previous one."""
    previous = _recorder[0]
    _recorder[0] = recorder
    return previous


def active():
    return _recorder[0] is not None


def emit(kind, **info):
    """Tell the recorder, if there is one, of a call of ``kind`` (see gpuedu/profiler/trace.py for the kinds)."""
    recorder = _recorder[0]
    if recorder is not None:
        info.setdefault("host_time", time.perf_counter())
        recorder(kind, info)


@contextlib.contextmanager
def call(kind, **info):
    """Around a device call: the recorder hears of it with its host start and, once it returned, its end."""
    recorder = _recorder[0]
    if recorder is None:
        yield info
        return
    info["host_time"] = time.perf_counter()
    yield info                       # a call that raised did nothing a GPU would queue: not heard of
    info["host_end"] = time.perf_counter()
    recorder(kind, info)


def stream_id(stream):
    """0 for the legacy default stream (None), else a number naming the stream."""
    return 0 if stream is None else getattr(stream, "handle", id(stream))


#: The classes of page-locked host memory; ``driver`` registers its ``PagelockedHostAllocation`` here, so
#: this core module needs nothing from the PyCUDA-named modules above it.
PINNED_TYPES = ()


def is_pinned(array):
    """Whether a host array lives in page-locked memory (``pagelocked_*``), which copies by DMA."""
    seen = 0
    base = array
    while base is not None and seen < 16:
        if isinstance(base, PINNED_TYPES):
            return True
        base = getattr(base, "base", None)
        seen += 1
    return False
