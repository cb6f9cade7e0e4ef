"""Lesson 11's exercises: each check fails plausible wrong kernels and names the mistake where it can (that every
solution passes and every stub fails is tested for all exercises in test_exercises_framework_runs.py)."""
import gpuedu
from gpuedu import exercises
from exercise_helpers import check_quietly as _check, mutate as _without

gpuedu.setup(verbose=False)

CONV = exercises.get("11.conv_direct").solution
IM2COL = exercises.get("11.im2col").solution


def test_both_solutions_pass_and_both_stubs_fail():
    for eid in ("11.conv_direct", "11.im2col"):
        assert _check(eid, exercises.get(eid).solution).passed
        assert not _check(eid, exercises.get(eid).stub).passed


def test_conv_clamping_into_the_image_instead_of_padding_is_named():
    wrong = _without(CONV, "if (h < 0 || h >= H) continue;", "if (h < 0) h = 0; if (h >= H) h = H - 1;")
    result = _check("11.conv_direct", wrong)
    assert not result.passed and "halo" in result.report()


def test_conv_without_any_halo_guard_reads_out_of_bounds():
    wrong = _without(_without(CONV, "if (h < 0 || h >= H) continue;"), "if (col < 0 || col >= W) continue;")
    result = _check("11.conv_direct", wrong)
    assert not result.passed
    assert result.failure.kind in ("out_of_bounds", "wrong_values", "launch_error")


def test_conv_without_the_index_guard_writes_past_y():
    wrong = _without(CONV, "if (idx >= K * P * Q) return;")
    result = _check("11.conv_direct", wrong)
    assert not result.passed
    assert result.failure.kind in ("out_of_bounds", "launch_error")


def test_conv_ignoring_the_stride_is_named():
    wrong = _without(CONV, "int h = p * stride - pad + r;", "int h = p - pad + r;")
    wrong = _without(wrong, "int col = q * stride - pad + s;", "int col = q - pad + s;")
    result = _check("11.conv_direct", wrong)
    assert not result.passed and "stride is missing" in result.report()


def test_im2col_ignoring_the_stride_is_named():
    wrong = _without(IM2COL, "int h = p * stride - pad + r, w = q * stride - pad + s;",
                     "int h = p - pad + r, w = q - pad + s;")
    result = _check("11.im2col", wrong)
    assert not result.passed and "stride is missing" in result.report()


def test_im2col_transposed_is_named():
    wrong = _without(IM2COL, "cols[idx] =", "cols[col * (C * R * S) + row] =")
    result = _check("11.im2col", wrong)
    assert not result.passed and "transposed" in result.report()


def test_im2col_without_zero_padding_fails():
    wrong = _without(IM2COL, "(h >= 0 && h < H && w >= 0 && w < W) ? x[(c * H + h) * W + w] : 0.0f",
                     "x[(c * H + h) * W + w]")
    assert not _check("11.im2col", wrong).passed
