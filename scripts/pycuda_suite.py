"""Run PyCUDA's own tests of its driver, GPUArray and cumath, unmodified, against gpuedu's CPU emulator.

    python scripts/pycuda_suite.py        # download (once), run, write benchmarks/results/pycuda-suite.json
    python scripts/pycuda_suite.py --files test_cumath.py  # one file (the record then says so)
    python scripts/pycuda_suite.py --select "scan or vector"  # the tests pytest -k picks
    python scripts/pycuda_suite.py --sdist path/to/pycuda-2026.1.tar.gz --out /tmp/suite.json

The tests come from PyCUDA's source distribution of the version pinned below, as PyPI serves it: the sdist is
downloaded once into build/ and checked against its pinned SHA-256 before anything is read from it. The files
``test/test_driver.py``, ``test/test_gpuarray.py`` and ``test/test_cumath.py`` are extracted byte for byte into a
temporary folder, beside a ``conftest.py`` this script writes. That conftest is the only shim: it routes
``import pycuda.*`` to the emulator (``gpuedu.backend.use_emulator()``), registers the ``cuda`` marker, and
watches each test with a timer. Everything the tests import from PyCUDA (``pycuda.tools.mark_cuda_test``,
``init_cuda_context_fixture``, ``pycuda.characterize``, ...) comes from the emulator itself, except ``pytools``,
a package of its own that PyCUDA depends on, and gpuedu too.

pytest runs in a child process with pytest-xdist's workers (``--workers``, 2 by default): a test that kills its
worker (a crash) is reported by xdist and a fresh worker goes on with the rest. A test that runs longer than
``--timeout`` seconds is a hang: the watchdog writes its name down and ends the worker, so the run goes on too.
Each worker may use an equal share of nine tenths of the memory available when the run starts (``--memory-limit``
sets it): a test that needs more fails with a MemoryError instead of waking the kernel's OOM killer. Such a test
runs again afterwards, alone, with nine tenths of the memory available then; that second outcome is its outcome
(the record lists these tests under ``run_alone_for_memory``).

Every test ends as one of passed, failed, error (in its setup or teardown), skipped, xfailed (PyCUDA's own
``pytest.xfail``), crashed or hung; the record gives the counts per file and in total, the pass rate
(passed / collected: skipped and xfailed tests count against it), and for each test that did not pass its name
and a one-line reason. Beside the raw count, ``gpu_comparable`` is the count a real GPU with CUDA 13 is held to:
the tests skipped or xfailed here that PyCUDA skips or xfails on such a GPU too (``UPSTREAM_NOT_PASSED``, each
with its reason) are left out of it, and listed. Exit status: 0 when the run completed (whatever the rate), 1 when
``--min-rate`` was given and not reached, 2 when the suite could not be run at all.
"""
import argparse
import datetime
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The PyCUDA release whose tests are run, its sdist (fetched by name with pip) and the SHA-256 PyPI
#: publishes for it.
PYCUDA_VERSION = "2026.1"
SDIST = f"pycuda-{PYCUDA_VERSION}.tar.gz"
SDIST_SHA256 = "759516160628ba06f32ce7e563e3f5b9214691dc9528a03ea99ea1073f4e14ba"

TEST_FILES = ("test_driver.py", "test_gpuarray.py", "test_cumath.py")
DEFAULT_CACHE = os.path.join(ROOT, "build", "pycuda-suite")
DEFAULT_OUT = os.path.join(ROOT, "benchmarks", "results", "pycuda-suite.json")

OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "crashed", "hung")

# The conftest.py written beside the extracted tests. It runs in the pytest controller and in every worker.
CONFTEST = '''\
"""Written by gpuedu's scripts/pycuda_suite.py: run PyCUDA's tests against gpuedu's CPU emulator."""
import json
import os
import threading

import pytest

import gpuedu.backend

gpuedu.backend.use_emulator()

# Each worker may take its share of the host's memory and no more: a test that wants more gets a MemoryError
# (a failure with a reason) instead of waking the kernel's OOM killer, which would end the worker (or a process
# that has nothing to do with the run).
if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("PYCUDA_SUITE_MEMORY_LIMIT"):
    import resource
    _limit = int(os.environ["PYCUDA_SUITE_MEMORY_LIMIT"])
    resource.setrlimit(resource.RLIMIT_AS, (_limit, _limit))

_TIMEOUT = float(os.environ["PYCUDA_SUITE_TIMEOUT"])
_HANGS = os.environ["PYCUDA_SUITE_HANGS"]
_REPORTS = os.environ["PYCUDA_SUITE_REPORTS"]


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a CUDA device (PyCUDA's marker)")


def _hung(nodeid):
    with open(_HANGS, "a") as f:
        f.write(nodeid + "\\n")
    os._exit(70)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    timer = threading.Timer(_TIMEOUT, _hung, args=(item.nodeid,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _reason(report):
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    if crash is not None and crash.message:
        text = crash.message
    elif isinstance(report.longrepr, tuple):        # a skip: (path, line, reason)
        text = str(report.longrepr[2])
    else:
        text = str(report.longrepr or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


def _record(entry):
    with open(_REPORTS, "a") as f:
        f.write(json.dumps(entry) + "\\n")


def pytest_runtest_logreport(report):
    # Only the controller records: it sees every worker's reports, and the ones xdist makes for a crashed worker.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    reason = _reason(report) if report.outcome != "passed" else ""
    if hasattr(report, "wasxfail"):
        reason = reason or str(report.wasxfail)
    _record({"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
             "wasxfail": hasattr(report, "wasxfail"), "reason": reason})


def pytest_collectreport(report):
    if os.environ.get("PYTEST_XDIST_WORKER") or report.outcome != "failed":
        return
    _record({"nodeid": report.nodeid, "when": "collect", "outcome": "failed", "wasxfail": False,
             "reason": _reason(report)})
'''


class SuiteError(Exception):
    """What went wrong, in words that say how to fix it."""


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_sdist(cache_dir=DEFAULT_CACHE, sdist=None):
    """The path of the pinned sdist, checked against its SHA-256: ``sdist`` if given, else cached or downloaded."""
    if sdist is None:
        sdist = os.path.join(cache_dir, SDIST)
        if not os.path.exists(sdist):
            os.makedirs(cache_dir, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=cache_dir) as folder:
                done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "pycuda",
                                       "--dest", folder, f"pycuda=={PYCUDA_VERSION}"], capture_output=True, text=True,
                                      timeout=600, stdin=subprocess.DEVNULL)
                if done.returncode != 0 or not os.path.isfile(os.path.join(folder, SDIST)):
                    last = (done.stderr or done.stdout).strip().splitlines()
                    raise SuiteError(f"pip could not download pycuda=={PYCUDA_VERSION}'s sdist "
                                     f"({last[-1] if last else 'exit ' + str(done.returncode)}); download it by hand "
                                     f"(pip download --no-binary pycuda pycuda=={PYCUDA_VERSION}) and pass --sdist PATH, "
                                     f"or put it at {sdist}")
                os.replace(os.path.join(folder, SDIST), sdist)
    elif not os.path.exists(sdist):
        raise SuiteError(f"--sdist {sdist}: no such file")
    found = sha256_of(sdist)
    if found != SDIST_SHA256:
        raise SuiteError(f"{sdist} has SHA-256 {found}, not the pinned {SDIST_SHA256} of PyCUDA {PYCUDA_VERSION}'s "
                         "sdist; delete it so it is downloaded again, or pass the right file with --sdist")
    return sdist


def extract_tests(sdist, dest, files=TEST_FILES):
    """Copy ``test/<file>`` of the sdist into ``dest`` byte for byte; returns their paths."""
    prefix = f"pycuda-{PYCUDA_VERSION}/test/"
    paths = []
    with tarfile.open(sdist, "r:gz") as tar:
        for name in files:
            try:
                member = tar.getmember(prefix + name)
            except KeyError:
                raise SuiteError(f"{sdist} has no {prefix + name}; the files PyCUDA {PYCUDA_VERSION} ships are "
                                 + ", ".join(m.name for m in tar.getmembers() if m.name.startswith(prefix)))
            path = os.path.join(dest, name)
            with tar.extractfile(member) as src, open(path, "wb") as out:
                shutil.copyfileobj(src, out)
            paths.append(path)
    return paths


def available_memory():
    """Bytes of host memory available now (MemAvailable), or None where /proc/meminfo does not say."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def default_memory_limit(workers):
    """Nine tenths of the memory available now, shared among the workers (None: no limit known)."""
    available = available_memory()
    return None if available is None else int(available * 0.9) // workers


def run_tests(folder, files, workers=2, timeout=120.0, python=sys.executable, total_timeout=3600,
              memory_limit=None, select=None, tests=None, round_name="run"):
    """Run pytest on ``files`` in ``folder`` in a child process; returns (per-test results, pytest's output).
    ``tests``: only these node ids (of ``files``); ``round_name`` keeps each round's reports apart."""
    reports = os.path.join(folder, f"reports-{round_name}.jsonl")
    hangs = os.path.join(folder, f"hangs-{round_name}.txt")
    with open(os.path.join(folder, "conftest.py"), "w") as f:
        f.write(CONFTEST)
    with open(os.path.join(folder, "pytest.ini"), "w") as f:   # keep the repository's pytest settings out
        f.write("[pytest]\n")
    # The child is a pytest of its own: no PYTEST_* variable of a pytest that runs this script (an xdist
    # worker's PYTEST_XDIST_WORKER would make the child's controller think it is a worker and record nothing).
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env = dict(clean, PYCUDA_SUITE_TIMEOUT=str(timeout), PYCUDA_SUITE_HANGS=hangs, PYCUDA_SUITE_REPORTS=reports,
               PYCUDA_SUITE_MEMORY_LIMIT=str(memory_limit or ""),
               PYTHONPATH=os.pathsep.join([ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                    if p]))
    # One pytest per file: a file that fails to import is that file's error, not the end of the run.
    outputs = []
    for name in files:
        command = [python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rN", "--rootdir", folder, "-c",
                   os.path.join(folder, "pytest.ini"), "-n", str(workers), "--max-worker-restart", "1000000"]
        if tests is not None:
            mine = [t for t in tests if t.split("::")[0] == name]
            if not mine:
                continue
            command += mine
        else:
            command.append(name)
        if select:
            command += ["-k", select]
        try:
            proc = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                                  timeout=total_timeout)
        except subprocess.TimeoutExpired as exc:
            raise SuiteError(f"{name} took more than {total_timeout} s in all; raise --total-timeout") from exc
        outputs.append(proc.stdout + proc.stderr)
    if not os.path.exists(reports):
        raise SuiteError("pytest reported no test:\n" + "\n".join(outputs))
    with open(reports) as f:
        entries = [json.loads(line) for line in f if line.strip()]
    hung = set()
    if os.path.exists(hangs):
        with open(hangs) as f:
            hung = {line.strip() for line in f if line.strip()}
    return classify(entries, hung), "\n".join(outputs)


#: The tests that a real GPU with CUDA 13 does not pass either, because PyCUDA itself skips or xfails them there,
#: and why (node ids). The rule: a test of the run whose outcome is skipped
#: or xfailed and whose id is listed here is left out of the GPU-comparable count; any other outcome of a listed
#: test (it passed, or failed) keeps it in, and so does every skip for a reason of this machine (too little memory).
UPSTREAM_NOT_PASSED = (
    ("PyCUDA skips it under CUDA 12 and later: texture references were removed in CUDA 12", (
        "test_driver.py::TestDriver::test_2d_texture", "test_driver.py::TestDriver::test_multiple_2d_textures",
        "test_driver.py::TestDriver::test_multichannel_2d_texture", "test_driver.py::TestDriver::test_multichannel_linear_texture",
        "test_driver.py::TestDriver::test_2d_fp_textures", "test_driver.py::TestDriver::test_2d_fp_textures_layered",
        "test_driver.py::TestDriver::test_3d_fp_textures", "test_driver.py::TestDriver::test_3d_texture",
        "test_driver.py::TestDriver::test_fp_textures", "test_gpuarray.py::TestGPUArray::test_take",
        "test_gpuarray.py::TestGPUArray::test_take_put")),
    ("PyCUDA skips it under CUDA 12 and later: surface references were removed in CUDA 12", (
        "test_driver.py::TestDriver::test_2d_fp_surfaces", "test_driver.py::TestDriver::test_3d_fp_surfaces")),
    ("PyCUDA skips it on every device (https://github.com/inducer/pycuda/issues/163)", (
        "test_gpuarray.py::TestGPUArray::test_sum_allocator", "test_gpuarray.py::TestGPUArray::test_dot_allocator")),
    ("PyCUDA's own xfail on every device (known issue: must fix array creation)", (
        "test_driver.py::TestDriver::test_register_host_memory",)),
    ("PyCUDA's own xfail on every device for int32/int64 true division (its merge request 66)", tuple(
        f"test_gpuarray.py::TestGPUArray::test_binary_ops_with_unequal_dtypes[truediv-{a}-{b}]"
        for a in ("int32", "int64") for b in ("int32", "int64"))),
)
UPSTREAM_OUTCOMES = ("skipped", "xfailed")


def upstream_reason(nodeid):
    """Why a real GPU with CUDA 13 does not pass this test either, or None when it would."""
    for reason, patterns in UPSTREAM_NOT_PASSED:
        if nodeid in patterns:
            return reason
    return None


def gpu_comparable(results):
    """The count a real GPU with CUDA 13 is held to: the run's tests less those that were skipped or xfailed here
    and that PyCUDA skips or xfails there too (``UPSTREAM_NOT_PASSED``)."""
    left_out = {nodeid: upstream_reason(nodeid) for nodeid, r in sorted(results.items())
                if r["outcome"] in UPSTREAM_OUTCOMES and upstream_reason(nodeid)}
    collected = len(results) - len(left_out)
    passed = sum(r["outcome"] == "passed" for r in results.values())
    return {"rule": "collected, less the tests skipped or xfailed here that PyCUDA skips or xfails on a real GPU "
                    "with CUDA 13 too (scripts/pycuda_suite.py, UPSTREAM_NOT_PASSED)",
            "collected": collected, "passed": passed,
            "pass_rate": round(passed / collected, 4) if collected else 0.0, "left_out": left_out}


# What a test that ran out of its worker's share of memory fails with: NumPy's and the emulator's MemoryError.
MEMORY_FAILURES = ("MemoryError", "Unable to allocate", "cannot allocate")


def out_of_memory(results):
    """The tests that failed for want of memory (their reason says so), in order."""
    return [nodeid for nodeid, r in sorted(results.items())
            if r["outcome"] in ("failed", "error") and any(m in r["reason"] for m in MEMORY_FAILURES)]


def classify(entries, hung=()):
    """One outcome and reason per test from pytest's reports (setup, call, teardown; xdist's crash reports)."""
    results = {}
    for entry in entries:
        nodeid, outcome, when = entry["nodeid"], entry["outcome"], entry["when"]
        result = results.setdefault(nodeid, {"outcome": "passed", "reason": ""})
        if when == "collect":
            result.update(outcome="error", reason="collection failed: " + entry["reason"])
        elif "crashed while running" in entry["reason"] or nodeid in hung:
            if nodeid in hung:
                result.update(outcome="hung", reason="ran past the per-test timeout")
            else:
                result.update(outcome="crashed", reason=entry["reason"])
        elif result["outcome"] in ("crashed", "hung"):
            continue
        elif outcome == "skipped":
            if result["outcome"] == "passed":
                result.update(outcome="xfailed" if entry.get("wasxfail") else "skipped", reason=entry["reason"])
        elif outcome == "failed":
            if when == "call":
                result.update(outcome="failed", reason=entry["reason"])
            elif result["outcome"] != "failed":
                result.update(outcome="error", reason=f"in {when}: " + entry["reason"])
    for nodeid in hung:           # a hang whose crash report did not arrive is still a hang
        results.setdefault(nodeid, {"outcome": "hung", "reason": "ran past the per-test timeout"})
    return results


def counts_of(results):
    counts = {outcome: 0 for outcome in OUTCOMES}
    for result in results.values():
        counts[result["outcome"]] += 1
    counts["collected"] = len(results)
    counts["pass_rate"] = round(counts["passed"] / counts["collected"], 4) if counts["collected"] else 0.0
    return counts


def gpuedu_commit():
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


def build_record(results, files, sdist_sha256, timeout, workers, memory_limit=None, commit=None):
    sys.path.insert(0, ROOT)
    from gpuedu import machine
    per_file = {}
    for name in files:
        mine = {k: v for k, v in results.items() if k.split("::")[0] == name}
        per_file[name] = counts_of(mine)
    return {
        "what": "PyCUDA's own tests, unmodified, run against gpuedu's CPU emulator (scripts/pycuda_suite.py)",
        "pycuda_version": PYCUDA_VERSION,
        "sdist": SDIST,
        "sdist_sha256": sdist_sha256,
        "files": list(files),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpuedu_commit": commit,
        # the machine, not where this checkout or its interpreter happen to live on it
        "machine": {k: v for k, v in machine.describe(devices=False).items()
                    if k not in ("python_executable", "nvcc_path")},
        "pytest": machine.package_version("pytest"),
        "pytest_xdist": machine.package_version("pytest-xdist"),
        "per_test_timeout_s": timeout,
        "workers": workers,
        "memory_limit_per_worker_bytes": memory_limit,
        "per_file": per_file,
        "total": counts_of(results),
        "gpu_comparable": gpu_comparable(results),
        "not_passed": {nodeid: r for nodeid, r in sorted(results.items()) if r["outcome"] != "passed"},
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", nargs="+", choices=TEST_FILES, default=list(TEST_FILES),
                        help="which of PyCUDA's test files to run (default: all three)")
    parser.add_argument("--sdist", help="PyCUDA's sdist (checked against the pinned SHA-256) instead of the cached "
                                        "or downloaded one")
    parser.add_argument("--cache", default=DEFAULT_CACHE,
                        help="where the downloaded sdist is kept (default: %(default)s)")
    parser.add_argument("--out", default=DEFAULT_OUT, help="the JSON record to write (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds one test may run before it counts as a "
                                                                     "hang (default: %(default)s)")
    parser.add_argument("--total-timeout", type=float, default=3600.0, help="seconds one file's run may take in all")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (default: %(default)s)")
    parser.add_argument("--memory-limit", type=float, help="GiB of address space each worker may use (default: "
                                                             "nine tenths of the available memory over the workers)")
    parser.add_argument("--select", metavar="EXPR", help="only the tests pytest's -k EXPR picks (the record says so)")
    parser.add_argument("--min-rate", type=float, help="exit 1 when the pass rate is below this (0 to 1)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and print its path")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1: the workers are what keeps a crash from ending the run")
    commit = gpuedu_commit()      # the code that runs, before anything else can change the tree
    import importlib.util
    if importlib.util.find_spec("pytools") is None:
        print("note: pytools (PyCUDA's own dependency) is not installed, so test_complex_bits will fail on its "
              "import; it is one of gpuedu's own dependencies: pip install -e . installs it", file=sys.stderr)
    memory_limit = (int(args.memory_limit * 2**30) if args.memory_limit is not None
                    else default_memory_limit(args.workers))
    try:
        sdist = fetch_sdist(args.cache, args.sdist)
        folder = tempfile.mkdtemp(prefix="pycuda-suite-")
        try:
            extract_tests(sdist, folder, args.files)
            results, output = run_tests(folder, args.files, args.workers, args.timeout,
                                        total_timeout=args.total_timeout, memory_limit=memory_limit,
                                        select=args.select)
            # A test that needs more than a worker's share of memory runs again, alone, with nine tenths of
            # what is available then; its second outcome is its outcome.
            alone = out_of_memory(results) if args.workers > 1 else []
            if alone:
                again, _ = run_tests(folder, args.files, 1, args.timeout, total_timeout=args.total_timeout,
                                     memory_limit=default_memory_limit(1), tests=alone, round_name="alone")
                results.update({k: v for k, v in again.items() if k in alone})
        finally:
            if args.keep:
                print(f"tests and pytest's files kept in {folder}")
            else:
                shutil.rmtree(folder, ignore_errors=True)
    except SuiteError as exc:
        print(f"pycuda_suite: {exc}", file=sys.stderr)
        return 2
    record = build_record(results, args.files, SDIST_SHA256, args.timeout, args.workers, memory_limit, commit)
    record["select"] = args.select
    record["run_alone_for_memory"] = alone
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1, sort_keys=False)
        f.write("\n")
    total = record["total"]
    for name, counts in record["per_file"].items():
        print(f"{name:20s} " + " ".join(f"{k}={counts[k]}" for k in ("collected",) + OUTCOMES))
    gpu = record["gpu_comparable"]
    print(f"total: {total['passed']} of {total['collected']} passed ({total['pass_rate']:.1%}), "
          f"{total['crashed']} crashed, {total['hung']} hung; {gpu['passed']} of the {gpu['collected']} a real GPU "
          f"with CUDA 13 is held to ({gpu['pass_rate']:.1%}); record: {args.out}")
    if args.min_rate is not None and total["pass_rate"] < args.min_rate:
        print(f"pycuda_suite: pass rate {total['pass_rate']:.1%} is below --min-rate {args.min_rate:.1%}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
