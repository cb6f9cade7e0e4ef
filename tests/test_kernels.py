"""Every version of every kernel against the NumPy reference, at several block sizes and at sizes
that are not multiples of the block or tile (llm.c's habit: validate each version, then time it)."""
import numpy as np
import pytest

import gpuedu
from gpuedu import ops
from gpuedu import reference as ref

gpuedu.setup(verbose=False)

rng = np.random.default_rng(1234)


def _randn(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ---- elementwise ------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ops.ACTIVATION_VERSIONS)
@pytest.mark.parametrize("name", list(ops.ACTIVATION_CODES))
def test_activation_every_version(name, version):
    for n, block in [(1, 32), (3, 256), (257, 256), (1001, 128), (4099, 1024)]:
        x = _randn(n, scale=3.0)
        got = ops.activation(x, name, version=version, block_size=block).get()
        np.testing.assert_allclose(got, ref.activation(x, name), rtol=2e-6, atol=2e-7,
                                   err_msg=f"{name} v{version} n={n} block={block}")


@pytest.mark.parametrize("version", ops.ACTIVATION_VERSIONS)
def test_activation_alpha_and_shape(version):
    x = _randn(7, 9, scale=2.0)
    got = ops.leaky_relu(x, version=version, alpha=0.3).get()
    assert got.shape == (7, 9)
    np.testing.assert_allclose(got, ref.leaky_relu(x, 0.3), rtol=1e-6)
    np.testing.assert_allclose(ops.elu(x, version=version, alpha=0.5).get(), ref.elu(x, 0.5), rtol=2e-6, atol=1e-7)


def test_activation_grid_stride_covers_more_than_the_grid():
    # version 2 caps the grid: with 1-thread blocks each thread must loop over many elements
    n = ops.GRID_STRIDE_MAX_BLOCKS * 3 + 5
    x = _randn(n)
    for version in (2, 3):
        np.testing.assert_array_equal(ops.relu(x, version=version, block_size=1).get(), ref.relu(x))


# ---- copy and transpose ----------------------------------------------------------------------

SHAPES_2D = [(1, 1), (1, 33), (33, 1), (32, 32), (33, 65), (70, 31), (128, 97)]


@pytest.mark.parametrize("version", ops.TRANSPOSE_VERSIONS)
def test_transpose_every_version(version):
    for shape in SHAPES_2D:
        x = _randn(*shape)
        np.testing.assert_array_equal(ops.transpose(x, version=version).get(), ref.transpose(x),
                                      err_msg=f"v{version} {shape}")


def test_copy2d():
    for shape in SHAPES_2D:
        x = _randn(*shape)
        np.testing.assert_array_equal(ops.copy2d(x).get(), x)


# ---- reduction -------------------------------------------------------------------------------

def _small_ints(n):
    # integers in float32: every partial sum is exact, so any order of additions gives the same bits
    return rng.integers(-8, 9, n).astype(np.float32)


BLOCKS_BY_VERSION = {1: (2, 64, 256), 2: (2, 128, 1024), 3: (32, 256), 4: (8, 256, 512),
                     5: (32, 64, 256, 1024), 6: (32, 96, 256), 7: (32, 160, 1024)}


@pytest.mark.parametrize("version", ops.REDUCE_VERSIONS)
def test_reduce_sum_every_version_exact_on_integers(version):
    for block in BLOCKS_BY_VERSION[version]:
        for n in (1, block - 1 or 1, block, 2 * block + 1, 5003):
            x = _small_ints(n)
            got = ops.reduce_sum(x, version=version, block_size=block).get()
            assert got.shape == (1,)
            assert got[0] == np.float32(ref.reduce_sum(x)), f"v{version} block={block} n={n}"


@pytest.mark.parametrize("version", ops.REDUCE_VERSIONS)
def test_reduce_sum_random_floats_within_tolerance(version):
    x = _randn(100_003)
    got = float(ops.reduce_sum(x, version=version).get()[0])
    assert abs(got - ref.reduce_sum(x)) <= ref.sum_tolerance(x)


def test_reduce_pass_gives_one_partial_sum_per_block():
    x = _small_ints(1000)
    partial = ops.reduce_pass(x, version=3, block_size=128).get()
    padded = np.zeros(8 * 128, np.float32)
    padded[:1000] = x
    np.testing.assert_array_equal(partial, padded.reshape(8, 128).sum(axis=1))
    # version 4 halves the number of blocks: each one adds two elements while loading
    assert ops.reduce_pass(x, version=4, block_size=128).size == 4


def test_reduce_sum_of_empty_is_zero():
    for version in ops.REDUCE_VERSIONS:
        assert ops.reduce_sum(np.zeros(0, np.float32), version=version).get()[0] == 0.0


def test_reduce_sum_grid_stride_versions_on_unaligned_views():
    # float4 loads start at the first 16-byte aligned element: views 1-3 floats past an allocation's
    # start leave a scalar head, and the lengths leave scalar tails of 0-3.
    gpuarray = gpuedu.backend.active().gpuarray
    host = _small_ints(4 * 1024 * 16 + 11)
    whole = gpuarray.to_gpu(host)
    for version in (6, 7):
        for start in range(4):
            for n in (0, 1, 2, 3, 5, 70, 4 * 1024 * 16 + 7 - start):
                got = ops.reduce_sum(whole[start:start + n], version=version).get()[0]
                assert got == np.float32(ref.reduce_sum(host[start:start + n])), f"v{version} start={start} n={n}"


@pytest.mark.parametrize("version", ops.REDUCE_VERSIONS)
def test_reduce_sum_with_out_and_workspace_over_three_levels(version):
    # 64 threads a block: n = 300_007 needs 4688 -> 74 -> 2 -> 1 partial sums with versions 1-3
    gpuarray = gpuedu.backend.active().gpuarray
    x = gpuarray.to_gpu(_small_ints(300_007))
    out = gpuarray.empty((1,), np.float32)
    workspace = ops.reduce_workspace(x.size, version, block_size=64)
    for _ in range(2):   # the second call reuses the partial sums' space: still right
        assert ops.reduce_sum(x, version=version, block_size=64, out=out, workspace=workspace) is out
        assert out.get()[0] == np.float32(ref.reduce_sum(x.get()))


# ---- softmax ---------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ops.SOFTMAX_VERSIONS)
def test_softmax_every_version(version):
    blocks = (1, 33, 128) if version <= 2 else (32, 96, 256)
    for block in blocks:
        for rows, cols in [(1, 1), (3, 31), (5, 32), (37, 33), (9, 1000)]:
            x = _randn(rows, cols, scale=5.0)
            got = ops.softmax_rows(x, version=version, block_size=block).get()
            np.testing.assert_allclose(got, ref.softmax_rows(x), rtol=1e-5, atol=1e-7,
                                       err_msg=f"v{version} block={block} {rows}x{cols}")


@pytest.mark.parametrize("version", ops.SOFTMAX_VERSIONS)
def test_softmax_large_logits_do_not_overflow(version):
    x = np.array([[1000.0, 999.0, -1000.0], [-np.inf, 0.0, 0.0]], np.float32)
    got = ops.softmax_rows(x, version=version).get()
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref.softmax_rows(x), rtol=1e-6, atol=1e-30)


# ---- matmul ----------------------------------------------------------------------------------

# (131, 132, 36) and (8, 260, 12): N and K multiples of 4, so version 6 takes its float4 path, with
# ragged tiles; the others send it down the scalar fallback.
MATMUL_SHAPES = [(1, 1, 1), (16, 16, 16), (33, 17, 9), (5, 70, 3), (70, 3, 37), (129, 65, 130),
                 (131, 132, 36), (8, 260, 12)]


@pytest.mark.parametrize("version", ops.MATMUL_VERSIONS)
def test_matmul_every_version(version):
    for M, N, K in MATMUL_SHAPES:
        a, b = _randn(M, K), _randn(K, N)
        got = ops.matmul(a, b, version=version).get()
        np.testing.assert_allclose(got, ref.matmul(a, b), rtol=1e-4, atol=1e-4 * np.sqrt(K),
                                   err_msg=f"v{version} M={M} N={N} K={K}")


# Version 7's 128 x 128 tile and 16-deep K slabs: a single element, shapes one short of / past a tile,
# K not a multiple of 16 (and not of 4: scalar loads), several slabs so the double buffer swaps.
MATMUL7_SHAPES = [(1, 1, 1), (127, 129, 65), (256, 256, 256), (256, 256, 250), (129, 257, 17),
                  (200, 8, 48), (3, 300, 7)]


def test_matmul_v7_warp_tiling_against_numpy_and_version_6():
    for M, N, K in MATMUL7_SHAPES:
        a, b = _randn(M, K), _randn(K, N)
        got = ops.matmul(a, b, version=7).get()
        np.testing.assert_allclose(got, ref.matmul(a, b), rtol=1e-4, atol=1e-4 * np.sqrt(K),
                                   err_msg=f"M={M} N={N} K={K}")
        # the same products summed in the same (ascending k) order: the same bits as version 6
        np.testing.assert_array_equal(got, ops.matmul(a, b, version=6).get(), err_msg=f"M={M} N={N} K={K}")


def test_matmul_v7_writes_only_inside_c():
    # C is the front of a larger buffer filled with a marker: every element of the ragged C must be
    # computed, and the stores of the edge block (past row 70) must not reach the marker behind it.
    a, b = _randn(70, 33), _randn(33, 45)
    buffer = gpuedu.backend.active().gpuarray.to_gpu(np.full(70 * 45 + 4096, 7.0, np.float32))
    out = buffer[:70 * 45].reshape(70, 45)
    ops.matmul(a, b, version=7, out=out)
    np.testing.assert_allclose(out.get(), ref.matmul(a, b), rtol=1e-4, atol=1e-4)
    assert (buffer.get()[70 * 45:] == 7.0).all()


@pytest.mark.parametrize("block_size", [8, 16, 32])
def test_matmul_naive_block_sizes_and_tiles(block_size):
    a, b = _randn(37, 23), _randn(23, 41)
    want = ref.matmul(a, b)
    for version in (1, 2):
        np.testing.assert_allclose(ops.matmul(a, b, version=version, block_size=block_size).get(),
                                   want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ops.matmul(a, b, version=3, tile=block_size).get(), want, rtol=1e-5, atol=1e-5)


def test_matmul_exact_on_integers_and_with_k_zero():
    a = rng.integers(-4, 5, (50, 77)).astype(np.float32)
    b = rng.integers(-4, 5, (77, 45)).astype(np.float32)
    for version in ops.MATMUL_VERSIONS:
        np.testing.assert_array_equal(ops.matmul(a, b, version=version).get(), ref.matmul(a, b))
    z = ops.matmul(np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32)).get()
    np.testing.assert_array_equal(z, np.zeros((3, 4), np.float32))
