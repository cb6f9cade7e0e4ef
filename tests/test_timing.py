"""gpuedu.timing: a call timed with a wait for the device; the copy/compute timeline."""
import matplotlib
import pytest

import gpuedu
from gpuedu import timing

matplotlib.use("Agg")
gpuedu.setup(verbose=False)


def test_median_seconds_measures_the_call():
    calls = []
    seconds = timing.median_seconds(lambda: (calls.append(1), __import__("time").sleep(0.01)), repeats=3, warmup=2)
    assert len(calls) == 5 and 0.009 < seconds < 0.5
    with pytest.raises(ValueError, match="repeats"):
        timing.median_seconds(lambda: None, repeats=0)
    delays = iter([0.05, 0.001, 0.05])
    fastest = timing.median_seconds(lambda: __import__("time").sleep(next(delays)), repeats=3, warmup=0, reduce="min")
    assert fastest < 0.04
    with pytest.raises(ValueError, match="reduce"):
        timing.median_seconds(lambda: None, reduce="mean")


def test_plot_timeline_draws_a_bar_per_copy_and_per_step():
    marks = [(0.0, 1.0, 1.0, 3.0), (1.0, 2.0, 3.0, 5.0)]
    ax = timing.plot_timeline(marks, title="overlapped")
    copies, steps = ax.collections
    assert len(copies.get_paths()) == 2 and len(steps.get_paths()) == 2
    assert ax.get_title() == "overlapped"
    with pytest.raises(ValueError, match="ends >= starts"):
        timing.plot_timeline([(2.0, 1.0, 0.0, 1.0)])
