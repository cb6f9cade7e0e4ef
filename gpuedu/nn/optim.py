"""Optimizers: the update rule runs on the device, one kernel launch for all parameter tensors.

SGD:   v = mu v + g;  w = w - lr v       (mu = 0 gives the plain rule  dW = -lr dL/dW)
Adam:  m, v = moving averages of g and g^2;  w = w - lr m_hat / (sqrt(v_hat) + eps)

``multi_tensor=True`` (the default) updates every tensor in one launch (``*_update_multi`` in
``nn_optim.cu``, launched by ``gpuedu.ops.optim``), reading their addresses from a small device table built
on the first step;
``multi_tensor=False`` launches the per-tensor kernels of lesson 05, one per parameter.  Both give the
same bits.

``step(skip=None)``: ``skip`` is an optional int32 device flag (a 1-element GPUArray).  When it holds a
nonzero value on the device, every update kernel leaves the parameters and the optimizer's state
untouched; mixed precision (``nn.amp``) passes the flag its loss scaler raises on an overflowed
gradient, so the host never has to read it.  ``None``: never skip.
"""
import numpy as np

from .. import launch as L
from ..ops import optim as _optim
from ..ops.optim import TensorTable, skip_pointer  # noqa: F401  (amp passes its skip flag with skip_pointer)


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
        self.steps = 0            # step() calls, skipped ones included (the host cannot tell them apart)
        self.state = [self.init_state(p) for p in params]

    def init_state(self, param):
        return {}

    def update(self, param, state, skip):
        """Launch the update of one parameter; ``skip`` is the kernel's skip-flag pointer (0: none)."""
        raise NotImplementedError

    def begin_step(self, skip):
        """Work done once per step before the per-parameter updates (Adam counts its steps here)."""

    def update_all(self, skip):
        """Update every parameter: one ``update`` launch each (SGD and Adam override it with one launch)."""
        for p, s in zip(self.params, self.state):
            self.update(p, s, skip)

    def step(self, skip=None):
        """Update every parameter from its ``.grad``; nothing happens on the device if ``skip`` is set there."""
        flag = skip_pointer(skip)
        self.steps += 1
        self.begin_step(flag)
        self.update_all(flag)

    def _zeros_like(self, param):
        return L.gpuarray().zeros(param.value.shape, np.float32)


class SGD(Optimizer):
    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0, multi_tensor=True):
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum!r}")
        self.momentum, self.weight_decay = float(momentum), float(weight_decay)
        self.multi_tensor, self._table = bool(multi_tensor), TensorTable()
        super().__init__(params, lr)

    def update_all(self, skip):
        if not self.multi_tensor:
            return super().update_all(skip)
        rows = [(p.value, p.grad, s["velocity"]) for p, s in zip(self.params, self.state)]
        _optim.sgd_update_multi(self._table, rows, skip, self.lr, self.momentum, self.weight_decay, self.stream)

    def init_state(self, param):
        return {"velocity": self._zeros_like(param)}

    def update(self, p, state, skip):
        _optim.sgd_update(p.value, state["velocity"], p.grad, skip, self.lr, self.momentum, self.weight_decay,
                          self.stream)


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, multi_tensor=True):
        b1, b2 = betas
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            raise ValueError(f"betas must each be in [0, 1), got {betas!r}")
        self.beta1, self.beta2, self.eps, self.weight_decay = float(b1), float(b2), float(eps), float(weight_decay)
        ga = L.gpuarray()
        # The step count t and the bias corrections (c1, c2) live on the device: a step skipped on the
        # device must not advance t, and the host does not know which steps were skipped.
        self._t = ga.zeros(1, np.int32)
        self._corrections = ga.zeros(2, np.float32)
        self.multi_tensor, self._table = bool(multi_tensor), TensorTable()
        super().__init__(params, lr)

    @property
    def t(self):
        """Adam's step count (applied steps only): a synchronising read from the device."""
        return int(self._t.get()[0])

    def init_state(self, param):
        return {"m": self._zeros_like(param), "v": self._zeros_like(param)}

    def begin_step(self, skip):
        # Bias correction: m and v start at 0, so early averages are too small by (1 - beta^t).
        _optim.adam_begin_step(self._t, self._corrections, skip, self.beta1, self.beta2, self.stream)

    def update_all(self, skip):
        if not self.multi_tensor:
            return super().update_all(skip)
        rows = [(p.value, p.grad, s["m"], s["v"]) for p, s in zip(self.params, self.state)]
        _optim.adam_update_multi(self._table, rows, self._corrections, skip, self.lr, self.beta1, self.beta2,
                                 self.eps, self.weight_decay, self.stream)

    def update(self, p, state, skip):
        _optim.adam_update(p.value, state["m"], state["v"], p.grad, self._corrections, skip, self.lr, self.beta1,
                           self.beta2, self.eps, self.weight_decay, self.stream)
