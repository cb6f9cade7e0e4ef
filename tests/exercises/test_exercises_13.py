"""Lesson 13's exercise: right values are not enough, the loads must be coalesced."""
import pytest

import gpuedu
from gpuedu import exercises

EX = "13.bias_relu"


def test_the_solution_passes_with_its_loads_counted():
    result = exercises.check(EX, exercises.get(EX).solution, verbose=False)
    assert result, result.report()
    if gpuedu.setup(verbose=False).name == "cpu":
        assert any("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum" in note for note in result.notes)


def test_the_stub_fails():
    assert not exercises.check(EX, exercises.stub(EX), verbose=False)


def test_right_values_from_uncoalesced_loads_fail_the_requirement():
    if gpuedu.setup(verbose=False).name != "cpu":
        pytest.skip("the counters exist on the emulator only")
    # every element once, but numbered down the columns: a warp's 32 threads read 32 different rows
    transposed = r"""
__global__ void bias_relu(float* out, const float* x, const float* b, int rows, int cols) {
    int t = (blockIdx.y * gridDim.x + blockIdx.x) * (blockDim.x * blockDim.y) + threadIdx.y * blockDim.x + threadIdx.x;
    int r = t % rows, c = t / rows;
    if (c < cols)
        out[r * cols + c] = fmaxf(x[r * cols + c] + b[c], 0.0f);
}
"""
    result = exercises.check(EX, transposed, verbose=False)
    assert not result and result.kind == "requirement", result.report()
    assert "threadIdx.x to the column" in result.failure.hint


@pytest.mark.parametrize("wrong, words", [("fmaxf(x[r * cols + c], 0.0f)", "never added"),
                                          ("fmaxf(x[r * cols + c] + b[r], 0.0f)", "per row")])
def test_bias_mistakes_get_their_own_hint(wrong, words):
    source = exercises.get(EX).solution.replace("fmaxf(x[r * cols + c] + b[c], 0.0f)", wrong)
    result = exercises.check(EX, source, verbose=False)
    assert not result and words in result.failure.hint, result.report()
