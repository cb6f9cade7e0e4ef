"""Lesson 06's exercises beyond the loss gradient (test_exercises_05_06_08_09.py): the accuracy counted on the device,
judged on its values and on its atomics, and the launches of an epoch, judged against the launches counted in real
training steps. (Solutions passing and stubs failing for every exercise: test_exercises_framework_runs.py.)"""
import pytest

import gpuedu
from exercise_helpers import check_quietly, mutate
from gpuedu import exercises
from gpuedu.exercises import lesson06

gpuedu.setup(verbose=False)

COUNT = "06.count_correct"
LAUNCHES = "06.launches_per_epoch"


def on_emulator():
    return gpuedu.setup(verbose=False).name == "cpu"


def count_solution():
    return exercises.get(COUNT).solution


def test_the_count_solution_passes_with_its_atomics_counted():
    result = check_quietly(COUNT, count_solution())
    assert result, result.report()
    if on_emulator():
        assert any(" + ".join(lesson06.GLOBAL_ATOMICS) in note for note in result.notes), result.notes


def test_the_stub_leaves_the_count_unchanged_and_is_told_so():
    result = check_quietly(COUNT, exercises.stub(COUNT))
    assert not result and result.kind == "untouched", result.report()


@pytest.mark.parametrize("old, new, words", [
    ("z[j] > z[best]", "z[j] >= z[best]", "the first class with the largest logit"),
    ("atomicAdd(correct, hits);", "*correct = hits;", "the count started again"),
    ("atomicAdd(correct, hits);", "atomicAdd(correct, 1);", "one per block"),
    ("    __syncthreads();                              // every hit", "    // every hit", "one per block"),
])
def test_each_typical_mistake_in_the_values_gets_its_hint(old, new, words):
    if "__syncthreads" in old and not on_emulator():
        pytest.skip("a missing barrier's wrong count is the emulator's thread order; a GPU's varies by run")
    result = check_quietly(COUNT, mutate(count_solution(), old, new))
    assert not result and result.kind == "wrong_values", result.report()
    assert words in result.failure.hint, result.report()


def test_one_atomic_per_correct_row_gives_right_values_and_fails_the_requirement():
    if not on_emulator():
        pytest.skip("the counters exist on the emulator only")
    per_row = mutate(mutate(count_solution(), "atomicAdd(&hits, 1);", "atomicAdd(correct, 1);"),
                     "atomicAdd(correct, hits);", ";")
    result = check_quietly(COUNT, per_row)
    assert not result and result.kind == "requirement", result.report()
    assert "count the block's hits in shared memory" in result.failure.hint


def test_a_plain_increment_of_the_shared_count_is_a_race_on_the_emulator():
    if not on_emulator():
        pytest.skip("racecheck exists on the emulator only")
    result = check_quietly(COUNT, mutate(count_solution(), "atomicAdd(&hits, 1);", "hits++;"))
    assert not result and result.kind == "race", result.report()
    assert "one update is lost" in result.failure.hint


def test_returning_early_past_the_batch_strands_the_barrier():
    if not on_emulator():
        pytest.skip("a GPU does not report a barrier some threads never reach")
    result = check_quietly(COUNT, mutate(count_solution(), "    if (b < rows) {", "    if (b >= rows) return;\n    {"))
    assert not result and result.kind == "launch_error", result.report()
    assert "every thread of the block must reach each __syncthreads()" in result.failure.hint


# ---- 06.launches_per_epoch -----------------------------------------------------------------------------------

def launches_solution():
    return exercises.get(LAUNCHES).solution


def test_the_reference_is_the_count_of_real_steps():
    # lesson 06's picture: 11 launches a step for 64-128-10, 45 steps of 1,438 images in batches of 32
    name = gpuedu.setup(verbose=False).name
    assert lesson06.counted_step_launches((64, 128, 10), 32, name) == 11
    assert lesson06.counted_step_launches((64, 128, 10), 30, name) == 11      # the last batch of 1,438
    assert lesson06.launches_per_epoch_reference([64, 128, 10], 1438, 32) == 495
    assert lesson06.counted_step_launches((64, 10), 32, name) == 6


def test_the_launch_solution_passes_every_case():
    result = check_quietly(LAUNCHES, launches_solution())
    assert result and len(result.cases) == 6, result.report()


@pytest.mark.parametrize("old, new, words", [
    ("-(-n_train // batch_size)", "n_train // batch_size", "the last, partial batch is a step too"),
    ("return per_step * steps", "return per_step", "one step's launches"),
    ("backward = 4 * layers - 1", "backward = 4 * layers", "no GEMM for dX"),
    ("backward = 4 * layers - 1", "backward = 3 * layers - 1", "two launches a layer"),
    ("+ 1 + backward + 1", "+ 1 + backward + 2 * layers", "one launch updates every parameter tensor"),
    ("forward = layers  ", "forward = 2 * layers - 1  ", "fused into the layer's forward GEMM"),
])
def test_each_miscount_gets_its_hint(old, new, words):
    result = check_quietly(LAUNCHES, mutate(launches_solution(), old, new))
    assert not result and result.kind == "wrong_values", result.report()
    assert words in result.failure.hint, result.report()


def test_the_stub_returns_nothing_and_fails():
    result = check_quietly(LAUNCHES, exercises.stub(LAUNCHES))
    assert not result and result.kind == "wrong_type" and "returned None" in result.failure.message
