"""NumPy references for every op in ``gpuedu.ops``: what each kernel must compute, gathered by their
lessons' names (``reference.sigmoid``, ``reference.matmul``, ``reference.conv2d``, ...). Each is defined
beside its launchers, in its family's module of ``gpuedu/ops/`` (as ``<op>_reference``).

They are written for clarity, in float64 where the order of a float32 sum would otherwise change
the answer, and return float32 arrays (the kernels' dtype) unless the name says otherwise; the
convolution references (``conv2d``, ``im2col``, ``maxpool2d`` and their backward passes) and the attention
references (``attention``, ``attention_backward``) return float64, since gradient checks compare them with
finite differences.
"""
from .ops.attention import attention_backward_reference as attention_backward  # noqa: F401
from .ops.attention import attention_reference as attention  # noqa: F401
from .ops.conv import col2im_reference as col2im  # noqa: F401
from .ops.conv import conv2d_backward_reference as conv2d_backward  # noqa: F401
from .ops.conv import conv2d_reference as conv2d  # noqa: F401
from .ops.conv import im2col_reference as im2col  # noqa: F401
from .ops.conv import maxpool2d_backward_reference as maxpool2d_backward  # noqa: F401
from .ops.conv import maxpool2d_reference as maxpool2d  # noqa: F401
from .ops.conv import output_size as conv_output_size  # noqa: F401
from .ops.copy_transpose import transpose_reference as transpose  # noqa: F401
from .ops.elementwise import REFERENCE_ACTIVATIONS as ACTIVATIONS  # noqa: F401
from .ops.elementwise import activation_reference as activation  # noqa: F401
from .ops.elementwise import elu_reference as elu  # noqa: F401
from .ops.elementwise import gelu_reference as gelu  # noqa: F401
from .ops.elementwise import leaky_relu_reference as leaky_relu  # noqa: F401
from .ops.elementwise import relu_reference as relu  # noqa: F401
from .ops.elementwise import sigmoid_reference as sigmoid  # noqa: F401
from .ops.elementwise import silu_reference as silu  # noqa: F401
from .ops.elementwise import tanh_reference as tanh  # noqa: F401
from .ops.gemm import matmul_reference as matmul  # noqa: F401
from .ops.reduction import histogram_reference as histogram  # noqa: F401
from .ops.reduction import reduce_sum_reference as reduce_sum  # noqa: F401
from .ops.reduction import sum_tolerance  # noqa: F401
from .ops.softmax import softmax_rows_reference as softmax_rows  # noqa: F401
