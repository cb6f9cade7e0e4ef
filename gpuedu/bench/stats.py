"""Statistics for timings: medians and quartiles, never means.

A timing distribution has a hard floor (the work itself) and a long tail (the OS, other processes,
a clock tick), so the median is the honest centre and the interquartile range (IQR) the honest
spread: one stray slow repeat moves neither.
"""
import math

import numpy as np


def summarize(samples):
    """Median, quartiles, extremes and count of a list of numbers, as a plain dict for JSON.

    Quartiles use linear interpolation between order statistics (NumPy's default), so
    ``summarize([1, 2, 3, 4])`` has q1 = 1.75, median = 2.5, q3 = 3.25.
    """
    values = np.asarray(list(samples), dtype=np.float64)
    if values.size == 0:
        raise ValueError("cannot summarize an empty list of samples; time at least one repeat")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"samples must be finite numbers, got {values.tolist()}")
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return {
        "median": float(median),
        "q1": float(q1),
        "q3": float(q3),
        "iqr": float(q3 - q1),
        "min": float(values.min()),
        "max": float(values.max()),
        "repeats": int(values.size),
    }


def rates(seconds, amount):
    """Turn durations into rates: ``amount / s`` for each duration ``s`` (e.g. bytes -> bytes/s).

    Summarise the rates rather than inverting the median time: the median commutes with the
    monotone map, but the quartiles swap ends, and doing it per sample keeps that right.
    """
    out = []
    for s in seconds:
        if not s > 0:
            raise ValueError(f"a timed duration must be positive, got {s!r} seconds; "
                             "the timer's resolution is too coarse for this size — time more work per repeat")
        out.append(amount / s)
    return out


def ratio(value, baseline):
    """``value / baseline`` as a finite float, or None when either side is missing or not positive."""
    if value is None or baseline is None:
        return None
    value, baseline = float(value), float(baseline)
    if not (math.isfinite(value) and math.isfinite(baseline)) or value <= 0 or baseline <= 0:
        return None
    return value / baseline
