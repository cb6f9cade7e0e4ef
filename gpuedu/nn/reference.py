"""The same network in NumPy float64: the reference the device kernels are checked against.

``Sequential.from_model(model)`` copies a device model's weights; ``forward``/``backward`` mirror the
device layers (forward and local backward side by side); ``numerical_gradient`` gives central finite
differences, so the reference's analytic gradients are themselves checked before the device's are
compared with them.
"""
from math import erf, pi, sqrt

import numpy as np

from ..ops.attention import attention_backward_reference as attention_backward
from ..ops.attention import attention_reference as attention
from ..ops.layernorm import layernorm_backward_reference as layernorm_backward
from ..ops.layernorm import layernorm_reference as layernorm

_erf = np.vectorize(erf, otypes=[np.float64])


def act_forward(name, z):
    if name in (None, "none"):
        return z
    if name == "relu":
        return np.maximum(z, 0.0)
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-z))
    if name == "tanh":
        return np.tanh(z)
    if name == "gelu":
        return 0.5 * z * (1.0 + _erf(z / sqrt(2.0)))
    raise ValueError(f"unknown activation {name!r}")


def act_derivative(name, z, y):
    if name in (None, "none"):
        return np.ones_like(z)
    if name == "relu":
        return (z > 0).astype(z.dtype)
    if name == "sigmoid":
        return y * (1.0 - y)
    if name == "tanh":
        return 1.0 - y * y
    if name == "gelu":
        return 0.5 * (1.0 + _erf(z / sqrt(2.0))) + z * np.exp(-0.5 * z * z) / sqrt(2.0 * pi)
    raise ValueError(f"unknown activation {name!r}")


class Dense:
    def __init__(self, W, b, activation=None):
        self.W = np.array(W, dtype=np.float64)
        self.b = np.array(b, dtype=np.float64)
        self.activation = activation

    def forward(self, x):
        self.x = x
        self.z = x @ self.W + self.b
        self.y = act_forward(self.activation, self.z)
        return self.y

    def backward(self, dy):
        dz = dy * act_derivative(self.activation, self.z, self.y)
        self.dW = self.x.T @ dz
        self.db = dz.sum(axis=0)
        return dz @ self.W.T

    def parameters(self):
        return [self.W, self.b]

    def grads(self):
        return [self.dW, self.db]


class Activation:
    def __init__(self, name):
        self.activation = name

    def forward(self, x):
        self.x = x
        self.y = act_forward(self.activation, x)
        return self.y

    def backward(self, dy):
        return dy * act_derivative(self.activation, self.x, self.y)

    def parameters(self):
        return []

    def grads(self):
        return []


class Conv2D:
    """conv2d (+ bias, optional ReLU) in float64, via gpuedu.reference's im2col."""

    def __init__(self, W, b, stride=1, padding=0, activation=None):
        self.W = np.array(W, dtype=np.float64)
        self.b = np.array(b, dtype=np.float64)
        self.stride, self.padding, self.activation = stride, padding, activation

    def forward(self, x):
        from .. import reference
        self.x = x
        self.z = reference.conv2d(x, self.W, self.b, self.stride, self.padding)
        self.y = act_forward(self.activation, self.z)
        return self.y

    def backward(self, dy):
        from .. import reference
        dz = dy * act_derivative(self.activation, self.z, self.y)
        dx, self.dW, self.db = reference.conv2d_backward(dz, self.x, self.W, self.stride, self.padding)
        return dx

    def parameters(self):
        return [self.W, self.b]

    def grads(self):
        return [self.dW, self.db]


class MaxPool2D:
    def __init__(self, kernel_size=2, stride=None):
        self.kernel_size, self.stride = kernel_size, stride

    def forward(self, x):
        from .. import reference
        self.shape = x.shape
        y, self.argmax = reference.maxpool2d(x, self.kernel_size, self.stride)
        return y

    def backward(self, dy):
        from .. import reference
        return reference.maxpool2d_backward(dy, self.argmax, self.shape)

    def parameters(self):
        return []

    def grads(self):
        return []


class Reshape:
    """Flatten (shape=None: [N, ...] -> [N, -1]) or Reshape (shape=(C, H, W)), as the device layers."""

    def __init__(self, shape=None):
        self.shape = shape

    def forward(self, x):
        self.in_shape = x.shape
        return x.reshape(len(x), -1) if self.shape is None else x.reshape(len(x), *self.shape)

    def backward(self, dy):
        return dy.reshape(self.in_shape)

    def parameters(self):
        return []

    def grads(self):
        return []


class SelfAttention:
    """gpuedu.nn.SelfAttention in float64: Y = attention(X Wq, X Wk, X Wv) Wo on [batch, seq, d_model]."""

    def __init__(self, Wq, Wk, Wv, Wo, n_heads, causal=True):
        self.Wq, self.Wk, self.Wv, self.Wo = (np.array(w, dtype=np.float64) for w in (Wq, Wk, Wv, Wo))
        self.n_heads, self.causal = n_heads, causal

    @classmethod
    def from_layer(cls, layer):
        return cls(*(p.numpy() for p in layer.parameters()), layer.n_heads, layer.causal)

    def forward(self, x):
        self.x = x
        self.q, self.k, self.v = x @ self.Wq, x @ self.Wk, x @ self.Wv
        self.a = attention(self.q, self.k, self.v, heads=self.n_heads, causal=self.causal)
        return self.a @ self.Wo

    def backward(self, dy):
        sum_rows = lambda a, b: np.einsum("bsi,bsj->ij", a, b)    # noqa: E731  (A^T B over batch and seq)
        self.dWo = sum_rows(self.a, dy)
        da = dy @ self.Wo.T
        dq, dk, dv = attention_backward(da, self.q, self.k, self.v, heads=self.n_heads, causal=self.causal)
        self.dWq, self.dWk, self.dWv = sum_rows(self.x, dq), sum_rows(self.x, dk), sum_rows(self.x, dv)
        return dq @ self.Wq.T + dk @ self.Wk.T + dv @ self.Wv.T

    def parameters(self):
        return [self.Wq, self.Wk, self.Wv, self.Wo]

    def grads(self):
        return [self.dWq, self.dWk, self.dWv, self.dWo]


class LayerNorm:
    """gpuedu.nn.LayerNorm in float64, over the last axis."""

    def __init__(self, gamma, beta, eps=1e-5):
        self.gamma, self.beta = np.array(gamma, dtype=np.float64), np.array(beta, dtype=np.float64)
        self.eps = eps

    @classmethod
    def from_layer(cls, layer):
        return cls(layer.gamma.numpy(), layer.beta.numpy(), layer.eps)

    def forward(self, x):
        self.x = x
        return layernorm(x, self.gamma, self.beta, self.eps)[0]

    def backward(self, dy):
        dx, self.dgamma, self.dbeta = layernorm_backward(dy, self.x, self.gamma, self.eps)
        return dx

    def parameters(self):
        return [self.gamma, self.beta]

    def grads(self):
        return [self.dgamma, self.dbeta]


class TransformerBlock:
    """gpuedu.nn.TransformerBlock in float64: h = x + attention(norm1(x)), y = h + fc2(fc1(norm2(h)))."""

    def __init__(self, norm1, attention, norm2, fc1, fc2):
        self.norm1, self.attention, self.norm2, self.fc1, self.fc2 = norm1, attention, norm2, fc1, fc2
        self.layers = [norm1, attention, norm2, fc1, fc2]

    @classmethod
    def from_layer(cls, block):
        dense = lambda layer: Dense(layer.W.numpy(), layer.b.numpy(), layer.activation)   # noqa: E731
        return cls(LayerNorm.from_layer(block.norm1), SelfAttention.from_layer(block.attention),
                   LayerNorm.from_layer(block.norm2), dense(block.fc1), dense(block.fc2))

    def forward(self, x):
        self.shape = x.shape
        h = x + self.attention.forward(self.norm1.forward(x))
        m = self.norm2.forward(h).reshape(-1, x.shape[-1])
        return h + self.fc2.forward(self.fc1.forward(m)).reshape(x.shape)

    def backward(self, dy):
        d = self.fc1.backward(self.fc2.backward(dy.reshape(-1, self.shape[-1])))
        dh = dy + self.norm2.backward(d.reshape(self.shape))
        return dh + self.norm1.backward(self.attention.backward(dh))

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]

    def grads(self):
        return [g for layer in self.layers for g in layer.grads()]


def softmax_cross_entropy(logits, labels):
    """(mean loss, dL/dlogits) with the max subtracted before exp, as the kernel does."""
    rows = logits.shape[0]
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_sum = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    log_p = shifted - log_sum
    loss = -log_p[np.arange(rows), labels].mean()
    grad = np.exp(log_p)
    grad[np.arange(rows), labels] -= 1.0
    return loss, grad / rows


class Sequential:
    def __init__(self, layers):
        self.layers = list(layers)

    @classmethod
    def from_model(cls, model):
        """A float64 copy of a device ``gpuedu.nn.Sequential`` (weights copied from the device)."""
        layers = []
        for layer in model.layers:
            kind = type(layer).__name__
            if kind == "Conv2D":
                layers.append(Conv2D(layer.W.numpy(), layer.b.numpy(), layer.stride, layer.padding, layer.activation))
            elif kind == "MaxPool2D":
                layers.append(MaxPool2D(layer.kernel_size, layer.stride))
            elif kind in ("Flatten", "Reshape"):
                layers.append(Reshape(getattr(layer, "shape", None)))
            elif hasattr(layer, "W"):
                layers.append(Dense(layer.W.numpy(), layer.b.numpy(), layer.activation))
            else:
                layers.append(Activation(layer.name))
        return cls(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer.forward(x)
        return x

    def backward(self, dlogits):
        for layer in reversed(self.layers):
            dlogits = layer.backward(dlogits)
        return dlogits

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]

    def grads(self):
        return [g for layer in self.layers for g in layer.grads()]

    def loss(self, x, labels):
        return softmax_cross_entropy(self.forward(x), labels)[0]

    def loss_and_grads(self, x, labels):
        """Mean loss and the analytic gradients of every parameter (in ``parameters()`` order)."""
        loss, dlogits = softmax_cross_entropy(self.forward(x), labels)
        self.backward(dlogits)
        return loss, self.grads()


def numerical_gradient(f, array, eps=1e-6):
    """Central differences (f(a + eps) - f(a - eps)) / 2 eps for every element of ``array``, in place."""
    grad = np.zeros_like(array)
    flat, gflat = array.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        saved = flat[i]
        flat[i] = saved + eps
        up = f()
        flat[i] = saved - eps
        down = f()
        flat[i] = saved
        gflat[i] = (up - down) / (2 * eps)
    return grad


def relative_error(a, b):
    """||a - b|| / max(||a||, ||b||): one number per tensor, robust to elements that are nearly zero."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = max(np.linalg.norm(a), np.linalg.norm(b))
    return 0.0 if scale == 0 else float(np.linalg.norm(a - b) / scale)
