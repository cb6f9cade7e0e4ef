"""Lesson 08's instruction-level exercise, 08.swizzled_rows: the check judges each lane's ldmatrix registers and the
counted bank conflicts, so the plain layout (right values, 28 conflicts an ldmatrix.x4) is refused, as is a
placement that loses data or one that leaves ldmatrix out; the XOR swizzle passes. Kernel and stub compile with nvcc
for sm_80 and sm_90."""
import shutil
import subprocess

import numpy as np
import pytest

import gpuedu
from gpuedu import exercises
from gpuedu.exercises import lesson08

gpuedu.setup(verbose=False)

SOLUTION = lesson08.SWIZZLED_ROWS_SOLUTION
SWIZZLE = "16 * (chunk ^ (row % 8))"


def _check(source):
    return exercises.check("08.swizzled_rows", source, verbose=False)


def test_the_swizzle_passes_values_and_counts():
    result = _check(SOLUTION)
    assert result, result.report()


def test_the_plain_layout_has_the_right_values_and_is_refused_for_its_conflicts():
    plain = SOLUTION.replace(SWIZZLE, "16 * chunk")
    result = _check(plain)
    assert not result and result.failure.kind == "requirement"
    assert "ldmatrix met 112 bank conflicts" in result.failure.hint      # 4 ldmatrix.x4, 28 each
    assert "c ^ (r % 8)" in result.failure.hint


def test_the_stub_loses_half_the_tile_the_same_way_on_every_backend():
    # rows r and r + 8 share a slot, written by the same lane one store after the other: the later row wins on a
    # GPU as here, so the stub's report (wrong values) reads the same on both backends
    result = _check(exercises.stub("08.swizzled_rows"))
    assert not result and "overwrite each other" in result.failure.hint


@pytest.mark.parametrize("swizzle,words", [
    ("16 * (chunk % 4)", "overwrite each other"),                       # two chunks on one slot
    ("16 * (chunk ^ (row % 4))", "bank conflicts"),                     # a half swizzle: right values, conflicts
])
def test_other_placements_are_told_what_is_wrong(swizzle, words):
    result = _check(SOLUTION.replace(SWIZZLE, swizzle))
    assert not result and words in result.failure.hint


def test_an_answer_without_ldmatrix_is_refused():
    # the same registers, assembled from plain shared loads: right values, no LDSM
    no_ldmatrix = SOLUTION.replace(
        'asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\\n"\n'
        '                     : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(row));',
        "const unsigned short* h = static_cast<const unsigned short*>(__cvta_shared_to_generic(row_address("
        "base, 0, 0)));\n        unsigned regs[4];\n"
        "        for (int j = 0; j < 4; ++j) {\n"
        "            int r = (j % 2) * 8 + lane / 4, c = 2 * step + j / 2;\n"
        "            const unsigned short* p = static_cast<const unsigned short*>(__cvta_shared_to_generic("
        "row_address(base, r, c))) + 2 * (lane % 4);\n"
        "            regs[j] = p[0] | (unsigned)p[1] << 16;\n"
        "        }\n        r0 = regs[0]; r1 = regs[1]; r2 = regs[2]; r3 = regs[3]; (void)h; (void)row;")
    assert no_ldmatrix != SOLUTION
    result = _check(no_ldmatrix)
    assert not result and "fewer than its 4" in result.failure.hint


def test_the_reference_is_ldmatrix_as_the_ptx_isa_defines_it():
    src = np.arange(16 * 64, dtype=np.uint16).view(np.uint32)
    out = lesson08.swizzled_rows_spec(src).reshape(4, 4, 32)
    halves = np.arange(16 * 64).reshape(16, 8, 8)          # row, chunk, half
    # step 1, register 3: rows 8-15 of chunk 3; lane 13 holds row 13 / 4 = 3 of it, halves 2 and 3
    assert out[1, 3, 13] == halves[11, 3, 2] | halves[11, 3, 3] << 16


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("source", [SOLUTION, lesson08.SWIZZLED_ROWS_STUB], ids=["solution", "stub"])
def test_the_exercise_compiles_with_nvcc_for_ampere_and_hopper(tmp_path, source):
    path = tmp_path / "exercise.cu"
    path.write_text(source)
    proc = subprocess.run(["nvcc", "-fatbin", "-gencode", "arch=compute_80,code=sm_80", "-gencode",
                           "arch=compute_90,code=sm_90", "-o", str(tmp_path / "e.fatbin"), str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
