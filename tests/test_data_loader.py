"""gpuedu.data.DataLoader: every row once per epoch, seeded shuffles, drop_last, clear errors."""
import numpy as np
import pytest

import gpuedu
from gpuedu import data

gpuedu.setup(verbose=False)


def make(n=10, features=3):
    x = np.arange(n * features, dtype=np.float32).reshape(n, features)
    y = np.arange(n, dtype=np.int32) % 4
    return x, y


def epoch(loader):
    # Copy each batch to the host before asking for the next one (its buffer is then refilled).
    return [(xb.get().copy(), yb.get().copy()) for xb, yb in loader]


def test_every_row_once_per_epoch_in_batches():
    x, y = make(10)
    loader = data.DataLoader(x, y, batch_size=4, shuffle=True, seed=0)
    assert len(loader) == 3
    batches = epoch(loader)
    assert [len(b[0]) for b in batches] == [4, 4, 2]
    xs = np.concatenate([b[0] for b in batches])
    ys = np.concatenate([b[1] for b in batches])
    rows = (xs[:, 0] / 3).astype(int)
    assert sorted(rows.tolist()) == list(range(10))          # a permutation: nothing lost, nothing twice
    assert np.array_equal(ys, y[rows])                       # labels travel with their rows
    assert rows.tolist() != list(range(10))                  # and it is shuffled


def test_shuffle_is_seeded_and_changes_between_epochs():
    x, y = make(16)
    first = [b[1].tolist() for b in epoch(data.DataLoader(x, y, 5, seed=3))]
    again = data.DataLoader(x, y, 5, seed=3)
    assert [b[1].tolist() for b in epoch(again)] == first
    second_epoch = [b[0][:, 0].tolist() for b in epoch(again)]
    assert second_epoch != [b[0][:, 0].tolist() for b in epoch(data.DataLoader(x, y, 5, seed=3))]


def test_no_shuffle_keeps_order_and_drop_last_drops_the_short_batch():
    x, y = make(10)
    loader = data.DataLoader(x, y, batch_size=4, shuffle=False, drop_last=True)
    assert len(loader) == 2 and loader.rows_per_epoch == 8
    batches = epoch(loader)
    assert np.array_equal(np.concatenate([b[0] for b in batches]), x[:8])


def test_with_a_compute_stream():
    from gpuedu import backend
    x, y = make(9)
    loader = data.DataLoader(x, y, batch_size=2, shuffle=False, compute_stream=backend.active().driver.Stream())
    assert np.array_equal(np.concatenate([b[0] for b in epoch(loader)]), x)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(batch_size=0), ValueError, "at least 1"),
    (dict(batch_size=11), ValueError, "larger than the data set"),
    (dict(batch_size=2.5), TypeError, "integer"),
])
def test_bad_batch_sizes(kwargs, error, message):
    x, y = make(10)
    with pytest.raises(error, match=message):
        data.DataLoader(x, y, **kwargs)


def test_bad_data():
    x, y = make(10)
    with pytest.raises(TypeError, match="astype"):
        data.DataLoader(x.astype(np.float64), y, 2)
    with pytest.raises(ValueError, match="C-contiguous"):
        data.DataLoader(np.asfortranarray(np.ones((10, 3), np.float32)), y, 2)
    bad = x.copy()
    bad[7, 1] = np.nan
    with pytest.raises(ValueError, match="row 7"):
        data.DataLoader(bad, y, 2)
    bad[7, 1] = np.inf
    with pytest.raises(ValueError, match="NaN or inf"):
        data.DataLoader(bad, y, 2)
    with pytest.raises(ValueError, match="9 entries"):
        data.DataLoader(x, y[:9], 2)
    with pytest.raises(TypeError, match="int32"):
        data.DataLoader(x, y.astype(np.int64), 2)
    with pytest.raises(ValueError, match="negative"):
        data.DataLoader(x, y - 1, 2)


def test_the_buffer_of_the_previous_batch_is_refilled_when_the_next_is_asked_for():
    x, y = make(12)
    loader = data.DataLoader(x, y, batch_size=4, shuffle=False)
    it = iter(loader)
    first_x, _ = next(it)
    first = first_x.get().copy()
    assert np.array_equal(first, x[:4])
    second_x, _ = next(it)                     # stages batch 3 into batch 1's buffer
    assert np.array_equal(second_x.get(), x[4:8])
    assert np.array_equal(first_x.get(), x[8:12])
