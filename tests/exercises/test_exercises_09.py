"""Lesson 09's exercises beyond momentum (test_exercises_05_06_09_10.py): Adam, judged on its values and on its
counted loads and stores, and the batch size chosen from the step-time model. (Solutions passing and stubs failing
for every exercise: test_exercises_framework_runs.py.)"""
import pytest

import gpuedu
from exercise_helpers import check_quietly, mutate
from gpuedu import exercises
from gpuedu.exercises import lesson09

gpuedu.setup(verbose=False)

ADAM = "09.adam"
BATCH = "09.smallest_efficient_batch"

# Adam written the way the formula reads: every array read where it appears, after the stores
ADAM_AS_WRITTEN = r"""
__global__ void adam(float* w, float* m, float* v, const float* g, int n,
                     float lr, float beta1, float beta2, float eps, float c1, float c2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
    v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    w[i] -= lr * (m[i] * c1) / (sqrtf(v[i] * c2) + eps);
}
"""


def on_emulator():
    return gpuedu.setup(verbose=False).name == "cpu"


def adam_solution():
    return exercises.get(ADAM).solution


def test_the_adam_solution_passes_with_its_traffic_counted():
    result = check_quietly(ADAM, adam_solution())
    assert result, result.report()
    if on_emulator():
        assert any(" + ".join(lesson09.LOAD_REQUESTS) in note and " + ".join(lesson09.STORE_REQUESTS) in note
                   for note in result.notes)


def test_the_stub_is_told_it_wrote_nothing():
    result = check_quietly(ADAM, exercises.stub(ADAM))
    assert not result and result.kind == "untouched", result.report()


def test_reloading_after_a_store_gives_right_values_and_fails_the_load_count():
    if not on_emulator():
        pytest.skip("the counters exist on the emulator only")
    result = check_quietly(ADAM, ADAM_AS_WRITTEN)
    assert not result and result.kind == "requirement", result.report()
    assert " + ".join(lesson09.LOAD_REQUESTS) in result.failure.message and "__restrict__" in result.failure.hint


def test_restrict_pointers_let_the_compiler_keep_the_values():
    restricted = ADAM_AS_WRITTEN.replace("float* w, float* m, float* v, const float* g",
                                         "float* __restrict__ w, float* __restrict__ m, float* __restrict__ v, "
                                         "const float* __restrict__ g")
    result = check_quietly(ADAM, restricted)
    assert result, result.report()


def test_storing_twice_fails_the_store_count():
    if not on_emulator():
        pytest.skip("the counters exist on the emulator only")
    # m stored, then w read and v stored (either may be m's memory, so neither store can be dropped), m again
    twice = mutate(mutate(adam_solution(), "    v[i] = vi;\n", "    float wi = w[i];\n    v[i] = vi;\n    m[i] = mi;\n"),
                   "w[i] -= lr", "w[i] = wi - lr")
    result = check_quietly(ADAM, twice)
    assert not result and result.kind == "requirement", result.report()
    assert " + ".join(lesson09.STORE_REQUESTS) in result.failure.message and "store each array once" in \
        result.failure.hint


@pytest.mark.parametrize("old, new, words", [
    ("(mi * c1) / (sqrtf(vi * c2) + eps)", "mi / (sqrtf(vi) + eps)", "bias corrections are missing"),
    ("(mi * c1) / (sqrtf(vi * c2) + eps)", "(mi / c1) / (sqrtf(vi / c2) + eps)", "do not divide"),
    ("(1.0f - beta2) * gi * gi", "(1.0f - beta2) * gi", "not its square"),
    ("sqrtf(vi * c2) + eps", "sqrtf(vi * c2 + eps)", "outside the square root"),
    ("    v[i] = vi;\n", "", "store the new v"),
    ("(mi * c1) / (sqrtf(vi * c2) + eps)", "(m[i] * c1) / (sqrtf(v[i] * c2) + eps)", "old m and v"),
])
def test_each_typical_adam_mistake_gets_its_hint(old, new, words):
    wrong = mutate(adam_solution(), old, new)
    if "m[i] * c1" in new:    # the step reads m and v back before they are stored
        wrong = mutate(mutate(wrong, "    m[i] = mi;\n    v[i] = vi;\n"), "}\n", "    m[i] = mi;\n    v[i] = vi;\n}\n")
    result = check_quietly(ADAM, wrong)
    assert not result and words in result.failure.hint, result.report()


# ---- 09.smallest_efficient_batch -----------------------------------------------------------------------------

def batch_solution():
    return exercises.get(BATCH).solution


def test_the_batch_solution_passes_every_case():
    result = check_quietly(BATCH, batch_solution())
    assert result and len(result.cases) == 8, result.report()


def test_the_reference_solves_the_model():
    # 90% of the ceiling needs B >= 0.9 t0 / (0.1 t1) = 361 for the emulator's fit: 512 among the powers of two
    powers = [2 ** k for k in range(13)]
    assert lesson09.smallest_efficient_batch_reference(544e-6, 13.56e-6, 0.9, powers) == 512
    assert lesson09.smallest_efficient_batch_reference(544e-6, 13.56e-6, 0.5, powers) == 64
    assert lesson09.smallest_efficient_batch_reference(11 * 6.2e-6, 57e3 / 67e12, 0.5, powers) is None
    # the H200's two measured steps: t0 = 384 us, t1 = 0.214 us, so B* = 1,797 and half the ceiling needs 2048
    assert round(lesson09.H200_T0 * 1e6) == 384 and round(lesson09.H200_T1 * 1e9) == 214
    assert lesson09.smallest_efficient_batch_reference(lesson09.H200_T0, lesson09.H200_T1, 0.5, powers) == 2048


def test_no_random_case_sits_on_the_threshold():
    import numpy as np
    for label, kwargs in exercises.get(BATCH).cases(np.random.default_rng(0)):
        need = lesson09._threshold(kwargs["t0"], kwargs["t1"], kwargs["fraction"])
        assert all(abs(b / need - 1) > 0.01 for b in kwargs["batch_sizes"]), label


@pytest.mark.parametrize("old, new, words", [
    ("if batch / (t0 + batch * t1) >= fraction / t1:", "if batch >= t0 / t1:", "half of its ceiling"),
    ("if batch / (t0 + batch * t1) >= fraction / t1:",
     "if batch / (t0 + batch * t1) >= fraction * max(batch_sizes) / (t0 + max(batch_sizes) * t1):",
     "not the throughput of the largest batch"),
    ("for batch in sorted(batch_sizes):", "for batch in batch_sizes:", "need not be in order"),
    ("    for batch in sorted(batch_sizes):",
     "    return fraction * t0 / ((1 - fraction) * t1)\n    for batch in sorted(batch_sizes):", "return one of batch_sizes"),
    ("    return None  ", "    return max(batch_sizes)  ", "return None"),
])
def test_each_typical_batch_mistake_gets_its_hint(old, new, words):
    result = check_quietly(BATCH, mutate(batch_solution(), old, new))
    assert not result and result.kind in ("wrong_values", "wrong_type"), result.report()   # the bound is a float
    assert words in result.failure.hint, result.report()
