"""Lesson 02's exercises: each check passes its solution and fails plausible wrong kernels, naming the cause."""
import pytest

from gpuedu import exercises
from exercise_helpers import check_printed as _check

STRIDED_NO_STRIDE = r"""
__global__ void strided_read(float* out, const float* x, int stride, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i];
}
"""

STRIDED_NO_GUARD = r"""
__global__ void strided_read(float* out, const float* x, int stride, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = x[i * stride];
}
"""

STRIDED_WRITES_STRIDED = r"""
__global__ void strided_read(float* out, const float* x, int stride, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i * stride] = x[i * stride];
}
"""

GRID_STRIDE_NO_LOOP = r"""
__global__ void grid_stride_copy(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i];
}
"""

GRID_STRIDE_NO_GUARD = r"""
__global__ void grid_stride_copy(float* out, const float* x, int n) {
    int step = blockDim.x * gridDim.x;
    int rounds = (n + step - 1) / step;
    for (int r = 0; r < rounds; ++r) {
        int i = r * step + blockIdx.x * blockDim.x + threadIdx.x;
        out[i] = x[i];
    }
}
"""

GRID_STRIDE_FORGOT_BLOCK = r"""
__global__ void grid_stride_copy(float* out, const float* x, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        out[i] = x[i];
}
"""

GRID_STRIDE_BLOCK_STEP = r"""
__global__ void grid_stride_copy(float* out, const float* x, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x)
        out[i] = x[i];
}
"""

TRANSPOSE_COPY = r"""
__global__ void transpose_naive(float* out, const float* a, int rows, int cols) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) out[row * cols + col] = a[row * cols + col];
}
"""

TRANSPOSE_WRONG_PITCH = r"""
__global__ void transpose_naive(float* out, const float* a, int rows, int cols) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) out[col * cols + row] = a[row * cols + col];
}
"""

TRANSPOSE_ROW_GUARD_ONLY = r"""
__global__ void transpose_naive(float* out, const float* a, int rows, int cols) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows) out[col * rows + row] = a[row * cols + col];
}
"""

IDS = ["02.strided_read", "02.grid_stride_copy", "02.transpose_naive"]


@pytest.mark.parametrize("exercise_id", IDS)
def test_solution_passes_every_case(exercise_id, capsys):
    result, out = _check(exercise_id, exercises.get(exercise_id).solution, capsys)
    assert result, out
    assert len(result.cases) >= 5 and out.startswith(f"PASSED {exercise_id}")


@pytest.mark.parametrize("exercise_id", IDS)
def test_stub_is_reported_as_never_written(exercise_id, capsys):
    result, out = _check(exercise_id, exercises.stub(exercise_id), capsys)
    assert not result and result.kind == "untouched", out


@pytest.mark.parametrize("exercise_id, source, kind, words", [
    ("02.strided_read", STRIDED_NO_STRIDE, "wrong_values", ["read x[i * stride]"]),
    ("02.strided_read", STRIDED_NO_GUARD, "out_of_bounds", ["past the end of `out`", "if (i < n)"]),
    ("02.strided_read", STRIDED_WRITES_STRIDED, None, ["past the end", "bounds"]),  # beyond the padding too
    ("02.grid_stride_copy", GRID_STRIDE_NO_LOOP, "untouched", ["only the first 512 elements", "gridDim.x"]),
    ("02.grid_stride_copy", GRID_STRIDE_NO_GUARD, "out_of_bounds", ["past the end of `out`"]),
    ("02.grid_stride_copy", GRID_STRIDE_FORGOT_BLOCK, "untouched", ["must include the block"]),
    ("02.transpose_naive", TRANSPOSE_COPY, "wrong_values", ["plain copy of a", "col * rows + row"]),
    ("02.transpose_naive", TRANSPOSE_WRONG_PITCH, None, ["past the end", "bounds"]),  # far past: a fault
    ("02.transpose_naive", TRANSPOSE_ROW_GUARD_ONLY, None, ["NOT YET"]),
])
def test_wrong_kernels_fail_with_the_right_cause(exercise_id, source, kind, words, capsys):
    result, out = _check(exercise_id, source, capsys)
    assert not result, out
    if kind is not None:
        assert result.kind == kind, out
    for word in words:
        assert word in out, out


def test_a_redundant_but_right_loop_is_refused_by_its_sectors(capsys):
    # Every block copies everything from its start on: every element is right, and every round coalesced, but the
    # check bounds the sectors a copy of n floats takes (5 for every 32), which four blocks copying it all pass.
    result, out = _check("02.grid_stride_copy", GRID_STRIDE_BLOCK_STEP, capsys)
    assert not result and result.kind == "requirement", out
    assert "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum" in result.failure.message
