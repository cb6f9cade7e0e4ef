"""The warp-tiled GEMMs, the PTX tensor-core GEMMs and the float4 reduction on a real GPU, at the sizes the
benchmarks time (the `gpu` tier; skipped with the reason elsewhere). The CPU tier checks the same kernels on small
ragged shapes; here the full grids run in parallel on real hardware, with real float4 alignment and real FMA
rounding."""
import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def _randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_matmul_v7_at_benchmark_size(gpu_context):
    from gpuedu import ops
    rng = np.random.default_rng(0)
    for M, N, K in [(1024, 1024, 1024), (1000, 1030, 517)]:
        a, b = _randn(rng, M, K), _randn(rng, K, N)
        got = ops.matmul(a, b, version=7).get()
        want = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5 * np.sqrt(K) * 4, err_msg=f"{M}x{N}x{K}")


@pytest.mark.parametrize("batch", [128, 4096])
def test_dense_layers_of_the_benchmark_mlp(gpu_context, batch):
    """784-1024-1024-10: every tile and split-K plan the MLP benchmark runs, against float64."""
    from gpuedu import nn
    from gpuedu.nn import reference as ref
    import pycuda.gpuarray as gpuarray
    rng = np.random.default_rng(1)
    for n_in, n_out, act in [(784, 1024, "relu"), (1024, 1024, "relu"), (1024, 10, None)]:
        layer = nn.Dense(n_in, n_out, activation=act, seed=2)
        x, dy = _randn(rng, batch, n_in), _randn(rng, batch, n_out)
        y = layer.forward(gpuarray.to_gpu(x)).get()
        dx = layer.backward(gpuarray.to_gpu(dy)).get()
        x64, W64 = x.astype(np.float64), layer.W.numpy().astype(np.float64)
        z = x64 @ W64 + layer.b.numpy()
        want_y = ref.act_forward(act, z)
        dz = dy * ref.act_derivative(act, z, want_y)
        tol = dict(rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(y, want_y, **tol)
        np.testing.assert_allclose(layer.W.grad.get(), x64.T @ dz, rtol=1e-3, atol=1e-3 * np.sqrt(batch))
        np.testing.assert_allclose(layer.b.grad.get(), dz.sum(axis=0), rtol=1e-3, atol=1e-3 * np.sqrt(batch))
        np.testing.assert_allclose(dx, dz @ W64.T, **tol)


def test_reduce_sum_float4_versions_on_a_large_unaligned_view(gpu_context):
    from gpuedu import ops
    import pycuda.gpuarray as gpuarray
    host = np.random.default_rng(3).integers(-8, 9, 2**24 + 3).astype(np.float32)
    whole = gpuarray.to_gpu(host)
    for version in (6, 7):
        for start in (0, 1):
            x = whole[start:]
            out = gpuarray.empty((1,), np.float32)
            workspace = ops.reduce_workspace(x.size, version)
            got = ops.reduce_sum(x, version=version, out=out, workspace=workspace).get()[0]
            assert got == host[start:].astype(np.float64).sum(), f"v{version} start={start}"


@pytest.mark.parametrize("version", [6, 7, 8, 9, 10])
def test_ptx_tensor_core_gemms_at_benchmark_size(gpu_context, version):
    """ops.fp16.matmul's versions 6-10 (mma_gemm.cu) on full grids: 1024^3, and a ragged shape whose rows are a
    multiple of 8 halves (the cp.async path) or not (K = 517: element by element); version 10 in every layout."""
    from gpuedu.ops import fp16
    rng = np.random.default_rng(version)
    layouts = [(False, False), (True, False), (False, True), (True, True)] if version == 10 else [(False, False)]
    for M, N, K in [(1024, 1024, 1024), (1000, 1032, 520), (1000, 1030, 517)]:
        a = rng.standard_normal((M, K)).astype(np.float16)
        b = rng.standard_normal((K, N)).astype(np.float16)
        want = fp16.matmul_reference(a, b, out_dtype=np.float64)
        bound = 4 * fp16.matmul_tolerance(a, b, out_dtype=np.float32)   # tensor cores may truncate when aligning
        for ta, tb in layouts:
            got = fp16.matmul(np.ascontiguousarray(a.T) if ta else a, np.ascontiguousarray(b.T) if tb else b,
                              transpose_a=ta, transpose_b=tb, out_dtype=np.float32, version=version).get()
            assert np.all(np.abs(got - want) <= bound), f"version {version} {M}x{N}x{K} transposes {ta, tb}"
