"""Lesson 13's occupancy exercise: a Python function checked against the occupancy calculator, case by case."""
import pytest

from gpuedu import exercises

EX = "13.resident_blocks"


def solution():
    return exercises.get(EX).solution


def test_the_solution_passes_every_case():
    result = exercises.check(EX, solution(), verbose=False)
    assert result and len(result.cases) == 15, result.report()


def test_the_stub_does_not_pass():
    result = exercises.check(EX, exercises.stub(EX), verbose=False)
    assert not result and result.kind == "wrong_type" and "returned None" in result.failure.message
    assert "stopped at the first wrong case of 15: case 1 (14 not run)" in result.report()


@pytest.mark.parametrize("old, new, words", [
    ("whole_warps = QUARTERS * (REGISTERS // QUARTERS // per_warp)", "whole_warps = REGISTERS // per_warp", "quarter"),
    ("-(-registers * 32 // 256) * 256", "registers * 32", "rounded up to a multiple of 256"),
    ("per_block = -(-(shared + RESERVED) // 128) * 128", "per_block = max(1, -(-shared // 128) * 128)", "reserves"),
    ("per_block = -(-(shared + RESERVED) // 128) * 128", "per_block = -(-(shared + RESERVED) // 256) * 256",
     "128-byte units; 256 bytes was the unit up to compute capability 7.x"),
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


def test_the_shared_memory_unit_is_cudas_128_bytes_on_an_h100():
    # 64 threads, 24 registers, 20,000 bytes: 21,024 with the reserved 1 KB, 21,120 in 128-byte units (11 blocks
    # in 233,472 bytes); 256-byte units would make it 21,248, and 10 blocks
    from gpuedu.exercises import lesson13
    assert lesson13.resident_blocks_reference(threads=64, registers=24, shared=20000) == 11
    labels = [label for label, _ in exercises.get(EX).cases(__import__("numpy").random.default_rng(0))]
    assert any("20,000 bytes shared (128-byte units" in label for label in labels)


def test_a_float_count_fails_on_its_type():
    wrong = solution().replace("    return min(limits)", "    return float(min(limits))")
    result = exercises.check(EX, wrong, verbose=False)
    assert not result and result.kind == "wrong_type" and "a float: the exercise asks for an int" in result.failure.message
