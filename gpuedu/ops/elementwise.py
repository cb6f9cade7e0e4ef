"""The activation ladder of ``gpuedu/kernels/elementwise.cu``: its launchers and NumPy references.

    ops.activation(x, "gelu", version=3)     ops.relu(x), ops.sigmoid(x), ...

``VERSIONS`` is the ladder (described at the top of elementwise.cu); ``ACTIVATION_CODES`` the activations
it applies, with their codes from the kernels' one table (activations.cuh). The references
(``relu_reference``, ..., ``activation_reference``) compute in float64 and return float32.
"""
import numpy as np

from .. import kernels as _kernels
from .. import launch as L
from ..launch import ceil_div
from ._common import check_block, check_version

#: The activations elementwise.cu applies, with their codes from the kernels' one table (activations.cuh).
ACTIVATION_CODES = {name: code for name, code in _kernels.ACTIVATIONS.items() if name != "none"}
#: Default alpha of the activations that take one (leaky ReLU's slope, ELU's scale).
DEFAULT_ALPHA = {"leaky_relu": 0.01, "elu": 1.0}

VERSIONS = (1, 2, 3)
GRID_STRIDE_MAX_BLOCKS = 1024   # versions 2 and 3: enough blocks to fill a large GPU, then loop


def activation(x, name="relu", version=1, alpha=None, block_size=256, out=None, stream=None):
    """phi(x) elementwise; ``name`` is one of ``ACTIVATION_CODES`` (relu, gelu, ...)."""
    if name not in ACTIVATION_CODES:
        raise ValueError(f"unknown activation {name!r}; choose one of {', '.join(ACTIVATION_CODES)}")
    check_version(version, VERSIONS, "activation")
    check_block(block_size, "activation")
    x = L.device_array(x)
    out = L.output(out, x.shape)
    n = x.size
    if n == 0:
        return out
    alpha = DEFAULT_ALPHA.get(name, 0.0) if alpha is None else alpha
    if version == 3:
        L.check_aligned16("activation version 3", x=x, out=out)
    if version == 1:
        grid = ceil_div(n, block_size)
    elif version == 2:
        grid = min(ceil_div(n, block_size), GRID_STRIDE_MAX_BLOCKS)
    else:  # one thread per float4; at least one block for the scalar tail
        grid = max(1, min(ceil_div(n // 4, block_size), GRID_STRIDE_MAX_BLOCKS))
    fn = L.kernel("elementwise", f"activation_kernel{version}", "PPiif")
    L.launch(fn, (grid, 1), (block_size, 1, 1),
             (out.gpudata, x.gpudata, np.int32(n), np.int32(ACTIVATION_CODES[name]), np.float32(alpha)), stream)
    return out


def relu(x, version=1, **kw):
    return activation(x, "relu", version, **kw)


def leaky_relu(x, version=1, alpha=0.01, **kw):
    return activation(x, "leaky_relu", version, alpha=alpha, **kw)


def sigmoid(x, version=1, **kw):
    return activation(x, "sigmoid", version, **kw)


def tanh(x, version=1, **kw):
    return activation(x, "tanh", version, **kw)


def gelu(x, version=1, **kw):
    return activation(x, "gelu", version, **kw)


def silu(x, version=1, **kw):
    return activation(x, "silu", version, **kw)


def elu(x, version=1, alpha=1.0, **kw):
    return activation(x, "elu", version, alpha=alpha, **kw)


# ---- NumPy references -------------------------------------------------------------------------

#: Activation names understood by ``activation_reference`` (and by ``activation``).
REFERENCE_ACTIVATIONS = ("relu", "leaky_relu", "sigmoid", "tanh", "gelu", "silu", "elu")


def as_float64(x):
    return np.asarray(x, dtype=np.float64)


def relu_reference(x):
    return np.maximum(as_float64(x), 0.0).astype(np.float32)


def leaky_relu_reference(x, alpha=0.01):
    x = as_float64(x)
    return np.where(x > 0, x, alpha * x).astype(np.float32)


def sigmoid_reference(x):
    x = as_float64(x)
    return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


def tanh_reference(x):
    return np.tanh(as_float64(x)).astype(np.float32)


def gelu_reference(x):
    """The tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    x = as_float64(x)
    return (0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))).astype(np.float32)


def silu_reference(x):
    x = as_float64(x)
    return (x / (1.0 + np.exp(-x))).astype(np.float32)


def elu_reference(x, alpha=1.0):
    x = as_float64(x)
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0))).astype(np.float32)


def activation_reference(x, name, alpha=None):
    """The activation called ``name`` (one of ``REFERENCE_ACTIVATIONS``) applied elementwise."""
    if name not in REFERENCE_ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {', '.join(REFERENCE_ACTIVATIONS)}")
    fn = globals()[f"{name}_reference"]
    if name in ("leaky_relu", "elu") and alpha is not None:
        return fn(x, alpha)
    return fn(x)
