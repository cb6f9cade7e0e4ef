"""Timers: how one repeat of a measurement is timed on each backend.

Every timer has the same two methods:

- ``time(run, repeats, warmup)``: call ``run()`` ``warmup`` times untimed (first-launch costs:
  module loading, page faults, clocks ramping up), then ``repeats`` times, each after a cache
  flush, and return the list of durations in seconds of each call alone;
- ``time_launches(run, launches, repeats)``: host seconds per call of ``run`` over batches of
  ``launches`` calls with no flush in between — for launch overhead, where the host's cost of
  issuing work is what is measured, not the work.

On a GPU the timed interval is between two CUDA events recorded on the stream around the work,
so it excludes Python's own jitter before and after; the L2 flush writes a buffer twice the L2's
size, so each repeat starts with no operand in L2 (otherwise a working set that fits in L2 reports
L2 bandwidth, not memory bandwidth). On the CPU emulator a launch returns when the work is done,
so a host clock is the right clock; the flush there writes twice the host's last-level cache.
The emulator and NumPy (limited to one BLAS thread by the suite) each run on one host thread, so
the CPU time of this process measures their work and, unlike the wall clock, is not inflated when
other processes share the host's cores (a CI machine often runs several jobs at once).
"""
import glob
import time

import numpy as np


def host_last_level_cache_bytes():
    """The largest CPU cache of cpu0 in bytes, from sysfs; 32 MiB when sysfs does not say."""
    sizes = []
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        if text and text[-1] in units and text[:-1].isdigit():
            sizes.append(int(text[:-1]) * units[text[-1]])
        elif text.isdigit():
            sizes.append(int(text))
    return max(sizes) if sizes else 32 << 20


def _time_host_batches(run, launches, repeats, synchronize, clock=time.perf_counter):
    out = []
    for _ in range(repeats):
        synchronize()
        start = clock()
        for _ in range(launches):
            run()
        out.append((clock() - start) / launches)
        # Launches are asynchronous on a GPU: wait for the batch outside the timed interval so
        # the next batch does not queue behind it (which would time the kernels, not the launch).
        synchronize()
    return out


class HostTimer:
    """A host clock around each call, for work that is finished when the call returns.

    ``cpu_time=True`` (the default) reads this process's CPU time (``time.process_time``): right
    for single-threaded work on a shared host; ``False`` reads the wall clock (``perf_counter``).
    """

    def __init__(self, flush=True, cpu_time=True):
        self._clock = time.process_time if cpu_time else time.perf_counter
        self.clock = ("CPU time of this process (time.process_time) around each call" if cpu_time
                      else "host wall clock (time.perf_counter) around each call")
        self.flush_bytes = 2 * host_last_level_cache_bytes() if flush else 0
        self._flush_buffer = np.empty(self.flush_bytes // 8, dtype=np.float64) if flush else None

    def flush(self):
        """Write a buffer twice the last-level cache so the next repeat starts cold."""
        if self._flush_buffer is not None:
            self._flush_buffer.fill(1.0)

    def time(self, run, repeats, warmup=1):
        for _ in range(warmup):
            run()
        out = []
        for _ in range(repeats):
            self.flush()
            start = self._clock()
            run()
            out.append(self._clock() - start)
        return out

    def time_launches(self, run, launches, repeats):
        return _time_host_batches(run, launches, repeats, synchronize=lambda: None, clock=self._clock)


class _EventTimer:
    """The protocol every device timer follows, with the library's own events, flush and synchronise.

    A subclass sets ``clock`` and ``flush_bytes`` and defines ``flush()``, ``synchronize()`` (wait for
    all of the library's work), ``events()`` (a start and an end event) and ``elapsed_seconds(start,
    end)``.
    """

    def time(self, run, repeats, warmup=1):
        for _ in range(warmup):
            run()
        self.synchronize()
        start, end = self.events()
        out = []
        for _ in range(repeats):
            self.flush()
            start.record()
            run()
            end.record()
            end.synchronize()
            out.append(self.elapsed_seconds(start, end))
        return out

    def time_launches(self, run, launches, repeats):
        return _time_host_batches(run, launches, repeats, synchronize=self.synchronize)


def _flush_bytes(l2_bytes, flush):
    """Twice the L2 (at least 1 MiB) when flushing, so no operand is left there; 0 otherwise."""
    return max(2 * int(l2_bytes), 1 << 20) if flush else 0


class CudaEventTimer(_EventTimer):
    """CUDA events around each call on the default stream, with an L2 flush before each repeat.

    ``drv`` is ``pycuda.driver``; ``l2_bytes`` the device's L2 size (the flush writes twice that).
    """

    clock = "CUDA events on the default stream"

    def __init__(self, drv, l2_bytes, flush=True):
        self.drv = drv
        self.flush_bytes = _flush_bytes(l2_bytes, flush)
        self._flush_buffer = drv.mem_alloc(self.flush_bytes) if flush else None

    def flush(self):
        if self._flush_buffer is not None:
            self.drv.memset_d32(self._flush_buffer, 0, self.flush_bytes // 4)

    def synchronize(self):
        self.drv.Context.synchronize()

    def events(self):
        return self.drv.Event(), self.drv.Event()

    def elapsed_seconds(self, start, end):
        return start.time_till(end) * 1e-3   # time_till is in milliseconds


class TorchEventTimer(_EventTimer):
    """The same protocol with PyTorch's CUDA events and caching allocator (for cuBLAS through torch).

    PyTorch queues work on its own current stream, so its own events bracket it; the flush is a
    PyTorch tensor written with ``zero_()`` on that stream.
    """

    clock = "torch.cuda.Event on torch's current stream"

    def __init__(self, torch, l2_bytes, flush=True):
        self.torch = torch
        self.flush_bytes = _flush_bytes(l2_bytes, flush)
        self._flush_buffer = (torch.empty(self.flush_bytes // 4, dtype=torch.float32, device="cuda")
                              if flush else None)

    def flush(self):
        if self._flush_buffer is not None:
            self._flush_buffer.zero_()

    def synchronize(self):
        self.torch.cuda.synchronize()

    def events(self):
        return (self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True))

    def elapsed_seconds(self, start, end):
        return start.elapsed_time(end) * 1e-3   # milliseconds


class CupyEventTimer(_EventTimer):
    """The same protocol with CuPy's CUDA events on CuPy's current stream."""

    clock = "cupy.cuda.Event on CuPy's current stream"

    def __init__(self, cupy, l2_bytes, flush=True):
        self.cupy = cupy
        self.flush_bytes = _flush_bytes(l2_bytes, flush)
        self._flush_buffer = cupy.empty(self.flush_bytes // 4, dtype=cupy.float32) if flush else None

    def flush(self):
        if self._flush_buffer is not None:
            self._flush_buffer.fill(0)

    def synchronize(self):
        self.cupy.cuda.Device().synchronize()

    def events(self):
        return self.cupy.cuda.Event(), self.cupy.cuda.Event()

    def elapsed_seconds(self, start, end):
        return self.cupy.cuda.get_elapsed_time(start, end) * 1e-3   # milliseconds
