"""gpuedu.data: digits, the MNIST IDX reader and checksum-verified download, and the DataLoader."""
import gzip
import hashlib
import struct

import numpy as np
import pytest

from gpuedu import data


def idx_bytes(array, code=0x08):
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def write_mnist(folder, n_train=12, n_test=5, compress=True, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": rng.integers(0, 10, n_train, dtype=np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    for stem, a in arrays.items():
        raw = idx_bytes(a)
        if compress:
            (folder / (stem + ".gz")).write_bytes(gzip.compress(raw))
        else:
            (folder / stem).write_bytes(raw)
    return arrays


# ---- digits --------------------------------------------------------------------------------------
def test_digits_split_is_seeded_scaled_and_complete():
    a, b = data.load_digits(seed=0), data.load_digits(seed=0)
    assert a.x_train.shape == (1438, 64) and a.x_test.shape == (359, 64)
    assert a.x_train.dtype == np.float32 and a.y_train.dtype == np.int32
    assert 0.0 <= a.x_train.min() and a.x_train.max() <= 1.0
    assert np.array_equal(a.x_train, b.x_train) and np.array_equal(a.y_test, b.y_test)
    c = data.load_digits(seed=1)
    assert not np.array_equal(a.y_train, c.y_train)
    assert sorted(np.concatenate([a.y_train, a.y_test]).tolist()) == sorted(
        np.concatenate([c.y_train, c.y_test]).tolist())
    assert set(a.y_test.tolist()) == set(range(10))


def test_digits_rejects_a_bad_fraction():
    with pytest.raises(ValueError, match="test_fraction"):
        data.load_digits(test_fraction=1.5)


# ---- IDX -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("compress", [False, True])
def test_read_idx_round_trips(tmp_path, compress):
    a = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    raw = idx_bytes(a)
    p = tmp_path / "a.idx"
    p.write_bytes(gzip.compress(raw) if compress else raw)
    assert np.array_equal(data.read_idx(p), a)


def test_read_idx_big_endian_int32(tmp_path):
    a = np.array([1, -2, 70000], dtype=np.int32)
    p = tmp_path / "b.idx"
    p.write_bytes(idx_bytes(a, code=0x0C))
    out = data.read_idx(p)
    assert out.dtype == np.int32 and out.tolist() == [1, -2, 70000]


@pytest.mark.parametrize("damage, message", [
    (lambda raw: raw[:-3], "truncated or corrupted"),
    (lambda raw: raw + b"\x00", "truncated or corrupted"),
    (lambda raw: b"\x01" + raw[1:], "not an IDX file"),
    (lambda raw: raw[:2] + b"\x42" + raw[3:], "unknown IDX type"),
    (lambda raw: raw[:6], "truncated IDX header"),
    (lambda raw: gzip.compress(raw)[:-10], "gzip stream is corrupted"),
])
def test_read_idx_reports_damage(tmp_path, damage, message):
    raw = idx_bytes(np.zeros((3, 4, 4), np.uint8))
    p = tmp_path / "bad.idx"
    p.write_bytes(damage(raw))
    with pytest.raises(ValueError, match=message):
        data.read_idx(p)


@pytest.mark.parametrize("compress", [False, True])
def test_load_mnist_from_a_folder(tmp_path, compress):
    arrays = write_mnist(tmp_path, compress=compress)
    assert data.mnist_available(str(tmp_path))
    ds = data.load_mnist(str(tmp_path), verify=False)   # a small stand-in in MNIST's format
    assert ds.x_train.shape == (12, 784) and ds.x_test.shape == (5, 784) and ds.image_shape == (28, 28)
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int32
    np.testing.assert_allclose(ds.x_train[3], arrays["train-images-idx3-ubyte"][3].ravel() / 255.0, rtol=1e-6)
    assert ds.y_test.tolist() == arrays["t10k-labels-idx1-ubyte"].tolist()


def test_load_mnist_missing_file_says_what_to_do(tmp_path):
    write_mnist(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    assert not data.mnist_available(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="download=True"):
        data.load_mnist(str(tmp_path))


def test_load_mnist_rejects_mismatched_counts(tmp_path):
    write_mnist(tmp_path)
    (tmp_path / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(np.zeros(7, np.uint8))))
    with pytest.raises(ValueError, match="expected"):
        data.load_mnist(str(tmp_path), verify=False)


@pytest.mark.parametrize("compress, name", [(True, "train-images-idx3-ubyte.gz"), (False, "train-images-idx3-ubyte")])
def test_load_mnist_refuses_other_files_under_mnists_names(tmp_path, compress, name):
    write_mnist(tmp_path, compress=compress)
    with pytest.raises(ValueError, match=f"{name} fails its checksum: its SHA-256 is [0-9a-f]{{64}}, MNIST's {name} "
                                         f"has [0-9a-f]{{64}}.*verify=False"):
        data.load_mnist(str(tmp_path))


@pytest.mark.parametrize("compress", [True, False])
def test_a_tampered_mnist_file_fails_its_checksum_before_it_is_read(tmp_path, compress, monkeypatch):
    """A file of MNIST's layout and shape whose bytes changed: named by its checksum, whatever its content."""
    arrays = write_mnist(tmp_path, compress=compress)
    suffix = ".gz" if compress else ""
    contents = {}
    for stem, a in arrays.items():
        raw = idx_bytes(a)
        contents[stem] = gzip.compress(raw, mtime=0) if compress else raw
        (tmp_path / (stem + suffix)).write_bytes(contents[stem])
    digests = {stem: hashlib.sha256(blob).hexdigest() for stem, blob in contents.items()}
    if compress:   # these small files stand for MNIST: their digests are the ones expected
        monkeypatch.setattr(data, "MNIST_FILES", {s + ".gz": (len(contents[s]), d) for s, d in digests.items()})
    else:
        monkeypatch.setattr(data, "MNIST_RAW_SHA256", digests)
    assert data.load_mnist(str(tmp_path)).x_train.shape == (12, 784)
    stem = "t10k-labels-idx1-ubyte"
    tampered = arrays[stem].copy()
    tampered[0] = (tampered[0] + 1) % 10          # one label changed: the same shape, a valid file
    blob = gzip.compress(idx_bytes(tampered), mtime=0) if compress else idx_bytes(tampered)
    (tmp_path / (stem + suffix)).write_bytes(blob)
    with pytest.raises(ValueError, match=f"{stem}{suffix} fails its checksum.*changed or damaged"):
        data.load_mnist(str(tmp_path))
    (tmp_path / (stem + suffix)).write_bytes(blob[: len(blob) // 2])   # cut short: the checksum says so first
    with pytest.raises(ValueError, match="fails its checksum"):
        data.load_mnist(str(tmp_path))


# ---- download ------------------------------------------------------------------------------------
def fake_files(contents):
    return {name: (len(blob), hashlib.sha256(blob).hexdigest()) for name, blob in contents.items()}


def test_download_verifies_checksums_and_falls_back_to_the_next_mirror(tmp_path):
    contents = {"a.gz": b"first file", "b.gz": b"second file"}
    calls = []

    def fetch(url):
        calls.append(url)
        if url.startswith("https://bad/"):
            return b"tampered"
        return contents[url.rsplit("/", 1)[1]]

    paths = data.download_mnist(str(tmp_path), fetch=fetch, files=fake_files(contents),
                                mirrors=("https://bad/", "https://good/"))
    assert [p.rsplit("/", 1)[1] for p in paths] == ["a.gz", "b.gz"]
    assert (tmp_path / "a.gz").read_bytes() == b"first file"
    assert calls == ["https://bad/a.gz", "https://good/a.gz", "https://bad/b.gz", "https://good/b.gz"]
    # A second call finds the verified files and fetches nothing.
    calls.clear()
    data.download_mnist(str(tmp_path), fetch=fetch, files=fake_files(contents), mirrors=("https://good/",))
    assert calls == []


def test_download_refuses_a_file_whose_checksum_never_matches(tmp_path):
    def fetch(url):
        return b"not what was promised"

    with pytest.raises(RuntimeError, match="SHA-256"):
        data.download_mnist(str(tmp_path), fetch=fetch, files=fake_files({"a.gz": b"real"}),
                            mirrors=("https://m1/",))
    assert not (tmp_path / "a.gz").exists() and not (tmp_path / "a.gz.part").exists()


def test_download_reports_transport_errors(tmp_path):
    def fetch(url):
        raise OSError("network unreachable")

    with pytest.raises(RuntimeError, match="network unreachable"):
        data.download_mnist(str(tmp_path), fetch=fetch, files=fake_files({"a.gz": b"x"}), mirrors=("https://m/",))


def test_load_mnist_download_end_to_end_with_a_fake_fetch(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    write_mnist(source)
    blobs = {p.name: p.read_bytes() for p in source.iterdir()}
    target = tmp_path / "target"
    ds_files = fake_files(blobs)
    data.download_mnist(str(target), fetch=lambda url: blobs[url.rsplit("/", 1)[1]], files=ds_files,
                        mirrors=("https://m/",))
    assert data.load_mnist(str(target), verify=False).x_train.shape == (12, 784)


def test_known_mnist_checksums_are_well_formed():
    for name, (size, sha) in data.MNIST_FILES.items():
        assert name.endswith(".gz") and size > 0 and len(sha) == 64 and int(sha, 16) >= 0


def test_load_dispatches_by_name(tmp_path, monkeypatch):
    assert data.load("digits").name == "digits"
    write_mnist(tmp_path)
    assert data.load("mnist", folder=str(tmp_path), verify=False).x_test.shape == (5, 784)
    monkeypatch.setenv("GPUEDU_MNIST", str(tmp_path))
    assert "mnist" in repr(data.load("mnist", verify=False))
    with pytest.raises(ValueError, match="'digits' or 'mnist'"):
        data.load("cifar10")


def test_char_task_is_seeded_shifted_by_one_and_made_of_its_words():
    task = data.char_task(seq_len=20, train=30, test=10, seed=3)
    again = data.char_task(seq_len=20, train=30, test=10, seed=3)
    np.testing.assert_array_equal(task.x_train, again.x_train)
    assert not np.array_equal(task.x_train, data.char_task(seq_len=20, train=30, test=10, seed=4).x_train)
    assert task.x_train.shape == task.y_train.shape == (30, 20) and task.x_test.shape == (10, 20)
    assert task.x_train.dtype == np.int32
    np.testing.assert_array_equal(task.x_train[:, 1:], task.y_train[:, :-1])     # y is x one character on
    assert task.alphabet[0] == " " and task.vocab_size == len(set(task.alphabet))
    for row in task.x_train:
        inner = task.decode(row).split(" ")[1:-1]      # the words cut by the window's ends left out
        assert set(inner) <= set(data.CHAR_WORDS) | {""}
    with pytest.raises(ValueError, match="seq_len must be a positive integer"):
        data.char_task(seq_len=0)


def test_unigram_loss_is_the_cross_entropy_of_smoothed_frequencies():
    y_train = np.array([0, 0, 0, 1], np.int32)      # counts + 1: 4, 2, 1 of 7
    y_test = np.array([0, 2], np.int32)
    assert data.unigram_loss(y_train, y_test, 3) == pytest.approx(-(np.log(4 / 7) + np.log(1 / 7)) / 2)
