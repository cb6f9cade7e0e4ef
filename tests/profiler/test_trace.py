"""gpuedu.trace(): CUDA's stream rules against timelines worked out by hand, the trace-event JSON, and a
double-buffered pipeline that overlaps."""
import json

import numpy as np
import pytest

import gpuedu
from gpuedu.profiler.gpus import get_gpu
from gpuedu.profiler.trace import API_OVERHEAD_S, LAUNCH_HOST_S, copy_seconds, schedule

H100 = get_gpu("H100")
US = 1e-6


def copy(stream, nbytes, pinned=True, is_async=True, direction="htod"):
    return ("copy", {"direction": direction, "stream": stream, "bytes": nbytes, "pinned": pinned,
                     "is_async": is_async})


def kernel(stream, seconds, name="k"):
    return ("kernel", {"name": name, "stream": stream, "seconds": seconds})


def spans(events):
    return [(e["row"], e["kind"], round(e["start"] / US, 3), round((e["start"] + e["duration"]) / US, 3))
            for e in events]


def test_a_copy_takes_a_latency_plus_its_bytes_over_the_link():
    assert copy_seconds("htod", 50_000_000, True, H100) == pytest.approx(8e-6 + 1e-3)
    assert copy_seconds("htod", 50_000_000, False, H100) == pytest.approx(8e-6 + 2e-3)   # pageable: half
    assert copy_seconds("dtod", 1_000_000, False, H100) == pytest.approx(2e6 / (0.85 * 3.35e12))


def test_two_streams_overlap_a_copy_with_the_other_streams_kernel():
    c = copy_seconds("htod", 1_000_000, True, H100)          # 28 us
    k = 50 * US
    calls = [copy(1, 1_000_000), kernel(1, k), copy(2, 1_000_000), kernel(2, k)]
    o = API_OVERHEAD_S
    got = spans(schedule(calls, H100))
    c1_end = o + c
    expected = [
        ("stream 1", "htod", o, c1_end),
        ("stream 1", "kernel", c1_end, c1_end + k),           # after its stream's copy
        ("stream 2", "htod", c1_end, c1_end + c),             # the copy engine is free again: overlaps the kernel
        ("stream 2", "kernel", c1_end + k, c1_end + 2 * k),   # one compute queue: after stream 1's kernel
    ]
    assert got == [(r, kind, round(a / US, 3), round(b / US, 3)) for r, kind, a, b in expected]


def test_one_stream_runs_everything_in_order():
    c = copy_seconds("htod", 1_000_000, True, H100)
    k = 50 * US
    events = schedule([copy(1, 1_000_000), kernel(1, k), copy(1, 1_000_000), kernel(1, k)], H100)
    ends = [e["start"] + e["duration"] for e in events]
    assert ends[-1] == pytest.approx(API_OVERHEAD_S + 2 * (c + k))
    assert all(b["start"] >= a["start"] + a["duration"] - 1e-15 for a, b in zip(events, events[1:]))


def test_a_wait_for_an_event_holds_the_stream_until_the_other_stream_reaches_it():
    k = 100 * US
    calls = [kernel(1, k, "producer"), ("event_record", {"stream": 1, "event": 7}),
             ("stream_wait_event", {"stream": 2, "event": 7}), kernel(2, 10 * US, "consumer"),
             kernel(3, 10 * US, "independent")]
    by_name = {e["name"]: e for e in schedule(calls, H100)}
    assert by_name["consumer"]["start"] == pytest.approx(LAUNCH_HOST_S + k)
    # without the wait it could have started at once, but the compute queue is busy with the producer
    assert by_name["independent"]["start"] == pytest.approx(LAUNCH_HOST_S + k + 10 * US)


def test_the_legacy_default_stream_waits_for_every_stream_and_blocks_the_next():
    calls = [kernel(1, 100 * US, "a"), copy(0, 1_000_000, direction="htod", is_async=True),
             copy(2, 1_000_000)]
    a, on_default, after = schedule(calls, H100)
    assert on_default["start"] == pytest.approx(a["start"] + a["duration"])
    assert after["start"] == pytest.approx(on_default["start"] + on_default["duration"])


def test_synchronous_and_pageable_copies_hold_the_host_but_pinned_async_ones_do_not():
    k = 1e-3
    calls = [kernel(1, k, "long"), copy(2, 1000, pinned=True, is_async=True), kernel(2, 1 * US, "next")]
    events = schedule(calls, H100)
    # the pinned async copy returns at once: the host issues "next" right after it (6.2 us a launch, 2 a copy)
    issued = 2 * LAUNCH_HOST_S + API_OVERHEAD_S
    assert events[2]["start"] == pytest.approx(max(issued, events[0]["start"] + k))
    calls = [copy(2, 1_000_000, pinned=False, is_async=True), kernel(1, 1 * US, "after")]
    staged, after = schedule(calls, H100)
    assert after["start"] == pytest.approx(staged["start"] + staged["duration"] + LAUNCH_HOST_S)


def test_a_stream_synchronize_makes_the_host_wait_for_that_stream_only():
    calls = [kernel(1, 1e-3, "long"), kernel(2, 1 * US, "short"), ("stream_synchronize", {"stream": 2}),
             copy(3, 1000)]
    long_, short, after = schedule(calls, H100)
    assert after["start"] == pytest.approx(short["start"] + short["duration"] + API_OVERHEAD_S)


def test_a_double_buffered_pipeline_overlaps_and_the_json_is_trace_event_format(tmp_path):
    if gpuedu.setup(verbose=False).name != "cpu":
        pytest.skip("gpuedu.trace() models the timeline on the emulator")
    import pycuda.driver as drv
    from pycuda.compiler import SourceModule
    scale = SourceModule("__global__ void scale(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x;"
                         " if (i < n) x[i] *= 2.0f; }").get_function("scale")
    n = 1 << 16
    host = [drv.pagelocked_empty(n, np.float32) for _ in range(4)]
    for i, h in enumerate(host):
        h[:] = i
    dev = [drv.mem_alloc(4 * n) for _ in range(2)]

    def run(streams):
        for i in range(4):
            s = streams[i % len(streams)]
            drv.memcpy_htod_async(dev[i % 2], host[i], s)
            scale(dev[i % 2], np.int32(n), block=(256, 1, 1), grid=(n // 256, 1), stream=s)
        drv.Context.synchronize()

    with gpuedu.trace() as serial:
        run([drv.Stream()])
    path = tmp_path / "pipeline.json"
    with gpuedu.trace(str(path)) as overlapped:
        run([drv.Stream(), drv.Stream()])
    out = np.empty(n, np.float32)
    drv.memcpy_dtoh(out, dev[1])
    assert (out == 6).all()                       # the work was done, and done right
    c = overlapped.events[0]["duration"]
    k = overlapped.events[1]["duration"]
    assert overlapped.total < serial.total
    assert overlapped.total == pytest.approx(API_OVERHEAD_S + c + 3 * max(c, k) + k)
    assert serial.total == pytest.approx(API_OVERHEAD_S + 4 * (c + k))
    doc = json.loads(path.read_text())
    complete = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == 8
    for e in complete:
        assert {"name", "ph", "ts", "dur", "pid", "tid"} <= set(e) and e["dur"] > 0
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"}
    assert names == {"stream 1", "stream 2"}
    assert "modelled" in doc["otherData"]["what"] and "modelled" in str(overlapped)
    import matplotlib
    matplotlib.use("Agg")
    ax = overlapped.plot()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["stream 2", "stream 1"]
    assert "modelled" in ax.get_xlabel()


def test_a_range_spans_the_host_time_of_the_calls_inside_it():
    calls = [("range_push", {"name": "step"}), kernel(1, 1e-3, "a"), kernel(1, 1e-3, "b"),
             ("range_pop", {"name": "step"}), ("stream_synchronize", {"stream": 1}),
             ("range_push", {"name": "after"}), ("range_pop", {"name": "after"})]
    events = schedule(calls, H100)
    step = next(e for e in events if e["name"] == "step")
    assert step["row"] == "host" and step["kind"] == "range"
    assert step["start"] == 0 and step["duration"] == pytest.approx(2 * LAUNCH_HOST_S)   # issuing is quick
    after = next(e for e in events if e["name"] == "after")
    assert after["start"] == pytest.approx(LAUNCH_HOST_S + 2e-3)   # the host waited for both kernels


def test_gpuedu_range_marks_the_host_row_of_a_trace_and_is_harmless_outside_one():
    if gpuedu.setup(verbose=False).name != "cpu":
        pytest.skip("gpuedu.trace() models the timeline on the emulator")
    import pycuda.gpuarray as gpuarray
    x = gpuarray.to_gpu(np.ones(1024, np.float32))
    with gpuedu.range("outside any trace"):
        (x * 2).get()
    with gpuedu.trace() as tr:
        with gpuedu.range("double"):
            y = x * 2
        y.get()
    assert tr.rows()[0] == "host"
    assert [e["name"] for e in tr.events if e["kind"] == "range"] == ["double"]
    with pytest.raises(ValueError, match="non-empty name"):
        with gpuedu.range(""):
            pass


class FakeDriver:
    """Shaped like pycuda.driver: events stamp a clock that advances 1 ms per record, per call."""

    def __init__(self):
        self.clock = 0.0
        self.synchronized = 0
        driver = self

        class Event:
            def record(self, stream=None):
                driver.clock += 1.0
                self.t, self.stream = driver.clock, stream

            def time_till(self, other):
                return other.t - self.t

        class Function:
            def __call__(self, *args, **kwargs):
                return "called"

            def prepared_call(self, grid, block, *args, **kwargs):
                return "prepared"

            def prepared_async_call(self, grid, block, stream, *args, **kwargs):
                return "async"

        class Context:
            @staticmethod
            def synchronize():
                driver.synchronized += 1

        self.Event, self.Function, self.Context = Event, Function, Context
        self.copies = []

    def memcpy_htod_async(self, dest, src, stream=None):
        self.copies.append(("htod", stream))

    def memcpy_dtoh(self, dest, src):
        self.copies.append(("dtoh", None))


class FakeStream:
    def __init__(self, handle):
        self.handle = handle


def test_the_gpu_recorder_brackets_launches_and_copies_with_events_on_their_streams():
    import numpy as np

    from gpuedu.profiler.trace import EventRecorder
    drv = FakeDriver()
    original_call = drv.Function.prepared_async_call
    recorder = EventRecorder(drv).start()
    f = drv.Function()
    f.function_name = "my_kernel"
    s1, s2 = FakeStream(11), FakeStream(22)
    host = np.zeros(256, np.float32)
    assert drv.memcpy_htod_async(0, host, s1) is None
    assert f.prepared_async_call((1, 1), (32, 1, 1), s2, 5) == "async"
    assert f.prepared_call((1, 1), (32, 1, 1)) == "prepared"
    drv.memcpy_dtoh(host, 0)
    recorder.stop()
    assert drv.Function.prepared_async_call is original_call          # restored
    assert drv.copies == [("htod", s1), ("dtoh", None)]               # the real calls still happened
    events = recorder.events()
    assert drv.synchronized == 1
    assert [(e["kind"], e["name"], e["row"]) for e in events] == [
        ("htod", "htod 1,024 B", "stream 1"), ("kernel", "my_kernel", "stream 2"),
        ("kernel", "my_kernel", "stream 0 (default)"), ("dtoh", "dtoh 1,024 B", "stream 0 (default)")]
    # each call: start at clock k, end at k + 1 (1 ms); starts from the first event, in seconds
    assert [e["start"] for e in events] == [0.0, 0.002, 0.004, 0.006]
    assert all(e["duration"] == 0.001 for e in events)
    assert all(e["args"]["duration"] == "measured with CUDA events" for e in events)


@pytest.mark.gpu
def test_on_a_gpu_the_trace_is_measured_with_events(gpu_context, tmp_path):
    import numpy as np
    import pycuda.gpuarray as gpuarray

    from gpuedu import ops
    x = np.ones(1 << 20, np.float32)
    stream = gpu_context.Stream()
    with gpuedu.trace(tmp_path / "gpu.json") as tr:
        d = gpuarray.to_gpu_async(x, stream=stream)
        ops.relu(d)
        d.get()
    assert tr.measured_on and all(e["duration"] >= 0 for e in tr.events)
    assert {e["kind"] for e in tr.events} >= {"htod", "kernel", "dtoh"}
    assert "measured on" in str(tr)


def test_the_host_takes_the_measured_6_2_us_to_issue_a_launch_and_a_short_kernel_waits_for_it():
    from gpuedu.profiler.time_model import HOST_LAUNCH_S
    assert LAUNCH_HOST_S == HOST_LAUNCH_S == 6.2e-6
    first, second = schedule([kernel(1, 1 * US, "a"), kernel(1, 1 * US, "b")], H100)
    assert first["start"] == pytest.approx(LAUNCH_HOST_S)
    assert second["start"] == pytest.approx(2 * LAUNCH_HOST_S)    # the GPU idled: launch-bound
