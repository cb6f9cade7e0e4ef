"""The timers' protocol (warm-up untimed, a flush before every repeat, events around the work, units),
checked with a recording stand-in for pycuda.driver, so it runs without a GPU."""
import pytest

from gpuedu.bench import timers


class _RecordingDriver:
    """Just enough of pycuda.driver to see what a timer does, in order; each event pair is 2.5 ms apart."""

    def __init__(self):
        self.calls = []
        driver = self

        class Event:
            count = 0

            def __init__(self):
                Event.count += 1
                self.id = Event.count

            def record(self, stream=None):
                driver.calls.append(f"record{self.id}")

            def synchronize(self):
                driver.calls.append(f"sync{self.id}")

            def time_till(self, other):
                return 2.5     # milliseconds, as PyCUDA reports

        class Context:
            @staticmethod
            def synchronize():
                driver.calls.append("ctx_sync")

        self.Event, self.Context = Event, Context

    def mem_alloc(self, nbytes):
        self.calls.append(("alloc", nbytes))
        return object()

    def memset_d32(self, buf, value, count):
        self.calls.append(("flush", count * 4))


def test_cuda_event_timer_flushes_twice_the_l2_then_brackets_each_repeat_with_events():
    drv = _RecordingDriver()
    timer = timers.CudaEventTimer(drv, l2_bytes=50 << 20)
    assert timer.flush_bytes == 100 << 20 and drv.calls == [("alloc", 100 << 20)]
    drv.calls.clear()
    seconds = timer.time(lambda: drv.calls.append("work"), repeats=2, warmup=1)
    assert seconds == [0.0025, 0.0025]          # milliseconds became seconds
    repeat = [("flush", 100 << 20), "record1", "work", "record2", "sync2"]
    assert drv.calls == ["work", "ctx_sync"] + repeat + repeat


def test_launch_batches_synchronise_outside_the_timed_interval():
    drv = _RecordingDriver()
    timer = timers.CudaEventTimer(drv, l2_bytes=0, flush=False)
    assert timer.flush_bytes == 0
    per_launch = timer.time_launches(lambda: drv.calls.append("launch"), launches=3, repeats=2)
    assert len(per_launch) == 2 and all(s > 0 for s in per_launch)
    batch = ["ctx_sync", "launch", "launch", "launch", "ctx_sync"]
    assert drv.calls == batch + batch


def test_host_timer_does_not_time_the_warm_up_and_flushes_each_repeat(monkeypatch):
    timer = timers.HostTimer()
    assert timer.flush_bytes >= 2 * 1024 * 1024
    events = []
    monkeypatch.setattr(timer, "flush", lambda: events.append("flush"))
    seconds = timer.time(lambda: events.append("work"), repeats=3, warmup=2)
    assert len(seconds) == 3 and all(s >= 0 for s in seconds)
    assert events == ["work", "work"] + ["flush", "work"] * 3


def test_host_last_level_cache_is_a_plausible_size():
    size = timers.host_last_level_cache_bytes()
    assert 256 * 1024 <= size <= 4 << 30


def _wait_until_this_process_is_idle(limit_s=2.0):
    """Right after NumPy is imported, OpenBLAS's worker thread spins for ~50 ms, which is this process's
    CPU time too: wait until a short sleep costs (almost) no CPU before measuring one."""
    import time
    deadline = time.perf_counter() + limit_s
    while time.perf_counter() < deadline:
        start = time.process_time()
        time.sleep(0.02)
        if time.process_time() - start < 0.002:
            return


def test_host_timer_counts_this_process_cpu_time_not_time_spent_waiting():
    import time
    _wait_until_this_process_is_idle()
    cpu = timers.HostTimer(flush=False).time(lambda: time.sleep(0.05), repeats=1, warmup=0)
    wall = timers.HostTimer(flush=False, cpu_time=False).time(lambda: time.sleep(0.05), repeats=1, warmup=0)
    assert cpu[0] < 0.02          # sleeping, like waiting for other processes' turn, uses no CPU
    assert wall[0] >= 0.05


class _RecordingLibrary:
    """Just enough of torch or cupy for their timers: events 4 ms apart, a flush buffer, a synchronise."""

    def __init__(self, kind):
        self.calls = []
        lib = self

        class Event:
            count = 0

            def __init__(self, enable_timing=True):
                Event.count += 1
                self.id = Event.count

            def record(self):
                lib.calls.append(f"record{self.id}")

            def synchronize(self):
                lib.calls.append(f"sync{self.id}")

            def elapsed_time(self, other):
                return 4.0

        class Buffer:
            def zero_(self):
                lib.calls.append("flush")

            def fill(self, value):           # cupy's name for the same
                self.zero_()

        class Device:
            def synchronize(self):
                lib.calls.append("device_sync")

        class Namespace:
            pass

        self.cuda = Namespace()
        self.cuda.Event = Event
        self.float32 = "float32"
        if kind == "torch":
            self.cuda.synchronize = lambda: lib.calls.append("device_sync")
            self.empty = lambda n, dtype, device: Buffer()
        else:
            self.cuda.Device = Device
            self.cuda.get_elapsed_time = lambda start, end: 4.0
            self.empty = lambda n, dtype: Buffer()


@pytest.mark.parametrize("kind, make", [("torch", timers.TorchEventTimer), ("cupy", timers.CupyEventTimer)])
def test_torch_and_cupy_timers_follow_the_same_protocol(kind, make):
    lib = _RecordingLibrary(kind)
    timer = make(lib, l2_bytes=50 << 20)
    assert timer.flush_bytes == 100 << 20
    seconds = timer.time(lambda: lib.calls.append("work"), repeats=2, warmup=1)
    assert seconds == [0.004, 0.004]            # milliseconds became seconds
    repeat = ["flush", "record1", "work", "record2", "sync2"]
    assert lib.calls == ["work", "device_sync"] + repeat + repeat
