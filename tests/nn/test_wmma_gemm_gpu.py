"""The tensor-core GEMMs on a real GPU, at the sizes the benchmarks time (the `gpu` tier; skipped with the
reason elsewhere). The CPU tier checks the same kernels on small ragged shapes, where every copy lands when it
is issued; here cp.async copies really are in flight while the warps compute, so a missing wait or barrier
shows, and the tensor cores round as the hardware does. Rows of the result are checked against float64 sums
of a sample of rows (a full float64 product at these sizes would take the host longer than the GPU tier)."""
import numpy as np
import pytest

pytestmark = pytest.mark.gpu

SAMPLED_ROWS = 48


def _halves(rng, *shape):
    return rng.standard_normal(shape).astype(np.float16)


def _check_sampled_rows(got, a, b, transpose_a, transpose_b, alpha, out_dtype, rng, what):
    op_a = a.T if transpose_a else a
    op_b = b.T if transpose_b else b
    rows = rng.choice(op_a.shape[0], size=min(SAMPLED_ROWS, op_a.shape[0]), replace=False)
    rows = np.union1d(rows, [0, op_a.shape[0] - 1])           # the first and the (edge) last row too
    exact = alpha * (op_a[rows].astype(np.float64) @ op_b.astype(np.float64))
    magnitude = abs(alpha) * (np.abs(op_a[rows].astype(np.float64)) @ np.abs(op_b.astype(np.float64)))
    k = op_a.shape[1]
    unit = 2.0 ** -10 if np.dtype(out_dtype) == np.float16 else 2.0 ** -23
    # one rounding of the output, FP32 sums (4x: tensor cores may truncate when aligning addends)
    bound = unit * np.abs(exact) + 4 * (k + 1) * 2.0 ** -24 * magnitude + 2.0 ** -24
    err = np.abs(got[rows].astype(np.float64) - exact)
    assert np.all(err <= bound), f"{what}: max |error| {err.max():.3g} (worst excess {np.max(err - bound):.3g})"


@pytest.mark.parametrize("version", [1, 2, 3])
def test_wmma_matmul_at_benchmark_size(gpu_context, version):
    from gpuedu.ops import fp16
    rng = np.random.default_rng(version)
    for m, n, k in [(4096, 4096, 4096), (1000, 1030, 517)]:
        a, b = _halves(rng, m, k), _halves(rng, k, n)
        got = fp16.wmma_matmul(a, b, version=version).get()
        _check_sampled_rows(got, a, b, False, False, 1.0, np.float32, rng, f"v{version} {m}x{n}x{k}")


@pytest.mark.parametrize("version", [4, 5])
def test_the_mixed_precision_layers_gemms(gpu_context, version):
    """Width 4096, batch 512 (the mixed-precision target): Z = X W, dW = X^T dZ, dX = dZ W^T, FP16 out;
    and the 4096 -> 10 output layer, whose rows of 10 halves take the element-by-element path."""
    from gpuedu.ops import fp16
    rng = np.random.default_rng(7)
    for batch, n_in, n_out in [(512, 4096, 4096), (512, 4096, 10)]:
        x, w, dz = _halves(rng, batch, n_in), _halves(rng, n_in, n_out), _halves(rng, batch, n_out)
        for a, b, ta, tb, what in [(x, w, False, False, "Z = X W"), (x, dz, True, False, "dW = X^T dZ"),
                                   (dz, w, False, True, "dX = dZ W^T")]:
            got = fp16.matmul(a, b, transpose_a=ta, transpose_b=tb, alpha=0.5, version=version).get()
            _check_sampled_rows(got, a, b, ta, tb, 0.5, np.float16, rng, f"{version} {what} {batch}-{n_in}-{n_out}")
