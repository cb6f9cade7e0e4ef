"""``gpuedu gpu-check`` (``make gpu-check``): run everything the course promises about GPUs, and record it.

On a machine with an NVIDIA GPU, one command runs, each step in its own process and each step
whatever happened in the one before, in the order of their value to the record:

    doctor      ``gpuedu doctor`` with GPUEDU_BACKEND=cuda; fails unless the lessons get the GPU
    bench       ``gpuedu bench`` (the full suite): benchmarks/results/<device>.json and its plots, put
                there when the whole run is over (the tests of the same run read the record before it)
    attention   ``benchmarks/gpu_probe.py attention``: attention versions 3 and 4 against each of PyTorch's
                SDPA backends at N = 2048 and 4096; benchmarks/results/<device>-attention-check.json
    ncu         ``benchmarks/ncu_compare.py measure``: Nsight Compute's counters of a fixed workload (the
                course's ladders and the inline PTX kernels of benchmarks/ptx_counts.cu) beside the
                emulator's counts of the same launches; benchmarks/results/<device>-ncu-check.csv and .json
    lessons     every lesson under nbval with real PyCUDA, one notebook per worker
    gpu-tests   ``pytest -m gpu tests``: what only a real device shows
    tests       the rest of the test suite, on the GPU backend (``-m "not gpu"``)

The bench times the GPU, so it runs alone, and so do the attention probe and Nsight Compute, which replays each kernel; the
doctor runs first, alone, as it is quick and says whether the rest can mean anything. The last three time nothing they record, so they run side by
side (``plan``). ``--budget SECONDS`` bounds the whole run: a step still running when the budget
runs out is interrupted (pytest then writes what it has) and recorded as stopped, and a step the
budget never reached as not run.

It writes ``benchmarks/results/<device>-checks.json`` beside the bench's results: the device, the
software versions, the plan, and per step its command, exit code, pass/fail/skip counts, the names
of what failed, the duration and the tail of its output when it failed. Each step's full output goes
to ``gpu-check-logs/<step>.log``. Both JSON files can be committed as the record of the run.

Exit status: 0 every step passed; 1 at least one failed or was not run (all are reported); 3 there
is no usable GPU here, so nothing was run; 2 the command was used wrongly.
"""
import argparse
import concurrent.futures
import datetime
import glob
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ElementTree

from .. import backend as backend_module, preflight
from .. import machine

NO_GPU_EXIT = 3
STEP_NAMES = ("doctor", "bench", "attention", "ncu", "lessons", "gpu-tests", "tests")   # by their value to the record
# After a step's time (or the budget) runs out: SIGINT, so pytest writes what it has; this long after, SIGKILL.
STOP_GRACE_S = 20
# What counts as a lesson, for the number of notebook workers.
LESSONS_GLOB = "[0-9][0-9]_*.ipynb"
DEFAULT_LOG_DIR = "gpu-check-logs"
TAIL_LINES = 40
# Distributions whose versions the record keeps: the course, its GPU stack and its yardsticks.
VERSIONED = ("gpuedu", "numpy", "pycuda", "torch", "cupy-cuda13x", "cupy-cuda12x", "cupy", "pytest",
             "pytest-xdist", "pytest-timeout", "nbval", "nbclient", "ipykernel", "jupyter_client")


class Step:
    """One step: a command run from the repository root with GPUEDU_BACKEND=cuda."""

    def __init__(self, name, what, command, junit=None, timeout_s=4 * 3600, alone=False):
        self.name = name
        self.what = what
        self.command = list(command)
        self.junit = junit            # path of the JUnit XML pytest writes, for the counts and names
        self.timeout_s = timeout_s
        self.alone = alone            # nothing else runs beside it (it times the GPU, or comes first)


def _has_module(name):
    return importlib.util.find_spec(name) is not None


def default_jobs():
    """Test processes for the suite: one per two cores, at most 8 (each holds a CUDA context)."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))


def lesson_workers(lessons_dir="lessons"):
    """Notebook workers for the lessons step: one per lesson, at most one per core."""
    count = len(glob.glob(os.path.join(lessons_dir, LESSONS_GLOB))) or 1
    return max(1, min(count, os.cpu_count() or 1))


BENCH_FILE = "bench.json"    # the bench step's results in the logs folder; its plots are bench-<group>.png
NCU_DIR = "ncu"              # the ncu step's folder in the logs folder: ncu.csv and ncu-compare.json
NCU_FILES = (("ncu.csv", "ncu-check.csv"), ("ncu-compare.json", "ncu-check.json"))   # (written, published as)
#: The attention step's record in the logs folder (gpu_probe.py names it), and its name beside the bench's results
#: (not over the record the lessons quote, nvidia-h200-probe-attention.json).
ATTENTION_FILES = ("probe-attention.json", "attention-check.json")
#: The GPU whose L2 the ncu step's DRAM model uses, unless the device is one the profiler knows.
NCU_DEFAULT_GPU = "H200"


def publish_bench(log_dir, results_dir, device_name):
    """Copy the bench step's results and plots from the logs folder to ``<results>/<device>.json`` and
    ``<device>-<group>.png`` (the names ``gpuedu bench`` gives them there); returns the results' new path,
    or None when the bench wrote nothing."""
    from ..bench.environment import slug
    source = os.path.join(log_dir, BENCH_FILE)
    if not os.path.isfile(source):
        return None
    os.makedirs(results_dir, exist_ok=True)
    stem = slug(device_name)
    target = os.path.join(results_dir, f"{stem}.json")
    shutil.copyfile(source, target)
    prefix = os.path.splitext(BENCH_FILE)[0] + "-"
    for name in sorted(os.listdir(log_dir)):
        if name.startswith(prefix) and name.endswith(".png"):
            shutil.copyfile(os.path.join(log_dir, name), os.path.join(results_dir, stem + name[len(prefix) - 1:]))
    return target


def publish_attention(log_dir, results_dir, device_name):
    """Copy the attention step's record to ``<results>/<device>-attention-check.json``; returns its new path, or
    None when the step wrote none."""
    from ..bench.environment import slug
    written, name = ATTENTION_FILES
    source = os.path.join(log_dir, written)
    if not os.path.isfile(source):
        return None
    os.makedirs(results_dir, exist_ok=True)
    target = os.path.join(results_dir, f"{slug(device_name)}-{name}")
    shutil.copyfile(source, target)
    return target


def publish_ncu(log_dir, results_dir, device_name):
    """Copy the ncu step's CSV and comparison to ``<results>/<device>-ncu-check.csv`` and ``.json`` (beside, not
    over, the records the README quotes); returns the comparison's new path, or None when the step wrote none."""
    from ..bench.environment import slug
    source = os.path.join(log_dir, NCU_DIR)
    if not os.path.isfile(os.path.join(source, NCU_FILES[1][0])):
        return None
    os.makedirs(results_dir, exist_ok=True)
    published = None
    for written, name in NCU_FILES:
        if os.path.isfile(os.path.join(source, written)):
            published = os.path.join(results_dir, f"{slug(device_name)}-{name}")
            shutil.copyfile(os.path.join(source, written), published)
    return published


def profiler_gpu(device_name):
    """The profiler's name for the GPU called ``device_name`` (as the driver names it: "NVIDIA H200"), or
    NCU_DEFAULT_GPU when the profiler does not know it."""
    from ..profiler.gpus import get_gpu
    name = str(device_name or "")
    for candidate in (name, name.replace("NVIDIA", "", 1).strip()):
        try:
            return get_gpu(candidate).name
        except ValueError:
            continue
    return NCU_DEFAULT_GPU


def build_steps(log_dir, jobs=None, python=sys.executable, lesson_jobs=None, gpu=NCU_DEFAULT_GPU):
    """The seven steps, by their value; pytest plugins that are not installed are simply not asked for. ``gpu``: the
    profiler's GPU for the ncu step's DRAM model."""
    jobs = default_jobs() if jobs is None else jobs
    lesson_jobs = lesson_workers() if lesson_jobs is None else lesson_jobs
    pytest = [python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfEs"]   # list failures and skips
    timeout = ["--timeout=1800", "--timeout-method=thread"] if _has_module("pytest_timeout") else []
    xdist = _has_module("xdist")
    parallel = ["-n", str(jobs), "--dist", "loadscope"] if jobs > 1 and xdist else []
    # a notebook's cells share its kernel: whole notebooks per worker
    notebooks = ["-n", str(lesson_jobs), "--dist", "loadfile"] if lesson_jobs > 1 and xdist else []

    def junit(step):
        return os.path.join(log_dir, f"{step}.xml")

    return [
        Step("doctor", "gpuedu doctor; the lessons must get the cuda backend",
             [python, "-m", "gpuedu", "doctor"], timeout_s=600, alone=True),
        # Into the logs folder: the results folder gets it when the whole run is over (publish_bench), so
        # the tests of this same run still read the record that was there before.
        Step("bench", "gpuedu bench, the full suite (it times the GPU: alone)",
             [python, "-m", "gpuedu", "bench", "--out", os.path.join(log_dir, BENCH_FILE)],
             timeout_s=6 * 3600, alone=True),
        # Nsight Compute replays every kernel with the GPU's counters: nothing else may run beside it.
        Step("attention", "attention v3 and v4 against each of PyTorch's SDPA backends at N = 2048 and 4096 (it times "
                          "the GPU: alone)",
             [python, os.path.join("benchmarks", "gpu_probe.py"), "attention", "--seq", "2048", "4096",
              "--out", log_dir], timeout_s=1800, alone=True),
        Step("ncu", "Nsight Compute's counters of ncu_compare.py's workload against the emulator's (alone)",
             [python, os.path.join("benchmarks", "ncu_compare.py"), "measure", "--out-dir",
              os.path.join(log_dir, NCU_DIR), "--gpu", gpu], timeout_s=3600, alone=True),
        # Lessons time kernels too, but those outputs are not compared and not recorded: they share.
        Step("lessons", "every lesson under nbval with real PyCUDA, a notebook per worker",
             pytest + timeout + notebooks + ["--nbval", "--nbval-cell-timeout=1800", "lessons",
                                             f"--junitxml={junit('lessons')}"], junit=junit("lessons")),
        Step("gpu-tests", "pytest -m gpu: what only a real device shows",
             pytest + timeout + ["-m", "gpu", "tests", f"--junitxml={junit('gpu-tests')}"], junit=junit("gpu-tests")),
        Step("tests", "the test suite on the GPU backend (the gpu-marked tests run in gpu-tests)",
             pytest + timeout + parallel + ["-m", "not gpu", "tests", f"--junitxml={junit('tests')}"],
             junit=junit("tests")),
    ]


def plan(steps):
    """The steps as phases, run one after another: a step marked ``alone`` is a phase of its own; the
    steps between such steps run side by side."""
    phases = []
    for step in steps:
        if step.alone or not phases or phases[-1][-1].alone:
            phases.append([step])
        else:
            phases[-1].append(step)
    return phases


# --------------------------------------------------------------------------------------------
# Running a step
# --------------------------------------------------------------------------------------------

def _signal_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_group(proc):
    _signal_group(proc, signal.SIGKILL)


# A step starts with SIGINT at its default, whatever this process inherited: a process started in the background by a
# shell, or a test runner's worker, ignores SIGINT, and an ignored signal stays ignored across exec, so pytest in the
# step would not stop and write its results when its time runs out. This runs first in the step's process and then
# becomes the step's command (os.execvp), so it costs one interpreter start and no Popen(preexec_fn=...), which is
# unsafe beside the threads that run steps side by side.
_WITH_DEFAULT_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                        "os.execvp(sys.argv[1], sys.argv[1:])")


def run_command(command, log_path, env, cwd, timeout_s, echo=True):
    """Run ``command``, copying its output to the terminal (``echo``) and to ``log_path``; (exit code, lines).

    The command gets a process group of its own. When ``timeout_s`` passes the group gets SIGINT (pytest
    then stops and writes its results), and STOP_GRACE_S later SIGKILL with everything it started (pytest
    workers, notebook kernels). Exit code None: it ran out of time.
    """
    lines = []
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("$ " + shlex.join(command) + "\n")
        proc = subprocess.Popen([sys.executable, "-c", _WITH_DEFAULT_SIGINT, *command], cwd=cwd, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                errors="replace", bufsize=1, start_new_session=True)
        expired = threading.Event()

        def interrupt():             # runs on the timer's thread when the time limit passes
            expired.set()
            _signal_group(proc, signal.SIGINT)
            killer.start()

        killer = threading.Timer(STOP_GRACE_S, _kill_group, (proc,))
        watchdog = threading.Timer(timeout_s, interrupt)
        watchdog.start()
        try:
            for line in proc.stdout:   # ends when the group is gone: its output pipe closes
                lines.append(line.rstrip("\n"))
                log.write(line)
                if echo:
                    sys.stdout.write(line)
                    sys.stdout.flush()
            proc.wait()
        except KeyboardInterrupt:
            _kill_group(proc)
            raise
        finally:
            watchdog.cancel()
            killer.cancel()
            if expired.is_set():
                _kill_group(proc)      # what the interrupt left running
        if expired.is_set():
            note = f"gpu-check: stopped after {timeout_s:.0f} s, the step's time limit"
            lines.append(note)
            log.write(note + "\n")
            return None, lines
    return proc.returncode, lines


def read_junit(path):
    """Counts and names from a pytest JUnit XML file; None when pytest wrote none (it did not get that far)."""
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return None
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failures, skip_reasons = [], {}
    for case in root.iter("testcase"):
        name = "::".join(p for p in (case.get("classname", ""), case.get("name", "")) if p)
        if not name:
            continue                   # the test an interrupt stopped: pytest writes it without a name
        kinds = {child.tag for child in case}
        if "failure" in kinds:
            counts["failed"] += 1
            failures.append(name)
        elif "error" in kinds:
            counts["errors"] += 1
            failures.append(name)
        elif "skipped" in kinds:
            counts["skipped"] += 1
            reason = next(child.get("message", "") for child in case if child.tag == "skipped")
            skip_reasons[reason] = skip_reasons.get(reason, 0) + 1
        else:
            counts["passed"] += 1
    return {"counts": counts, "failures": failures, "skip_reasons": skip_reasons}


def judge_step(step, returncode, lines, budget_s=None):
    """(ok, problem, extra) for a finished step: what passing means differs per step. ``budget_s``: the run's
    budget, when it (not the step's own time limit) is what stopped the step."""
    extra = {}
    if returncode is None:
        junit = read_junit(step.junit) if step.junit else None
        if junit is not None:              # interrupted, pytest wrote what had run
            extra.update(junit)
        if budget_s is not None:
            return False, f"stopped when the run's budget of {budget_s:.0f} s ran out", extra
        return False, f"did not finish within {step.timeout_s} s", extra
    if step.junit:
        junit = read_junit(step.junit)
        if junit is None:
            return False, f"pytest exited with code {returncode} before writing any results", extra
        extra.update(junit)
        counts = junit["counts"]
        if counts["passed"] == 0:
            return False, "no test passed (all skipped or none collected)", extra
        if returncode != 0 or counts["failed"] or counts["errors"]:
            return False, f"{counts['failed']} failed, {counts['errors']} errors (pytest exit code {returncode})", extra
        return True, "", extra
    if step.name == "doctor":
        using_gpu = any("Lessons will use:" in ln and "cuda (real GPU)" in ln for ln in lines)
        if not using_gpu:
            return False, "the lessons would not get the cuda backend (see the doctor's report)", extra
    if step.name == "ncu" and returncode == 0:
        extra.update(ncu_summary(step))
    if step.name == "bench":
        extra.update(bench_summary(lines))
        if extra.get("failed_figures"):
            return False, f"figures failed with an error: {', '.join(extra['failed_figures'])}", extra
    if returncode != 0:
        return False, f"exit code {returncode}", extra
    return True, "", extra


def ncu_summary(step):
    """How many (launch, metric) pairs the ncu step found equal, from the comparison it wrote."""
    if "--out-dir" not in step.command[:-1]:
        return {}
    folder = step.command[step.command.index("--out-dir") + 1]
    path = os.path.join(folder, NCU_FILES[1][0])
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError) as exc:
        return {"ncu_error": f"{type(exc).__name__}: {exc}"}
    return {"ncu_equal": record.get("equal"), "ncu_pairs": record.get("pairs"), "ncu_comparison": path}


def bench_summary(lines):
    """The results file the bench wrote (from its ``wrote ...json`` line), its figures and targets."""
    written = [ln.split("wrote ", 1)[1].strip() for ln in lines if ln.startswith("wrote ") and ln.endswith(".json")]
    if not written:
        return {}
    summary = {"results_file": written[-1]}
    try:
        with open(written[-1], encoding="utf-8") as f:
            results = json.load(f)
    except (OSError, ValueError) as exc:
        summary["results_error"] = f"{type(exc).__name__}: {exc}"
        return summary
    figures = results.get("figures", [])
    summary["figures_measured"] = sum(f.get("status") == "ok" for f in figures)
    summary["figures_total"] = len(figures)
    summary["failed_figures"] = [f["name"] for f in figures
                                 if f.get("status") != "ok" and str(f.get("reason", "")).startswith("failed:")]
    summary["targets"] = [{k: t.get(k) for k in ("name", "status", "value", "goal", "reason")}
                          for t in results.get("targets", [])]
    return summary


def run_step(step, log_dir, env, cwd, echo=True, limit_s=None, budget_s=None):
    """Run one step and return its entry for the record. ``limit_s``: what is left of the run's budget
    ``budget_s``, when that is less than the step's own time limit."""
    if step.junit and os.path.exists(step.junit):
        os.remove(step.junit)          # a file left by an earlier run must not pass for this one
    log_path = os.path.join(log_dir, f"{step.name}.log")
    by_budget = limit_s is not None and limit_s < step.timeout_s
    if echo:
        print(f"\n=== gpu-check: {step.name}: {step.what}", flush=True)
    started = time.perf_counter()
    try:
        returncode, lines = run_command(step.command, log_path, env, cwd, limit_s if by_budget else step.timeout_s,
                                        echo=echo)
    except OSError as exc:             # the command itself could not start
        returncode, lines = 127, [f"gpu-check: could not start {step.command[0]}: {exc}"]
    duration = time.perf_counter() - started
    ok, problem, extra = judge_step(step, returncode, lines, budget_s if by_budget else None)
    entry = {"name": step.name, "what": step.what, "command": shlex.join(step.command),
             "returncode": returncode, "ok": ok, "problem": problem, "duration_s": round(duration, 1),
             "log": log_path}
    entry.update(extra)
    if not ok:
        entry["tail"] = lines[-TAIL_LINES:]
    if echo:
        print(f"=== gpu-check: {step.name}: {'passed' if ok else 'FAILED: ' + problem} ({duration:.0f} s)", flush=True)
    return entry


def not_run(step, budget_s):
    """The record's entry for a step the budget did not reach."""
    return {"name": step.name, "what": step.what, "command": shlex.join(step.command), "returncode": None,
            "ok": False, "problem": f"not run: the run's budget of {budget_s:.0f} s was spent", "duration_s": 0.0,
            "log": None, "not_run": True}


# Less than this left of the budget: a step is not started.
MIN_STEP_S = 10


def run_phase(phase, log_dir, env, cwd, echo=True, limit_s=None, budget_s=None):
    """Run one phase of the plan: its one step, or its steps side by side (each with its output in its log)."""
    if len(phase) == 1:
        return [run_step(phase[0], log_dir, env, cwd, echo, limit_s, budget_s)]
    if echo:
        print(f"\n=== gpu-check: side by side: {', '.join(s.name for s in phase)} (each one's output in "
              f"{log_dir}/<step>.log)", flush=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(phase)) as pool:
        futures = {pool.submit(run_step, step, log_dir, env, cwd, False, limit_s, budget_s): step for step in phase}
        for future in concurrent.futures.as_completed(futures):
            entry = future.result()
            if echo:
                print(f"=== gpu-check: {entry['name']}: {'passed' if entry['ok'] else 'FAILED: ' + entry['problem']} "
                      f"({entry['duration_s']:.0f} s)", flush=True)
    return [future.result() for future in futures]   # in the plan's order


# --------------------------------------------------------------------------------------------
# The record
# --------------------------------------------------------------------------------------------

def versions(described=None):
    """Installed versions of what the results depend on (None: not installed); the interpreter, gpuedu, NumPy,
    PyCUDA, nvcc and the driver as ``machine.describe()`` (``described``, when given) has them."""
    described = described or machine.describe(devices=False)
    found = {"python": described["python"]}
    for dist in VERSIONED:
        version = described[dist] if dist in ("gpuedu", "numpy", "pycuda") else machine.package_version(dist)
        if version is not None or not dist.startswith("cupy"):
            found[dist] = version
    found["nvcc"] = described["nvcc"]
    found["nvidia_driver"] = described["nvidia_driver"]
    return found


def git_state(cwd):
    """{"commit": sha, "dirty": bool} of the checkout, or None outside git."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                             timeout=30, stdin=subprocess.DEVNULL)
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                                capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if sha.returncode != 0:
        return None
    return {"commit": sha.stdout.strip(), "dirty": bool(status.stdout.strip())}


def record_path(device_name, results_dir):
    from ..bench.environment import slug
    return os.path.join(results_dir, f"{slug(device_name)}-checks.json")


def write_record(record, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
        f.write("\n")


def no_gpu_message(reason):
    return (f"gpuedu gpu-check: no usable GPU on this machine ({reason}), so nothing was run.\n"
            f"This command records the course's GPU results: it needs an NVIDIA GPU with its driver, the CUDA "
            f"toolkit (nvcc on PATH) and pycuda (pip install -e '.[cuda]'; offline: scripts/offline_install.py).\n"
            f"`gpuedu doctor` says what this machine lacks; README.md, \"Using a GPU\", says how to get one "
            f"(e.g. a cloud GPU instance or Google Colab). On this machine `make test` runs everything on the CPU emulator.")


def run_checks(steps, log_dir, results_dir, device, cwd, echo=True, argv=(), budget_s=None):
    """Run ``steps`` phase by phase (``plan``) within ``budget_s`` seconds if given, write the record after
    every phase, and return (record, its path)."""
    os.makedirs(log_dir, exist_ok=True)
    env = dict(os.environ)
    env[backend_module.ENV_VAR] = "cuda"
    started = time.perf_counter()
    described = machine.describe(devices=False)   # the device comes from the preflight that let the run start
    phases = plan(steps)
    record = {
        "kind": "gpuedu gpu-check",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": ["gpuedu", "gpu-check", *argv],
        "device": device,
        "host": {"platform": described["host_platform"], "cpus": described["host_cpu_count"]},
        "versions": versions(described),
        "git": git_state(cwd),
        "logs": log_dir,
        "budget_s": budget_s,
        "plan": [[s.name for s in phase] for phase in phases],
        "steps": [],
    }
    path = record_path(device.get("name", "device"), results_dir)
    for phase in phases:
        left = None if budget_s is None else budget_s - (time.perf_counter() - started)
        if left is not None and left < MIN_STEP_S:
            entries = [not_run(step, budget_s) for step in phase]
        else:
            entries = run_phase(phase, log_dir, env, cwd, echo, left, budget_s)
        record["steps"] += entries
        record["duration_s"] = round(time.perf_counter() - started, 1)
        record["ok"] = all(s["ok"] for s in record["steps"])
        record["failed_steps"] = [s["name"] for s in record["steps"] if not s["ok"]]
        write_record(record, path)     # after every phase: a run cut short still leaves its record
    # Each step's results go beside the records now the run is over (the tests of this run read the old ones).
    for name, publish in (("bench", publish_bench), ("attention", publish_attention), ("ncu", publish_ncu)):
        entry = next((e for e in record["steps"] if e["name"] == name and e.get("returncode") is not None), None)
        published = publish(log_dir, results_dir, device.get("name", "device")) if entry is not None else None
        if published:
            entry["results_file"] = published
            write_record(record, path)
    return record, path


def summary_lines(record, path):
    lines = ["", "gpu-check summary"]
    for s in record["steps"]:
        counts = s.get("counts")
        detail = (f"{counts['passed']} passed, {counts['failed']} failed, {counts['errors']} errors, "
                  f"{counts['skipped']} skipped" if counts else
                  "not run" if s.get("not_run") else
                  f"{s['ncu_equal']} of {s['ncu_pairs']} (launch, metric) pairs equal to Nsight Compute's"
                  if s.get("ncu_pairs") is not None else f"exit code {s['returncode']}")
        lines.append(f"  [{'ok ' if s['ok'] else 'BAD'}] {s['name']:<10} {detail} ({s['duration_s']:.0f} s)"
                     + ("" if s["ok"] else f": {s['problem']}"))
        for name in s.get("failures", [])[:20]:
            lines.append(f"          failed: {name}")
    lines.append(f"wrote {path}")
    lines.append("Result: " + ("every step passed." if record["ok"] else
                               f"FAILED steps: {', '.join(record['failed_steps'])} (full output in {record['logs']})"))
    return lines


def build_parser(parser):
    parser.add_argument("--steps", nargs="+", choices=STEP_NAMES, metavar="STEP",
                        help=f"run only these steps, in the usual order ({', '.join(STEP_NAMES)}; default: all)")
    parser.add_argument("--jobs", type=int, metavar="N",
                        help=f"test processes for the tests step (default here: {default_jobs()})")
    parser.add_argument("--results", default=os.path.join("benchmarks", "results"), metavar="DIR",
                        help="folder of the record <device>-checks.json (default: benchmarks/results)")
    parser.add_argument("--logs", default=DEFAULT_LOG_DIR, metavar="DIR",
                        help=f"folder of each step's full output (default: {DEFAULT_LOG_DIR})")
    parser.add_argument("--budget", type=float, metavar="SECONDS",
                        help="bound the whole run: a step running when it is spent is interrupted and recorded "
                             "as stopped, later ones as not run (steps run by their value: "
                             f"{', '.join(STEP_NAMES)})")
    parser.add_argument("--list", action="store_true",
                        help="print the plan: each phase's steps and commands; run nothing (works without a GPU)")
    return parser


def run(args, argv=()):
    """``gpuedu gpu-check``; returns the exit status."""
    if args.jobs is not None and args.jobs < 1:
        print("gpuedu gpu-check: --jobs must be at least 1", file=sys.stderr)
        return 2
    if args.budget is not None and not args.budget > MIN_STEP_S:
        print(f"gpuedu gpu-check: --budget is in seconds and must be more than {MIN_STEP_S}, got {args.budget:g}",
              file=sys.stderr)
        return 2
    cwd = os.getcwd()
    if not (os.path.isdir(os.path.join(cwd, "tests")) and os.path.isdir(os.path.join(cwd, "lessons"))):
        print("gpuedu gpu-check: run it from the repository root (the folder with tests/ and lessons/), "
              "e.g. `make gpu-check`", file=sys.stderr)
        return 2
    log_dir = os.path.abspath(args.logs)
    wanted = args.steps or STEP_NAMES
    steps = [s for s in build_steps(log_dir, args.jobs) if s.name in wanted]
    if args.list:
        for number, phase in enumerate(plan(steps), 1):
            how = "alone" if len(phase) == 1 else "side by side"
            print(f"phase {number} ({how}):")
            for step in phase:
                print(f"  {step.name:<10} {step.what}\n             {backend_module.ENV_VAR}=cuda "
                      f"{shlex.join(step.command)}")
        if args.budget is not None:
            print(f"within a budget of {args.budget:.0f} s: a step running when it is spent is interrupted, later "
                  f"phases are not run")
        return 0
    ok, reason, details = preflight.check_gpu()   # child-process probes: this process keeps no context
    if not ok:
        print(no_gpu_message(reason), file=sys.stderr)
        return NO_GPU_EXIT
    probe = details.get("probe", {})
    device = dict(details.get("device", {}))
    gpu = profiler_gpu(device.get("name"))        # the ncu step's DRAM model: this GPU's L2 where it is known
    steps = [s for s in build_steps(log_dir, args.jobs, gpu=gpu) if s.name in wanted]
    device["cuda_driver_version"] = probe.get("cuda_driver_version")
    device["pycuda_version"] = probe.get("pycuda_version")
    print(f"gpuedu gpu-check on {device.get('name')} (sm_{device.get('arch')}): {', '.join(s.name for s in steps)}")
    record, path = run_checks(steps, log_dir, args.results, device, cwd, argv=argv, budget_s=args.budget)
    print("\n".join(summary_lines(record, path)))
    return 0 if record["ok"] else 1
