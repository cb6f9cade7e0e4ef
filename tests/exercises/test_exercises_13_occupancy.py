"""Lesson 13's occupancy exercise: a Python function checked against the occupancy calculator, case by case."""
import pytest

from gpuedu import exercises

EX = "13.resident_blocks"


def solution():
    return exercises.get(EX).solution


def test_the_solution_passes_every_case():
    result = exercises.check(EX, solution(), verbose=False)
    assert result and len(result.cases) == 14, result.report()


def test_the_stub_does_not_pass():
    result = exercises.check(EX, exercises.stub(EX), verbose=False)
    assert not result and result.kind == "wrong_values" and "returned None" in result.failure.message


@pytest.mark.parametrize("old, new, words", [
    ("whole_warps = QUARTERS * (REGISTERS // QUARTERS // per_warp)", "whole_warps = REGISTERS // per_warp", "quarter"),
    ("-(-registers * 32 // 256) * 256", "registers * 32", "rounded up to a multiple of 256"),
    ("per_block = -(-(shared + RESERVED) // 256) * 256", "per_block = max(1, -(-shared // 256) * 256)", "reserves"),
    ("    limits = [MAX_WARPS // warps, MAX_BLOCKS]\n", "    limits = [MAX_WARPS // warps, MAX_BLOCKS]\n    return limits[0]\n",
     "four limits"),
])
def test_each_classic_mistake_fails_with_its_hint(old, new, words):
    wrong = solution().replace(old, new)
    assert wrong != solution()
    result = exercises.check(EX, wrong, verbose=False)
    assert not result and result.kind == "wrong_values", result.report()
    assert words in result.failure.hint, result.report()


@pytest.mark.parametrize("source, kind", [("def resident_blocks(:", "compile_error"),
                                          ("def other(threads, registers, shared):\n    return 1\n", "missing_function"),
                                          ("def resident_blocks(threads, registers, shared):\n    return 1 / 0\n", "error"),
                                          (None, "bad_source")])
def test_broken_sources_get_a_verdict_not_a_traceback(source, kind):
    result = exercises.check(EX, source, verbose=False)
    assert not result and result.kind == kind
