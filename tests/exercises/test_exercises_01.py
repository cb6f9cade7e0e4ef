"""Lesson 01's exercises: each check passes its solution and fails plausible wrong kernels, naming the cause."""
import pytest

from gpuedu import exercises
from exercise_helpers import check_printed as _check

RELU_NO_GUARD = r"""
__global__ void relu(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = fmaxf(x[i], 0.0f);
}
"""

RELU_THREAD_ONLY = r"""
__global__ void relu(float* out, const float* x, int n) {
    int i = threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i], 0.0f);
}
"""

RELU_OFF_BY_ONE_GUARD = r"""
__global__ void relu(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i] = fmaxf(x[i], 0.0f);
}
"""

RELU_SHIFTED = r"""
__global__ void relu(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n - 1) out[i] = fmaxf(x[i + 1], 0.0f);
    else if (i == n - 1) out[i] = 0.0f;
}
"""

RELU_NO_ACTIVATION = r"""
__global__ void relu(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i];
}
"""

SAXPY_NO_GUARD = r"""
__global__ void saxpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = a * x[i] + y[i];
}
"""

SAXPY_FORGOT_Y = r"""
__global__ void saxpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
"""

SAXPY_SWAPPED = r"""
__global__ void saxpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * y[i] + x[i];
}
"""

SCALE_NO_COL_GUARD = r"""
__global__ void scale_2d(float* out, const float* a, const float* s, int rows, int cols) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows) out[row * cols + col] = s[row] * a[row * cols + col];
}
"""

SCALE_BY_COLUMN = r"""
__global__ void scale_2d(float* out, const float* a, const float* s, int rows, int cols) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) out[row * cols + col] = s[col] * a[row * cols + col];
}
"""

SCALE_WRONG_PITCH = r"""
__global__ void scale_2d(float* out, const float* a, const float* s, int rows, int cols) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) out[row * rows + col] = s[row] * a[row * rows + col];
}
"""


@pytest.mark.parametrize("exercise_id", ["01.relu", "01.saxpy", "01.scale_2d"])
def test_solution_passes_every_case(exercise_id, capsys):
    result, out = _check(exercise_id, exercises.get(exercise_id).solution, capsys)
    assert result, out
    assert result.failure is None and len(result.cases) >= 5
    assert out.startswith(f"PASSED {exercise_id}")


@pytest.mark.parametrize("exercise_id", ["01.relu", "01.saxpy", "01.scale_2d"])
def test_stub_compiles_and_is_reported_as_never_written(exercise_id, capsys):
    result, out = _check(exercise_id, exercises.stub(exercise_id), capsys)
    assert not result
    assert result.kind == "untouched" and "never wrote" in out   # saxpy's y: still its input values
    assert "FILL ME IN" in out   # the note that the stub is unchanged


@pytest.mark.parametrize("exercise_id, source, kind, words", [
    ("01.relu", RELU_NO_GUARD, "out_of_bounds", ["past the end of `out`", "if (i < n)"]),
    ("01.relu", RELU_THREAD_ONLY, "untouched", ["blockIdx.x * blockDim.x + threadIdx.x"]),
    ("01.relu", RELU_OFF_BY_ONE_GUARD, "out_of_bounds", ["past the end of `out` (index 1;", "bounds check"]),
    ("01.relu", RELU_SHIFTED, "wrong_index", ["off by 1"]),
    ("01.relu", RELU_NO_ACTIVATION, "wrong_values", ["exact copy of x", "max(x[i], 0)"]),
    ("01.saxpy", SAXPY_NO_GUARD, "out_of_bounds", ["past the end of `y`"]),
    ("01.saxpy", SAXPY_FORGOT_Y, "wrong_values", ["adds the old y"]),
    ("01.saxpy", SAXPY_SWAPPED, "wrong_values", ["multiplies x, not y"]),
    ("01.scale_2d", SCALE_NO_COL_GUARD, "out_of_bounds", ["past the end of `out`", "check the row and the column"]),
    ("01.scale_2d", SCALE_BY_COLUMN, "wrong_values", ["belongs to the row, s[row]"]),
    ("01.scale_2d", SCALE_WRONG_PITCH, None, ["NOT YET"]),
])
def test_wrong_kernels_fail_with_the_right_cause(exercise_id, source, kind, words, capsys):
    result, out = _check(exercise_id, source, capsys)
    assert not result, out
    if kind is not None:
        assert result.kind == kind, out
    for word in words:
        assert word in out, out
    assert result.failed_cases, out


def test_wrong_pitch_fails_on_non_square_cases_only(capsys):
    result, out = _check("01.scale_2d", SCALE_WRONG_PITCH, capsys)
    assert not result
    failed = " | ".join(result.failed_cases)
    assert "wide" in failed and "tall" in failed and "large" in failed, failed
    # square matrices hide this bug (rows == cols)
    assert "1 x 1" not in failed and "16 x 16" not in failed and "17 x 17" not in failed, failed
