"""The timers' protocol (warm-up untimed, a flush before every repeat, events around the work, units),
checked with a recording stand-in for pycuda.driver, so it runs without a GPU."""
from gpuedu.bench import timing


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
    timer = timing.CudaEventTimer(drv, l2_bytes=50 << 20)
    assert timer.flush_bytes == 100 << 20 and drv.calls == [("alloc", 100 << 20)]
    drv.calls.clear()
    seconds = timer.time(lambda: drv.calls.append("work"), repeats=2, warmup=1)
    assert seconds == [0.0025, 0.0025]          # milliseconds became seconds
    repeat = [("flush", 100 << 20), "record1", "work", "record2", "sync2"]
    assert drv.calls == ["work", "ctx_sync"] + repeat + repeat


def test_launch_batches_synchronise_outside_the_timed_interval():
    drv = _RecordingDriver()
    timer = timing.CudaEventTimer(drv, l2_bytes=0, flush=False)
    assert timer.flush_bytes == 0
    per_launch = timer.time_launches(lambda: drv.calls.append("launch"), launches=3, repeats=2)
    assert len(per_launch) == 2 and all(s > 0 for s in per_launch)
    batch = ["ctx_sync", "launch", "launch", "launch", "ctx_sync"]
    assert drv.calls == batch + batch


def test_host_timer_does_not_time_the_warm_up_and_flushes_each_repeat(monkeypatch):
    timer = timing.HostTimer()
    assert timer.flush_bytes >= 2 * 1024 * 1024
    events = []
    monkeypatch.setattr(timer, "flush", lambda: events.append("flush"))
    seconds = timer.time(lambda: events.append("work"), repeats=3, warmup=2)
    assert len(seconds) == 3 and all(s >= 0 for s in seconds)
    assert events == ["work", "work"] + ["flush", "work"] * 3


def test_host_last_level_cache_is_a_plausible_size():
    size = timing.host_last_level_cache_bytes()
    assert 256 * 1024 <= size <= 4 << 30


def test_host_timer_counts_this_process_cpu_time_not_time_spent_waiting():
    import time
    cpu = timing.HostTimer(flush=False).time(lambda: time.sleep(0.05), repeats=1, warmup=0)
    wall = timing.HostTimer(flush=False, cpu_time=False).time(lambda: time.sleep(0.05), repeats=1, warmup=0)
    assert cpu[0] < 0.02          # sleeping, like waiting for other processes' turn, uses no CPU
    assert wall[0] >= 0.05
