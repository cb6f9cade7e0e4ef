"""Lesson 07's exercises: the stubs and typical mistakes fail their checks (every solution passing:
test_exercises_framework_runs.py), and solution and stub compile with nvcc as they are (they include
cuda_fp16.h and declare their kernel extern "C" themselves)."""
import os
import shutil
import subprocess

import pytest

import gpuedu
from gpuedu import exercises, kernels
from gpuedu.exercises import lesson07

gpuedu.setup(verbose=False)

IDS = ["07.float_to_half", "07.half2_axpy"]


@pytest.mark.parametrize("exercise_id", IDS)
def test_stub_is_reported_as_unwritten_or_wrong(exercise_id):
    result = exercises.check(exercise_id, exercises.get(exercise_id).stub, verbose=False)
    assert not result
    assert result.failure.kind in ("untouched", "wrong_values")


def test_truncating_conversion_is_caught_with_a_rounding_hint():
    wrong = lesson07.FLOAT_TO_HALF_SOLUTION.replace("__float2half_rn", "__float2half_rz")
    result = exercises.check("07.float_to_half", wrong, verbose=False)
    assert not result
    assert "round-to-nearest-even" in result.failure.hint


def test_half2_axpy_without_the_odd_tail_is_caught_with_a_tail_hint():
    wrong = lesson07.HALF2_AXPY_SOLUTION.replace("y[i] = __hfma(__float2half_rn(a), x[i], y[i]);", "")
    result = exercises.check("07.half2_axpy", wrong, verbose=False)
    assert not result
    assert "odd" in result.failure.hint or "last" in result.failure.hint


def test_half2_axpy_that_updates_one_lane_is_caught():
    wrong = r"""
#include <cuda_fp16.h>
extern "C" __global__ void half2_axpy(__half* y, const __half* x, int n, float a) {
    int pair = blockIdx.x * blockDim.x + threadIdx.x;
    int i = 2 * pair;
    if (i < n) y[i] = __hfma(__float2half_rn(a), x[i], y[i]);
}
"""
    result = exercises.check("07.half2_axpy", wrong, verbose=False)
    assert not result


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("exercise_id", IDS)
@pytest.mark.parametrize("which", ["solution", "stub"])
def test_sources_compile_with_nvcc_as_the_checker_wraps_them(exercise_id, which, tmp_path):
    ex = exercises.get(exercise_id)
    path = tmp_path / "exercise.cu"
    assert ex.no_extern_c
    path.write_text(getattr(ex, which))
    for arch in ("sm_75", "sm_90"):
        proc = subprocess.run(["nvcc", "-cubin", f"-arch={arch}", *ex.options, "-I", kernels.DIR,
                               "-o", os.fspath(tmp_path / "k.cubin"), os.fspath(path)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
