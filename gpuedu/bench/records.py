"""The record of one benchmark run: figures (measured or skipped) and the state measurements share.

A *figure* is one number with its context, stored as a plain dict so it goes to JSON as is:

    name       "matmul_v4"
    group      "matmul"             (which measurement produced it; plots are drawn per group)
    unit       "GFLOP/s"
    status     "ok" or "skipped"
    median     the median over the repeats (None when skipped)
    spread     {"q1", "q3", "iqr", "min", "max"} of the same samples
    repeats    how many timed repeats
    sizes      the problem's sizes, e.g. {"m": 4096, "n": 4096, "k": 4096}
    baselines  names of the figures it is compared with, headline first
    ratios     {baseline name: this median / that median, or None when that baseline is missing}
    ratio      the headline ratio (to the first baseline), or None
    reason     why it was skipped (only when skipped)
    note       anything a reader needs to interpret it (optional)

A ratio is always ``this median / baseline median`` in the figure's own unit: for a throughput
(GB/s, GFLOP/s, samples/s) above 1 means faster than the baseline; for a duration per launch (µs)
below 1 means faster.
"""
from . import stats


class Skipped(Exception):
    """A measurement that cannot run here: the message says why (missing code, no GPU, no PyTorch)."""


class Run:
    """State shared by the measurements of one run and the figures they record.

    ``backend`` is ``gpuedu.backend.active()``, ``drv`` is ``pycuda.driver``, ``timer`` one of the
    timers in ``gpuedu.bench.timers``; ``sizes`` the problem sizes of this mode (see ``config``).
    """

    def __init__(self, backend, drv, timer, sizes, repeats, warmup, on_gpu, log=print):
        self.backend = backend
        self.drv = drv
        self.timer = timer
        self.sizes = sizes
        self.repeats = repeats
        self.warmup = warmup
        self.on_gpu = on_gpu
        self.log = log
        self.figures = {}
        self.third_party = {}    # name -> module or the reason it is unavailable (see baselines)
        self.deferred = []       # measurements run after all others (see ``later``)

    # -- recording ----------------------------------------------------------------------------
    def add(self, name, group, unit, values, sizes, baselines=(), note=None, seconds=None):
        """Record a measured figure from its per-repeat ``values`` (already in ``unit``)."""
        summary = stats.summarize(values)
        figure = {
            "name": name, "group": group, "unit": unit, "status": "ok",
            "median": summary["median"],
            "spread": {k: summary[k] for k in ("q1", "q3", "iqr", "min", "max")},
            "repeats": summary["repeats"],
            "sizes": dict(sizes),
            "baselines": list(baselines),
        }
        if seconds is not None:
            figure["seconds_median"] = stats.summarize(seconds)["median"]
        if note:
            figure["note"] = note
        self._store(figure)
        self.log(f"  {name:<28} {_format_number(figure['median'])} {unit}")
        return figure

    def skip(self, name, group, unit, reason, sizes=None, baselines=()):
        """Record a figure that was not measured, with the reason."""
        figure = {
            "name": name, "group": group, "unit": unit, "status": "skipped",
            "median": None, "spread": None, "repeats": 0,
            "sizes": dict(sizes or {}), "baselines": list(baselines), "reason": str(reason),
        }
        self._store(figure)
        self.log(f"  {name:<28} skipped: {reason}")
        return figure

    def figure(self, name, group, unit, sizes, baselines=(), note=None):
        """A context in which one figure is measured; failures become a skipped figure with the reason.

            with run.figure("relu_v1", "bandwidth", "GB/s", {"n": n}, ["copy_dtod"]) as fig:
                seconds = run.time(lambda: ...)
                fig.record(stats.rates(seconds, 8 * n / 1e9), seconds)

        ``raise Skipped("why")`` inside records the reason; any other exception is recorded as a
        failure with its type and message (the rest of the run goes on), except KeyboardInterrupt.
        """
        return _FigureContext(self, name, group, unit, sizes, baselines, note)

    def _store(self, figure):
        if figure["name"] in self.figures:
            raise ValueError(f"figure {figure['name']!r} recorded twice; names must be unique in a run")
        self.figures[figure["name"]] = figure

    def measured(self, name):
        """The figure ``name`` if it was measured, else None."""
        figure = self.figures.get(name)
        return figure if figure is not None and figure["status"] == "ok" else None

    def later(self, function):
        """Run ``function()`` after every measurement of the suite (the vendor libraries' yardsticks).

        PyTorch and CuPy drive the GPU through the CUDA runtime, which may make its own primary
        context current in this thread; run last, they cannot disturb a gpuedu figure.
        """
        self.deferred.append(function)

    def run_deferred(self):
        while self.deferred:
            self.deferred.pop(0)()

    # -- timing helpers -----------------------------------------------------------------------
    def time(self, run, repeats=None, warmup=None, timer=None):
        """Seconds per repeat of ``run()`` with this run's timer (or ``timer``), repeats and warm-up."""
        timer = timer or self.timer
        return timer.time(run, self.repeats if repeats is None else repeats,
                          self.warmup if warmup is None else warmup)

    # -- finishing ----------------------------------------------------------------------------
    def compute_ratios(self):
        """Fill ``ratios`` and ``ratio`` of every figure from the medians of its baselines."""
        for figure in self.figures.values():
            ratios, missing = {}, []
            for base in figure["baselines"]:
                other = self.figures.get(base)
                value = stats.ratio(figure["median"], other["median"]) if other else None
                ratios[base] = value
                if value is None and figure["status"] == "ok":
                    why = "not measured in this run" if other is None else other.get("reason", "not positive")
                    missing.append(f"{base}: {why}")
            figure["ratios"] = ratios
            figure["ratio"] = ratios.get(figure["baselines"][0]) if figure["baselines"] else None
            if missing:
                figure["ratio_missing"] = "; ".join(missing)

    def figure_list(self):
        return list(self.figures.values())


class _FigureContext:
    def __init__(self, run, name, group, unit, sizes, baselines, note):
        self.run, self.name, self.group, self.unit = run, name, group, unit
        self.sizes, self.baselines, self.note = dict(sizes), list(baselines), note
        self.recorded = None

    def record(self, values, seconds=None, note=None):
        self.recorded = self.run.add(self.name, self.group, self.unit, values, self.sizes,
                                     self.baselines, note or self.note, seconds)
        return self.recorded

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if kind is None:
            if self.recorded is None:
                raise RuntimeError(f"figure {self.name!r}: the measurement ended without recording a value")
            return False
        if issubclass(kind, Skipped):
            reason = str(exc)
        elif issubclass(kind, Exception):
            reason = f"failed: {kind.__name__}: {_first_line(exc)}"
        else:
            return False   # KeyboardInterrupt, SystemExit: stop the run
        if self.recorded is None:
            self.run.skip(self.name, self.group, self.unit, reason, self.sizes, self.baselines)
        return True


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else "(no message)"


def _format_number(x):
    if x is None:
        return "-"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


format_number = _format_number
