"""Lesson 08's exercises: the stubs and typical mistakes fail their checks with a hint that names the mistake
(every solution passing: test_exercises_framework_runs.py), the BF16 spec rounds as bfloat16 must, and solution
and stub compile with nvcc as the checker wraps them."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import gpuedu
from gpuedu import exercises, kernels
from gpuedu.exercises import lesson08

gpuedu.setup(verbose=False)

IDS = ["08.wmma_tile", "08.float_to_bf16"]
WMMA = lesson08.WMMA_TILE_SOLUTION
BF16 = lesson08.FLOAT_TO_BF16_SOLUTION


def _wrong(exercise_id, source):
    result = exercises.check(exercise_id, source, verbose=False)
    assert not result, f"{exercise_id}: the mistake passed"
    return result.failure


@pytest.mark.parametrize("exercise_id", IDS)
def test_stub_is_reported_as_unwritten(exercise_id):
    failure = _wrong(exercise_id, exercises.get(exercise_id).stub)
    assert failure.kind == "untouched" and "never wrote" in failure.hint


# A plausible wrong WMMA kernel, and words its hint must contain.
WMMA_MISTAKES = {
    "one step along K": (WMMA.replace("k0 < K; k0 += 16", "k0 < 16; k0 += 16"), "only the first 16 terms"),
    "accumulator reset at every step": (
        WMMA.replace("        wmma::mma_sync(acc, a, b, acc);",
                     "        wmma::fill_fragment(acc, 0.0f);\n        wmma::mma_sync(acc, a, b, acc);"),
        "reset at every step"),
    "C stored column-major": (WMMA.replace("wmma::mem_row_major", "wmma::mem_col_major"), "transposed"),
    "B read as col_major": (WMMA.replace("matrix_b, 16, 16, 16, __half, wmma::row_major",
                                         "matrix_b, 16, 16, 16, __half, wmma::col_major"), "every tile of B"),
    "A read as col_major": (WMMA.replace("matrix_a, 16, 16, 16, __half, wmma::row_major",
                                         "matrix_a, 16, 16, 16, __half, wmma::col_major"), "every tile of A"),
    "every warp on the first tile": (WMMA.replace("const int row0 = 16 * blockIdx.y, col0 = 16 * blockIdx.x;",
                                                  "const int row0 = 0, col0 = 0;"), "16 * blockIdx.y"),
    "a leading dimension of 16": (WMMA.replace("A + row0 * K + k0, K);", "A + row0 * K + k0, 16);"),
                                  "leading dimension K"),
    "half the warp at mma_sync": (
        WMMA.replace("        wmma::mma_sync(acc, a, b, acc);", "        if (threadIdx.x < 16) wmma::mma_sync(acc, a, b, acc);"),
        "every lane the call names must reach it"),
}


@pytest.mark.parametrize("mistake", list(WMMA_MISTAKES))
def test_a_typical_wmma_mistake_gets_its_hint(mistake):
    source, words = WMMA_MISTAKES[mistake]
    assert source != WMMA, "the mistake was not written into the solution"
    assert words in _wrong("08.wmma_tile", source).hint


BF16_MISTAKES = {
    "truncation": (BF16.replace("    bits += 0x7fffu + ((bits >> 16) & 1u);", ""), "rounds toward zero"),
    "ties rounded up": (BF16.replace("bits += 0x7fffu + ((bits >> 16) & 1u);", "bits += 0x8000u;"), "ties go to"),
    "no test for NaN": (BF16.replace("if ((bits & 0x7fffffffu) > 0x7f800000u) {", "if (false) {"), "Test for NaN"),
}


@pytest.mark.parametrize("mistake", list(BF16_MISTAKES))
def test_a_typical_bf16_mistake_gets_its_hint(mistake):
    source, words = BF16_MISTAKES[mistake]
    assert source != BF16, "the mistake was not written into the solution"
    assert words in _wrong("08.float_to_bf16", source).hint


def test_the_nan_that_carries_into_the_sign_is_among_the_cases():
    # 0x7fffffff plus the rounding increment is 0x80007fff: without a NaN test it becomes -0.0.
    special = lesson08._special_values().view(np.uint32)
    assert 0x7FFFFFFF in special
    assert lesson08.float_to_bf16_spec(np.array([0x7FFFFFFF], np.uint32).view(np.float32), 1)[0] == 0x7FFF


def test_the_bf16_spec_picks_the_nearest_neighbour_with_ties_to_even():
    # Checked against the definition, in float64: of the two bfloat16s around x (x's upper 16 bits, and one
    # step further from zero), the spec's is the nearer; at a tie it is the one whose last bit is 0.
    rng = np.random.default_rng(0)
    bits = np.concatenate([rng.integers(0x00800000, 0x7F7F0000, 20000, dtype=np.uint64).astype(np.uint32),
                           lesson08._special_values().view(np.uint32)])
    x = bits.view(np.float32)
    finite = np.isfinite(x) & (np.abs(x) < np.float32(3.38e38))      # the top binade rounds to Inf, tested below
    x, bits = x[finite], bits[finite]
    got = lesson08.float_to_bf16_spec(x, x.size).astype(np.uint32)
    low = bits >> 16
    below, above = [(b << 16).view(np.float32).astype(np.float64) for b in (low, low + 1)]
    distance_low, distance_high = np.abs(x - below), np.abs(above - x)
    nearer = np.where(distance_low < distance_high, low, low + 1)
    tie = distance_low == distance_high
    nearer[tie] = np.where(low[tie] % 2 == 0, low[tie], low[tie] + 1)
    np.testing.assert_array_equal(got, nearer)
    largest = np.array([0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F7FFF], np.uint32).view(np.float32)
    assert lesson08.float_to_bf16_spec(largest, 3).tolist() == [0x7F80, 0xFF80, 0x7F7F]   # past bf16's max: Inf


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("exercise_id", IDS)
@pytest.mark.parametrize("which", ["solution", "stub"])
def test_sources_compile_with_nvcc_as_the_checker_wraps_them(exercise_id, which, tmp_path):
    ex = exercises.get(exercise_id)
    source = getattr(ex, which)
    path = tmp_path / "exercise.cu"
    path.write_text(source if ex.no_extern_c else 'extern "C" {\n' + source + "\n}\n")
    for arch in ("sm_75", "sm_90"):        # WMMA needs sm_70 or later
        proc = subprocess.run(["nvcc", "-cubin", f"-arch={arch}", *ex.options, "-I", kernels.DIR,
                               "-o", os.fspath(tmp_path / "k.cubin"), os.fspath(path)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
