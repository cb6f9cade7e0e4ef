"""Lesson 04's exercises: each check fails plausible wrong kernels (that every solution passes and every
stub fails is tested for all exercises in test_exercises_framework_runs.py)."""
import pytest

import gpuedu
from gpuedu import exercises
from exercise_helpers import check_quietly as _check, mutate as _without

gpuedu.setup(verbose=False)

# Load requests are counted by the emulator only; on a GPU the tiled check judges the values alone.
emulator_only = pytest.mark.skipif(gpuedu.backend.active().name != "cpu",
                                   reason="the counters of a launch are counted on the emulator only")


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


@pytest.mark.skipif(gpuedu.backend.active().name != "cpu",
                    reason="racecheck is the emulator's: on a GPU a missing barrier may or may not change the values")
def test_tiled_missing_second_barrier_is_a_race():
    wrong = _without(TILED, "        __syncthreads();                  // all reads done", "        //")
    result = _check("04.matmul_tiled", wrong)
    assert not result.passed
    assert "__syncthreads" in result.report()


def test_tiled_early_return_skips_the_barriers():
    wrong = _without(TILED, "    float acc = 0.0f;\n", "    float acc = 0.0f;\n    if (row >= M || col >= N) return;\n")
    assert not _check("04.matmul_tiled", wrong).passed


# The bound on global reads: plain loads, atomics and reductions together.
LOADS = " + ".join([f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum" for op in ("ld", "atom", "red")]
                   + ["l1tex__t_requests_pipe_lsu_mem_local_op_ld.sum"])
NAIVE_AS_TILED = NAIVE.replace("matmul_naive", "matmul_tiled")
# The naive product that also reads a zero from shared memory for every k, so that its shared-memory loads are
# those of a tiled kernel: only its global reads give it away.
NAIVE_WITH_SHARED_DECOY = NAIVE_AS_TILED.replace(
    "    if (row < M && col < N) {",
    "    __shared__ float zero[16];\n    if (threadIdx.y == 0) zero[threadIdx.x] = 0.0f;\n    __syncthreads();\n"
    "    if (row < M && col < N) {").replace(
    "acc += A[row * K + k] * B[k * N + col];", "acc += A[row * K + k] * B[k * N + col] + zero[k % 16];")

# Tiled, but every thread loads from a clamped index and masks the value: each warp issues exactly one
# load of A and one of B per tile, the most a tiled kernel issues.
TILED_UNPREDICATED = _without(_without(
    TILED, "(row < M && k + tx < K) ? A[row * K + k + tx] : 0.0f;",
    "A[min(row, M - 1) * K + min(k + tx, K - 1)] * (row < M && k + tx < K ? 1.0f : 0.0f);"),
    "(k + ty < K && col < N) ? B[(k + ty) * N + col] : 0.0f;",
    "B[min(k + ty, K - 1) * N + min(col, N - 1)] * (k + ty < K && col < N ? 1.0f : 0.0f);")


@emulator_only
def test_tiled_check_refuses_a_correct_naive_kernel_without_shared_memory_by_its_tile_reads():
    result = _check("04.matmul_tiled", NAIVE_AS_TILED)
    assert not result.passed and result.failure.kind == "requirement", result.report()
    assert "smsp__sass_inst_executed_op_shared_ld.sum = 0, where at least 1 is expected" in result.failure.message
    assert "read the A and B tiles from shared memory" in result.failure.hint


@emulator_only
def test_tiled_check_refuses_a_correct_naive_kernel_by_its_load_requests():
    result = _check("04.matmul_tiled", NAIVE_WITH_SHARED_DECOY)
    assert not result.passed and result.failure.kind == "requirement", result.report()
    assert f"{LOADS} = 256, where at most 16 is expected" in result.failure.message   # M = N = K = 16
    assert ("your kernel issued 256 global read requests (loads, local loads, atomics and reductions); a 16x16-tiled kernel "
            "issues at most 16 "
            f"here, the naive one 256") in result.failure.hint
    assert "once per tile, not once per multiply" in result.failure.hint


@emulator_only
def test_tiled_check_accepts_tiled_kernels_that_load_unconditionally():
    assert _check("04.matmul_tiled", TILED_UNPREDICATED).passed


@emulator_only
def test_load_request_formulas_are_what_the_counters_count():
    # The bound and the hint's naive figure are formulas: check them against the profiler on every case.
    from gpuedu.exercises import _runner, lesson04
    tiled = exercises.get("04.matmul_tiled")
    kernels = {"naive": _runner.compile_kernel(NAIVE_AS_TILED, "matmul_tiled"),
               "tiled": _runner.compile_kernel(TILED, "matmul_tiled"),
               "unpredicated": _runner.compile_kernel(TILED_UNPREDICATED, "matmul_tiled")}
    for case in tiled.make_cases(0):
        counted = {}
        for name, function in kernels.items():
            with gpuedu.profile() as prof:
                _runner.run_case(tiled, function, case, tiled.expected(case))
            counted[name] = sum(prof.kernels[-1].metrics[m] for m in lesson04.LOAD_REQUESTS)
        assert counted["naive"] == lesson04.naive_load_requests(case), case.label
        assert counted["unpredicated"] == lesson04.tiled_load_requests(case), case.label
        assert counted["tiled"] <= lesson04.tiled_load_requests(case), case.label


def test_a_naive_kernel_with_wrong_values_is_told_about_its_values_first():
    # The counters are read only once every case's values are right: the report stays about the values.
    wrong = _without(NAIVE_AS_TILED, "k < K;", "k < K - 1;")
    result = _check("04.matmul_tiled", wrong)
    assert not result.passed and result.failure.kind != "requirement"
    assert LOADS not in result.report()
