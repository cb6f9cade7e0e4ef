"""The exercises framework end to end on the active backend: compile errors, launch errors, canaries,
races under the reversed thread order, inputs that must not change."""
import numpy as np
import pytest

from gpuedu import backend, exercises
from exercise_helpers import check_printed as _check
from exercise_helpers import check_quietly
from gpuedu.exercises import Case, Exercise, _canary, _kernel_check, _runner

BLOCK = 64


def shift_spec(x, n):
    """out[i] = x[i - 1] within each block of 64 (0 for a block's first thread): needs shared memory."""
    out = np.zeros_like(x)
    for start in range(0, int(n), BLOCK):
        out[start + 1:start + BLOCK] = x[start:start + BLOCK - 1]
    return out


def shift_cases(rng):
    for n in (BLOCK, 3 * BLOCK):
        yield Case(f"n = {n}", {"x": rng.standard_normal(n).astype(np.float32), "n": np.int32(n)},
                   block=(BLOCK, 1, 1), grid=(n // BLOCK, 1))


SHIFT_SOLUTION = r"""
__global__ void shift_in_block(float* out, const float* x, int n) {
    __shared__ float tile[64];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    tile[t] = x[i];
    __syncthreads();                       // every thread's write is visible before anyone reads
    out[i] = t > 0 ? tile[t - 1] : 0.0f;
}
"""

SHIFT_NO_BARRIER = SHIFT_SOLUTION.replace("__syncthreads();", "")

SHIFT_WRITES_INPUT = r"""
__global__ void shift_in_block(float* out, float* x, int n) {
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    float left = t > 0 ? x[i - 1] : 0.0f;
    __syncthreads();
    x[i] = left;                           // BUG: writes the input (and never the output)
    out[i] = left;
}
"""


@pytest.fixture
def shift_exercise():
    ex = Exercise(id="98.shift_in_block", title="shift within a block", text="t", kernel="shift_in_block",
                  params=("out", "x", "n"), outputs=("out",), reference=shift_spec, cases=shift_cases,
                  stub="__global__ void shift_in_block(float* out, const float* x, int n) {\n"
                       "    // FILL ME IN (roughly 5 lines)\n}\n",
                  solution=SHIFT_SOLUTION, launch="blocks of 64", races=True)
    exercises.register(ex)
    yield ex
    exercises._registry.pop(ex.id)


def test_compile_error_is_a_failed_check_with_the_learners_line(capsys):
    source = ("__global__ void relu(float* out, const float* x, int n) {\n"
              "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
              "    if (i < n) out[i] = fmaxf(x[i], zero);\n"
              "}\n")
    result, out = _check("01.relu", source, capsys)
    assert not result and result.kind == "compile_error"
    assert "line 3 of your source" in out and "fmaxf(x[i], zero)" in out
    assert "zero" in result.failure.message and "Traceback" not in out


def test_error_lines_are_read_from_gcc_and_nvcc_logs():
    log = ("exercise.cu:4:7: error: 'y' was not declared\n"
           "exercise.cu(9): error: identifier \"z\" is undefined\nexercise.cu:4:9: note: x")
    assert _runner.error_lines(log) == [4, 9]


def test_missing_kernel_names_the_expected_signature(capsys):
    result, out = _check("01.relu", "__global__ void my_relu(float* out, const float* x, int n) {}\n", capsys)
    assert not result and result.kind == "missing_kernel"
    assert "__global__ void relu(float* out, const float* x, int n)" in out


def test_canaries_catch_a_write_before_the_start(capsys):
    source = ("__global__ void relu(float* out, const float* x, int n) {\n"
              "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
              "    if (i < n) out[i - 1] = fmaxf(x[i], 0.0f);\n"
              "}\n")
    result, out = _check("01.relu", source, capsys)
    assert not result and result.kind == "out_of_bounds"
    assert "before the start of `out` (indices -1..-1)" in out


def test_a_write_past_the_padding_is_a_launch_error_not_a_crash(capsys):
    if backend.active().name != "cpu":
        pytest.skip("only the emulator stops a stray write with a guard page")
    pad = _canary.pad_length(1)
    source = ("__global__ void relu(float* out, const float* x, int n) {\n"
              f"    if (threadIdx.x == 0 && blockIdx.x == 0) out[n + {pad}] = 1.0f;  // just past the padding\n"
              "}\n")
    result, out = _check("01.relu", source, capsys)
    assert not result and result.kind == "launch_error"
    assert "LaunchError" in out and "bounds guard" in out
    # the process and the backend live on: a right kernel passes right after
    assert exercises.check("01.relu", exercises.get("01.relu").solution, verbose=False)


def test_missing_barrier_fails_under_the_reversed_order(shift_exercise, capsys):
    if _runner.emulator_scheduler() is None:
        pytest.skip("the thread order can only be chosen on the emulator")
    result, out = _check(shift_exercise.id, SHIFT_SOLUTION, capsys)
    assert result, out
    assert "reverse order" in out
    result, out = _check(shift_exercise.id, SHIFT_NO_BARRIER, capsys)
    assert not result and result.kind == "race", out
    assert "__syncthreads()" in out and "only when the threads run in reverse order" in out
    assert _runner.emulator_scheduler().get_schedule() == "forward"   # the order is restored


def test_a_kernel_that_writes_its_input_is_told_so(shift_exercise, capsys):
    result, out = _check(shift_exercise.id, SHIFT_WRITES_INPUT, capsys)
    assert not result and result.kind == "input_modified"
    assert "changed the input `x`" in out


def test_checks_are_reproducible_and_seeded(capsys):
    source = exercises.get("01.relu").solution.replace("fmaxf(x[i], 0.0f)", "x[i] > 0.5f ? x[i] : 0.0f")
    first = exercises.check("01.relu", source, verbose=False)
    again = exercises.check("01.relu", source, verbose=False)
    other = exercises.check("01.relu", source, seed=1, verbose=False)
    assert not first and first.report() == again.report()
    assert first.failure.index is not None and first.failure.n_wrong > 0
    assert other.report() != first.report()


@pytest.mark.timeout(120)
def test_an_endless_loop_is_stopped_and_reported(monkeypatch, capsys):
    active = backend.active()
    if active.name != "cpu" or not callable(getattr(active.compiler, "set_kernel_timeout", None)):
        pytest.skip("only the emulator can stop a running kernel")
    monkeypatch.setattr(_kernel_check, "KERNEL_TIME_LIMIT_S", 1)
    source = ("__global__ void grid_stride_copy(float* out, const float* x, int n) {\n"
              "    int step = blockDim.x * gridDim.x;\n"
              "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i + step)\n"
              "        out[i] = x[i];\n"
              "}\n")
    result, out = _check("02.grid_stride_copy", source, capsys)
    assert not result and result.kind == "launch_error"
    assert "never finished" in out and "i += step" in out


NAIVE_AS_TILED = exercises.get("04.matmul_naive").solution.replace("matmul_naive", "matmul_tiled")


def _gpu_stand_in(monkeypatch):
    """A CUDA backend stood in for by the emulator's modules: the values run through the GPU's path of the
    checks (no thread order to choose, no counters), the method on the emulator as on a real GPU."""
    import types
    active = backend.active()
    gpu_like = types.SimpleNamespace(name="cuda", driver=active.driver, compiler=active.compiler)
    monkeypatch.setattr(backend, "active", lambda: gpu_like)


def test_on_a_gpu_the_method_is_judged_on_the_emulator_with_the_same_verdict(monkeypatch, capsys):
    # A naive "tiled" matmul is refused on a GPU as on a laptop: the same counters, the same bounds.
    laptop = check_quietly("04.matmul_tiled", NAIVE_AS_TILED)
    _gpu_stand_in(monkeypatch)
    result, out = _check("04.matmul_tiled", NAIVE_AS_TILED, capsys)
    assert not result and not laptop
    assert result.kind == laptop.kind == "requirement"
    assert result.failure.message == laptop.failure.message + " (judged on the emulator)", out
    solved, out = _check("04.matmul_tiled", exercises.get("04.matmul_tiled").solution, capsys)
    assert solved and "on the emulator, after the values on the GPU" in out, out


def test_on_a_gpu_a_race_is_found_in_reverse_order_on_the_emulator(monkeypatch, shift_exercise):
    laptop = check_quietly(shift_exercise.id, SHIFT_NO_BARRIER)
    _gpu_stand_in(monkeypatch)
    result = check_quietly(shift_exercise.id, SHIFT_NO_BARRIER)
    assert not result and result.kind == laptop.kind == "race", result.report()
    assert "judged on the emulator" in result.failure.message
    assert check_quietly(shift_exercise.id, SHIFT_SOLUTION), "the solution passes on the GPU's path too"


def test_without_an_emulator_a_gpu_says_the_method_was_not_checked(monkeypatch, capsys):
    def unavailable():
        raise _runner.EmulatorUnavailable("no C++ compiler (g++ or clang++) on PATH")
    _gpu_stand_in(monkeypatch)
    monkeypatch.setattr(_runner, "emulator_side", unavailable)
    result, out = _check("04.matmul_tiled", NAIVE_AS_TILED, capsys)
    assert result and result.method_unchecked
    assert "PASSED (values only; the method was not checked) 04.matmul_tiled" in out
    assert "PASSED 04.matmul_tiled" not in out
    assert ("only the values were checked, on the GPU: gpuedu.racecheck() and the bounds on "
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum + l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum + "
            "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum + l1tex__t_requests_pipe_lsu_mem_local_op_ld.sum, "
            "smsp__sass_inst_executed_op_shared_ld.sum need the emulator, which cannot build kernels here: "
            "no C++ compiler (g++ or clang++) on PATH") in out


def test_a_launch_the_emulator_cannot_count_is_judged_on_its_values(monkeypatch, capsys):
    if backend.active().name != "cpu":
        pytest.skip("counters exist on the emulator only")
    from gpuedu.emulator import _instrument

    def uncounted(*args, **kwargs):
        raise _instrument.ProfilingUnavailable("no instrumented build here")
    monkeypatch.setattr(_instrument, "run", uncounted)
    result, out = _check("04.matmul_tiled", NAIVE_AS_TILED, capsys)
    assert result, out
    assert "(no counters for this kernel, so only its values were checked: no instrumented build here)" in out


def _every_exercise_id():
    exercises._load_all()
    return sorted(exercises._registry)


@pytest.mark.parametrize("exercise_id", _every_exercise_id())
def test_every_solution_passes_and_every_stub_does_not(exercise_id):
    # Every registered exercise, so a new one is covered the day it is registered.
    ex = exercises.get(exercise_id)
    solved = check_quietly(exercise_id, ex.solution)
    assert solved.passed and solved.failure is None, solved.report()
    assert not check_quietly(exercise_id, ex.stub).passed


def _kernel_exercises():
    exercises._load_all()
    return sorted(i for i, ex in exercises._registry.items() if isinstance(ex, Exercise))


def test_a_stubs_report_reads_the_same_on_the_emulator_and_on_a_gpu(monkeypatch):
    # The lessons show each exercise's stub checked, and nbval compares those reports on both backends:
    # what the emulator checks beyond the values (racecheck, counters, the reversed thread order) is said
    # only once the values are right, so a report about wrong values does not depend on the backend.
    import types
    active = backend.active()
    if active.name != "cpu":
        pytest.skip("compares the emulator's report with a GPU's")
    ids = _kernel_exercises()
    assert len(ids) >= 20
    on_emulator = {i: exercises.check(i, exercises.stub(i), verbose=False).report() for i in ids}
    gpu_like = types.SimpleNamespace(name="cuda", driver=active.driver, compiler=active.compiler)
    monkeypatch.setattr(backend, "active", lambda: gpu_like)
    for i in ids:
        assert exercises.check(i, exercises.stub(i), verbose=False).report() == on_emulator[i], i


def test_what_else_was_checked_is_said_once_the_values_are_right(shift_exercise, monkeypatch):
    if _runner.emulator_scheduler() is None:
        pytest.skip("the thread order can only be chosen on the emulator")
    wrong = SHIFT_SOLUTION.replace("tile[t - 1]", "tile[t]")
    assert "reverse order" not in exercises.check(shift_exercise.id, wrong, verbose=False).report()
    assert ("(each case also passed with the threads of every block in reverse order)"
            in exercises.check(shift_exercise.id, SHIFT_SOLUTION, verbose=False).report())


def _add_count_exercise(small):
    def spec(count, n):
        return count + n

    def cases(rng):
        yield Case("n = 5", {"count": np.array([7], np.int32), "n": np.int32(5)}, block=(32, 1, 1), grid=(1, 1))

    def overwritten(case, expected, got):
        return "the count was overwritten" if int(got["count"][0]) == int(case.inputs["n"]) else None

    return Exercise(id="98.add_count", title="add to a count", text="t", kernel="add_count", params=("count", "n"),
                    outputs=("count",), reference=spec, cases=cases,
                    stub="__global__ void add_count(int* count, int n) {\n    // FILL ME IN (roughly 1 line)\n}\n",
                    solution="", launch="one block", diagnoses=(overwritten,), diagnose_small_outputs=small)


@pytest.mark.parametrize("small", [False, True])
def test_a_one_element_output_is_diagnosed_only_when_the_exercise_says_so(small):
    # By default a mistake's hint needs 8 elements (fewer match a wrong pattern by chance); a count opts in.
    ex = exercises.register(_add_count_exercise(small))
    try:
        source = "__global__ void add_count(int* count, int n) {\n    if (threadIdx.x == 0) *count = n;\n}\n"
        result = check_quietly(ex.id, source)
        assert not result and result.kind == "wrong_values", result.report()
        assert ("the count was overwritten" == result.failure.hint) == small, result.report()
    finally:
        exercises._registry.pop(ex.id)
