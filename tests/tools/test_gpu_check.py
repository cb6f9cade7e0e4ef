"""`gpuedu gpu-check`: refuses without a GPU, runs every step whatever the others did, records it all.

The real steps need a GPU; here the same machinery runs small stand-in steps (a pytest run with a
pass, a failure and a skip; a command that fails; one that outlives its time limit), and the whole
command runs its doctor step against the fake PyCUDA of test_backend.py.
"""
import json
import os
import signal
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from gpuedu.tools import gpu_check
from test_backend import REPO, fake_device, needs_nvcc, run_child

DEVICE = {"name": "Test GPU", "arch": "90"}


def python_step(name, code, timeout_s=120):
    return gpu_check.Step(name, f"stand-in {name}", [sys.executable, "-c", textwrap.dedent(code)],
                          timeout_s=timeout_s)


def pytest_step(tmp_path, body):
    test_file = tmp_path / "test_standin.py"
    test_file.write_text(textwrap.dedent(body))
    junit = str(tmp_path / "logs" / "tests.xml")
    return gpu_check.Step("tests", "stand-in tests",
                          [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", str(test_file),
                           f"--junitxml={junit}"], junit=junit)


def run(tmp_path, steps):
    return gpu_check.run_checks(steps, str(tmp_path / "logs"), str(tmp_path / "results"), DEVICE,
                                cwd=str(tmp_path), echo=False)


def test_no_gpu_is_refused_with_what_to_do_and_its_own_exit_code():
    from gpuedu import preflight
    if preflight.check_gpu()[0]:   # asked first: here gpu-check would run everything, this test included
        pytest.skip("this machine has a usable GPU: gpu-check would run for real")
    proc = subprocess.run([sys.executable, "-m", "gpuedu", "gpu-check"], cwd=REPO, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == gpu_check.NO_GPU_EXIT == 3
    assert "no usable GPU on this machine" in proc.stderr and "nothing was run" in proc.stderr
    assert "Using a GPU" in proc.stderr and "gpuedu doctor" in proc.stderr


def test_a_failing_step_does_not_stop_the_others_and_all_are_recorded(tmp_path):
    steps = [
        pytest_step(tmp_path, """
            import pytest
            def test_good():
                assert 1 + 1 == 2
            def test_bad():
                assert 1 + 1 == 3
            @pytest.mark.skip(reason="needs something absent")
            def test_skipped():
                pass
        """),
        python_step("bench", "import sys; print('bench ran'); sys.exit(4)"),
        python_step("doctor", "print('  [ok ] Lessons will use: cuda (real GPU), because a usable GPU was found')"),
    ]
    record, path = run(tmp_path, steps)
    assert path == str(tmp_path / "results" / "test-gpu-checks.json")
    with open(path) as f:
        assert json.load(f) == record
    tests, bench, doctor = record["steps"]
    assert tests["counts"] == {"passed": 1, "failed": 1, "errors": 0, "skipped": 1}
    assert tests["failures"] == ["test_standin::test_bad"] and not tests["ok"]
    assert tests["skip_reasons"] == {"needs something absent": 1}
    assert any("FAILED" in line and "test_bad" in line for line in tests["tail"])
    assert (bench["ok"], bench["returncode"], bench["problem"]) == (False, 4, "exit code 4")
    assert doctor["ok"] and "tail" not in doctor
    assert record["ok"] is False and record["failed_steps"] == ["tests", "bench"]
    assert record["device"] == DEVICE and record["versions"]["numpy"]
    with open(bench["log"]) as f:
        assert "bench ran" in f.read()


def test_doctor_step_fails_unless_the_lessons_get_the_gpu(tmp_path):
    record, _ = run(tmp_path, [python_step(
        "doctor", "print('  [ok ] Lessons will use: cpu (CPU emulator), because no usable GPU')")])
    step = record["steps"][0]
    assert step["returncode"] == 0 and not step["ok"]
    assert "would not get the cuda backend" in step["problem"]


def test_a_pytest_run_where_nothing_passed_is_a_failure(tmp_path):
    step = pytest_step(tmp_path, """
        import pytest
        @pytest.mark.skip(reason="no usable GPU: pycuda is not installed")
        def test_on_the_device():
            pass
    """)
    entry = run(tmp_path, [step])[0]["steps"][0]
    assert entry["returncode"] == 0 and not entry["ok"]
    assert entry["problem"] == "no test passed (all skipped or none collected)"


def test_a_step_past_its_time_limit_is_stopped_with_its_children(tmp_path):
    step = python_step("lessons", """
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print(child.pid, flush=True)
        time.sleep(60)
    """, timeout_s=2)
    entry = run(tmp_path, [step])[0]["steps"][0]
    assert entry["returncode"] is None and not entry["ok"]
    assert entry["problem"] == "did not finish within 2 s" and entry["duration_s"] < 30
    grandchild = int(entry["tail"][0])
    for _ in range(100):                        # the whole process group went, not only the step
        if not running(grandchild):
            break
        time.sleep(0.1)
    assert not running(grandchild)


def running(pid):
    """Whether a process is alive (a zombie waiting for a parent to reap it counts as gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" not in f.read()
    except FileNotFoundError:
        return False


def test_bench_step_reports_the_results_file_its_figures_and_targets(tmp_path):
    results = tmp_path / "h200.json"
    results.write_text(json.dumps({
        "figures": [{"name": "copy_dtod", "status": "ok"},
                    {"name": "matmul_v3", "status": "unavailable", "reason": "failed: CompileError: boom"},
                    {"name": "cublas_sgemm", "status": "unavailable", "reason": "no torch or CuPy"}],
        "targets": [{"name": "sgemm_vs_cublas", "status": "unavailable", "value": None, "goal": 0.7,
                     "reason": "baseline cublas_sgemm: no torch or CuPy", "figure": "matmul_v3"}]}))
    entry = run(tmp_path, [python_step("bench", f"print('wrote {results}')")])[0]["steps"][0]
    assert entry["results_file"] == str(results)
    assert (entry["figures_measured"], entry["figures_total"]) == (1, 3)
    assert entry["failed_figures"] == ["matmul_v3"] and not entry["ok"]
    assert entry["targets"] == [{"name": "sgemm_vs_cublas", "status": "unavailable", "value": None, "goal": 0.7,
                                 "reason": "baseline cublas_sgemm: no torch or CuPy"}]


def test_the_bench_record_reaches_the_results_folder_only_when_the_run_is_over(tmp_path):
    # The tests of the same run must read the record that was committed, not the one this bench just wrote
    # (an H200's run replaced nvidia-h200.json under the tests that check its quotes).
    results = tmp_path / "results"
    results.mkdir()
    (results / "test-gpu.json").write_text('{"committed": true}')
    logs = tmp_path / "logs"
    bench = python_step("bench", f"""
        import json, os
        os.makedirs({str(logs)!r}, exist_ok=True)
        with open({str(logs / "bench.json")!r}, "w") as f:
            json.dump({{"figures": [{{"name": "copy_dtod", "status": "ok"}}], "targets": []}}, f)
        open({str(logs / "bench-ratios.png")!r}, "wb").write(b"png")
        print("wrote {logs / 'bench.json'}")
    """)
    seen = python_step("tests", f"print(open({str(results / 'test-gpu.json')!r}).read())")
    record, _ = run(tmp_path, [bench, seen])
    with open(record["steps"][1]["log"]) as f:
        assert '{"committed": true}' in f.read()             # what the later step saw: the old record
    assert json.loads((results / "test-gpu.json").read_text())["figures"][0]["name"] == "copy_dtod"
    assert (results / "test-gpu-ratios.png").read_bytes() == b"png"
    assert record["steps"][0]["results_file"] == str(results / "test-gpu.json")


def test_the_real_steps_are_the_documented_seven_on_the_cuda_backend(tmp_path):
    steps = gpu_check.build_steps(str(tmp_path), jobs=4, lesson_jobs=13)
    assert [s.name for s in steps] == list(gpu_check.STEP_NAMES) == ["doctor", "bench", "attention", "ncu",
                                                                      "lessons", "gpu-tests", "tests"]
    commands = {s.name: " ".join(s.command) for s in steps}
    assert "-m gpu tests" in commands["gpu-tests"] and "-m not gpu tests" in commands["tests"]
    assert "--nbval" in commands["lessons"] and " lessons " in commands["lessons"]
    if gpu_check._has_module("xdist"):       # a whole notebook per worker: its cells share one kernel
        assert "-n 13 --dist loadfile" in commands["lessons"] and "-n 4 --dist loadscope" in commands["tests"]
    assert commands["bench"].endswith(f"-m gpuedu bench --out {tmp_path / 'bench.json'}")
    assert commands["ncu"].endswith(f"ncu_compare.py measure --out-dir {tmp_path / 'ncu'} --gpu H200")
    assert commands["attention"].endswith(f"gpu_probe.py attention --seq 2048 4096 --out {tmp_path}")
    assert all(s.junit for s in steps if "pytest" in s.command)


def test_the_bench_runs_alone_and_what_times_nothing_runs_side_by_side(tmp_path):
    phases = gpu_check.plan(gpu_check.build_steps(str(tmp_path)))
    assert [[s.name for s in phase] for phase in phases] == [["doctor"], ["bench"], ["attention"], ["ncu"],
                                                             ["lessons", "gpu-tests", "tests"]]
    assert gpu_check.lesson_workers(os.path.join(REPO, "lessons")) == min(15, os.cpu_count())


def test_the_ncu_step_records_how_many_pairs_agree_and_its_files_go_beside_the_results(tmp_path):
    out_dir = tmp_path / "logs" / gpu_check.NCU_DIR
    comparison = {"gpu": "H200 SXM", "equal": 40, "pairs": 42, "per_metric": {}, "differences": []}
    ncu = gpu_check.Step("ncu", "stand-in ncu", [sys.executable, "-c", textwrap.dedent(f"""
        import json, os, sys
        folder = sys.argv[sys.argv.index("--out-dir") + 1]
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, "ncu.csv"), "w").write('"ID","Kernel Name"\\n')
        json.dump({comparison!r}, open(os.path.join(folder, "ncu-compare.json"), "w"))
    """), "--out-dir", str(out_dir)], timeout_s=120)
    record, path = run(tmp_path, [ncu])
    (entry,) = record["steps"]
    assert entry["ok"] and (entry["ncu_equal"], entry["ncu_pairs"]) == (40, 42)
    results = tmp_path / "results"
    assert entry["results_file"] == str(results / "test-gpu-ncu-check.json")
    assert json.loads((results / "test-gpu-ncu-check.json").read_text())["equal"] == 40
    assert (results / "test-gpu-ncu-check.csv").read_text().startswith('"ID"')
    assert "40 of 42 (launch, metric) pairs equal to Nsight Compute's" in "\n".join(
        gpu_check.summary_lines(record, path))


def test_the_ncu_step_models_dram_for_the_device_when_the_profiler_knows_it():
    assert gpu_check.profiler_gpu("NVIDIA H200") == "H200 SXM"
    assert gpu_check.profiler_gpu("NVIDIA A100-SXM4-80GB") == "A100 SXM4 80GB"
    assert gpu_check.profiler_gpu("NVIDIA GeForce RTX 4090") == gpu_check.NCU_DEFAULT_GPU == "H200"   # unknown
    assert gpu_check.profiler_gpu("Tesla T4") == "T4"
    assert gpu_check.profiler_gpu(None) == gpu_check.NCU_DEFAULT_GPU


def test_steps_side_by_side_run_at_once_and_are_recorded_in_the_plans_order(tmp_path):
    steps = [python_step(name, "import time; time.sleep(2); print('done')") for name in ("lessons", "gpu-tests")]
    started = time.perf_counter()
    record, _ = run(tmp_path, steps)
    assert time.perf_counter() - started < 3.8          # not 4 s one after the other
    assert record["plan"] == [["lessons", "gpu-tests"]]
    assert [s["name"] for s in record["steps"]] == ["lessons", "gpu-tests"] and record["ok"]


def test_the_budget_interrupts_a_step_keeps_what_pytest_wrote_and_skips_what_is_left(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "MIN_STEP_S", 1)   # a budget of seconds, for a test
    tests = pytest_step(tmp_path, """
        import time
        def test_quick():
            assert True
        def test_slow():
            time.sleep(120)
    """)
    tests.alone = True
    later = python_step("bench", "print('never')")
    later.alone = True
    started = time.perf_counter()
    record, path = gpu_check.run_checks([tests, later], str(tmp_path / "logs"), str(tmp_path / "results"), DEVICE,
                                        cwd=str(tmp_path), echo=False, budget_s=6)
    assert time.perf_counter() - started < 30
    first, second = record["steps"]
    assert first["problem"] == "stopped when the run's budget of 6 s ran out" and not first["ok"]
    assert first["counts"]["passed"] == 1          # pytest, interrupted, wrote what had run
    assert second["not_run"] and second["problem"] == "not run: the run's budget of 6 s was spent"
    assert record["budget_s"] == 6 and not record["ok"] and record["failed_steps"] == ["tests", "bench"]
    with open(path) as f:
        assert json.load(f) == record
    assert "not run" in "\n".join(gpu_check.summary_lines(record, path))


@needs_nvcc
def test_the_command_runs_on_a_gpu_that_passes_the_preflight(tmp_path):
    fake = fake_device(tmp_path, cc=(9, 0))
    out = run_child(f"""
        import sys
        from gpuedu.tools import cli
        sys.exit(cli.main(["gpu-check", "--steps", "doctor", "--results", {str(tmp_path / 'results')!r},
                           "--logs", {str(tmp_path / 'logs')!r}]))
    """, fake=fake)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "gpuedu gpu-check on Fake GPU (sm_90): doctor" in out.stdout
    with open(tmp_path / "results" / "fake-gpu-checks.json") as f:
        record = json.load(f)
    assert record["ok"] and [s["name"] for s in record["steps"]] == ["doctor"]
    assert record["device"]["name"] == "Fake GPU" and record["device"]["pycuda_version"] == "2099.1"
    assert "cuda (real GPU)" in (tmp_path / "logs" / "doctor.log").read_text()


def test_list_shows_the_plan_and_every_steps_command_without_a_gpu():
    proc = subprocess.run([sys.executable, "-m", "gpuedu", "gpu-check", "--list", "--jobs", "3", "--budget", "480"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [ln for ln in lines if ln.startswith("phase")] == [
        "phase 1 (alone):", "phase 2 (alone):", "phase 3 (alone):", "phase 4 (alone):", "phase 5 (side by side):"]
    names = [ln.split()[0] for ln in lines if ln.startswith("  ") and not ln.startswith("   ")]
    assert names == list(gpu_check.STEP_NAMES)
    assert "GPUEDU_BACKEND=cuda" in proc.stdout and "-m gpuedu bench" in proc.stdout
    assert ("-n 3 --dist loadscope" in proc.stdout) == gpu_check._has_module("xdist")
    assert "within a budget of 480 s" in proc.stdout


def test_a_budget_that_cannot_hold_a_step_is_refused():
    proc = subprocess.run([sys.executable, "-m", "gpuedu", "gpu-check", "--budget", "5"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "--budget is in seconds and must be more than 10, got 5" in proc.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_gpu_check_runs_the_command_and_says_how_to_make_a_missing_environment(tmp_path):
    recipe = subprocess.run(["make", "-n", "gpu-check", "GPU_CHECK_ARGS=--steps lessons"], cwd=REPO,
                            capture_output=True, text=True, timeout=60).stdout
    assert "-m gpuedu gpu-check --steps lessons" in recipe
    missing = str(tmp_path / "no-venv" / "bin" / "python")
    proc = subprocess.run(["make", "-s", "gpu-check", f"PY={missing}"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    assert f"no {missing}" in proc.stderr and "offline_install.py install --system-site-packages" in proc.stderr


def test_the_attention_probes_record_is_published_beside_the_one_the_lessons_quote(tmp_path):
    logs, results = tmp_path / "logs", tmp_path / "results"
    logs.mkdir()
    assert gpu_check.publish_attention(str(logs), str(results), "Test GPU") is None      # the step wrote nothing
    (logs / "probe-attention.json").write_text('{"probe": "attention"}')
    assert gpu_check.publish_attention(str(logs), str(results), "Test GPU") == str(results / "test-gpu-attention-check.json")
    assert json.loads((results / "test-gpu-attention-check.json").read_text()) == {"probe": "attention"}


def test_a_step_gets_sigint_at_its_default_even_when_this_process_ignores_it(tmp_path):
    # (a shell's background job, or a test runner's worker, ignores SIGINT; a step must still stop on it)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code, lines = gpu_check.run_command(
            [sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"],
            str(tmp_path / "step.log"), dict(os.environ), str(tmp_path), timeout_s=60, echo=False)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 0 and lines[-1].strip() == "True", lines
