"""Timing on the device as a user experiences it, and a picture of when copies and kernels ran.

``median_seconds(run)`` times a call with a wait for the device after each repeat (lessons 05, 08, 09, 10, 13);
``plot_timeline(marks)`` draws the copy and compute intervals that CUDA events recorded (lesson 10).
Benchmarks that need event timers, cache flushing or vendor baselines use ``gpuedu.bench`` instead.
"""
import time

import numpy as np


def median_seconds(run, repeats=5, warmup=1, reduce="median"):
    """Median wall-clock seconds of ``run()``, each call followed by a wait for the device to finish.

    What a user of the device experiences: launch overheads included, so small problems show the cost
    of issuing work, large ones the cost of the work.  ``warmup`` calls first (compilation, allocation).
    ``reduce="min"`` returns the fastest repeat instead: on a shared, busy machine the least disturbed one.
    """
    if reduce not in ("median", "min"):
        raise ValueError(f"reduce must be 'median' or 'min', got {reduce!r}")
    from . import backend
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    drv = backend.active().driver
    for _ in range(warmup):
        run()
    drv.Context.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        drv.Context.synchronize()
        times.append(time.perf_counter() - start)
    return float(np.median(times) if reduce == "median" else np.min(times))


def plot_timeline(marks, ax=None, title=None):
    """A copy/compute timeline: ``marks`` holds (copy start, copy end, compute start, compute end) per batch,
    in milliseconds since a common origin (e.g. ``event.time_since(origin)``); one row of bars per engine."""
    import matplotlib.pyplot as plt
    marks = [tuple(float(t) for t in m) for m in marks]
    if any(len(m) != 4 or m[1] < m[0] or m[3] < m[2] for m in marks):
        raise ValueError("each mark must be (copy start, copy end, compute start, compute end) with ends >= starts")
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 1.8))
    ax.broken_barh([(c0, c1 - c0) for c0, c1, _, _ in marks], (10, 8), color="tab:orange")
    ax.broken_barh([(k0, k1 - k0) for _, _, k0, k1 in marks], (0, 8), color="tab:blue")
    ax.set_yticks([4, 14], ["compute", "copy"])
    ax.set_xlabel("milliseconds")
    if title:
        ax.set_title(title, fontsize=10)
    return ax
