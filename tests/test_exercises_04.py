"""Lesson 04's exercises: each check fails plausible wrong kernels (that every solution passes and every
stub fails is tested for all exercises in test_exercises_framework_runs.py)."""
import gpuedu
from gpuedu import exercises
from exercise_helpers import check_quietly as _check, mutate as _without

gpuedu.setup(verbose=False)


NAIVE = exercises.get("04.matmul_naive").solution


def test_naive_without_column_guard_writes_out_of_bounds():
    wrong = _without(NAIVE, "if (row < M && col < N)", "if (row < M)")
    result = _check("04.matmul_naive", wrong)
    assert not result.passed
    assert result.failure.kind in ("out_of_bounds", "wrong_values", "launch_error")


def test_naive_without_any_guard():
    wrong = _without(NAIVE, "if (row < M && col < N)", "")
    result = _check("04.matmul_naive", wrong)
    assert not result.passed
    assert result.failure.kind in ("out_of_bounds", "launch_error")


def test_naive_with_swapped_operands_is_named():
    wrong = _without(NAIVE, "acc += A[row * K + k] * B[k * N + col];", "acc += B[row * K + k] * A[k * N + col];")
    result = _check("04.matmul_naive", wrong)
    assert not result.passed   # on non-square shapes the swapped indices also run out of bounds


def test_transposed_product_diagnosis_names_b_at_a():
    import numpy as np
    from gpuedu.exercises import Case, lesson04
    A = np.arange(9, dtype=np.float32).reshape(3, 3)
    B = np.eye(3, dtype=np.float32)[::-1].copy()
    case = Case("3 x 3", {"A": A, "B": B, "M": np.int32(3), "N": np.int32(3), "K": np.int32(3)},
                block=(16, 16, 1), grid=(1, 1))
    assert "B @ A" in lesson04._transposed_product(case, {"C": A @ B}, {"C": B @ A})
    assert lesson04._transposed_product(case, {"C": A @ B}, {"C": A @ B + 1}) is None


TILED = exercises.get("04.matmul_tiled").solution


def test_tiled_off_by_one_tile_count_is_named():
    wrong = _without(TILED, "t < (K + TILE - 1) / TILE;", "t < K / TILE;")
    result = _check("04.matmul_tiled", wrong)
    assert not result.passed
    assert "ceil_div(K, TILE)" in result.report()


def test_tiled_without_zero_fill_past_k():
    wrong = _without(TILED, "(row < M && k + tx < K) ? A[row * K + k + tx] : 0.0f;",
                     "(row < M) ? A[row * K + k + tx] : 0.0f;")
    assert not _check("04.matmul_tiled", wrong).passed


def test_tiled_missing_second_barrier_is_a_race():
    wrong = _without(TILED, "        __syncthreads();                  // all reads done", "        //")
    result = _check("04.matmul_tiled", wrong)
    assert not result.passed
    assert "__syncthreads" in result.report()


def test_tiled_early_return_skips_the_barriers():
    wrong = _without(TILED, "    float acc = 0.0f;\n", "    float acc = 0.0f;\n    if (row >= M || col >= N) return;\n")
    assert not _check("04.matmul_tiled", wrong).passed
