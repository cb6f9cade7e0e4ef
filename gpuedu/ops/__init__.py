"""Python launchers for the kernels in ``gpuedu/kernels/``: check, allocate, size the grid, launch.

One module per op family, each with its launchers, its ladder (``VERSIONS``: the versions, described at
the top of its ``.cu`` file), the tile sizes it reads from that file, and its NumPy float64 references:

    elementwise     ops.activation(x, "gelu", version=3), ops.relu(x), ops.sigmoid(x), ...  (elementwise.cu)
    copy_transpose  ops.transpose(x, version=3), ops.copy2d(x)                           (copy_transpose.cu)
    reduction       ops.reduce_sum(x, version=6)                                         (reduction.cu)
                    ops.reduce_sum(x, 7, out=out, workspace=ops.reduce_workspace(x.size, 7))  (allocation-free)
    softmax         ops.softmax_rows(x, version=3)                                       (softmax.cu)
    gemm            ops.matmul(a, b, version=7)                                          (matmul.cu)
    attention       ops.attention.attention(q, k, v, heads=2, causal=True, version=3),   (attention.cu)
                    its backward (attention_backward)
    conv            ops.conv.conv2d(x, w, version=4), pooling, im2col, gradients         (conv2d.cu)
    fp16            ops.fp16.matmul(a16, b16, version=10), conversions, half2 kernels    (fp16_*.cu, wmma_gemm.cu, mma_gemm.cu)
    dense, loss,    the kernels gpuedu.nn's layers, loss, optimizers and mixed-precision trainer launch
    optim, amp,     (nn_dense.cu, nn_activations.cu, nn_loss.cu, nn_optim.cu, fp16_amp.cu, nn_layernorm.cu)
    layernorm

Inputs are GPUArrays or NumPy arrays (copied to the device first), float32 and C-contiguous;
anything else gets an error that says what to change (``gpuedu.launch.device_array``). Results are new
GPUArrays, or the ``out=`` array you pass (handy when timing, so that allocation is not timed). Every
launcher takes ``stream=`` (None: the default stream) and returns without waiting for the device.
This module itself only gathers the families' public names.
"""
from ..launch import ceil_div  # noqa: F401  (lessons size their grids with ops.ceil_div)
from . import (amp, attention, conv, copy_transpose, dense, elementwise, fp16, gemm, layernorm, loss, optim,  # noqa: F401
               reduction, softmax)
from ._common import MAX_THREADS_PER_BLOCK  # noqa: F401
from .attention import VERSIONS as ATTENTION_VERSIONS  # noqa: F401
from .copy_transpose import BLOCK_ROWS as TRANSPOSE_BLOCK_ROWS  # noqa: F401
from .copy_transpose import TILE as TRANSPOSE_TILE  # noqa: F401
from .copy_transpose import VERSIONS as TRANSPOSE_VERSIONS  # noqa: F401
from .copy_transpose import copy2d, transpose  # noqa: F401
from .elementwise import VERSIONS as ACTIVATION_VERSIONS  # noqa: F401
from .elementwise import (ACTIVATION_CODES, DEFAULT_ALPHA, GRID_STRIDE_MAX_BLOCKS, activation, elu,  # noqa: F401
                          gelu, leaky_relu, relu, sigmoid, silu, tanh)
from .gemm import TILE4 as MATMUL4_TILE  # noqa: F401
from .gemm import TILE5 as MATMUL5_TILE  # noqa: F401
from .gemm import TILE7 as MATMUL7_TILE  # noqa: F401
from .gemm import VERSIONS as MATMUL_VERSIONS  # noqa: F401
from .gemm import matmul, matmul_flops  # noqa: F401
from .reduction import MAX_BLOCKS as REDUCE_MAX_BLOCKS  # noqa: F401
from .reduction import VERSIONS as REDUCE_VERSIONS  # noqa: F401
from .reduction import reduce_pass, reduce_sum, reduce_workspace, reduce_workspace_size  # noqa: F401
from .softmax import VERSIONS as SOFTMAX_VERSIONS  # noqa: F401
from .softmax import softmax_rows  # noqa: F401
