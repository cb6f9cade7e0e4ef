"""What the tensor-core GEMM rungs' tests share: the check of a product against its exact float64 sums."""
import numpy as np

import gpuedu
from gpuedu.ops import fp16

# FP32 sums in some order: matmul_tolerance's bound. The emulator adds each product in FP32, rounding to nearest,
# so the bound holds as it is; a GPU's tensor cores may truncate when they align the addends of a sum, hence 4 times
# it there, as for the WMMA GEMMs.
SLACK = 1 if gpuedu.setup(verbose=False).is_emulator else 4


def assert_close_to_exact(got, a, b, alpha, out_dtype):
    exact = fp16.matmul_reference(a, b, alpha=alpha, out_dtype=np.float64)
    bound = SLACK * fp16.matmul_tolerance(a, b, alpha=alpha, out_dtype=out_dtype)
    assert got.dtype == np.dtype(out_dtype) and got.shape == exact.shape
    excess = np.abs(got.astype(np.float64) - exact) - bound
    worst = np.unravel_index(excess.argmax(), excess.shape)
    assert np.all(excess <= 0), f"worst excess over the bound {excess.max():.3g} at {worst}"
