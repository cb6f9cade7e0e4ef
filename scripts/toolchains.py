"""The emulator on the toolchains learners have, beside the one `make test` uses: the emulator's tests
(tests/emulator) and lessons 01, 03 and 04 under nbval, once per toolchain, and on the g++ legs the profiler's
tests too (tests/profiler: its counts must not depend on the g++). `make toolchains` runs every leg;
CI runs it after `make test` (.ci/run). README.md, "Platforms", lists what each leg is.

    python scripts/toolchains.py [clang] [hardened] [debian13] [arm64] [--bench [debian13|arm64]]

Legs (all of them when none is named):
  clang     clang++-19 on this machine (`apt-get install clang-19` when it is missing)
  hardened  g++ with the hardening Ubuntu's g++ turns on by default (scripts/hardened-g++ as CXX)
  debian13  Debian 13 "trixie" (g++ 14, glibc 2.41, Python 3.13) in a chroot made with debootstrap from
            Debian's default mirror; the chroot (and its virtual environment) is kept between runs in
            $GPUEDU_CHROOT_CACHE (default /var/cache/gpuedu-ci), keyed by what goes into it
  arm64     Debian 12 for arm64 (aarch64, g++ 12, Python 3.11) in a chroot, its programs run through qemu-user
            (binfmt_misc, registered here); kept like Debian 13's. Under emulation everything is some 5-10x
            slower, so it runs a part of the emulator's tests (ARM64_TESTS says which and why) and lessons 01
            and 03
--bench   runs benchmarks/emulator_bench.py here and in a chroot (Debian 13's unless named), alternately, three
          times each, and writes both sides' best and their ratios to benchmarks/results/: Debian 13's to
          cpu-emulator-runtime-toolchains.json; arm64's to cpu-emulator-runtime-arm64.json, with
          benchmarks/atomics_bench.py's three ways of building atomics in cpu-emulator-atomics-arm64.json
          (alone, it runs no leg; with legs named, after them)

apt-get, debootstrap and chroot need root: as another user each runs through `sudo -n`. Each leg's output is
kept in build/toolchains/<leg>.log; a table of the legs ends the run. Exit status: 0 every leg passed,
1 a leg failed, 2 a leg could not be set up (no root, no network).
"""
import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGS = os.path.join(ROOT, "build", "toolchains")
LEGS = ("clang", "hardened", "debian13", "arm64")
LESSONS = ["lessons/01_first_kernel.ipynb", "lessons/03_parallel_patterns.ipynb", "lessons/04_matmul.ipynb"]
# As `make test` runs them: one worker per core, a notebook's cells together.
PYTEST = ["-m", "pytest", "-n", "2", "--dist", "loadscope", "-q", "-p", "no:cacheprovider", "--timeout=600",
          "--timeout-method=thread", "tests/emulator", *LESSONS, "--nbval", "--nbval-cell-timeout=900"]
# The g++ legs count as well: the profiler's counts must be the same whatever g++ builds its instrumented twin
# (g++ 13's jump threader once split ReLU v1's load into two sites). Not on clang, which merges the stores of an
# if/else into one where nvcc keeps two (test_counters' warp-uniform branch test; README, "Platforms").
PYTEST_GXX = PYTEST + ["tests/profiler"]
# The arm64 leg, through qemu, where everything is some 5-10x slower: all of tests/emulator, tests/profiler and
# lessons 01 and 03 took 20 min 18 s there (2,336 test-seconds on 2 workers; README.md, "Platforms"), so CI runs
# the tests of what differs between CPUs (fibers and their stacks, signals and faults, atomics, memory and its
# guards, worker threads, warps, half precision, the toolchain check, and the profiler's counts, memcheck and
# racecheck; and clusters, whose blocks switch the thread's worker pointer), some 800 test-seconds with the lessons. Left out: the heaviest files whose code is the same on
# every CPU (the kernel cache, cuRAND's generators, complex numbers, the generated reduction/scan/elementwise
# kernels, the scanner's refusals and host calls, the profiler's catalogue and session), which the full run covers.
ARM64_TESTS = [f"tests/emulator/test_{name}.py" for name in (
    "aarch64", "atomics", "signals", "errors", "device_heap", "memory", "launch", "launch_resources", "workers",
    "warp", "cooperative_groups", "toolchains", "driver", "fp16", "bf16", "wmma", "pipeline", "device_language",
    "device_math_more", "clusters")] + [f"tests/profiler/test_{name}.py" for name in (
    "hardware_counts", "workers", "memcheck", "racecheck")] + [
    "lessons/01_first_kernel.ipynb", "lessons/03_parallel_patterns.ipynb"]
PYTEST_ARM64 = ["-m", "pytest", "-n", "2", "--dist", "loadscope", "-q", "-rs", "-p", "no:cacheprovider",
                "--timeout=1200", "--timeout-method=thread", *ARM64_TESTS, "--nbval", "--nbval-cell-timeout=1200"]
CLANG = "clang++-19"

# What each chroot is made of; a change here makes a new one.
DEBIAN13 = {"suite": "trixie", "variant": "minbase",
            "include": ["g++", "binutils", "make", "python3", "python3-venv", "ca-certificates"]}
# Debian 12 for arm64: what an Apple-silicon Mac's container, a Graviton instance or a Raspberry Pi runs. On an
# x86-64 machine its programs run through qemu-user (registered with binfmt_misc), some 5-10x slower.
ARM64 = {"suite": "bookworm", "arch": "arm64", "variant": "minbase",
         "include": ["g++", "binutils", "make", "python3", "python3-venv", "ca-certificates"]}
# Debian 12 as debootstrap makes it, for this machine's architecture: the base of the course's container image
# (scripts/container.py imports it as docker.io/library/debian:12, so that the image builds with no registry).
DEBIAN12 = {"suite": "bookworm", "variant": "minbase", "include": ["ca-certificates"]}
CHROOTS = {"debian13": DEBIAN13, "arm64": ARM64, "debian12": DEBIAN12}


class SetupError(Exception):
    """A leg could not be prepared (as opposed to: its tests failed)."""


def _as_root(command):
    return command if os.geteuid() == 0 else ["sudo", "-n", *command]


def _run(command, log, env=None, cwd=ROOT):
    """Run ``command``, its output appended to ``log``; returns the exit status."""
    with open(log, "a") as out:
        out.write("$ " + " ".join(shlex.quote(c) for c in command) + "\n")
        out.flush()
        return subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=env, cwd=cwd).returncode


def _apt_install(package, log):
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if _run(_as_root(["apt-get", "install", "-y", "-q", "--no-install-recommends", package]), log, env) == 0:
        return
    _run(_as_root(["apt-get", "update", "-q"]), log, env)
    if _run(_as_root(["apt-get", "install", "-y", "-q", "--no-install-recommends", package]), log, env) != 0:
        raise SetupError(f"apt-get could not install {package} (see {log})")


def _summary(log):
    """pytest's last line: "N passed, M skipped in S s", or what ended the run."""
    with open(log, errors="replace") as f:
        lines = [line.strip() for line in f if line.strip()]
    ends = [line for line in lines if " passed" in line or " failed" in line or " error" in line]
    return (ends or lines or ["no output"])[-1]


def _host_env(**extra):
    env = dict(os.environ, **extra)
    env.pop("GPUEDU_CXXFLAGS", None)   # the leg's toolchain, not the caller's extra flags
    return env


# ---- the legs on this machine ----------------------------------------------------------------------

def leg_clang(log):
    if shutil.which(CLANG) is None:
        _apt_install("clang-19", log)
    env = _host_env(CXX=CLANG, GPUEDU_CACHE_DIR=os.path.join(LOGS, "kernel-cache-clang"))
    shutil.rmtree(env["GPUEDU_CACHE_DIR"], ignore_errors=True)
    return _run([sys.executable, *PYTEST], log, env)


def leg_hardened(log):
    env = _host_env(CXX=os.path.join(ROOT, "scripts", "hardened-g++"),
                    GPUEDU_CACHE_DIR=os.path.join(LOGS, "kernel-cache-hardened"))
    shutil.rmtree(env["GPUEDU_CACHE_DIR"], ignore_errors=True)
    return _run([sys.executable, *PYTEST_GXX], log, env)


# ---- the chroots: Debian 13, Debian 12 for arm64, Debian 12 for the image ----------------------------

def _chroot_dir(name="debian13"):
    cache = os.environ.get("GPUEDU_CHROOT_CACHE", "/var/cache/gpuedu-ci")
    key = hashlib.sha256(json.dumps(CHROOTS[name], sort_keys=True).encode()).hexdigest()[:12]
    return cache, os.path.join(cache, f"{name}-{key}")


def _foreign_arch(spec):
    """The chroot's architecture where it is not this machine's (debootstrap's name for it), else None."""
    native = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
    arch = spec.get("arch")
    return arch if arch and arch != native else None


BINFMT = "/proc/sys/fs/binfmt_misc"


def _binfmt_ready(arch, log):
    """Programs of ``arch`` run here through qemu-user: Debian's qemu-user-static registers its handler with
    binfmt_misc (mounted first where it is not, as on a fresh VM), so that a chroot's /bin/sh just runs."""
    qemu = {"arm64": "aarch64"}[arch]
    if shutil.which(f"qemu-{qemu}-static") is None or shutil.which("update-binfmts") is None:
        for package in ("qemu-user-static", "binfmt-support"):
            _apt_install(package, log)
    if not os.path.exists(os.path.join(BINFMT, "status")):
        _run(_as_root(["mount", "-t", "binfmt_misc", "binfmt_misc", BINFMT]), log)
    _run(_as_root(["update-binfmts", "--enable", f"qemu-{qemu}"]), log)
    try:
        with open(os.path.join(BINFMT, f"qemu-{qemu}")) as f:
            if f.readline().strip() == "enabled":
                return
    except OSError:
        pass
    raise SetupError(f"{arch} programs cannot run here: qemu-{qemu} is not registered with binfmt_misc "
                     f"(see {log}; as root: mount -t binfmt_misc binfmt_misc {BINFMT} && "
                     f"update-binfmts --enable qemu-{qemu})")


def _make_chroot(name, target, log):
    spec = CHROOTS[name]
    foreign = _foreign_arch(spec)
    if foreign:
        _binfmt_ready(foreign, log)      # the chroot's programs run through qemu, debootstrap's own included
    if os.path.isfile(os.path.join(target, ".gpuedu-ready")):
        return
    if shutil.which("debootstrap") is None:
        _apt_install("debootstrap", log)
    partial = target + ".partial"
    _run(_as_root(["rm", "-rf", partial]), log)
    command = ["debootstrap", f"--variant={spec['variant']}", "--include=" + ",".join(spec["include"]),
               *([f"--arch={spec['arch']}"] if "arch" in spec else []), spec["suite"], partial]
    if _run(_as_root(command), log) != 0:
        raise SetupError(f"debootstrap could not make the {name} chroot (see {log})")
    _run(_as_root(["touch", os.path.join(partial, ".gpuedu-ready")]), log)
    if _run(_as_root(["mv", partial, target]), log) != 0:
        raise SetupError(f"could not move the chroot into {target}")


def _tracked_files():
    """The checkout's files as a clean clone has them, plus what is new and not ignored."""
    done = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                          capture_output=True)
    if done.returncode != 0:
        raise SetupError("scripts/toolchains.py copies the checkout with git ls-files: run it in a git checkout")
    return [name for name in done.stdout.decode().split("\0") if name and os.path.lexists(os.path.join(ROOT, name))]


def _copy_checkout(target, log):
    """The checkout into <chroot>/opt/gpuedu, afresh."""
    dest = os.path.join(target, "opt", "gpuedu")
    _run(_as_root(["rm", "-rf", dest]), log)
    listing = os.path.join(LOGS, "files.txt")
    with open(listing, "w") as f:
        f.write("\n".join(_tracked_files()) + "\n")
    _run(_as_root(["mkdir", "-p", dest]), log)
    pack = subprocess.Popen(["tar", "-c", "-f", "-", "-T", listing], cwd=ROOT, stdout=subprocess.PIPE)
    unpack = subprocess.run(_as_root(["tar", "-x", "-f", "-", "-C", dest]), stdin=pack.stdout)
    pack.stdout.close()
    if pack.wait() != 0 or unpack.returncode != 0:
        raise SetupError(f"could not copy the checkout into {dest}")


def pip_ca_bundle():
    """The CA bundle this machine's pip trusts (a proxy's CA may be in it, which Debian's own bundle lacks),
    or None."""
    bundle = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
    return bundle if os.path.isfile(bundle) else None


def _network_files(target, log):
    """DNS, and the CA bundle this machine's pip trusts, for pip in the chroot."""
    _run(_as_root(["cp", "-L", "/etc/resolv.conf", os.path.join(target, "etc", "resolv.conf")]), log)
    bundle = pip_ca_bundle()
    if bundle:
        _run(_as_root(["cp", "-L", bundle, os.path.join(target, "etc", "gpuedu-pip-ca.crt")]), log)
        return "/etc/gpuedu-pip-ca.crt"
    return None


def _in_chroot(target, script, log, ca=None):
    """Run a shell script inside the chroot, with /proc and /dev/shm mounted in a mount namespace of its
    own (they go when it ends), a clean environment and the repository copy as the working folder."""
    env = ["PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8", "CI=true",
           "GPUEDU_CACHE_DIR=/tmp/gpuedu-kernel-cache", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1"]
    if ca:
        env.append(f"PIP_CERT={ca}")
    env += [f"{k}={os.environ[k]}" for k in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                                            "NO_PROXY") if k in os.environ]
    inner = " ".join(["env", "-i", *map(shlex.quote, env), "sh", "-c", shlex.quote(f"cd /opt/gpuedu && {script}")])
    outer = (f"mount -t proc proc {shlex.quote(target)}/proc && "
             f"mount -t tmpfs tmpfs {shlex.quote(target)}/dev/shm && "
             f"chroot {shlex.quote(target)} {inner}")
    return _run(_as_root(["unshare", "--mount", "--propagation", "private", "sh", "-c", outer]), log)


@contextlib.contextmanager
def chroot_made(name, log):
    """The chroot ``name``'s folder, made first where it is missing; locked while used."""
    cache, target = _chroot_dir(name)
    if _run(_as_root(["mkdir", "-p", cache]), log) != 0:
        raise SetupError(f"cannot make {cache}: run as root, or give sudo -n, or set GPUEDU_CHROOT_CACHE")
    os.makedirs(LOGS, exist_ok=True)
    with open(os.path.join(LOGS, f"{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _make_chroot(name, target, log)
        yield target


@contextlib.contextmanager
def _chroot_ready(log, name="debian13"):
    """The chroot ``name`` with this checkout in it and its test dependencies installed; locked while used."""
    with chroot_made(name, log) as target:
        _copy_checkout(target, log)
        ca = _network_files(target, log)
        setup = ("{ test -x /opt/venv/bin/python || python3 -m venv /opt/venv; } && "
                 "pip install -q -e '.[test]' && rm -rf /tmp/gpuedu-kernel-cache")
        if _in_chroot(target, setup, log, ca) != 0:
            raise SetupError(f"could not install gpuedu's test dependencies in the {name} chroot (see {log})")
        yield target, ca


def _versions(target, log, ca):
    _in_chroot(target, "uname -m; g++ --version | head -1; ldd --version | head -1; python --version", log, ca)


def leg_debian13(log):
    with _chroot_ready(log) as (target, ca):
        _versions(target, log, ca)
        return _in_chroot(target, "python " + " ".join(map(shlex.quote, PYTEST_GXX)), log, ca)


def leg_arm64(log):
    with _chroot_ready(log, "arm64") as (target, ca):
        _versions(target, log, ca)
        return _in_chroot(target, "python " + " ".join(map(shlex.quote, PYTEST_ARM64)), log, ca)


# ---- the runtime benchmark, here and in the chroot ----------------------------------------------------

BENCH_ROUNDS = 3


def compare(rounds, side="debian13"):
    """Each side's best round of every figure (all are times or ratios of times: the least is the least
    disturbed), and the chroot's (``side``) best over this machine's."""
    best = {name: {k: min(r["results"][k] for r in runs) for k in runs[0]["results"]} for name, runs in rounds.items()}
    return best, {k: best[side][k] / best["here"][k] for k in best["here"] if best["here"][k]}


# Where each chroot's record goes, and what it says of the machine beside "measured".
BENCH_RECORDS = {
    "debian13": ("cpu-emulator-runtime-toolchains.json", "in a Debian 13 chroot"),
    "arm64": ("cpu-emulator-runtime-arm64.json",
              "in a Debian 12 arm64 chroot whose programs ran under qemu-user on this x86-64 machine: measured under "
              "qemu, so its times and its ratios to NumPy (NumPy under qemu too) are not a native ARM machine's"),
}


def bench(log, side="debian13"):
    """benchmarks/emulator_bench.py on this machine and in the chroot ``side``, alternately, BENCH_ROUNDS
    times each; every figure is a time or a ratio of times (lower is better), and each side keeps its best
    round, the least disturbed on a shared machine. Writes both sides, every round and the ratios. In the
    arm64 chroot, benchmarks/atomics_bench.py then measures the three ways of building atomics there."""
    env = _host_env(GPUEDU_CACHE_DIR=os.path.join(LOGS, "kernel-cache-bench"))
    here_out = os.path.join(LOGS, "bench-here.json")
    name, where = BENCH_RECORDS[side]
    rounds = {"here": [], side: []}
    with _chroot_ready(log, side) as (target, ca):
        for _ in range(BENCH_ROUNDS):
            if _run([sys.executable, "benchmarks/emulator_bench.py", "--out", here_out], log, env) != 0:
                raise SetupError(f"the benchmark failed on this machine (see {log})")
            with open(here_out) as f:
                rounds["here"].append(json.load(f))
            if _in_chroot(target, "python benchmarks/emulator_bench.py --out /tmp/bench.json", log, ca) != 0:
                raise SetupError(f"the benchmark failed in the {side} chroot (see {log})")
            with open(os.path.join(target, "tmp", "bench.json")) as f:
                rounds[side].append(json.load(f))
        if side == "arm64":
            atomics = "benchmarks/results/cpu-emulator-atomics-arm64.json"
            command = (f"python benchmarks/atomics_bench.py --out /tmp/atomics.json --where "
                       f"{shlex.quote('qemu-user on an x86-64 machine (' + _cpu() + ')')}")
            if _in_chroot(target, command, log, ca) != 0:
                raise SetupError(f"the atomics benchmark failed in the arm64 chroot (see {log})")
            shutil.copyfile(os.path.join(target, "tmp", "atomics.json"), os.path.join(ROOT, atomics))
            print(f"written to {atomics}")
    best, ratios = compare(rounds, side)
    record = {"when": time.strftime("%Y-%m-%d"),
              "what": f"benchmarks/emulator_bench.py on one machine ({_cpu()}, {os.cpu_count()} cores), alternately "
                      f"on its own toolchain and {where}; {BENCH_ROUNDS} rounds each; best round of each figure (all "
                      f"are times or ratios of times: lower is better)",
              "here": {"compiler": rounds["here"][0]["compiler"], "python": rounds["here"][0]["python"],
                       "best": best["here"]},
              side: {"compiler": rounds[side][0]["compiler"], "python": rounds[side][0]["python"],
                     "best": best[side]},
              f"{side}_over_here": ratios, "rounds": rounds}
    out = os.path.join(ROOT, "benchmarks", "results", name)
    with open(out, "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    print(f"{'figure (best of ' + str(BENCH_ROUNDS) + ')':26s} {'here':>10s} {side:>10s} {'ratio':>7s}")
    for key, ratio in ratios.items():
        print(f"{key:26s} {best['here'][key]:10.4g} {best[side][key]:10.4g} {ratio:7.3f}")
    print(f"written to {os.path.relpath(out, ROOT)}")


def _cpu():
    from gpuedu.machine import host_cpu_model      # the venv's gpuedu: make toolchains runs this with it
    return host_cpu_model()


def run_step(script, name, log, work):
    """``work()``, which returns (exit status, what to say of it), timed, with ``log`` started afresh: the row
    (name, verdict, seconds, detail) for ``print_table`` and the step's exit status (0 passed, 1 failed, 2 not set
    up: a SetupError). A step that did not pass prints the last 60 lines of its log."""
    open(log, "w").close()
    print(f"{script}: {name} ...", flush=True)
    start = time.monotonic()
    try:
        rc, detail = work()
        verdict, status = ("passed", 0) if rc == 0 else ("FAILED", 1)
    except SetupError as e:
        verdict, detail, status = "NOT SET UP", str(e), 2
    seconds = time.monotonic() - start
    print(f"{script}: {name} {verdict} in {seconds:.0f} s: {detail}", flush=True)
    if verdict != "passed":
        with open(log, errors="replace") as f:
            print("".join(f.readlines()[-60:]), flush=True)
    return (name, verdict, seconds, detail), status


def print_table(rows, first, last):
    """The steps' rows, one line each, under a heading: ``first`` names the steps, ``last`` their details."""
    print(f"\n{first:10s} {'result':11s} {'seconds':>7s}  {last}")
    for name, verdict, seconds, detail in rows:
        print(f"{name:10s} {verdict:11s} {seconds:7.0f}  {detail}")


def _leg(leg, log):
    return globals()[f"leg_{leg}"](log), _summary(log)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("legs", nargs="*", metavar="LEG", help=f"which legs to run: {', '.join(LEGS)} (default: all)")
    parser.add_argument("--bench", nargs="?", const="debian13", choices=sorted(BENCH_RECORDS), metavar="CHROOT",
                        help="compare the runtime benchmark with a chroot's: debian13 (the default) or arm64")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.legs) - set(LEGS))
    if unknown:
        parser.error(f"no leg called {', '.join(unknown)}: the legs are {', '.join(LEGS)}")
    os.makedirs(LOGS, exist_ok=True)
    rows, status = [], 0
    for leg in args.legs or ([] if args.bench else LEGS):
        log = os.path.join(LOGS, f"{leg}.log")
        row, leg_status = run_step("toolchains", leg, log, lambda: _leg(leg, log))
        rows.append(row)
        status = max(status, leg_status)
    if args.bench:
        try:
            bench(os.path.join(LOGS, "bench.log"), args.bench)
        except SetupError as e:
            print(f"toolchains: bench NOT SET UP: {e}")
            status = max(status, 2)
    if rows:
        print_table(rows, "leg", "tests")
    return status


if __name__ == "__main__":
    sys.exit(main())
