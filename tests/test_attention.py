"""attention.cu against the float64 references: every version, causal or not, at sizes that are not multiples
of the tiles; the tiled kernel's saved log-sum-exp and its backward; the global stores each version makes
(counted); races and out-of-bounds accesses; and the errors a caller can trigger."""
import numpy as np
import pytest

import gpuedu
from gpuedu import ops
from gpuedu import reference as ref
from gpuedu.ops import attention as A

backend = gpuedu.setup(verbose=False)

STORE_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"   # counted: every global store's 32-byte sectors


def stored_bytes(metrics):
    """The bytes a launch stored to global memory, counted (its store sectors, whole arrays of whole sectors)."""
    return 32 * metrics[STORE_SECTORS]

# (batch, seq, heads, head_dim): seq below, between and above the tiles (16, 32, 64 rows), head sizes that
# are not powers of two (5, fewer than a warp's lanes; 48, more: version 2's lanes stage q in two rounds), one
# head and several. The largest head (MAX_HEAD_DIM, the file's default HEAD_DIM: compiled without options) too.
SHAPES = [(1, 1, 1, 4), (2, 5, 3, 4), (2, 37, 2, 8), (1, 70, 1, 16), (1, 65, 2, 5), (1, 130, 1, 32),
          (2, 45, 1, 48), (1, 33, 2, A.MAX_HEAD_DIM)]


def make(batch, seq, heads, head_dim, seed=0, count=3):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((batch, seq, heads * head_dim)).astype(np.float32) for _ in range(count)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("version", A.VERSIONS)
def test_every_version_matches_the_float64_reference(version, causal):
    for shape in SHAPES:
        batch, seq, heads, head_dim = shape
        q, k, v = make(*shape)
        got = A.attention(q, k, v, heads=heads, causal=causal, version=version).get()
        want = ref.attention(q, k, v, heads=heads, causal=causal)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6, err_msg=f"v{version} causal={causal} {shape}")


def test_causal_output_of_a_row_does_not_depend_on_later_keys():
    q, k, v = make(1, 40, 2, 8, seed=3)
    first = A.attention(q, k, v, heads=2, causal=True).get()
    k2, v2 = k.copy(), v.copy()
    k2[:, 20:] += 5.0
    v2[:, 20:] -= 3.0
    second = A.attention(q, k2, v2, heads=2, causal=True).get()
    np.testing.assert_array_equal(first[:, :20], second[:, :20])
    assert np.abs(first[:, 20:] - second[:, 20:]).max() > 0.1


def test_a_workspace_is_used_for_the_n_by_n_matrices_and_checked():
    q, k, v = make(2, 9, 1, 4, seed=14)
    want = ref.attention(q, k, v, causal=True)
    for version, matrices in ((1, 2), (2, 1)):
        workspace = backend.gpuarray.zeros(matrices * 2 * 9 * 9, np.float32)
        got = A.attention(q, k, v, causal=True, version=version, workspace=workspace).get()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)
        p = workspace.get()[-2 * 9 * 9:].reshape(2, 9, 9)            # the probabilities are its last part
        np.testing.assert_allclose(p.sum(axis=2), 1.0, rtol=1e-6)
        assert (np.triu(p, k=1) == 0).all()                          # causal: nothing above the diagonal
        with pytest.raises(ValueError, match=f"at least {matrices * 2 * 81} floats"):
            A.attention(q, k, v, version=version, workspace=backend.gpuarray.zeros(10, np.float32))


def test_large_scores_do_not_overflow_and_scale_is_applied():
    q, k, v = make(1, 33, 1, 4, seed=4)
    for version in A.VERSIONS:
        got = A.attention(q * 30, k * 30, v, version=version, scale=0.7).get()
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, ref.attention(q * 30, k * 30, v, scale=0.7), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_tiled_forward_saves_the_row_log_sum_exp(causal):
    q, k, v = make(2, 70, 2, 8, seed=5)
    out, lse = A.attention(q, k, v, heads=2, causal=causal, return_lse=True)
    want, want_lse = ref.attention(q, k, v, heads=2, causal=causal, return_lse=True)
    assert lse.shape == (2, 2, 70)
    np.testing.assert_allclose(lse.get(), want_lse, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.get(), want, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_matches_the_float64_reference(causal):
    for shape in SHAPES:
        batch, seq, heads, head_dim = shape
        q, k, v, dout = make(*shape, seed=6, count=4)
        out, lse = A.attention(q, k, v, heads=heads, causal=causal, return_lse=True)
        got = A.attention_backward(dout, q, k, v, out, lse, heads=heads, causal=causal)
        want = ref.attention_backward(dout, q, k, v, heads=heads, causal=causal)
        for name, g, w in zip(("dq", "dk", "dv"), got, want):
            np.testing.assert_allclose(g.get(), w, rtol=1e-4, atol=1e-5, err_msg=f"{name} causal={causal} {shape}")


def test_backward_reference_against_finite_differences():
    q, k, v, dout = (x.astype(np.float64) for x in make(1, 6, 2, 3, seed=7, count=4))
    grads = ref.attention_backward(dout, q, k, v, heads=2, causal=True)
    eps = 1e-6
    for x, g in zip((q, k, v), grads):
        numeric = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            old = x[idx]
            x[idx] = old + eps
            up = (ref.attention(q, k, v, heads=2, causal=True) * dout).sum()
            x[idx] = old - eps
            down = (ref.attention(q, k, v, heads=2, causal=True) * dout).sum()
            x[idx] = old
            numeric[idx] = (up - down) / (2 * eps)
        np.testing.assert_allclose(g, numeric, rtol=1e-6, atol=1e-8)


def test_the_backward_is_the_same_bits_every_run():
    q, k, v, dout = make(1, 50, 1, 8, seed=8, count=4)
    out, lse = A.attention(q, k, v, causal=True, return_lse=True)
    first = [g.get() for g in A.attention_backward(dout, q, k, v, out, lse, causal=True)]
    second = [g.get() for g in A.attention_backward(dout, q, k, v, out, lse, causal=True)]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("causal", [False, True])
def test_fp16_inputs_with_float32_arithmetic_match_within_fp16_tolerance(causal):
    for shape in [(2, 37, 2, 8), (1, 70, 1, 16), (1, 65, 2, 5), (2, 45, 1, 48)]:
        batch, seq, heads, head_dim = shape
        q, k, v = (x.astype(np.float16) for x in make(*shape, seed=12))
        out, lse = A.attention(q, k, v, heads=heads, causal=causal, return_lse=True)
        assert out.dtype == np.float16 and lse.dtype == np.float32
        want, want_lse = ref.attention(q, k, v, heads=heads, causal=causal, return_lse=True)
        # the inputs are exact in float64; the only roundings that matter are the float32 sums and O's
        # final rounding to half (a relative 2**-11)
        np.testing.assert_allclose(out.get().astype(np.float64), want, rtol=2**-10, atol=2**-12)
        np.testing.assert_allclose(lse.get(), want_lse, rtol=1e-5, atol=1e-5)
        # and it is the float32 kernel's result, rounded once: each element within half an FP16 ulp of it
        # (2**-11 of its size; 2**-25 where the half is subnormal)
        single = A.attention(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), heads=heads,
                             causal=causal).get()
        error = np.abs(out.get().astype(np.float32) - single)
        half_ulp = np.maximum(np.abs(single) * 2**-11, 2**-25)
        assert (error <= half_ulp).all(), (shape, causal, np.argwhere(error > half_ulp)[:3])


def test_fp16_moves_half_the_bytes_of_float32():
    if backend.name != "cpu":
        pytest.skip("the counters are the emulator's")
    batch, seq, heads, head_dim = 1, 64, 2, 16
    single = [backend.gpuarray.to_gpu(x) for x in make(batch, seq, heads, head_dim, seed=13)]
    half = [backend.gpuarray.to_gpu(x.get().astype(np.float16)) for x in single]
    with gpuedu.profile() as prof:
        A.attention(*single, heads=heads)
        A.attention(*half, heads=heads)
    f32, f16 = (kern.metrics for kern in prof.kernels)
    assert stored_bytes(f16) * 2 == stored_bytes(f32) == batch * seq * heads * head_dim * 4
    assert f16["dram__bytes_read.sum"] * 2 == f32["dram__bytes_read.sum"]


# ---- what each version writes to global memory (counted) ----------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
def test_only_the_tiled_kernel_writes_no_n_by_n_matrix(causal):
    if backend.name != "cpu":
        pytest.skip("the counters are the emulator's")
    batch, seq, heads, head_dim = 1, 40, 2, 16      # every array a whole number of 32-byte sectors
    q, k, v = (backend.gpuarray.to_gpu(x) for x in make(batch, seq, heads, head_dim, seed=9))
    problems = batch * heads
    out_bytes = batch * seq * heads * head_dim * 4
    matrix_bytes = problems * seq * seq * 4
    written = {}
    for version in A.VERSIONS:
        with gpuedu.profile() as prof:
            A.attention(q, k, v, heads=heads, causal=causal, version=version, return_lse=(version == 3))
        written[version] = [(kern.name, stored_bytes(kern.metrics)) for kern in prof.kernels]
    # version 1: S, then P (the softmax's output), then O
    assert [b for _, b in written[1]] == [matrix_bytes, matrix_bytes, out_bytes]
    # version 2: P (S never leaves the kernel), then O
    assert [b for _, b in written[2]] == [matrix_bytes, out_bytes]
    # version 3: one launch, O and the log-sum-exp: linear in seq
    assert len(written[3]) == 1
    assert written[3][0][1] == out_bytes + problems * seq * 4


def test_tiled_kernel_reads_k_and_v_once_per_query_tile():
    if backend.name != "cpu":
        pytest.skip("the counters are the emulator's")
    batch, seq, heads, head_dim = 1, 2 * A.FLASH_ROWS, 1, 8
    q, k, v = (backend.gpuarray.to_gpu(x) for x in make(batch, seq, heads, head_dim, seed=10))
    with gpuedu.profile() as prof:
        A.attention(q, k, v, version=3)
    metrics = prof.kernels[0].metrics
    row_bytes = seq * head_dim * 4
    # Q once, K and V once per query tile (2 tiles); every load a whole sector
    sectors = metrics["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]
    assert sectors * 32 == row_bytes + 2 * 2 * row_bytes


# ---- races and bounds -------------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
def test_tiled_kernels_have_no_races_and_stay_in_bounds(causal):
    if backend.name != "cpu":
        pytest.skip("racecheck and memcheck are the emulator's")
    q, k, v, dout = make(1, 37, 2, 4, seed=11, count=4)
    with gpuedu.racecheck() as rc:
        for version in (1, 2):
            A.attention(q, k, v, heads=2, causal=causal, version=version)
        out, lse = A.attention(q, k, v, heads=2, causal=causal, return_lse=True)
        A.attention_backward(dout, q, k, v, out, lse, heads=2, causal=causal)
    assert rc.hazards == []
    with gpuedu.memcheck() as mc:
        for version in A.VERSIONS:
            A.attention(q, k, v, heads=2, causal=causal, version=version)
        out, lse = A.attention(q, k, v, heads=2, causal=causal, return_lse=True)
        A.attention_backward(dout, q, k, v, out, lse, heads=2, causal=causal)
    assert mc.errors == []


# ---- bad input -----------------------------------------------------------------------------------------

def test_bad_input_gets_a_clear_error():
    q, k, v = make(1, 8, 2, 4)
    with pytest.raises(ValueError, match="multiple of heads=3"):
        A.attention(q, k, v, heads=3)
    with pytest.raises(ValueError, match="head_dim <= 64"):
        A.attention(*make(1, 4, 1, 65), heads=1)
    with pytest.raises(ValueError, match="k has shape"):
        A.attention(q, k[:, :5], v, heads=2)
    with pytest.raises(TypeError, match="float32"):
        A.attention(q.astype(np.float64), k, v, heads=2)
    with pytest.raises(ValueError, match="3-D"):
        A.attention(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="versions 1, 2, 3"):
        A.attention(q, k, v, heads=2, version=4)
    with pytest.raises(ValueError, match="only version 3"):
        A.attention(q, k, v, heads=2, version=1, return_lse=True)
    with pytest.raises(ValueError, match="positive integer"):
        A.attention(q, k, v, heads=0)
    with pytest.raises(TypeError, match="version 3's"):
        A.attention(q.astype(np.float16), k.astype(np.float16), v.astype(np.float16), heads=2, version=2)
    with pytest.raises(TypeError, match="k has dtype float32"):
        A.attention(q.astype(np.float16), k, v, heads=2)
    out, lse = A.attention(q, k, v, heads=2, return_lse=True)
    half = [x.astype(np.float16) for x in (q, k, v)]
    with pytest.raises(TypeError, match="forward only"):
        A.attention_backward(half[0], *half, out.get().astype(np.float16), lse, heads=2)
    with pytest.raises(ValueError, match=r"lse has shape"):
        A.attention_backward(q, q, k, v, out, lse.get().reshape(1, 8, 2), heads=2)


def test_the_families_names_are_gathered():
    assert ops.ATTENTION_VERSIONS == A.VERSIONS
    assert ops.attention is A
    assert A.attention_flops(2, 10, 3, 8) == 4 * 2 * 3 * 100 * 8
    assert A.attention_flops(1, 4, 1, 2, causal=True) == 4 * 10 * 2
