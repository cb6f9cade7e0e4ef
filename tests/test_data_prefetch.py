"""data.prefetch: the host side of the pipeline, in order, ahead, with errors where they belong."""
import threading
import time

import pytest

from gpuedu import data


def test_results_come_in_order_and_are_computed_ahead_on_other_threads():
    names = []

    def prepare(i):
        names.append(threading.current_thread().name)
        time.sleep(0.01 * (5 - i % 5))          # later items finish first: the order must still hold
        return i * i

    assert list(data.prefetch(range(12), prepare, workers=3)) == [i * i for i in range(12)]
    assert all(name.startswith("gpuedu-prefetch") for name in names)


def test_the_next_item_is_prepared_while_the_consumer_holds_this_one():
    started = {i: threading.Event() for i in range(4)}

    def prepare(i):
        started[i].set()
        return i

    for i in data.prefetch(range(4), prepare, workers=2):
        if i + 1 < 4:       # while we still hold item i, item i + 1 is already being prepared
            assert started[i + 1].wait(timeout=10), f"item {i + 1} was not started ahead"


def test_an_error_is_raised_at_its_item_and_the_rest_is_cancelled():
    started = []

    def prepare(i):
        started.append(i)
        if i == 3:
            raise ValueError("bad image 3")
        time.sleep(0.01)
        return i

    got = []
    with pytest.raises(ValueError, match="bad image 3"):
        for x in data.prefetch(range(100), prepare, workers=2, ahead=2):
            got.append(x)
    assert got == [0, 1, 2]
    assert len(started) < 100


@pytest.mark.parametrize("kwargs, words", [({"workers": 0}, "workers"), ({"workers": 1.5}, "workers"),
                                           ({"ahead": 0}, "ahead"), ({"prepare": 3}, "prepare")])
def test_bad_settings_are_named(kwargs, words):
    args = {"items": range(3), "prepare": lambda i: i, **kwargs}
    with pytest.raises((ValueError, TypeError), match=words):
        list(data.prefetch(**args))
