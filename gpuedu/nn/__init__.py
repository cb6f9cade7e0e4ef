"""gpuedu.nn: neural-network layers whose arithmetic runs in gpuedu's own CUDA kernels.

Everything a model holds lives on the device as ``pycuda.gpuarray.GPUArray`` (float32, C-contiguous,
row-major): parameters, their gradients, activations and the gradients flowing back.  Only the loss,
the metrics and predictions come back to the host.  The kernels are ``gpuedu/kernels/nn_*.cu``, loaded
through the active backend (a real GPU or the CPU emulator), so the same code runs on both.

The public API (a contract other modules build on)
--------------------------------------------------
``Parameter(name, array)``
    ``.value``: the GPUArray the layer computes with; ``.grad``: a GPUArray of the same shape and dtype
    that ``backward`` overwrites (gradients are *not* accumulated across calls, so there is no
    ``zero_grad``); ``.name``; ``.numpy()`` copies the value to the host.

Layer protocol (``Dense``, ``ReLU``, ``Sigmoid``, ``Tanh``, ``GELU``; any object with these methods)
    ``forward(x) -> y``            x: GPUArray [batch, in_features]; keeps what backward needs.  y is the
                                   layer's own buffer for that batch size (nothing is allocated per step):
                                   the next forward with as many rows overwrites it, so ``.get()`` what you keep.
    ``backward(dy, need_input_grad=True) -> dx``
                                   dy = dL/dy of the last forward; fills ``p.grad`` for every parameter and
                                   returns dL/dx (``None`` when ``need_input_grad`` is False: the first
                                   layer skips that GEMM).
    ``parameters() -> list[Parameter]``  (empty for activations)
    ``in_features`` / ``out_features``   (``None`` for shape-preserving layers); ``stream``: the
                                   ``drv.Stream`` its kernels are launched on (``None``: the default stream).

Image layers (``gpuedu.nn.conv_layers``, kernels in ``gpuedu/kernels/conv2d.cu``) follow the same protocol on
``[batch, channels, height, width]`` GPUArrays: ``Conv2D(in_channels, out_channels, kernel_size, stride=1,
padding=0, seed=0, activation=None)`` (a filter bank ``W`` [out, in, kh, kw], He-initialised, and a bias ``b``
[out]; ``activation="relu"`` fuses the ReLU), ``MaxPool2D(kernel_size, stride=None)``, ``Flatten()``
([batch, C, H, W] -> [batch, C*H*W]) and ``Reshape(C, H, W)`` (flat rows -> images, so that a CNN takes the
same data loader as an MLP).  They carry ``in_channels`` / ``out_channels`` (``None``: unchanged) instead of
features.

Sequence layers (``gpuedu.nn.transformer``, kernels in ``attention.cu``, ``nn_layernorm.cu`` and ``nn_dense.cu``) follow
the protocol on float32 ``[batch, seq, d_model]`` GPUArrays: ``SelfAttention(d_model, n_heads, causal=True, seed=0)``
(``parameters() == [Wq, Wk, Wv, Wo]``, each [d_model, d_model], no biases; the heads split along the last axis;
the tiled attention kernel inside, its backward recomputing the probabilities) and ``LayerNorm(features,
eps=1e-5)`` (over the last axis of any array, ``parameters() == [gamma, beta]``).  Both are shape-preserving
(``in_features`` / ``out_features`` are ``None``).
``TransformerBlock(d_model, n_heads, d_hidden=None, causal=True, seed=0)`` puts them together, pre-norm:
``h = x + SelfAttention(LayerNorm(x))``, ``y = h + MLP(LayerNorm(h))`` (two Dense layers, GELU between).
``CharTransformer(vocab_size, seq_len, d_model=32, n_heads=2, n_blocks=1)`` is a small causal character model:
int tokens [batch, seq] -> logits [batch * seq, vocab_size] for ``SoftmaxCrossEntropy`` (token and position
embeddings as one Dense layer on their one-hot codes, the blocks, a LayerNorm and a Dense head); it learns
``gpuedu.data.char_task()`` well below its unigram baseline in a few hundred steps on the emulator.

``Sequential(*layers)`` / ``mlp([64, 128, 10], activation="relu", seed=0)``
    Checks that the layers' shapes chain when it is built (features between Dense layers, channels between
    image layers, no image layer after a Dense one); a model whose first layer is an image layer takes
    [batch, C, H, W] input; ``forward(x)`` (x a GPUArray or a float32
    NumPy array), ``backward(dlogits)``, ``parameters()``, ``predict(x) -> np.ndarray of int32``,
    ``accuracy(x, labels) -> float``, ``stream`` (set it to run every layer on one stream).

``SoftmaxCrossEntropy()``
    ``dlogits = loss(logits, labels)``: one fused kernel computes the mean cross-entropy's gradient and adds
    the batch's summed loss and correct count to device accumulators; ``result() -> (mean_loss, accuracy)``
    reads them (the only copy back), ``reset()`` zeroes them.

Optimizers: ``SGD(params, lr, momentum=0.0, weight_decay=0.0)`` and ``Adam(params, lr=1e-3, betas=(0.9, 0.999),
    eps=1e-8, weight_decay=0.0)``, each with ``multi_tensor=True``; ``step(skip=None)`` updates every ``p.value``
    in place from ``p.grad`` with one kernel launch for all of them (``multi_tensor=False``: one per parameter);
    the state (velocity, moments, Adam's step count) lives on the device, and an optional int32 device flag
    ``skip`` makes the kernels leave everything untouched (mixed precision's overflowed steps).  A new optimizer
    subclasses ``Optimizer`` and implements ``update(param, state, skip)``; ``init_state(param)`` makes its
    per-parameter state.

Initialisation (``gpuedu.nn.init``): ``he_normal`` and ``xavier_uniform`` from a seeded NumPy generator.

``gpuedu.nn.reference`` is the same network in NumPy float64: the reference for gradient checks.

A training step::

    logits = model.forward(xb)              # xb, yb: GPUArrays from gpuedu.data.DataLoader
    dlogits = loss(logits, yb)
    model.backward(dlogits)
    optimizer.step()
"""
from . import init
from .conv_layers import Conv2D, Flatten, MaxPool2D, Reshape
from .layers import ACTIVATIONS, GELU, Activation, Dense, Parameter, ReLU, Sigmoid, Tanh
from .loss import SoftmaxCrossEntropy
from .model import Sequential, mlp
from .optim import SGD, Adam, Optimizer
from .transformer import CharTransformer, LayerNorm, SelfAttention, TransformerBlock

__all__ = ["ACTIVATIONS", "GELU", "SGD", "Activation", "Adam", "CharTransformer", "Conv2D", "Dense", "Flatten",
           "LayerNorm", "MaxPool2D", "Optimizer", "Parameter", "ReLU", "Reshape", "SelfAttention", "Sequential",
           "Sigmoid", "SoftmaxCrossEntropy", "Tanh", "TransformerBlock", "init", "mlp"]
