"""Lesson 03's exercises: each check fails plausible wrong kernels, saying what is wrong (that every
solution passes and every stub fails is tested for all exercises in test_exercises_framework_runs.py)."""
import pytest

import gpuedu
from gpuedu import exercises
from exercise_helpers import check_quietly as _check, mutate as _without

gpuedu.setup(verbose=False)

# A missing barrier is a race and an early return before a shuffle is undefined behaviour: the emulator
# exposes both every time (reversed thread order, shared memory poisoned before each block, lanes counted
# at each warp intrinsic), while on a GPU the wrong kernel may happen to compute the right sums.
emulator_only = pytest.mark.skipif(
    gpuedu.backend.active().name != "cpu",
    reason="races and undefined behaviour are not guaranteed to show on a GPU; the emulator exposes them every time")


BLOCK_SUM = exercises.get("03.block_sum").solution


def test_block_sum_missing_guard_reads_past_the_end():
    wrong = _without(BLOCK_SUM, "partial[tid] = (i < n) ? x[i] : 0.0f;", "partial[tid] = x[i];")
    result = _check("03.block_sum", wrong)
    assert not result.passed
    assert "NaN" in result.report() or "past n" in result.report()


@emulator_only
def test_block_sum_missing_barrier_in_the_tree_is_a_race():
    wrong = BLOCK_SUM.replace("            partial[tid] += partial[tid + s];\n        __syncthreads();",
                              "            partial[tid] += partial[tid + s];\n")
    assert wrong != BLOCK_SUM
    result = _check("03.block_sum", wrong)
    assert not result.passed
    assert "__syncthreads" in result.report()


def test_block_sum_tree_stopping_early_is_named():
    wrong = _without(BLOCK_SUM, "s > 0;", "s > 1;")
    result = _check("03.block_sum", wrong)
    assert not result.passed
    assert "one step early" in result.report()


WARP_SUM = exercises.get("03.warp_sum").solution


def test_warp_sum_missing_last_shuffle_step():
    wrong = _without(WARP_SUM, "offset > 0;", "offset > 1;")
    result = _check("03.warp_sum", wrong)
    assert not result.passed
    assert "offset = 1" in result.report()


def test_warp_sum_empty_warps_writing_past_out():
    wrong = _without(WARP_SUM, "if (lane == 0 && warp * 32 < n)", "if (lane == 0)")
    result = _check("03.warp_sum", wrong)
    assert not result.passed
    assert result.failure.kind == "out_of_bounds"


def test_warp_sum_reading_past_n():
    wrong = _without(WARP_SUM, "float v = (i < n) ? x[i] : 0.0f;", "float v = x[i];")
    assert not _check("03.warp_sum", wrong).passed


HISTOGRAM = exercises.get("03.histogram").solution


def test_histogram_missing_bounds_guard_counts_extra_values():
    wrong = _without(HISTOGRAM, "    if (i < n)\n        atomicAdd(&local[x[i]], 1u);",
                     "    atomicAdd(&local[x[i]], 1u);")
    result = _check("03.histogram", wrong)
    assert not result.passed
    assert "more values than there are" in result.report()


@emulator_only
def test_histogram_missing_barrier_before_merge():
    wrong = _without(HISTOGRAM, "    __syncthreads();                         // all counts are in", "    //")
    result = _check("03.histogram", wrong)
    assert not result.passed


@emulator_only
def test_histogram_missing_barrier_after_zeroing():
    wrong = _without(HISTOGRAM, "    __syncthreads();                         // all bins are zero", "    //")
    result = _check("03.histogram", wrong)
    assert not result.passed


@emulator_only
def test_histogram_racy_increment_in_shared_memory_is_named_by_racecheck():
    # Right values on the emulator (one thread after another), lost counts on a GPU: racecheck names it.
    wrong = _without(HISTOGRAM, "atomicAdd(&local[x[i]], 1u);", "local[x[i]]++;")
    line = next(k for k, text in enumerate(wrong.splitlines(), 1) if "local[x[i]]++" in text)
    result = _check("03.histogram", wrong)
    assert not result.passed and result.failure.kind == "race"
    message = result.failure.message
    assert "race on shared memory" in message and "gpuedu.racecheck()" in message
    assert "read-after-write" in message or "write-after-write" in message
    assert message.count("thread ") == 2 and message.count(f"line {line}") == 2
    assert "atomicAdd" in result.failure.hint


@emulator_only
def test_histogram_counting_straight_into_global_memory_is_refused():
    wrong = r"""
__global__ void histogram(unsigned int* hist, const unsigned char* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(&hist[x[i]], 1u);          // right counts, but no private bins
}
"""
    result = _check("03.histogram", wrong)
    assert not result.passed and result.failure.kind == "requirement", result.report()
    assert "smsp__sass_thread_inst_executed_op_shared_atom.sum = 0" in result.failure.message
    # atomicAdd(&hist[b], 1u); discards its result: a RED on the GPU, bounded with the ATOMs
    assert ("smsp__sass_thread_inst_executed_op_global_atom.sum + smsp__sass_thread_inst_executed_op_global_red.sum"
            in result.failure.hint)
    assert result.failure.case.startswith("n = 1 ") and result.failed_cases == [
        label.split(" (block=")[0] for label in result.cases]


@emulator_only
def test_histogram_solution_passes_racecheck_and_the_atomic_counts():
    result = _check("03.histogram", HISTOGRAM)
    assert result.passed, result.report()
    assert any("gpuedu.racecheck()" in note and "shared_atom" in note for note in result.notes)


@emulator_only
def test_warp_sum_lane_zero_looping_over_the_warp_is_refused():
    wrong = r"""
__global__ void warp_sum(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % 32;
    int warp = i / 32;
    if (lane == 0 && warp * 32 < n) {      // right sums, but 32 loads of one lane each
        float v = 0.0f;
        for (int j = 0; j < 32; j++)
            if (i + j < n) v += x[i + j];
        out[warp] = v;
    }
}
"""
    result = _check("03.warp_sum", wrong)
    assert not result.passed and result.failure.kind == "requirement", result.report()
    assert ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum + l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum + "
            "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum + l1tex__t_requests_pipe_lsu_mem_local_op_ld.sum = 32, where at most 4") in result.failure.message
    assert "issued 32 global read requests (loads, local loads, atomics and reductions)" in result.failure.hint


@emulator_only
def test_warp_sum_early_return_before_the_shuffle_is_refused():
    # lanes past n leave before __shfl_down_sync: undefined on a GPU, a named error on the emulator
    wrong = _without(WARP_SUM, "    float v = (i < n) ? x[i] : 0.0f;", "    if (i >= n) return;\n    float v = x[i];")
    result = _check("03.warp_sum", wrong)
    assert not result.passed
    assert "__shfl_down_sync" in result.report()
