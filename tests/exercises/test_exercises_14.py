"""Lesson 14's exercises: the fused FP16 attention kernel, whose global stores the profiler counts (a kernel that
keeps the N x N scores in global memory gets the right values and is refused), and the napkin formula of the
bytes each attention version stores."""
import numpy as np
import pytest

import gpuedu
from exercise_helpers import check_quietly, mutate
from gpuedu import exercises
from gpuedu.exercises import lesson14
from gpuedu.ops import attention as A

EX = "14.fused_attention"
SOLUTION = exercises.get(EX).solution if exercises.get(EX) else None
ON_EMULATOR = gpuedu.setup(verbose=False).name == "cpu"

# Version 1 of the lesson in one launch: every score of a row stored to scratch, read back for the softmax and
# for P V. Right values, and an N x N matrix in global memory.
NAIVE = r"""
#include <cuda_fp16.h>
#define D 16

extern "C" __global__ void fused_attention(__half* O, float* scratch, const __half* Q, const __half* K,
                                           const __half* V, int N, float scale, int causal) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float* s = scratch + (size_t)i * N;
    int keys = causal ? i + 1 : N;
    float m = -INFINITY;
    for (int j = 0; j < keys; j++) {
        float dot = 0.0f;
        for (int c = 0; c < D; c++) dot += __half2float(Q[i * D + c]) * __half2float(K[j * D + c]);
        s[j] = dot * scale;
        m = fmaxf(m, s[j]);
    }
    float l = 0.0f;
    for (int j = 0; j < keys; j++) { s[j] = expf(s[j] - m); l += s[j]; }
    for (int c = 0; c < D; c++) {
        float acc = 0.0f;
        for (int j = 0; j < keys; j++) acc += s[j] * __half2float(V[j * D + c]);
        O[i * D + c] = __float2half_rn(acc / l);
    }
}
"""


def test_the_solution_passes_with_its_stores_counted():
    result = check_quietly(EX, SOLUTION)
    assert result, result.report()
    if ON_EMULATOR:
        assert any(" + ".join(lesson14.STORE_SECTORS) in note for note in result.notes), result.notes


def test_the_stub_fails():
    assert not check_quietly(EX, exercises.stub(EX))


def test_the_naive_kernel_gets_the_values_right_and_is_refused_for_its_n_by_n_stores():
    if not ON_EMULATOR:
        pytest.skip("the store counters exist on the emulator only")
    result = check_quietly(EX, NAIVE)
    assert not result and result.kind == "requirement", result.report()
    assert "scratch" in result.failure.hint and "running maximum" in result.failure.hint
    assert " + ".join(lesson14.STORE_SECTORS) in result.failure.message   # stores, atomics and reductions


def test_the_store_bound_is_what_o_alone_can_take_and_the_naive_kernel_exceeds_it_on_the_large_cases():
    cases = exercises.get(EX).make_cases()
    # each row of O one 32-byte sector, touched by the two 16-byte vectors its thread writes
    assert [lesson14.output_sectors(c) for c in cases] == [2 * int(c.inputs["N"]) for c in cases]
    large = [c for c in cases if int(c.inputs["N"]) > 8 * lesson14.HEAD]
    # an N x N float matrix, stored as densely as it can be (8 floats a sector), is still more than the bound
    assert large and all(int(c.inputs["N"]) ** 2 // 8 > lesson14.output_sectors(c) for c in large)


def test_the_workspace_may_be_written_but_an_input_may_not():
    ex = exercises.get(EX)
    assert ex.workspaces == ("scratch",)
    # writing into Q (an input) is still refused, though scratch may be written
    source = mutate(SOLUTION, "    float m = -INFINITY, l = 0.0f;",
                    "    float m = -INFINITY, l = 0.0f;\n    if (i == 0) ((__half*)Q)[0] = __float2half_rn(0.0f);")
    result = check_quietly(EX, source)
    assert not result and result.kind == "input_modified", result.report()
    with pytest.raises(ValueError, match="workspaces"):
        exercises.Exercise(**{**ex.__dict__, "id": "14.bad_workspace", "workspaces": ("O",)})


def test_the_reference_is_the_librarys_float64_attention_rounded_to_half():
    for case in exercises.get(EX).make_cases()[:4]:
        q, k, v = (case.inputs[n] for n in ("Q", "K", "V"))
        want = A.attention_reference(q[None], k[None], v[None], causal=bool(case.inputs["causal"]))[0]
        np.testing.assert_array_equal(lesson14.fused_attention_spec(**case.inputs), want.astype(np.float16))


@pytest.mark.parametrize("old, new, words", [
    ("* scale; o[c] = 0.0f;", "; o[c] = 0.0f;", "not scaled"),
    ("int keys = causal ? i + 1 : N;", "int keys = N;", "causal is ignored"),
    ("__floats2half2_rn(o[c] / l, o[c + 1] / l)", "__floats2half2_rn(o[c], o[c + 1])", "not normalised"),
    # the sums in half: each step rounded to FP16
    ("o[c] = o[c] * correction + p * __half2float(V[j * D + c]);",
     "o[c] = __half2float(__float2half_rn(o[c] * correction + p * __half2float(V[j * D + c])));", "FP16's tolerance"),
])
def test_each_mistake_gets_its_hint(old, new, words):
    result = check_quietly(EX, mutate(SOLUTION, old, new))
    assert not result and words in result.failure.hint, result.report()


def test_o_written_half_by_half_is_refused_with_how_to_write_it_as_vectors():
    """The lesson's kernels write O element by element: right values, 16 sectors a row where a row is one."""
    if not ON_EMULATOR:
        pytest.skip("the store counters exist on the emulator only")
    half_by_half = mutate(SOLUTION, SOLUTION[SOLUTION.index("    union {"):SOLUTION.rindex("}")],
                          "    for (int c = 0; c < D; c++) O[i * D + c] = __float2half_rn(o[c] / l);\n")
    result = check_quietly(EX, half_by_half)
    assert not result and result.kind == "requirement", result.report()
    assert "each thread writes its row of O half by half" in result.failure.hint
    assert "two 16-byte vectors" in result.failure.hint


def test_the_tolerance_is_fp16s_and_the_cases_cover_the_edges():
    ex = exercises.get(EX)
    assert ex.rtol == 2.0 ** -9 and ex.atol == 2.0 ** -11
    cases = ex.make_cases()
    sizes = [int(c.inputs["N"]) for c in cases]
    assert 1 in sizes and lesson14.ROWS in sizes and lesson14.ROWS + 1 in sizes
    assert {int(c.inputs["causal"]) for c in cases} == {0, 1}
    assert all(c.inputs[n].dtype == np.float16 for c in cases for n in ("Q", "K", "V"))


# ---- the napkin formula -------------------------------------------------------------------------------------

BYTES = "14.stored_bytes"


def test_the_bytes_solution_passes_and_the_stub_fails():
    assert check_quietly(BYTES, exercises.get(BYTES).solution)
    result = check_quietly(BYTES, exercises.stub(BYTES))
    assert not result and result.kind == "wrong_type" and "ended without returning a value" in result.failure.hint


def test_the_formula_is_what_the_profiler_counts():
    if not ON_EMULATOR:
        pytest.skip("the counters are the emulator's")
    backend = gpuedu.setup(verbose=False)
    batch, seq, heads, head_dim = 1, 40, 2, 16     # every array a whole number of 32-byte sectors
    rng = np.random.default_rng(0)
    q, k, v = (backend.gpuarray.to_gpu(rng.standard_normal((batch, seq, heads * head_dim)).astype(np.float32))
               for _ in range(3))
    for version in A.FLOAT32_VERSIONS:          # the exercise's formula is for float32 arrays
        with gpuedu.profile() as prof:
            A.attention(q, k, v, heads=heads, version=version, return_lse=version == 3)
        # global memory: the formula's bytes (version 3 also stores each key tile's scores to local memory,
        # its `float s[FLASH_KEYS]`, as nvcc places it: counted apart, not in the formula)
        counted = sum(32 * kern.metrics[name] for kern in prof.kernels for name in lesson14.STORE_SECTORS
                      if "_mem_global_" in name)
        assert counted == lesson14.stored_bytes_reference(version, batch, seq, heads, head_dim), version


@pytest.mark.parametrize("old, new, words", [
    ("out + 4 * problems * seq}", "out}", "log-sum-exp"),
    ("2 * matrix + out", "matrix + out", "two N x N matrices"),
    ("    return {", "    out, matrix = out // 4, matrix // 4\n    return {", "count of floats"),
    ("matrix = 4 * problems * seq * seq", "matrix = 4 * seq * seq", "problem of its own"),
])
def test_each_bytes_mistake_gets_its_hint(old, new, words):
    result = check_quietly(BYTES, mutate(exercises.get(BYTES).solution, old, new))
    assert not result and words in result.failure.hint, result.report()
