"""The exercises framework's own behaviour: registry, canaries, diagnosis, verdicts that never raise."""
import numpy as np
import pytest

from gpuedu import exercises
from gpuedu.exercises import Case, Exercise, Requirement, _canary, _diagnose


# ---------------------------------------------------------------- canaries


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.uint8, np.int64])
def test_padding_holds_sentinels_and_body(dtype):
    body = np.arange(5).astype(dtype)
    flat = _canary.padded(body, 3)
    assert flat.size == 11
    assert _canary.is_sentinel(flat[:3]).all() and _canary.is_sentinel(flat[-3:]).all()
    assert not _canary.is_sentinel(flat[3:8]).any()
    np.testing.assert_array_equal(flat[3:8], body)
    before, after = _canary.changed_padding(flat, 3)
    assert len(before) == 0 and len(after) == 0


def test_changed_padding_reports_indices_relative_to_the_body():
    flat = _canary.padded(np.zeros(4, np.float32), 3)
    flat[3 + 4 + 1] = 1.0     # body index 5: one past the element after the end
    flat[1] = 2.0             # body index -2
    before, after = _canary.changed_padding(flat, 3)
    assert before.tolist() == [-2] and after.tolist() == [5]


def test_float_sentinel_is_a_nan_that_arithmetic_does_not_produce():
    s = _canary.sentinel_filled((4,), np.float32)
    assert np.isnan(s).all()
    with np.errstate(invalid="ignore"):
        computed = s * np.float32(2) + np.float32(1)  # arithmetic quiets the NaN: other bits
    assert np.isnan(computed).all() and not _canary.is_sentinel(computed).any()
    assert not _canary.is_sentinel(np.full(4, np.nan, np.float32)).any()


# ---------------------------------------------------------------- diagnosis


def _got_from(expected, written_mask):
    got = _canary.sentinel_filled(expected.shape, expected.dtype)
    got[written_mask] = expected[written_mask]
    return got


def test_compare_passes_equal_arrays_and_respects_tolerance():
    exp = np.linspace(-1, 1, 300).astype(np.float32)
    assert _diagnose.compare("out", exp, exp.copy(), None, 0, 0, 256) is None
    near = exp * np.float32(1 + 1e-6)
    assert _diagnose.compare("out", exp, near, None, 1e-5, 1e-6, 256) is None
    assert _diagnose.compare("out", exp, near, None, 0, 0, 256) is not None


def test_never_written_output():
    exp = np.ones(300, np.float32)
    f = _diagnose.compare("out", exp, _canary.sentinel_filled((300,), np.float32), None, 0, 0, 256)
    assert f.kind == "untouched" and "never wrote" in f.hint
    assert f.n_wrong == 300 and f.index == (0,)
    assert "got (never written)" in f.summary


def test_only_first_block_written_points_at_blockidx():
    exp = np.arange(600, dtype=np.float32)
    mask = np.zeros(600, bool)
    mask[:256] = True
    f = _diagnose.compare("out", exp, _got_from(exp, mask), None, 0, 0, 256)
    assert f.kind == "untouched" and "blockIdx.x * blockDim.x" in f.hint
    assert f.index == (256,) and f.n_wrong == 344


def test_stops_early_is_reported_as_not_covering():
    exp = np.arange(600, dtype=np.float32)
    mask = np.ones(600, bool)
    mask[-1] = False
    f = _diagnose.compare("out", exp, _got_from(exp, mask), None, 0, 0, 256)
    assert f.kind == "untouched" and "never written" in f.hint and f.index == (599,)


def test_index_shifted_by_one():
    x = np.random.default_rng(0).standard_normal(500).astype(np.float32)
    got = np.empty_like(x)
    got[:-1] = x[1:]
    got[-1] = 0
    f = _diagnose.compare("out", x, got, None, 0, 0, 256)
    assert f.kind == "wrong_index" and "off by 1" in f.hint


def test_wrong_only_in_last_partial_block():
    exp = np.arange(300, dtype=np.float32)
    got = exp.copy()
    got[290:] = -1
    f = _diagnose.compare("out", exp, got, None, 0, 0, 256)
    assert f.kind == "tail" and f.n_wrong == 10 and f.index == (290,)


def test_two_dimensional_index_is_a_tuple():
    exp = np.zeros((4, 5), np.float32)
    got = exp.copy()
    got[2, 3] = 7
    f = _diagnose.compare("out", exp, got, None, 0, 0, 256)
    assert f.index == (2, 3) and "first bad index [2, 3]" in f.summary and "got 7" in f.summary


def test_out_of_bounds_finding_names_the_guard():
    f = _diagnose.out_of_bounds("out", np.array([], int), np.array([300, 301]), 300)
    assert "past the end of `out`" in f.summary and "indices 300..301" in f.summary
    assert "if (i < n)" in f.hint
    f = _diagnose.out_of_bounds("out", np.array([-1]), np.array([], int), 300)
    assert "before the start" in f.summary


def _hazard(kind, first, second, space="shared"):
    """A racecheck hazard: ``first`` and ``second`` are (block x, thread x, line)."""
    def access(block, thread, line):
        return {"block": (block, 0, 0), "thread": (thread, 0, 0), "line": f"exercise.cu:{line}"}
    return {"kind": kind, "space": space, "count": 1, "where": {},
            "first": access(*first), "second": access(*second)}


def test_a_race_names_its_kind_both_threads_and_lines():
    f = _diagnose.race([_hazard("read-after-write", (0, 5, 9), (0, 17, 12))])
    assert f.kind == "race"
    assert ("read-after-write race on shared memory (found by gpuedu.racecheck()): thread 5 of block 0 wrote "
            "an address at line 9, then thread 17 of the same block read it at line 12") in f.summary
    assert "__syncthreads() between line 9 and line 12" in f.hint


def test_two_threads_writing_from_one_line_is_a_lost_update():
    f = _diagnose.race([_hazard("read-after-write", (0, 5, 9), (0, 17, 9)),
                        _hazard("write-after-write", (0, 5, 9), (0, 17, 9))])
    assert "atomicAdd" in f.hint and "__syncthreads" not in f.hint
    f = _diagnose.race([_hazard("read-after-write", (0, 3, 7), (0, 2, 7))])   # a tree missing its barrier
    assert "__syncthreads() between line 7 and line 7" in f.hint
    f = _diagnose.race([_hazard("write-after-write", (0, 0, 4), (3, 0, 6), space="global")])
    assert "of block 3" in f.summary and "no barrier orders blocks" in f.hint


def test_a_read_before_the_wait_of_a_cp_async_says_to_wait_then_synchronise():
    f = _diagnose.race([_hazard("read-before-wait", (0, 6, 14), (0, 5, 18))])
    assert ("read-before-wait race on shared memory (found by gpuedu.racecheck()): thread 6 of block 0 began "
            "copying (cp.async) to an address at line 14, then thread 5 of the same block read it at line 18") \
        in f.summary
    assert "the copy of line 14 had not landed" in f.hint
    assert "Before line 18, wait for it (cp.async.wait_group N, or __pipeline_wait_prior(N)), then __syncthreads()" \
        in f.hint


# ---------------------------------------------------------------- requirements on counters

LOADS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"


def test_a_requirement_names_a_counted_metric_and_one_bound():
    with pytest.raises(KeyError, match="unknown metric"):
        Requirement("l1tex__requests.sum", hint="", at_most=lambda case: 1)
    with pytest.raises(ValueError, match="not counted"):
        Requirement("dram__bytes_read.sum", hint="", at_most=lambda case: 1)
    with pytest.raises(ValueError, match="exactly one"):
        Requirement(LOADS, hint="")
    with pytest.raises(ValueError, match="exactly one"):
        Requirement(LOADS, hint="", at_most=lambda case: 1, at_least=lambda case: 1)
    with pytest.raises(TypeError, match="Requirement objects"):
        _toy(requirements=(LOADS,))


def test_a_requirement_judges_the_bound_and_words_the_hint():
    case = Case("n = 64", {"n": np.int32(64)}, (64, 1, 1), (1, 1))
    most = Requirement(LOADS, hint="{got} loads, at most {limit}", at_most=lambda c: int(c.inputs["n"]) // 32)
    assert most.judge(case, {LOADS: 2}) is None
    message, hint = most.judge(case, {LOADS: 64})
    assert message == ("the values are right, but not the way this exercise asks: "
                       f"{LOADS} = 64, where at most 2 is expected")
    assert hint == "64 loads, at most 2"
    least = Requirement(LOADS, hint=lambda c, got, limit, metrics: f"{got}/{limit}/{metrics['x']}",
                        at_least=lambda c: 3)
    assert least.judge(case, {LOADS: 3, "x": 0}) is None
    message, hint = least.judge(case, {LOADS: 2, "x": 7})
    assert message.endswith(f"{LOADS} = 2, where at least 3 is expected") and hint == "2/3/7"


def test_a_requirement_on_several_metrics_bounds_their_sum():
    # global atomics are ATOM where the result is read and RED where it is discarded: a bound counts both
    atom, red = ("smsp__sass_thread_inst_executed_op_global_atom.sum",
                 "smsp__sass_thread_inst_executed_op_global_red.sum")
    case = Case("n = 64", {"n": np.int32(64)}, (64, 1, 1), (1, 1))
    both = Requirement((atom, red), hint="{got} atomics, at most {limit}", at_most=lambda c: 4)
    assert both.names == (atom, red) and both.label == f"{atom} + {red}"
    assert both.judge(case, {atom: 1, red: 3}) is None
    message, hint = both.judge(case, {atom: 0, red: 5})
    assert message.endswith(f"{atom} + {red} = 5, where at most 4 is expected") and hint == "5 atomics, at most 4"
    with pytest.raises(ValueError, match="not counted"):
        Requirement((atom, "dram__bytes_write.sum"), hint="", at_most=lambda c: 1)


# ---------------------------------------------------------------- registry and verdicts


def _toy(**overrides):
    fields = dict(id="99.toy", title="toy", text="t", kernel="toy", params=("out", "n"), outputs=("out",),
                  reference=lambda n: np.zeros(int(n), np.float32),
                  cases=lambda rng: [Case("n = 3", {"n": np.int32(3)}, (32, 1, 1), (1, 1))],
                  stub="__global__ void toy(float* out, int n) {\n    // FILL ME IN (roughly 1 line)\n}\n",
                  solution="__global__ void toy(float* out, int n) { }", launch="one block")
    fields.update(overrides)
    return Exercise(**fields)


def test_exercise_fields_are_validated():
    with pytest.raises(ValueError, match="must look like"):
        _toy(id="relu")
    with pytest.raises(ValueError, match="FILL ME IN"):
        _toy(stub="__global__ void toy(float* out, int n) {}")
    with pytest.raises(ValueError, match="not kernel parameters"):
        _toy(outputs=("y",))


def test_register_refuses_a_second_exercise_with_the_same_id():
    ex = exercises.get("01.relu")
    assert exercises.register(ex) is ex          # registering the same object again is harmless
    with pytest.raises(ValueError, match="already registered"):
        exercises.register(_toy(id="01.relu"))


def test_unknown_id_names_close_matches_and_check_does_not_raise(capsys):
    with pytest.raises(KeyError, match="did you mean 01.relu"):
        exercises.get("01.rleu")
    result = exercises.check("01.rleu", "__global__ void relu() {}")
    assert not result and result.kind == "unknown_exercise"
    assert "did you mean 01.relu" in capsys.readouterr().out


def test_check_refuses_a_source_that_is_not_a_string(capsys):
    result = exercises.check("01.relu", None)
    assert not result and result.kind == "bad_source"
    out = capsys.readouterr().out
    assert out.startswith("NOT YET 01.relu") and "as a string" in out


def test_check_contains_errors_of_the_checker_itself(monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("boom")
    monkeypatch.setattr(exercises, "_check", broken)
    result = exercises.check("01.relu", "x")
    assert not result and result.kind == "internal" and "boom" in capsys.readouterr().out


def test_show_prints_text_spec_launch_and_stub_but_not_the_solution(capsys):
    exercises.show("01.relu")
    out = capsys.readouterr().out
    ex = exercises.get("01.relu")
    assert "ReLU" in out and "def relu_spec" in out and "ceil_div" in out and "FILL ME IN" in out
    assert "fmaxf" not in out and "fmaxf" in ex.solution


def test_solution_only_when_asked_with_a_try_first_note(capsys):
    text = exercises.solution("01.relu")
    out = capsys.readouterr().out
    assert out.startswith("Try first") and "fmaxf" in out and text == exercises.get("01.relu").solution


def test_list_groups_by_lesson(capsys):
    ids = exercises.list()
    out = capsys.readouterr().out
    assert {"01.relu", "01.saxpy", "01.scale_2d"} <= set(ids)
    assert "lesson 01:" in out
    assert exercises.list(1) == [i for i in ids if i.startswith("01.")]


def test_result_truthiness_and_report():
    from gpuedu.exercises import CheckResult, Failure
    passed = CheckResult("01.relu", passed=True, cases=["n = 1"])
    assert passed and "PASSED" in passed.report()
    failed = CheckResult("01.relu", failure=Failure("tail", "out wrong", "guard"), cases=["a", "b"],
                         failed_cases=["b"])
    assert not failed and "NOT YET" in failed.report() and "1 of 2 cases right" in failed.report()
    assert repr(failed) == "<CheckResult 01.relu: not yet (tail)>"


def test_a_report_gives_every_verdict_only_when_every_case_ran():
    from gpuedu.exercises import CheckResult, Failure

    def tally(run, wrong, total):
        return CheckResult("x", failure=Failure("wrong_values", "m"), cases=run, failed_cases=wrong,
                           total=total).report().splitlines()[-1].strip()

    assert tally(["a", "b", "c"], ["b", "c"], 3) == "1 of 3 cases right; wrong: b; c"
    assert tally(["a", "b", "c"], ["b", "c"], None) == "1 of 3 cases right; wrong: b; c"
    assert tally(["a"], ["a"], 14) == "stopped at the first wrong case of 14: case 1 (13 not run)"
    assert tally(["a", "b", "c"], ["c"], 14) == "stopped at the first wrong case of 14: case 3, after 2 right (11 not run)"
    # a kernel check that stops at a launch error after wrong values in earlier cases
    assert tally(["a", "b", "c"], ["a", "c"], 5) == "stopped at case 3 of 5 (2 not run): 1 of the 3 run right; wrong: a; c"
    assert tally(["a"], ["a"], 1) == "0 of 1 case right; wrong: a"


def test_standard_sizes_cover_the_edges():
    sizes = [n for _, n in exercises.sizes_1d(np.random.default_rng(1), 256)]
    assert sizes[:3] == [1, 256, 257]
    assert all(n % 256 for n in sizes[3:]) and sizes[-1] > 100_000


def test_never_written_marks_only_untouched_elements():
    out = _canary.sentinel_filled((2, 3), np.float32)
    out[0, 1] = 5.0
    out[1, 2] = np.nan                     # a computed NaN is a write, not the sentinel
    mask = exercises.never_written(out)
    assert mask.shape == (2, 3) and mask.sum() == 4 and not mask[0, 1] and not mask[1, 2]


def test_wrong_only_at_block_edges_points_at_neighbours_and_barriers():
    exp = np.arange(1024, dtype=np.float32)
    got = exp.copy()
    got[[256, 511, 512, 767]] = -1          # first or last thread of blocks of 256
    f = _diagnose.compare("out", exp, got, None, 0, 0, 256)
    assert f.kind == "block_edges" and "__syncthreads()" in f.hint and f.n_wrong == 4
    got[300] = -1                           # one wrong element inside a block: no longer that pattern
    assert _diagnose.compare("out", exp, got, None, 0, 0, 256).kind == "wrong_values"


def test_a_launch_error_at_a_warp_wide_call_gets_the_warps_hint_not_the_barriers():
    from gpuedu.exercises import _kernel_check
    # The emulator's words when lanes of a warp miss a warp intrinsic, and when threads miss a barrier.
    warp = _kernel_check._launch_error_hint(
        "LaunchError: kernel 'k' block (0,0,0): warp 0: 16 threads at wmma::mma_sync(mask=0xffffffff), 16 exited "
        "- every lane named in the mask must reach the intrinsic")
    stuck = _kernel_check._launch_error_hint(
        "deadlock: warp 0 has 16 threads at __shfl_sync(mask=0xffffffff) waiting for 16 lanes that are at "
        "__syncthreads or another intrinsic")
    barrier = _kernel_check._launch_error_hint("deadlock: 64 threads at __syncthreads, 0 at warp intrinsics, 64 exited")
    assert "warp-wide call" in warp and "warp-wide call" in stuck
    assert "__syncthreads()" in barrier and "warp-wide" not in barrier
