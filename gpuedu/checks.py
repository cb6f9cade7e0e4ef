"""Checks of a batch's features and labels, shared by nn's layers and loss, the data loader and distributed
training: a clear error instead of garbage."""
import numpy as np

from . import launch as L


def check_host_features(x, name="x", features=None):
    """A NumPy batch of features: float32, 2-D, C-contiguous, finite, at least one row."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray or a GPUArray, got {type(x).__name__}")
    if x.dtype != np.float32:
        raise TypeError(f"{name} has dtype {x.dtype}, the kernels compute in float32: "
                        f"pass {name}.astype(np.float32)")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D [batch, features], got shape {x.shape}; "
                         f"flatten images with {name}.reshape(len({name}), -1)")
    if x.shape[0] == 0:
        raise ValueError(f"{name} has no rows: a batch needs at least one sample")
    if features is not None and x.shape[1] != features:
        raise ValueError(f"{name} has {x.shape[1]} features per row, the model expects {features}")
    if not x.flags.c_contiguous:
        raise ValueError(f"{name} is not C-contiguous (a transposed or strided view?): "
                         f"pass np.ascontiguousarray({name})")
    finite = np.isfinite(x)
    if not finite.all():
        row = int(np.argwhere(~finite)[0][0])
        raise ValueError(f"{name} contains NaN or inf (first in row {row}); clean the data before training")
    return x


def check_device_features(x, name="x", features=None):
    """A GPUArray batch: float32, 2-D, contiguous, at least one row, the expected width."""
    if x.dtype != np.float32:
        raise TypeError(f"{name} has dtype {x.dtype}, the kernels compute in float32: "
                        f"convert it before copying it to the device")
    if len(x.shape) != 2:
        raise ValueError(f"{name} must be 2-D [batch, features], got shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{name} has no rows: a batch needs at least one sample")
    if features is not None and x.shape[1] != features:
        raise ValueError(f"{name} has {x.shape[1]} features per row, the layer expects {features}")
    flags = getattr(x, "flags", None)
    if flags is not None and not flags.c_contiguous:
        raise ValueError(f"{name} is not C-contiguous on the device: make a contiguous copy first")
    return x


def to_device_features(x, name="x", features=None):
    """Check ``x`` and return it as a GPUArray (copying a NumPy array to the device)."""
    if L.is_device_array(x):
        return check_device_features(x, name, features)
    return L.gpuarray().to_gpu(check_host_features(x, name, features))


def check_host_labels(y, classes=None, rows=None, name="labels"):
    """Class labels: a 1-D integer array of int32, each in [0, classes)."""
    if not isinstance(y, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray or a GPUArray, got {type(y).__name__}")
    if y.dtype != np.int32:
        raise TypeError(f"{name} has dtype {y.dtype}, the kernels read int32 class indices: "
                        f"pass {name}.astype(np.int32)")
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one class index per row), got shape {y.shape}")
    if rows is not None and y.shape[0] != rows:
        raise ValueError(f"{name} has {y.shape[0]} entries but there are {rows} rows of features")
    if classes is not None and y.size and (y.min() < 0 or y.max() >= classes):
        raise ValueError(f"{name} must lie in [0, {classes}), found values from {y.min()} to {y.max()}")
    return y


def to_device_labels(labels, classes, rows):
    """Check class labels and return them as an int32 GPUArray of shape (rows,).

    A GPUArray is checked for dtype and shape only (its values stay on the device); a NumPy
    array is checked in full by ``check_host_labels`` and copied over.
    """
    if L.is_device_array(labels):
        if labels.dtype != np.int32 or tuple(labels.shape) != (rows,):
            raise ValueError(f"labels must be an int32 GPUArray of shape ({rows},), "
                             f"got {labels.dtype} {tuple(labels.shape)}")
        return labels
    return L.gpuarray().to_gpu(check_host_labels(labels, classes, rows))
