"""FP16 kernels against numpy.float16: conversions and elementwise ops bit for bit, GEMMs within
a bound derived from FP32 accumulation, and bad input refused with a clear message."""
import numpy as np
import pytest

import gpuedu
from gpuedu.ops import fp16

backend = gpuedu.setup(verbose=False)
ga = backend.gpuarray


def bits(a):
    return np.asarray(a).view(np.uint16)


def special_floats(rng):
    """float32 inputs that probe every branch of float -> half: all 65,536 halves widened, every
    halfway point between neighbouring halves (ties) and its two float neighbours, overflow,
    subnormals, underflow, signed zeros, Inf and NaN, plus random bit patterns."""
    halves = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = np.sort(halves[np.isfinite(halves)].astype(np.float64))
    finite = np.unique(finite)
    mids = ((finite[:-1] + finite[1:]) / 2).astype(np.float32)      # exact in float32
    near = np.concatenate([np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))])
    edges = np.array([65504, 65519.996, 65520, 65536, 1e10, 2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001,
                      2.0 ** -26, 1e-30, 0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
    random_bits = rng.integers(0, 2 ** 32, 20_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([halves.astype(np.float32), mids, near, edges, -edges, random_bits])


@pytest.fixture(scope="module")
def floats():
    return special_floats(np.random.default_rng(0))


def test_float_to_half_is_bit_exact_with_numpy(floats):
    got = fp16.to_half(floats).get()
    expected = fp16.to_half_reference(floats)
    nan = np.isnan(floats)
    assert np.array_equal(bits(got)[~nan], bits(expected)[~nan])
    assert np.isnan(got[nan]).all()           # a GPU returns its own canonical NaN: only NaN-ness is fixed


def test_hand_written_conversion_matches_numpy_bits_including_nan(floats):
    got = fp16.to_half_bits(floats).get()
    assert got.dtype == np.uint16
    mismatch = np.flatnonzero(got != fp16.to_half_bits_reference(floats))
    assert mismatch.size == 0, (f"{mismatch.size} wrong, first: {floats[mismatch[0]]!r} -> "
                                f"{got[mismatch[0]]:#06x}, numpy {fp16.to_half_bits_reference(floats)[mismatch[0]]:#06x}")


def test_half_to_float_is_exact_for_every_half():
    halves = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    got = fp16.to_float(halves).get()
    expected = halves.astype(np.float32)
    nan = np.isnan(expected)
    assert np.array_equal(got[~nan].view(np.uint32), expected[~nan].view(np.uint32))
    assert np.isnan(got[nan]).all()


def halves(rng, n, scale=4.0):
    return (rng.standard_normal(n) * scale).astype(np.float16)


def test_bfloat16_patterns_are_the_nearest_with_ties_to_even_and_widen_exactly(floats):
    # bfloat16 (version 4 of ops.attention takes it) as uint16 patterns: each float goes to the nearer of the
    # two bfloat16s around it (its upper half as it is, and that plus one), a tie to the even pattern, in
    # float64; every NaN to 0x7FFF; past the largest finite bfloat16 (by half a gap or more) to Inf.
    x = floats[np.isfinite(floats)]
    got = fp16.to_bfloat16_bits_reference(x)
    low = (x.view(np.uint32) >> 16).astype(np.uint16)
    below = fp16.bfloat16_bits_to_float(low).astype(np.float64)
    above = fp16.bfloat16_bits_to_float(low + np.uint16(1)).astype(np.float64)     # may be Inf: never nearer
    gap_low, gap_high = np.abs(x - below), np.abs(above - x)
    nearest = np.where(gap_low < gap_high, low, np.where(gap_high < gap_low, low + 1, np.where(low % 2, low + 1, low)))
    np.testing.assert_array_equal(got, nearest.astype(np.uint16))
    assert (gap_low == gap_high).sum() > 1000                                          # ties were tried
    assert fp16.to_bfloat16_bits_reference(np.array([np.nan, -np.nan, np.inf, 3.4e38], np.float32)).tolist() == [
        0x7FFF, 0x7FFF, 0x7F80, 0x7F80]
    patterns = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16)
    wide = fp16.bfloat16_bits_to_float(patterns)
    assert wide.dtype == np.float32 and (wide.view(np.uint32) == patterns.astype(np.uint32) << 16).all()
    finite = np.isfinite(wide)
    np.testing.assert_array_equal(fp16.to_bfloat16_bits_reference(wide[finite]), patterns[finite])   # a round trip
    with pytest.raises(TypeError, match="bfloat16 bit patterns are uint16, got float32"):
        fp16.bfloat16_bits_to_float(wide)


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("n", [1, 2, 255, 512, 513, 3001])
def test_axpy_is_bit_exact(version, n):
    rng = np.random.default_rng(n)
    x, y = halves(rng, n), halves(rng, n)
    a = 0.3                                   # not a half: the kernel rounds it like the reference
    y_dev = ga.to_gpu(y)
    fp16.axpy(a, x, y_dev, version=version)
    assert np.array_equal(bits(y_dev.get()), bits(fp16.axpy_reference(a, x, y)))


def test_axpy_overflows_to_inf_like_the_hardware():
    x = np.array([60000, -60000, 1], np.float16)
    y = np.array([60000, -60000, 1], np.float16)
    y_dev = ga.to_gpu(y)
    fp16.axpy(1.0, x, y_dev)
    assert np.array_equal(y_dev.get(), np.array([np.inf, -np.inf, 2], np.float16))


@pytest.mark.parametrize("n", [1, 7, 256, 1001])
def test_relu_and_its_backward_are_bit_exact(n):
    rng = np.random.default_rng(n)
    z, dy = halves(rng, n), halves(rng, n)
    z[::5] = 0                                # ReLU'(0) is taken as 0
    assert np.array_equal(bits(fp16.relu(z).get()), bits(fp16.relu_reference(z)))
    assert np.array_equal(bits(fp16.relu_backward(dy, z).get()), bits(fp16.relu_backward_reference(dy, z)))


def test_relu_backward_does_not_turn_inf_into_nan_where_the_unit_was_off():
    dy = np.array([np.inf, -np.inf, 3], np.float16)
    z = np.array([-1, 2, -4], np.float16)
    assert np.array_equal(fp16.relu_backward(dy, z).get(), np.array([0, -np.inf, 0], np.float16))


@pytest.mark.parametrize("rows, cols", [(1, 1), (3, 5), (8, 16), (7, 33)])
def test_bias_add_is_bit_exact_also_when_pairs_straddle_rows(rows, cols):
    rng = np.random.default_rng(rows * cols)
    x, b = halves(rng, rows * cols).reshape(rows, cols), halves(rng, cols)
    assert np.array_equal(bits(fp16.bias_add(x, b).get()), bits(fp16.bias_add_reference(x, b)))
    x_dev = ga.to_gpu(x)
    fp16.bias_add(x_dev, b, out=x_dev)         # in place, as the layers use it
    assert np.array_equal(bits(x_dev.get()), bits(fp16.bias_add_reference(x, b)))


GEMM_SHAPES = [(1, 1, 1), (5, 3, 7), (64, 64, 16), (65, 70, 33), (17, 129, 80)]


@pytest.mark.parametrize("m, n, k", GEMM_SHAPES)
@pytest.mark.parametrize("version", [2, 3])
def test_gemm_with_fp32_sums_is_within_the_bound(m, n, k, version):
    rng = np.random.default_rng(m + n + k)
    a, b = halves(rng, m * k, 1.0).reshape(m, k), halves(rng, k * n, 1.0).reshape(k, n)
    got = fp16.matmul(a, b, alpha=0.5, version=version).get().astype(np.float64)
    exact = fp16.matmul_reference(a, b, alpha=0.5, out_dtype=np.float64)
    assert np.all(np.abs(got - exact) <= fp16.matmul_tolerance(a, b, alpha=0.5))


@pytest.mark.parametrize("transpose_a, transpose_b", [(True, False), (False, True), (True, True)])
def test_gemm_reads_transposed_operands_through_strides(transpose_a, transpose_b):
    rng = np.random.default_rng(3)
    m, n, k = 37, 21, 45
    a, b = halves(rng, m * k, 1.0).reshape(m, k), halves(rng, k * n, 1.0).reshape(k, n)
    a_stored = np.ascontiguousarray(a.T) if transpose_a else a
    b_stored = np.ascontiguousarray(b.T) if transpose_b else b
    got = fp16.matmul(a_stored, b_stored, transpose_a=transpose_a, transpose_b=transpose_b).get()
    exact = fp16.matmul_reference(a, b, out_dtype=np.float64)
    assert np.all(np.abs(got.astype(np.float64) - exact) <= fp16.matmul_tolerance(a, b))


def test_gemm_float32_output_keeps_what_half_would_round_away():
    rng = np.random.default_rng(4)
    a, b = halves(rng, 30 * 50, 1.0).reshape(30, 50), halves(rng, 50 * 20, 1.0).reshape(50, 20)
    got = fp16.matmul(a, b, out_dtype=np.float32).get()
    assert got.dtype == np.float32
    exact = fp16.matmul_reference(a, b, out_dtype=np.float64)
    bound = fp16.matmul_tolerance(a, b, out_dtype=np.float32)
    assert np.all(np.abs(got - exact) <= bound)
    # and it is much closer than any float16 result can be
    assert np.max(np.abs(got - exact)) < 0.1 * np.max(np.abs(exact.astype(np.float16) - exact))


def test_half_accumulation_is_bit_exact_with_its_model_and_loses_the_small_terms():
    # 1 followed by 511 terms of 2**-11: that is exactly half an FP16 ulp of 1.0, so each 1 + 2**-11
    # is a tie and rounds to the even neighbour, 1.0: the FP16 running sum never moves.  FP32 keeps all.
    k = 512
    a = np.ones((1, k), np.float16)
    b = np.full((k, 1), 2.0 ** -11, np.float16)
    b[0, 0] = 1.0
    half_sum = fp16.matmul(a, b, version=1).get()
    assert np.array_equal(bits(half_sum), bits(fp16.matmul_half_accum_reference(a, b)))
    assert half_sum[0, 0] == 1.0                                    # 511 additions of 2**-11 lost
    float_sum = fp16.matmul(a, b, version=3, out_dtype=np.float32).get()
    assert float_sum[0, 0] == 1.0 + 511 * 2.0 ** -11
    # random data: the model matches the kernel bit for bit, and FP32 sums are more accurate
    rng = np.random.default_rng(5)
    a, b = halves(rng, 9 * 300, 1.0).reshape(9, 300), halves(rng, 300 * 11, 1.0).reshape(300, 11)
    got = fp16.matmul(a, b, version=1).get()
    assert np.array_equal(bits(got), bits(fp16.matmul_half_accum_reference(a, b)))
    exact = fp16.matmul_reference(a, b, out_dtype=np.float64)
    err_half = np.abs(got - exact).mean()
    err_fp32 = np.abs(fp16.matmul(a, b).get() - exact).mean()
    assert err_fp32 < err_half / 4


@pytest.mark.parametrize("call, error, message", [
    (lambda: fp16.to_half(np.zeros(3, np.float64)), TypeError, "float32"),
    (lambda: fp16.to_float(np.zeros(3, np.float32)), TypeError, "float16"),
    (lambda: fp16.axpy(1.0, np.zeros(3, np.float16), np.zeros(3, np.float16)), TypeError, "in place"),
    (lambda: fp16.axpy(1.0, np.zeros(3, np.float16), ga.to_gpu(np.zeros(4, np.float16))), ValueError, "same shape"),
    (lambda: fp16.axpy(1.0, np.zeros(2, np.float16), ga.to_gpu(np.zeros(2, np.float16)), version=3), ValueError,
     "version"),
    (lambda: fp16.bias_add(np.zeros((2, 3), np.float16), np.zeros(4, np.float16)), ValueError, "columns"),
    (lambda: fp16.matmul(np.zeros((2, 3), np.float16), np.zeros((4, 2), np.float16)), ValueError,
     "inner dimensions"),
    (lambda: fp16.matmul(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float16)), TypeError, "float16"),
    (lambda: fp16.matmul(np.zeros((2, 3), np.float16), np.zeros((3, 2), np.float16), version="fast"),
     ValueError, "unknown GEMM version"),
    (lambda: fp16.matmul(np.zeros((2, 3), np.float16), np.zeros((3, 2), np.float16), version=2,
                        out_dtype=np.float32), ValueError, "tiled"),
    (lambda: fp16.relu([1.0, 2.0]), TypeError, r"x has dtype float64; the kernel takes float16: pass x.astype"),
    (lambda: fp16.relu("x"), TypeError, "GPUArray or a NumPy array"),
    (lambda: fp16.relu(np.zeros(4, np.float16), out=ga.to_gpu(np.zeros(5, np.float16))), ValueError, "shape"),
])
def test_bad_input_is_refused_with_a_message_that_says_what_to_do(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_gemm_versions_are_numbers_and_a_name_is_refused_with_the_ladder():
    a, b = np.ones((2, 8), np.float16), np.ones((8, 8), np.float16)   # (K, N multiples of 8: 11-13's tensor maps)
    assert sorted(fp16.GEMM_VERSIONS) == list(range(1, 14))
    for version in fp16.GEMM_VERSIONS:
        np.testing.assert_array_equal(fp16.matmul(a, b, version=version).get(), np.full((2, 8), 8, np.float16))
    with pytest.raises(ValueError, match=r"unknown GEMM version 'tiled'; the versions are numbers: 1: FP16 running "
                                         r"sums .*3: shared-memory tiles"):
        fp16.matmul(a, b, version="tiled")
