"""attention.cu against the float64 references: every version, causal or not, at sizes that are not multiples
of the tiles; the tiled kernels' saved log-sum-exp and the backward; version 4 (tensor cores) in FP16 and BF16;
the global stores each version makes (counted); races and out-of-bounds accesses; and the errors a caller can
trigger."""
import numpy as np
import pytest

import gpuedu
from gpuedu import ops
from gpuedu import reference as ref
from gpuedu.ops import attention as A
from gpuedu.ops import fp16

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
@pytest.mark.parametrize("version", A.FLOAT32_VERSIONS)
def test_every_float32_version_matches_the_float64_reference(version, causal):
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
    for version in A.FLOAT32_VERSIONS:
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


# ---- version 4: the tensor cores, FP16 and BF16 ---------------------------------------------------------

# (batch, seq, heads, head_dim): one row; lengths that leave the last warp's 16 rows and the last 64-key tile
# partial (37, 45, 70, 130: a block's rows past N, a second and a third key tile); one head and several; every
# head size version 4 takes (A.MMA_HEAD_DIMS).
MMA_SHAPES = [(1, 1, 1, 16), (2, 37, 2, 16), (1, 70, 1, 32), (2, 45, 1, 48), (1, 130, 2, 64)]
UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8}     # half the gap after 1.0: 10 and 7 fraction bits


def sixteen_bit(x, dtype):
    """float32 x rounded to the 16-bit type: (what the kernel takes, its exact values as float32)."""
    if dtype == "float16":
        half = x.astype(np.float16)
        return half, half.astype(np.float32)
    bits = fp16.to_bfloat16_bits_reference(x)
    return bits, fp16.bfloat16_bits_to_float(bits)


def as_float64(out, dtype):
    host = out.get()
    return (host if dtype == "float16" else fp16.bfloat16_bits_to_float(host)).astype(np.float64)


def tensor_cores(q, k, v, dtype, **kw):
    return A.attention(q, k, v, version=4, dtype="bfloat16" if dtype == "bfloat16" else None, **kw)


def rounding_bound(qf, kf, vf, want, dtype, heads, causal):
    """How far version 4 may be from the float64 result of its (exact) inputs, element by element. Two
    roundings to the 16-bit type (unit roundoff u) matter: each probability's, as it becomes P V's operand
    (relative u each, so at most u * sum_j P_ij |v_j|: the attention of |V|), and O's, once (u |O|). The
    float32 sums, and FP16's subnormal probabilities (below 2**-14: an absolute 2**-25 each), stay under 2**-12."""
    u = UNIT_ROUNDOFF[dtype]
    return u * (ref.attention(qf, kf, np.abs(vf), heads=heads, causal=causal) + np.abs(want)) + 2**-12


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
def test_tensor_cores_are_within_their_roundings_of_the_float64_reference(dtype, causal):
    for shape in MMA_SHAPES:
        batch, seq, heads, head_dim = shape
        (q, qf), (k, kf), (v, vf) = (sixteen_bit(x, dtype) for x in make(*shape, seed=15))
        out, lse = tensor_cores(q, k, v, dtype, heads=heads, causal=causal, return_lse=True)
        assert out.dtype == q.dtype and out.shape == q.shape and lse.dtype == np.float32
        got = as_float64(out, dtype)
        assert np.isfinite(got).all(), (shape, causal, "a stage read before its copies landed?")
        want, want_lse = ref.attention(qf, kf, vf, heads=heads, causal=causal, return_lse=True)
        bound = rounding_bound(qf, kf, vf, want, dtype, heads, causal)
        error = np.abs(got - want)
        assert (error <= bound).all(), (shape, causal, error.max(), np.argwhere(error > bound)[:3])
        # the log-sum-exp is float32 throughout, as version 3's
        np.testing.assert_allclose(lse.get(), want_lse, rtol=1e-5, atol=1e-5, err_msg=f"{shape} causal={causal}")


def test_tensor_cores_give_the_same_bits_every_run_and_keep_causal_rows_apart():
    for dtype in ("float16", "bfloat16"):
        (q, _), (k, kf), (v, vf) = (sixteen_bit(x, dtype) for x in make(2, 70, 2, 16, seed=16))
        first, first_lse = tensor_cores(q, k, v, dtype, heads=2, causal=True, return_lse=True)
        second, second_lse = tensor_cores(q, k, v, dtype, heads=2, causal=True, return_lse=True)
        np.testing.assert_array_equal(first.get(), second.get())
        np.testing.assert_array_equal(first_lse.get(), second_lse.get())
        # rows 0-19 see keys 0-19 only: changing the later keys and values leaves them bit for bit
        k2, v2 = kf.copy(), vf.copy()
        k2[:, 20:] += 2.0
        v2[:, 20:] -= 3.0
        third = tensor_cores(q, sixteen_bit(k2, dtype)[0], sixteen_bit(v2, dtype)[0], dtype, heads=2,
                             causal=True).get()
        np.testing.assert_array_equal(first.get()[:, :20], third[:, :20])
        assert np.abs(as_float64(first, dtype)[:, 20:] - as_float64(backend.gpuarray.to_gpu(third), dtype)[:, 20:]
                      ).max() > 0.1


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_backward_works_from_the_tensor_core_forward(dtype):
    for shape in [(2, 37, 2, 16), (1, 70, 1, 32)]:
        batch, seq, heads, head_dim = shape
        (q, qf), (k, kf), (v, vf) = (sixteen_bit(x, dtype) for x in make(*shape, seed=17))
        dout = make(*shape, seed=18, count=1)[0]
        for causal in (False, True):
            out, lse = tensor_cores(q, k, v, dtype, heads=heads, causal=causal, return_lse=True)
            got = A.attention_backward(dout, qf, kf, vf, as_float64(out, dtype).astype(np.float32), lse,
                                       heads=heads, causal=causal)
            want = ref.attention_backward(dout, qf, kf, vf, heads=heads, causal=causal)
            # dV = P^T dO needs only P, recomputed from the float32 log-sum-exp: version 3's tolerance. dQ and dK
            # also need D_i = dO_i . O_i, and O is the 16-bit forward's, within rounding_bound of the exact one:
            # D_i is off by up to sum_c |dO_ic| bound_ic, and dS_ij = P_ij (dP_ij - D_i) by P_ij times that,
            # which dQ_i = scale sum_j dS_ij k_j and dK_j = scale sum_i dS_ij q_i carry
            # (at most scale |D_i error| (P |K|)_i and scale sum_i P_ij |D_i error| |q_i|).
            np.testing.assert_allclose(got[2].get(), want[2], rtol=1e-4, atol=1e-5)
            bound = rounding_bound(qf, kf, vf, ref.attention(qf, kf, vf, heads=heads, causal=causal), dtype,
                                   heads, causal)
            d_error = A._split_heads(np.abs(dout) * bound, heads).sum(axis=-1)      # [batch, heads, seq]
            scale = 1 / np.sqrt(head_dim)
            qh, kh = A._split_heads(qf, heads), A._split_heads(kf, heads)
            p, _ = A._probabilities(qh, kh, causal, scale)
            dq_bound = A._merge_heads(scale * d_error[..., None] * (p @ np.abs(kh)))
            dk_bound = A._merge_heads(scale * (p * d_error[..., None]).transpose(0, 1, 3, 2) @ np.abs(qh))
            for name, g, w, b in (("dq", got[0], want[0], dq_bound), ("dk", got[1], want[1], dk_bound)):
                error = np.abs(g.get() - w)
                limit = b + 1e-4 * np.abs(w) + 1e-5            # plus version 3's float32 tolerance
                assert (error <= limit).all(), (name, shape, causal, dtype, error.max(), (error / limit).max())


def test_tensor_cores_refuse_what_they_cannot_run(monkeypatch):
    q, k, v = make(1, 8, 2, 16)
    half = [x.astype(np.float16) for x in (q, k, v)]
    bits = [fp16.to_bfloat16_bits_reference(x) for x in (q, k, v)]
    with pytest.raises(TypeError, match=r"version 4 takes float16 or bfloat16, not float32 "
                                        r"\(float32 is for versions 1, 2 and 3\).* version 3 for float32"):
        A.attention(q, k, v, heads=2, version=4)
    with pytest.raises(ValueError, match="head_dim = 8, .* one of 16, 32, 48, 64 .version 3 takes any"):
        A.attention(*half, heads=4, version=4)
    with pytest.raises(TypeError, match="q is uint16; if it holds bfloat16 bit patterns, pass dtype='bfloat16'"):
        A.attention(*bits, heads=2, version=4)
    with pytest.raises(TypeError, match=r"version 3 takes float32 or float16, not bfloat16 "
                                        r"\(bfloat16 is for version 4\)"):
        A.attention(*bits, heads=2, version=3, dtype="bfloat16")
    with pytest.raises(ValueError, match="dtype='float64'.* dtype='bfloat16'"):
        A.attention(*half, heads=2, version=4, dtype="float64")
    with pytest.raises(TypeError, match=r"k has dtype float16.* ops.fp16.to_bfloat16_bits_reference\(k\)"):
        A.attention(bits[0], half[1], half[2], heads=2, version=4, dtype="bfloat16")
    # a view 8 bytes into its allocation: cp.async's 16-byte copies and the 16-byte stores cannot start there
    flat = backend.gpuarray.to_gpu(np.zeros(8 * 32 + 4, np.float16))
    view = flat[4:].reshape(1, 8, 32)
    with pytest.raises(ValueError, match="q starts at an address that is 8 bytes past a multiple of 16"):
        A.attention(view, half[1], half[2], heads=2, version=4)
    if backend.name == "cpu":       # a GPU before Ampere: no mma m16n8k16, no cp.async
        device = backend.driver.Context.get_device()
        monkeypatch.setattr(type(device), "compute_capability", lambda self: (7, 5))
        with pytest.raises(RuntimeError, match="compute capability 8.0 or later .* this one is 7.5: use version 3"):
            A.attention(*half, heads=2, version=4)


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
    for version in A.FLOAT32_VERSIONS:
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
        for version in A.FLOAT32_VERSIONS:
            A.attention(q, k, v, heads=2, causal=causal, version=version)
        out, lse = A.attention(q, k, v, heads=2, causal=causal, return_lse=True)
        A.attention_backward(dout, q, k, v, out, lse, heads=2, causal=causal)
    assert mc.errors == []


@pytest.mark.parametrize("causal", [False, True])
def test_the_tensor_core_pipeline_has_no_races_and_stays_in_bounds(causal):
    # 70 rows: two key tiles, so tile 1 lands in the second buffer while tile 0 is used; the warps' writes and
    # reads of shared memory (O staged in Qs, the fragments' rows) are ordered by barriers; rows past N are
    # zero-filled copies, never read from beyond the arrays (memcheck). A stage read before its wait_group
    # reads stale data: the value tests above see it (NaN or far off)
    if backend.name != "cpu":
        pytest.skip("racecheck and memcheck are the emulator's")
    q, k, v = (x.astype(np.float16) for x in make(1, 70, 2, 16, seed=19))
    bits = [fp16.to_bfloat16_bits_reference(x.astype(np.float32)) for x in (q, k, v)]
    with gpuedu.racecheck() as rc:
        A.attention(q, k, v, heads=2, causal=causal, version=4, return_lse=True)
        A.attention(*bits, heads=2, causal=causal, version=4, dtype="bfloat16")
    assert rc.hazards == []
    with gpuedu.memcheck() as mc:
        A.attention(q, k, v, heads=2, causal=causal, version=4, return_lse=True)
        A.attention(*bits, heads=2, causal=causal, version=4, dtype="bfloat16")
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
    with pytest.raises(ValueError, match="versions 1, 2, 3, 4"):
        A.attention(q, k, v, heads=2, version=5)
    with pytest.raises(ValueError, match="only versions 3 and 4"):
        A.attention(q, k, v, heads=2, version=1, return_lse=True)
    with pytest.raises(ValueError, match="positive integer"):
        A.attention(q, k, v, heads=0)
    with pytest.raises(TypeError, match=r"version 2 takes float32, not float16 \(float16 is for versions 3 and 4\)"):
        A.attention(q.astype(np.float16), k.astype(np.float16), v.astype(np.float16), heads=2, version=2)
    with pytest.raises(TypeError, match="k has dtype float32"):
        A.attention(q.astype(np.float16), k, v, heads=2)
    out, lse = A.attention(q, k, v, heads=2, return_lse=True)
    half = [x.astype(np.float16) for x in (q, k, v)]
    with pytest.raises(TypeError, match="dout is float16: the 16-bit kernels .* are forward only"):
        A.attention_backward(half[0], *half, out.get().astype(np.float16), lse, heads=2)
    with pytest.raises(TypeError, match="out is float16"):      # a 16-bit forward's output, not converted
        A.attention_backward(q, q, k, v, out.get().astype(np.float16), lse, heads=2)
    with pytest.raises(ValueError, match=r"lse has shape"):
        A.attention_backward(q, q, k, v, out, lse.get().reshape(1, 8, 2), heads=2)


def test_the_families_names_are_gathered():
    assert ops.ATTENTION_VERSIONS == A.VERSIONS == (1, 2, 3, 4)
    assert A.FLOAT32_VERSIONS == (1, 2, 3) and A.MMA_HEAD_DIMS == (16, 32, 48, 64)
    assert ops.attention is A
    assert A.attention_flops(2, 10, 3, 8) == 4 * 2 * 3 * 100 * 8
    assert A.attention_flops(1, 4, 1, 2, causal=True) == 4 * 10 * 2
