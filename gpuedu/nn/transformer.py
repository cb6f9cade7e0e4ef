"""The layers of a transformer, on sequences: float32 [batch, seq, d_model] GPUArrays.

SelfAttention: forward   Q = X Wq, K = X Wk, V = X Wv                      three GEMM launches (nn_dense.cu)
                         A = concat_h softmax(mask(Q_h K_h^T / sqrt(d_h))) V_h  one launch: attention.cu's
                                                                           tiled kernel, which also saves
                                                                           the rows' log-sum-exp
                         Y = A Wo                                          one GEMM launch
               backward  dWo = A^T dY, dA = dY Wo^T                        two GEMMs
                         dQ, dK, dV from dA                                three launches (attention.cu: the
                                                                           probabilities recomputed from the
                                                                           saved log-sum-exp)
                         dWq = X^T dQ, dWk = X^T dK, dWv = X^T dV          three GEMMs
                         dX = dQ Wq^T + dK Wk^T + dV Wv^T                  three GEMMs and their sum
LayerNorm:     forward   y = gamma (x - mean) / sqrt(var + eps) + beta over the last axis   one launch
               backward  dx; dgamma, dbeta as fixed-order sums of chunk sums               three launches

Head h is the d_h = d_model / n_heads columns from h * d_h of Q, K, V and A: the heads sit side by side along
the last axis, so nothing is transposed. The kernels are gpuedu.ops' (attention, dense, layernorm).
"""
import numpy as np

from .. import launch as L
from ..ops import attention as _attention
from ..ops import dense as _dense
from ..ops import layernorm as _layernorm
from . import init as _init
from .layers import Parameter, _Cache

_NO_ACTIVATION = _dense.activation_code(None)


def _positive_int(label, value):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{label} must be a positive integer, got {value!r}")
    return int(value)


def check_sequences(x, name, d_model):
    """``x`` as a float32 [batch, seq, d_model] device array (a NumPy array is copied to the device)."""
    if isinstance(x, np.ndarray):
        if x.dtype != np.float32:
            raise TypeError(f"{name} has dtype {x.dtype}, the kernels compute in float32: pass {name}.astype(np.float32)")
        x = L.gpuarray().to_gpu(np.ascontiguousarray(x))
    elif not L.is_device_array(x):
        raise TypeError(f"{name} must be a GPUArray or a NumPy array [batch, seq, d_model], got {type(x).__name__}")
    if x.dtype != np.float32:
        raise TypeError(f"{name} has dtype {x.dtype}, the kernels compute in float32: convert it before copying it "
                        f"to the device")
    if len(x.shape) != 3:
        raise ValueError(f"{name} must be 3-D [batch, seq, d_model], got shape {tuple(x.shape)}; one sequence is "
                         f"{name}.reshape(1, seq, d_model)")
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name} has shape {tuple(x.shape)}: a batch needs at least one sequence of one position")
    if x.shape[2] != d_model:
        raise ValueError(f"{name} has {x.shape[2]} features per position, the layer expects d_model={d_model}")
    if not L.is_c_contiguous(x):
        raise ValueError(f"{name} is not C-contiguous on the device: make a contiguous copy first")
    return x


def _check_gradient(dy, expected):
    if not L.is_device_array(dy) or dy.dtype != np.float32:
        raise TypeError(f"the gradient must be a float32 GPUArray, got {type(dy).__name__} "
                        f"of dtype {getattr(dy, 'dtype', None)}")
    if tuple(dy.shape) != tuple(expected):
        raise ValueError(f"the gradient has shape {tuple(dy.shape)}, the last forward produced {tuple(expected)}")
    if not L.is_c_contiguous(dy):
        raise ValueError("the gradient is not C-contiguous on the device: make a contiguous copy first")


class SelfAttention:
    """Multi-head self-attention ``Y = concat_h softmax(mask(Q_h K_h^T / sqrt(d_h))) V_h Wo`` with
    ``Q = X Wq``, ``K = X Wk``, ``V = X Wv`` (no biases); causal masking lets position i attend to 0..i only."""

    in_features = out_features = None     # shape-preserving: [batch, seq, d_model] in and out

    def __init__(self, d_model, n_heads, causal=True, seed=0, name="attention"):
        d_model = _positive_int("d_model", d_model)
        n_heads = _positive_int("n_heads", n_heads)
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}: each head takes "
                             f"d_model / n_heads columns; choose n_heads among the divisors of {d_model}")
        if d_model // n_heads > _attention.MAX_HEAD_DIM:
            raise ValueError(f"d_model / n_heads = {d_model // n_heads}, but the attention kernels take heads of at "
                             f"most {_attention.MAX_HEAD_DIM} features: use at least "
                             f"{-(-d_model // _attention.MAX_HEAD_DIM)} heads")
        self.d_model, self.n_heads, self.causal = d_model, n_heads, bool(causal)
        self.head_dim = d_model // n_heads
        # Xavier-uniform, each from its own seed, so that Q, K, V start different.
        self.Wq, self.Wk, self.Wv, self.Wo = (
            Parameter(f"{name}.{label}", _init.xavier_uniform(d_model, d_model, seed * 4 + i))
            for i, label in enumerate(("Wq", "Wk", "Wv", "Wo")))
        self.stream = None
        self._zero_bias = L.gpuarray().zeros(d_model, np.float32)
        self._buffers = _Cache()
        self._scratch = _dense.Scratch()
        self._x = None

    def parameters(self):
        return [self.Wq, self.Wk, self.Wv, self.Wo]

    def forward(self, x):
        x = check_sequences(x, "the attention layer's input", self.d_model)
        batch, seq, d = x.shape
        f32 = np.float32
        bufs = self._buffers.get((batch, seq), Q=((batch, seq, d), f32), K=((batch, seq, d), f32),
                                 V=((batch, seq, d), f32), A=((batch, seq, d), f32), Y=((batch, seq, d), f32),
                                 lse=((batch, self.n_heads, seq), f32), dA=((batch, seq, d), f32),
                                 dQ=((batch, seq, d), f32), dK=((batch, seq, d), f32), dV=((batch, seq, d), f32),
                                 rowdot=((batch, self.n_heads, seq), f32), dXparts=((3, batch, seq, d), f32),
                                 dX=((batch, seq, d), f32))
        rows = batch * seq
        x2 = x.reshape(rows, d)
        for out, w in ((bufs["Q"], self.Wq), (bufs["K"], self.Wk), (bufs["V"], self.Wv)):
            _dense.dense_forward(out.reshape(rows, d), None, x2, w.value, self._zero_bias, _NO_ACTIVATION,
                                 self._scratch, self.stream)
        _attention.attention(bufs["Q"], bufs["K"], bufs["V"], heads=self.n_heads, causal=self.causal, version=3,
                             out=bufs["A"], lse=bufs["lse"], stream=self.stream)
        _dense.dense_forward(bufs["Y"].reshape(rows, d), None, bufs["A"].reshape(rows, d), self.Wo.value,
                             self._zero_bias, _NO_ACTIVATION, self._scratch, self.stream)
        self._x, self._bufs = x, bufs
        return bufs["Y"]

    __call__ = forward

    def backward(self, dy, need_input_grad=True):
        if self._x is None:
            raise RuntimeError("backward() before forward(): run a forward pass first")
        x, bufs = self._x, self._bufs
        _check_gradient(dy, x.shape)
        batch, seq, d = x.shape
        rows, s = batch * seq, self.stream
        flat = {name: bufs[name].reshape(rows, d) for name in ("Q", "K", "V", "A", "dA", "dQ", "dK", "dV", "dX")}
        dy2, x2 = dy.reshape(rows, d), x.reshape(rows, d)
        _dense.weight_grad(self.Wo.grad, flat["A"], dy2, self._scratch, s)        # dWo = A^T dY
        _dense.input_grad(flat["dA"], dy2, self.Wo.value, self._scratch, s)       # dA = dY Wo^T
        _attention.attention_backward(bufs["dA"], bufs["Q"], bufs["K"], bufs["V"], bufs["A"], bufs["lse"],
                                      heads=self.n_heads, causal=self.causal, dq=bufs["dQ"], dk=bufs["dK"],
                                      dv=bufs["dV"], workspace=bufs["rowdot"], stream=s)
        projections = ((self.Wq, "dQ"), (self.Wk, "dK"), (self.Wv, "dV"))
        for w, grad in projections:
            _dense.weight_grad(w.grad, x2, flat[grad], self._scratch, s)         # dW = X^T dQ, ...
        if not need_input_grad:
            return None
        parts = bufs["dXparts"]
        for i, (w, grad) in enumerate(projections):                              # X feeds three projections:
            _dense.input_grad(parts[i].reshape(rows, d), flat[grad], w.value, self._scratch, s)
        _dense.sum_parts(flat["dX"], parts, s)                                   # their gradients add up
        return bufs["dX"]

    def __repr__(self):
        return f"SelfAttention({self.d_model}, {self.n_heads}, causal={self.causal})"


class LayerNorm:
    """``y = gamma (x - mean) / sqrt(var + eps) + beta`` over the last axis of a float32 array of any rank
    ([batch, features], [batch, seq, features], ...); gamma starts at ones, beta at zeros."""

    in_features = out_features = None     # shape-preserving

    def __init__(self, features, eps=1e-5, name="layernorm"):
        self.features = _positive_int("features", features)
        if not isinstance(eps, (int, float, np.floating)) or isinstance(eps, bool) or not eps > 0:
            raise ValueError(f"eps must be a positive number (it keeps 1 / sqrt(var + eps) finite), got {eps!r}")
        self.eps = float(eps)
        self.gamma = Parameter(f"{name}.gamma", np.ones(self.features, np.float32))
        self.beta = Parameter(f"{name}.beta", np.zeros(self.features, np.float32))
        self.stream = None
        self._buffers = _Cache()
        self._x = None

    def parameters(self):
        return [self.gamma, self.beta]

    def _check(self, x):
        name = "the layer norm's input"
        if isinstance(x, np.ndarray):
            if x.dtype != np.float32:
                raise TypeError(f"{name} has dtype {x.dtype}, the kernels compute in float32: pass x.astype(np.float32)")
            x = L.gpuarray().to_gpu(np.ascontiguousarray(x))
        elif not L.is_device_array(x):
            raise TypeError(f"{name} must be a GPUArray or a NumPy array, got {type(x).__name__}")
        if x.dtype != np.float32:
            raise TypeError(f"{name} has dtype {x.dtype}, the kernels compute in float32")
        if len(x.shape) < 2 or x.shape[-1] != self.features:
            raise ValueError(f"{name} must be [..., {self.features}] (normalised over the last axis, at least 2-D), "
                             f"got shape {tuple(x.shape)}")
        if x.size == 0:
            raise ValueError(f"{name} has shape {tuple(x.shape)}: nothing to normalise")
        if not L.is_c_contiguous(x):
            raise ValueError(f"{name} is not C-contiguous on the device: make a contiguous copy first")
        return x

    def forward(self, x):
        x = self._check(x)
        shape, f = tuple(x.shape), self.features
        rows = x.size // f
        bufs = self._buffers.get(shape, Y=(shape, np.float32), dX=(shape, np.float32), mean=((rows,), np.float32),
                                 rstd=((rows,), np.float32),
                                 partials=((2, _layernorm.chunks(rows), f), np.float32))
        _layernorm.layernorm_forward(bufs["Y"].reshape(rows, f), bufs["mean"], bufs["rstd"], x.reshape(rows, f),
                                     self.gamma.value, self.beta.value, self.eps, self.stream)
        self._x, self._bufs = x, bufs
        return bufs["Y"]

    __call__ = forward

    def backward(self, dy, need_input_grad=True):
        if self._x is None:
            raise RuntimeError("backward() before forward(): run a forward pass first")
        x, bufs = self._x, self._bufs
        _check_gradient(dy, x.shape)
        f = self.features
        rows = x.size // f
        dx = bufs["dX"].reshape(rows, f) if need_input_grad else None
        _layernorm.layernorm_backward(dx, self.gamma.grad, self.beta.grad, dy.reshape(rows, f), x.reshape(rows, f),
                                      bufs["mean"], bufs["rstd"], self.gamma.value, bufs["partials"], self.stream)
        return bufs["dX"] if need_input_grad else None

    def __repr__(self):
        return f"LayerNorm({self.features}, eps={self.eps})"


class TransformerBlock:
    """A pre-norm transformer block on [batch, seq, d_model]:

        h = x + SelfAttention(LayerNorm(x))
        y = h + Dense(d_hidden, d_model)(GELU(Dense(d_model, d_hidden)(LayerNorm(h))))

    The MLP's two dense layers act on each position alone ([batch * seq, d_model] rows). Backward: each skip
    connection passes its gradient both ways, straight through and through the branch, and the two add."""

    in_features = out_features = None     # shape-preserving

    def __init__(self, d_model, n_heads, d_hidden=None, causal=True, seed=0, name="block"):
        from .layers import Dense
        d_model = _positive_int("d_model", d_model)
        d_hidden = 4 * d_model if d_hidden is None else _positive_int("d_hidden", d_hidden)
        self.d_model, self.d_hidden = d_model, d_hidden
        self.norm1 = LayerNorm(d_model, name=f"{name}.norm1")
        self.attention = SelfAttention(d_model, n_heads, causal=causal, seed=seed, name=f"{name}.attention")
        self.norm2 = LayerNorm(d_model, name=f"{name}.norm2")
        self.fc1 = Dense(d_model, d_hidden, activation="gelu", seed=seed * 4 + 1, name=f"{name}.fc1")
        self.fc2 = Dense(d_hidden, d_model, init="xavier", seed=seed * 4 + 2, name=f"{name}.fc2")
        self._layers = (self.norm1, self.attention, self.norm2, self.fc1, self.fc2)
        self._stream = None
        self._buffers = _Cache()
        self._x = None

    @property
    def stream(self):
        return self._stream

    @stream.setter
    def stream(self, stream):
        self._stream = stream
        for layer in self._layers:
            layer.stream = stream

    def parameters(self):
        return [p for layer in self._layers for p in layer.parameters()]

    def forward(self, x):
        x = check_sequences(x, "the transformer block's input", self.d_model)
        shape = tuple(x.shape)
        rows = shape[0] * shape[1]
        bufs = self._buffers.get(shape, H=(shape, np.float32), Y=(shape, np.float32), dH=(shape, np.float32),
                                 dX=(shape, np.float32))
        a = self.attention.forward(self.norm1.forward(x))
        _dense.residual_add(bufs["H"], x, a, self._stream)                       # h = x + attention
        m = self.norm2.forward(bufs["H"]).reshape(rows, self.d_model)
        m = self.fc2.forward(self.fc1.forward(m))
        _dense.residual_add(bufs["Y"], bufs["H"], m.reshape(shape), self._stream)  # y = h + MLP
        self._x, self._bufs = x, bufs
        return bufs["Y"]

    __call__ = forward

    def backward(self, dy, need_input_grad=True):
        if self._x is None:
            raise RuntimeError("backward() before forward(): run a forward pass first")
        bufs, shape = self._bufs, tuple(self._x.shape)
        _check_gradient(dy, shape)
        rows = shape[0] * shape[1]
        d = self.fc2.backward(dy.reshape(rows, self.d_model))
        d = self.fc1.backward(d)
        d = self.norm2.backward(d.reshape(shape))
        _dense.residual_add(bufs["dH"], dy, d, self._stream)                     # dh = dy + d(MLP branch)
        d = self.norm1.backward(self.attention.backward(bufs["dH"]), need_input_grad=need_input_grad)
        if not need_input_grad:
            return None
        _dense.residual_add(bufs["dX"], bufs["dH"], d, self._stream)             # dx = dh + d(attention branch)
        return bufs["dX"]

    def __repr__(self):
        return f"TransformerBlock({self.d_model}, {self.attention.n_heads}, d_hidden={self.d_hidden})"


class CharTransformer:
    """A small causal language model over characters: tokens [batch, seq] -> logits [batch * seq, vocab_size],
    row b * seq + t predicting the token after position t of sequence b.

        embed:   one Dense layer on [one-hot(token) | one-hot(position)]: a token embedding plus a learned
                 position embedding (and a bias), as one GEMM
        blocks:  n_blocks TransformerBlocks (causal)
        head:    LayerNorm, then Dense(d_model, vocab_size) to the logits

    ``backward(dlogits)`` takes nn.SoftmaxCrossEntropy's gradient; ``parameters()`` every trainable tensor."""

    def __init__(self, vocab_size, seq_len, d_model=32, n_heads=2, n_blocks=1, d_hidden=None, seed=0):
        from .layers import Dense
        self.vocab_size = _positive_int("vocab_size", vocab_size)
        self.seq_len = _positive_int("seq_len", seq_len)
        self.d_model = _positive_int("d_model", d_model)
        n_blocks = _positive_int("n_blocks", n_blocks)
        self.embed = Dense(self.vocab_size + self.seq_len, self.d_model, init="xavier", seed=seed, name="embed")
        self.blocks = [TransformerBlock(self.d_model, n_heads, d_hidden, causal=True, seed=seed + 1 + i,
                                        name=f"block{i}") for i in range(n_blocks)]
        self.norm = LayerNorm(self.d_model, name="norm")
        self.head = Dense(self.d_model, self.vocab_size, init="xavier", seed=seed + 1 + n_blocks, name="head")
        self._layers = [self.embed, *self.blocks, self.norm, self.head]
        self._shape = None

    def parameters(self):
        return [p for layer in self._layers for p in layer.parameters()]

    def one_hot(self, tokens):
        """The embedding layer's input for int tokens [batch, seq]: [batch * seq, vocab_size + seq_len]."""
        if not isinstance(tokens, np.ndarray) or tokens.dtype.kind not in "iu":
            raise TypeError(f"tokens must be a NumPy integer array [batch, seq], got "
                            f"{type(tokens).__name__} {getattr(tokens, 'dtype', '')}")
        if tokens.ndim != 2 or tokens.shape[0] == 0 or not 0 < tokens.shape[1] <= self.seq_len:
            raise ValueError(f"tokens must be [batch, seq] with 1 <= seq <= seq_len={self.seq_len}, "
                             f"got shape {tokens.shape}")
        if tokens.min() < 0 or tokens.max() >= self.vocab_size:
            raise ValueError(f"tokens must be in [0, {self.vocab_size}), got values from {tokens.min()} to {tokens.max()}")
        batch, seq = tokens.shape
        x = np.zeros((batch, seq, self.vocab_size + self.seq_len), np.float32)
        b, t = np.indices((batch, seq))
        x[b, t, tokens] = 1.0
        x[b, t, self.vocab_size + t] = 1.0
        return x.reshape(batch * seq, -1)

    def forward(self, tokens):
        batch, seq = np.shape(tokens)[:2] if np.ndim(tokens) == 2 else (None, None)
        h = self.embed.forward(L.gpuarray().to_gpu(self.one_hot(tokens)))
        h = h.reshape(batch, seq, self.d_model)
        for block in self.blocks:
            h = block.forward(h)
        h = self.norm.forward(h)
        self._shape = (batch, seq)
        return self.head.forward(h.reshape(batch * seq, self.d_model))

    __call__ = forward

    def backward(self, dlogits):
        if self._shape is None:
            raise RuntimeError("backward() before forward(): run a forward pass first")
        batch, seq = self._shape
        d = self.head.backward(dlogits)
        d = self.norm.backward(d.reshape(batch, seq, self.d_model))
        for block in reversed(self.blocks):
            d = block.backward(d)
        self.embed.backward(d.reshape(batch * seq, self.d_model), need_input_grad=False)

    def __repr__(self):
        return (f"CharTransformer(vocab_size={self.vocab_size}, seq_len={self.seq_len}, d_model={self.d_model}, "
                f"n_blocks={len(self.blocks)})")
