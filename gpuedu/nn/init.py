"""Weight initialisation from a seeded NumPy generator (host side; the layer copies the result once).

He (Kaiming) normal keeps the variance of ReLU-family activations constant from layer to layer:
std = sqrt(2 / fan_in).  Xavier (Glorot) uniform does the same for symmetric activations (tanh, sigmoid,
none) by balancing forward and backward: limit = sqrt(6 / (fan_in + fan_out)).
"""
import numpy as np


def _rng(seed):
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def he_normal(fan_in, fan_out, seed=0):
    """A [fan_in, fan_out] float32 matrix drawn from N(0, 2/fan_in)."""
    return (_rng(seed).standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def xavier_uniform(fan_in, fan_out, seed=0):
    """A [fan_in, fan_out] float32 matrix drawn from U(-a, a), a = sqrt(6/(fan_in+fan_out))."""
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return _rng(seed).uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)


INITIALISERS = {"he": he_normal, "xavier": xavier_uniform}


def default_for(activation):
    """He for ReLU and GELU, Xavier for the symmetric ones."""
    return "he" if activation in ("relu", "gelu") else "xavier"
