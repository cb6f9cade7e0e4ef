"""Optimizers: the update rule runs on the device, one kernel launch per parameter tensor.

SGD:   v = mu v + g;  w = w - lr v       (mu = 0 gives the plain rule  dW = -lr dL/dW)
Adam:  m, v = moving averages of g and g^2;  w = w - lr m_hat / (sqrt(v_hat) + eps)
"""
import numpy as np

from . import _kernels as K
from .checks import gpuarray_module

THREADS = 256


class Optimizer:
    """Holds the parameters and a device state per parameter; ``step()`` applies ``update`` to each."""

    def __init__(self, params, lr):
        params = list(params)
        if not params:
            raise ValueError("the optimizer got no parameters: pass model.parameters()")
        if not (isinstance(lr, (int, float, np.floating)) and np.isfinite(lr) and lr > 0):
            raise ValueError(f"the learning rate must be a positive finite number, got {lr!r}")
        self.params = params
        self.lr = float(lr)
        self.stream = None
        self.steps = 0
        self.state = [self.init_state(p) for p in params]

    def init_state(self, param):
        return {}

    def update(self, param, state):
        raise NotImplementedError

    def step(self):
        self.steps += 1
        for p, s in zip(self.params, self.state):
            self.update(p, s)

    def _zeros_like(self, param):
        return gpuarray_module().zeros(param.value.shape, np.float32)


class SGD(Optimizer):
    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0):
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum!r}")
        self.momentum, self.weight_decay = float(momentum), float(weight_decay)
        super().__init__(params, lr)

    def init_state(self, param):
        return {"velocity": self._zeros_like(param)}

    def update(self, p, state):
        f = K.function("nn_optim", "sgd_update", "PPPifff")
        K.launch(f, (K.blocks_for(p.size, THREADS), 1), (THREADS, 1, 1),
                 (K.ptr(p.value), K.ptr(p.grad), K.ptr(state["velocity"]), K.i32(p.size),
                  K.f32(self.lr), K.f32(self.momentum), K.f32(self.weight_decay)), self.stream)


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        b1, b2 = betas
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            raise ValueError(f"betas must each be in [0, 1), got {betas!r}")
        self.beta1, self.beta2, self.eps, self.weight_decay = float(b1), float(b2), float(eps), float(weight_decay)
        super().__init__(params, lr)

    def init_state(self, param):
        return {"m": self._zeros_like(param), "v": self._zeros_like(param)}

    def update(self, p, state):
        # Bias correction: m and v start at 0, so early averages are too small by (1 - beta^t).
        c1 = 1.0 / (1.0 - self.beta1 ** self.steps)
        c2 = 1.0 / (1.0 - self.beta2 ** self.steps)
        f = K.function("nn_optim", "adam_update", "PPPPifffffff")
        K.launch(f, (K.blocks_for(p.size, THREADS), 1), (THREADS, 1, 1),
                 (K.ptr(p.value), K.ptr(p.grad), K.ptr(state["m"]), K.ptr(state["v"]), K.i32(p.size),
                  K.f32(self.lr), K.f32(self.beta1), K.f32(self.beta2), K.f32(self.eps),
                  K.f32(c1), K.f32(c2), K.f32(self.weight_decay)), self.stream)
