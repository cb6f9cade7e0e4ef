"""Lesson 15's exercise, 15.ring_phases: the bookkeeping of an mbarrier ring that TMA fills (the stage of iteration i,
the parity each side waits on, the consumers' arrival). The check runs rings of 1 to 4 stages, iteration counts that
are not multiples of them, under the emulator's forward, reverse and random thread orders; the solution passes, and
answers right only by luck (one stage, two stages), with a parity that ignores the ring's size, or without a wait,
fail with a verdict that says what is wrong (a deadlock or an extra arrival is a verdict, not a crash)."""
import shutil
import subprocess

import numpy as np
import pytest

import gpuedu
from gpuedu import exercises
from gpuedu.exercises import lesson15

backend = gpuedu.setup(verbose=False)
pytestmark = pytest.mark.skipif(not backend.is_emulator, reason="the ring's thread orders are the emulator's")

SOLUTION = lesson15.RING_PHASES_SOLUTION
PRODUCER_WAIT = "if (pass > 0) wait_parity(smem_u32(&empty_bar[s]), (pass - 1) & 1);"
CONSUMER_WAIT = "wait_parity(smem_u32(&full_bar[s]), pass & 1);"
STAGE = "const int s = i % stages, pass = i / stages;"


def _check(source):
    return exercises.check("15.ring_phases", source, verbose=False)


def test_the_solution_passes_every_ring_and_order():
    result = _check(SOLUTION)
    assert result, result.report()
    assert len(result.cases) == 11
    assert {s for s in ("forward", "reverse", "random") if any(s in c for c in result.cases)} == {
        "forward", "reverse", "random"}


def test_the_cases_cover_rings_of_one_to_four_stages_with_partial_last_passes():
    cases = exercises.get("15.ring_phases").make_cases()
    rings = {(int(c.inputs["stages"]), int(c.inputs["iterations"])) for c in cases}
    assert {s for s, _ in rings} == {1, 2, 3, 4}
    assert all(i % s for s, i in rings if s > 1)          # no iteration count a multiple of its ring
    assert any(i < s for s, i in rings)                     # fewer rows than stages


def test_a_parity_that_ignores_the_ring_size_is_refused():
    wrong = SOLUTION.replace(CONSUMER_WAIT, "wait_parity(smem_u32(&full_bar[s]), i & 1);").replace(
        PRODUCER_WAIT, "if (pass > 0) wait_parity(smem_u32(&empty_bar[s]), (i - 1) & 1);")
    assert wrong.count("i & 1") == 1 and "(i - 1) & 1" in wrong
    result = _check(wrong)
    assert not result and result.failure.kind == "launch_error"
    assert "2 stages" in result.failure.case            # right for one stage, wrong from two on
    assert "empty barrier passed too early" in result.failure.hint


def test_a_consumer_parity_that_ignores_the_ring_size_deadlocks_and_is_told_so():
    result = _check(SOLUTION.replace(CONSUMER_WAIT, "wait_parity(smem_u32(&full_bar[s]), i & 1);"))
    assert not result and result.failure.kind == "launch_error"
    assert "deadlock" in result.failure.message and "parity" in result.failure.message
    assert "(i / STAGES) & 1" in result.failure.hint


def test_the_one_stage_stub_is_refused_for_not_using_the_ring():
    # stage 0 for every row, parities of the iteration: a right program (a ring of one stage), not the one asked for
    result = _check(exercises.stub("15.ring_phases"))
    assert not result and result.failure.output == "last"
    assert "not through a ring of 2 stages" in result.failure.hint


def test_a_ring_of_two_stages_whatever_the_size_is_refused():
    result = _check(SOLUTION.replace(STAGE, "const int s = i % 2, pass = i / 2;"))
    assert not result and "not through a ring of 1 stage:" in result.failure.hint


@pytest.mark.parametrize("removed", [CONSUMER_WAIT, PRODUCER_WAIT])
def test_an_answer_without_a_wait_is_refused(removed):
    result = _check(SOLUTION.replace(removed, ""))
    assert not result and result.failure.kind == "launch_error"
    assert "more threads arrive than the barrier counts" in result.failure.message
    assert "without first waiting" in result.failure.hint


def test_a_consumer_waiting_on_the_next_pass_deadlocks_and_is_told_so():
    wrong = SOLUTION.replace(CONSUMER_WAIT, "wait_parity(smem_u32(&full_bar[s]), (pass + 1) & 1);")
    result = _check(wrong)
    assert not result and "deadlock" in result.failure.message
    assert "threads wait on an mbarrier phase that never completes" in result.failure.hint


@pytest.mark.parametrize("held, words", [(-1.0, "the ring's value from before any copy"),
                                         ("earlier", "row 2, an earlier pass's"),
                                         ("later", "read row 6, a later pass's")])
def test_rows_read_too_early_or_too_late_are_named(held, words):
    # what a GPU can show where the emulator lands a copy at its wait: a stage read before its copy landed
    # (its old value, or the previous pass's row), or refilled before it was read (the next pass's row)
    (case,) = [c for c in exercises.get("15.ring_phases").make_cases()
               if int(c.inputs["stages"]) == 2 and int(c.inputs["iterations"]) == 7 and c.order == "forward"]
    want = lesson15.ring_phases_spec(**case.inputs)
    got = {"out": want["out"].copy(), "last": want["last"]}
    src = case.inputs["src"]
    got["out"][4] = -1.0 if held == -1.0 else src[2] if held == "earlier" else src[6]
    hint = lesson15._stale_reads(case, want, got)
    assert words in hint and "iteration 4" in hint and "stage 0" in hint
    assert lesson15._stale_reads(case, want, want) is None


def test_the_reference_puts_row_i_in_stage_i_mod_stages():
    src = np.arange(7 * lesson15.ROW, dtype=np.float32).reshape(7, lesson15.ROW)
    want = lesson15.ring_phases_spec(src, 7, 3)
    assert np.array_equal(want["out"], src)
    assert [int(want["last"][s, 0]) for s in range(4)] == [6 * 32, 4 * 32, 5 * 32, -1]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("source", ["stub", "solution"])
def test_stub_and_solution_compile_with_nvcc_for_sm90a(tmp_path, source):
    text = exercises.stub("15.ring_phases") if source == "stub" else SOLUTION
    path = tmp_path / "ring.cu"
    path.write_text(text)
    done = subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", "-o", str(tmp_path / "ring.cubin"), str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
