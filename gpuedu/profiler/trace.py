"""``gpuedu.trace()``: a timeline of copies and kernels as a GPU's streams would run them (modelled).

The emulator runs every copy and kernel at once, in issue order, so its own clock shows no overlap.
Inside ``with gpuedu.trace() as tr:`` every copy, launch, event, stream wait and synchronisation is
recorded with its stream, and ``schedule`` lays them out as CUDA's rules say a GPU runs them:

- work on one stream runs in issue order; work on different streams may overlap;
- the legacy default stream (``stream=None``) waits for all earlier work of every stream, and later
  work on any stream waits for it;
- ``stream.wait_for_event(e)`` holds the stream until ``e`` is reached; ``e.synchronize()``,
  ``stream.synchronize()``, ``Context.synchronize()`` and every synchronous copy hold the host;
- one copy engine per direction (host to device, device to host) and one compute queue (kernels
  of different streams do not run side by side here: a stated simplification).

Durations are **modelled**: a copy takes latency + bytes / link bandwidth (pinned memory at the
link's DMA rate; pageable memory about half, and a pageable "async" copy holds the host, as the
driver stages it); a kernel takes the profiler's modelled time on the named GPU (its counts come
from running it instrumented). The host is modelled as issuing its calls back to back: a kernel launch
takes it 6.2 µs (one prepared launch from Python, measured on an H200: ``time_model.HOST_LAUNCH_S``), any
other call 2 µs (an assumption); what it does between calls here is the emulator's work, not a GPU
program's.
``tr.write(path)`` saves Chrome trace-event JSON (Perfetto, chrome://tracing); ``tr.plot()`` draws it.

On a real GPU nothing is modelled: every kernel launch and copy made inside the block is bracketed by two
CUDA events recorded on its own stream (no synchronisation is added, so overlap happens as it would), and
the timeline is read from the events when the block ends: **measured**.  Host ranges go to Nsight Systems
as NVTX ranges (``gpuedu.range``), which measures everything else.
"""
from .. import launch as _launch
import contextlib
import json

from .time_model import HOST_LAUNCH_S


# Host <-> device links, per GPU: (pinned bytes/s, pageable bytes/s, latency s). Assumptions, stated.
LINKS = {
    "T4": (12e9, 6e9, 10e-6),           # PCIe 3.0 x16: ~12 GB/s pinned in practice
    "A100 SXM4 80GB": (24e9, 12e9, 10e-6),  # PCIe 4.0 x16: ~24 GB/s pinned in practice
    "RTX A6000": (24e9, 12e9, 10e-6),
    "H100 SXM": (50e9, 25e9, 8e-6),     # PCIe 5.0 x16: ~50 GB/s pinned in practice
    "H200 SXM": (50e9, 25e9, 8e-6),
}
LINK_SOURCE = ("assumption: typical measured PCIe rates (3.0 x16 ~12 GB/s, 4.0 ~24, 5.0 ~50 GB/s pinned; "
               "pageable about half, through the driver's staging buffer), 8-10 us per copy")
API_OVERHEAD_S = 2e-6   # host time to issue a copy or another call (assumption)
LAUNCH_HOST_S = HOST_LAUNCH_S   # host time to issue one kernel launch (measured on an H200, 2026-11-26)
ENGINES = {"htod": "copy engine (host to device)", "dtoh": "copy engine (device to host)",
           "dtod": "compute", "kernel": "compute"}


class Trace:
    """What a ``with gpuedu.trace() as tr:`` block recorded, and its modelled schedule (``tr.events``)."""

    def __init__(self, gpu="H100", path=None, l2_warm=False):
        from .gpus import get_gpu
        self.gpu = get_gpu(gpu)
        self.l2_warm = l2_warm
        self.path = path
        self.calls = []          # (kind, info) in issue order
        self.events = []         # the schedule: dicts with name, row, start, duration (seconds), args
        self.measured_on = None  # the device's name when the events are measured (a real GPU)
        self._profile = None
        self._previous = None
        self._recorder = None

    def __enter__(self):
        from .. import backend as _backend
        from .session import Profile
        backend = _backend.setup(verbose=False)
        if backend.name != "cpu":
            drv = backend.driver
            self.measured_on = drv.Context.get_device().name()
            self._recorder = EventRecorder(drv).start()
            return self
        from gpuedu.emulator import hooks
        self._profile = Profile().__enter__()          # kernels are counted, for their modelled time
        self._previous = hooks.record_activity(self._hear)
        return self

    def __exit__(self, *exc):
        if self._recorder is not None:
            self._recorder.stop()
            self.events = self._recorder.events()
            if self.path is not None and exc[0] is None:
                self.write(self.path)
            return False
        from gpuedu.emulator import hooks
        hooks.record_activity(self._previous)
        self._profile.__exit__(*exc)
        self.events = schedule(self.calls, self.gpu, l2_warm=self.l2_warm)
        if self.path is not None and exc[0] is None:
            self.write(self.path)
        return False

    def _hear(self, kind, info):
        info = dict(info)
        if kind == "kernel":
            rec = self._profile.kernels[-1] if self._profile.kernels else None
            info["record"] = rec
        self.calls.append((kind, info))

    # -- reading it
    @property
    def total(self):
        """Modelled seconds from the first call to the end of the last piece of work."""
        return max((e["start"] + e["duration"] for e in self.events), default=0.0)

    def rows(self):
        """The timeline's rows, host first, then each stream in order of first use."""
        seen = []
        for e in self.events:
            if e["row"] not in seen:
                seen.append(e["row"])
        return sorted(seen, key=lambda r: (r != "host", seen.index(r)))

    def to_chrome(self):
        """Chrome trace-event JSON: one complete event ("ph": "X") per copy or kernel, microseconds."""
        rows = self.rows()
        out = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": i, "args": {"name": row}}
               for i, row in enumerate(rows)]
        for e in self.events:
            out.append({"name": e["name"], "cat": e["kind"], "ph": "X", "pid": 1, "tid": rows.index(e["row"]),
                        "ts": round(e["start"] * 1e6, 3), "dur": round(e["duration"] * 1e6, 3), "args": e["args"]})
        if self.measured_on:
            return {"traceEvents": out, "displayTimeUnit": "ns",
                    "otherData": {"what": f"measured on {self.measured_on} with CUDA events by gpuedu.trace()"}}
        return {"traceEvents": out, "displayTimeUnit": "ns",
                "otherData": {"what": f"modelled on {self.gpu.name} by gpuedu.trace(), not measured",
                              "links": LINK_SOURCE}}

    def write(self, path):
        with open(path, "w") as f:
            json.dump(self.to_chrome(), f, indent=1)
        return path

    def plot(self, ax=None, title=None):
        """The timeline: one row per stream (and the host), a bar per copy or kernel, in modelled ms."""
        import matplotlib.pyplot as plt
        if ax is None:
            _, ax = plt.subplots(figsize=(9, 0.6 + 0.5 * len(self.rows())))
        colours = {"htod": "tab:orange", "dtoh": "tab:green", "dtod": "tab:olive", "kernel": "tab:blue",
                   "host": "tab:grey"}
        rows = self.rows()
        for e in self.events:
            y = len(rows) - 1 - rows.index(e["row"])
            ax.broken_barh([(e["start"] * 1e3, max(e["duration"] * 1e3, 1e-6))], (y - 0.35, 0.7),
                           color=colours.get(e["kind"], "tab:purple"), edgecolor="white", linewidth=0.3)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(list(reversed(rows)))
        how = f"measured on {self.measured_on}" if self.measured_on else f"modelled on {self.gpu.name} (not measured)"
        ax.set_xlabel(f"milliseconds, {how}")
        ax.set_title(title or f"{len(self.events)} copies and kernels: {self.total * 1e3:.3f} ms "
                              f"({'measured' if self.measured_on else 'modelled'})")
        return ax

    def __str__(self):
        kinds = {}
        for e in self.events:
            kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
        parts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        how = f"measured on {self.measured_on}" if self.measured_on else f"modelled on {self.gpu.name} (not measured)"
        return f"gpuedu.trace: {parts or 'nothing'} on {len(self.rows())} rows, {self.total * 1e3:.3f} ms {how}"


class EventRecorder:
    """On real PyCUDA: bracket every launch and copy with two CUDA events on its stream (``drv`` is
    ``pycuda.driver``, or anything shaped like it).  ``start()`` patches, ``stop()`` restores, ``events()``
    synchronises once and reads the timeline, in seconds from the first event."""

    LAUNCHES = ("__call__", "prepared_call", "prepared_async_call")
    COPIES = {"memcpy_htod": "htod", "memcpy_htod_async": "htod", "memcpy_dtoh": "dtoh",
              "memcpy_dtoh_async": "dtoh", "memcpy_dtod": "dtod", "memcpy_dtod_async": "dtod"}

    def __init__(self, drv):
        self.drv = drv
        self.marks = []          # (kind, name, stream, start event, end event, args)
        self._saved = []

    def _bracket(self, kind, name, stream, call, args):
        start, end = self.drv.Event(), self.drv.Event()
        start.record(stream)
        result = call()
        end.record(stream)
        self.marks.append((kind, name, stream, start, end, args))
        return result

    def start(self):
        cls = self.drv.Function
        for method in self.LAUNCHES:
            original = getattr(cls, method)
            self._saved.append((cls, method, original))
            setattr(cls, method, self._launch_wrapper(method, original))
        for fname, direction in self.COPIES.items():
            original = getattr(self.drv, fname, None)
            if original is not None:
                self._saved.append((self.drv, fname, original))
                setattr(self.drv, fname, self._copy_wrapper(fname, direction, original))
        return self

    def stop(self):
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved = []

    def _launch_wrapper(self, method, original):
        recorder = self

        def launch(function, *args, **kwargs):
            if method == "prepared_async_call":
                stream = args[2] if len(args) > 2 else kwargs.get("stream")
            else:
                stream = kwargs.get("stream")
            name = _launch.function_name(function)
            return recorder._bracket("kernel", name, stream, lambda: original(function, *args, **kwargs), {})
        return launch

    def _copy_wrapper(self, fname, direction, original):
        recorder = self

        def copy(*args, **kwargs):
            stream = kwargs.get("stream", args[-1] if fname.endswith("_async") and len(args) >= 3 else None)
            if direction == "dtod":
                nbytes = args[2] if len(args) > 2 else kwargs.get("size", 0)
            else:                     # the host side of the copy knows its size
                host = args[1] if direction == "htod" else args[0]
                nbytes = getattr(host, "nbytes", 0)
            return recorder._bracket(direction, f"{direction} {int(nbytes):,} B", stream,
                                     lambda: original(*args, **kwargs), {"bytes": int(nbytes)})
        return copy

    def events(self):
        """The measured timeline (the same dicts as the modelled one), after one synchronisation."""
        if not self.marks:
            return []
        self.drv.Context.synchronize()
        first = self.marks[0][3]
        rows, out = {}, []
        for kind, name, stream, start, end, args in self.marks:
            key = None if stream is None else getattr(stream, "handle", id(stream))
            if key not in rows:
                rows[key] = "stream 0 (default)" if key is None else f"stream {sum(k is not None for k in rows) + 1}"
            row = rows[key]
            out.append({"name": name, "kind": kind, "row": row, "start": first.time_till(start) / 1e3,
                        "duration": start.time_till(end) / 1e3,
                        "args": dict(args, stream=row, duration="measured with CUDA events")})
        return out


@contextlib.contextmanager
def nvtx_range(name):
    """A named span of the host's work (``gpuedu.range("forward")``): a bar on the trace's host row on the
    emulator, and an NVTX range that Nsight Systems shows on a GPU when the ``nvtx`` package is installed."""
    from .. import backend as _backend
    if not isinstance(name, str) or not name:
        raise ValueError(f"a range needs a non-empty name, like gpuedu.range('forward'); got {name!r}")
    active = _backend.active()
    if active is not None and active.name == "cpu":
        from gpuedu.emulator import hooks
        hooks.emit_activity("range_push", name=name)
        try:
            yield
        finally:
            hooks.emit_activity("range_pop", name=name)
        return
    try:
        import nvtx
    except ImportError:   # no NVTX here: the range marks nothing, and the code runs the same
        yield
        return
    nvtx.push_range(name)
    try:
        yield
    finally:
        nvtx.pop_range()


def trace(path=None, gpu="H100", l2_warm=False):
    """Record copies, kernels, events and synchronisations in a ``with`` block; lay them out as ``gpu``'s
    streams would run them (modelled); ``path`` (optional) receives Chrome trace-event JSON. ``l2_warm``: model
    each kernel with its data already in L2 (``KernelRecord.predict``), as in a repeated small step."""
    return Trace(gpu=gpu, path=path, l2_warm=l2_warm)


# ---- the schedule ------------------------------------------------------------------------------------
def copy_seconds(direction, nbytes, pinned, gpu):
    """Modelled time of one copy: a latency plus the bytes over the link (or twice over DRAM on the device)."""
    if direction == "dtod":
        return 2 * nbytes / (0.85 * gpu.dram_bytes_per_s)
    rate_pinned, rate_pageable, latency = LINKS.get(gpu.name, LINKS["H100 SXM"])
    return latency + nbytes / (rate_pinned if pinned else rate_pageable)


def kernel_seconds(record, gpu, l2_warm=False):
    """The profiler's modelled time of a launch on ``gpu`` (``None`` when it could not be counted)."""
    if record is None or record.metrics.get("smsp__warps_launched.sum") is None:
        return None
    return record.predict(gpu, l2_warm=l2_warm).seconds


def schedule(calls, gpu, l2_warm=False):
    """Lay out ``calls`` [(kind, info)] as CUDA's stream rules run them; returns the timeline's events.

    A kernel's info may give its ``seconds``; else its profiler ``record`` is modelled on ``gpu``.
    Each event: ``name``, ``kind`` (htod, dtoh, dtod, kernel, range), ``row`` (the stream, or "host"),
    ``start`` and ``duration`` in modelled seconds from the first call, and ``args``.
    """
    events = []
    host = 0.0                 # the host's clock
    tail = {}                  # stream -> when its last piece of work ends
    gate = {}                  # stream -> when an event it waits for is reached
    engine_free = {}           # engine -> when it is next free
    default_tail = 0.0         # the legacy default stream's last piece of work
    event_time = {}            # event -> when its stream reached it
    ranges = []                # open gpuedu.range()s: (name, host time at entry)
    names = {0: "default stream"}   # streams numbered in order of first use
    for _, info in calls:
        if "stream" in info and info["stream"] not in names:
            names[info["stream"]] = f"stream {len(names)}"
    for kind, info in calls:
        stream = info.get("stream", 0)
        ready = max(tail.get(stream, 0.0), gate.get(stream, 0.0))
        ready = max(ready, max(tail.values(), default=0.0) if stream == 0 else default_tail)
        if kind in ("copy", "kernel"):
            host += LAUNCH_HOST_S if kind == "kernel" else API_OVERHEAD_S
            if kind == "copy":
                what = info["direction"]
                duration = copy_seconds(what, info.get("bytes", 0), info.get("pinned", False), gpu)
                name = f"{what} {info.get('bytes', 0):,} B" + ("" if info.get("pinned") else " (pageable)")
                args = {"bytes": info.get("bytes", 0), "pinned": info.get("pinned", False)}
            else:
                what = "kernel"
                duration = info.get("seconds") or kernel_seconds(info.get("record"), gpu, l2_warm)
                if duration is None:
                    duration = info["host_end"] - info["host_time"]
                    args = {"duration": "the emulator's own time (not counted)"}
                else:
                    args = {"duration": f"modelled on {gpu.name}"}
                name = info["name"]
            engine = ENGINES[what]
            start = max(host, ready, engine_free.get(engine, 0.0))
            end = start + duration
            engine_free[engine] = end
            tail[stream] = end
            if stream == 0:
                default_tail = end
            blocking = not info.get("is_async", kind == "kernel") or (
                kind == "copy" and what != "dtod" and not info.get("pinned", False))
            if blocking and kind == "copy":
                host = end
            events.append({"name": name, "kind": what, "row": names[stream], "start": start,
                           "duration": duration, "args": dict(args, stream=names[stream])})
        elif kind == "event_record":
            event_time[info["event"]] = max(host, ready)
        elif kind == "stream_wait_event":
            gate[stream] = max(gate.get(stream, 0.0), event_time.get(info["event"], 0.0))
        elif kind == "event_synchronize":
            host = max(host, event_time.get(info["event"], host))
        elif kind == "stream_synchronize":
            host = max(host, tail.get(stream, 0.0), gate.get(stream, 0.0),
                       max(tail.values(), default=0.0) if stream == 0 else 0.0)
        elif kind == "context_synchronize":
            host = max([host] + list(tail.values()))
        elif kind == "range_push":
            ranges.append((info["name"], host))
        elif kind == "range_pop" and ranges:
            name, began = ranges.pop()
            events.append({"name": name, "kind": "range", "row": "host", "start": began,
                           "duration": max(host - began, 0.0), "args": {"depth": len(ranges)}})
    return events

