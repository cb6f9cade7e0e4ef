"""Nothing damaged in the kernel cache is loaded: each artefact (kernel module, worker library, runtime objects,
precompiled prelude, a module written from a buffer) is checked against the size and checksum recorded when it
was written, and one that differs is said in one line and built again. Each case runs in a fresh process, as a
learner's next notebook would, since a damaged library that got loaded would kill the process (SIGBUS, SIGILL)."""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from gpuedu.emulator import _cache, compiler

# Runs one kernel, then another whose source no cache has seen (so that building it uses the runtime objects
# and the precompiled prelude), then loads the first module's bytes through module_from_buffer.
SCRIPT = textwrap.dedent(r'''
    import sys, warnings
    import numpy as np
    warnings.simplefilter("always")
    from gpuedu.emulator import driver as drv
    from gpuedu.emulator import compiler
    drv.init()
    ctx = drv.Device(0).make_context()
    src = "__global__ void twice(float* a) { a[threadIdx.x] *= 2.0f; }"
    a = np.arange(8, dtype=np.float32)
    compiler.SourceModule(src).get_function("twice")(drv.InOut(a), block=(8, 1, 1))
    b = np.arange(8, dtype=np.int32)
    fresh = "__global__ void plus(int* b) { b[threadIdx.x] += %d; }" % int(sys.argv[1])
    compiler.SourceModule(fresh).get_function("plus")(drv.InOut(b), block=(8, 1, 1))
    c = np.arange(8, dtype=np.float32)
    drv.module_from_buffer(compiler.compile(src)).get_function("twice")(drv.InOut(c), block=(8, 1, 1))
    print("results", a.tolist() == [2.0 * i for i in range(8)], b.tolist() == [i + int(sys.argv[1]) for i in range(8)],
          c.tolist() == a.tolist())
    ctx.detach()
''')


def run(cache, n, env=None, timeout=600):
    """The script in a fresh process on ``cache``; ``n`` makes its second kernel's source new."""
    env = dict(os.environ, GPUEDU_CACHE_DIR=str(cache), **(env or {}))
    return subprocess.run([sys.executable, "-c", SCRIPT, str(n)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def damage_lines(done):
    return [line for line in done.stderr.splitlines() if "CacheDamageWarning" in line]


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A cache holding every artefact, built once for the module's cases (each works on a copy)."""
    cache = tmp_path_factory.mktemp("warm") / "cache"
    done = run(cache, 1)
    assert done.returncode == 0 and "results True True True" in done.stdout, done.stderr[-3000:]
    return cache


def artefact(cache, pattern):
    found = [p for p in glob.glob(os.path.join(cache, pattern)) if not p.endswith(".json")]
    if not found:
        pytest.skip(f"no {pattern} in this cache (clang builds no precompiled prelude)")
    return max(found, key=os.path.getsize)


def truncate(path):
    with open(path, "r+b") as f:          # as a full disk or a killed copy leaves it
        f.truncate(os.path.getsize(path) // 3)


def garble(path):
    with open(path, "r+b") as f:          # the same size, the bytes in its middle changed (code bytes, for a .so)
        size = os.path.getsize(path)
        f.seek(size // 4)
        f.write(b"\xff" * (size // 2))


ARTEFACTS = {
    "kernel module": "k*-*.so",
    "worker library": "worker-*.so",
    "runtime object": "host-*.o",
    "precompiled prelude": "pch-*-*/*.gch",
    "module from a buffer": "b*.so",
}


@pytest.mark.parametrize("how", [truncate, garble], ids=["truncated", "garbled"])
@pytest.mark.parametrize("what", ARTEFACTS)
def test_a_damaged_artefact_is_said_and_built_again_and_the_process_survives(warm, tmp_path, what, how):
    cache = tmp_path / "cache"
    shutil.copytree(warm, cache, symlinks=True)
    pattern = ARTEFACTS[what]
    if what == "kernel module":     # the first kernel's module: the one loaded before anything is built
        pattern = os.path.basename(json.load(open(_entry_of(cache, "twice")))["file"])
    path = artefact(cache, pattern)
    how(path)
    done = run(cache, 2)
    assert done.returncode == 0, f"the process died ({done.returncode}): {done.stderr[-3000:]}"
    assert "results True True True" in done.stdout, done.stderr[-3000:]
    said = damage_lines(done)
    assert len(said) == 1 and os.path.basename(path) in said[0] and "building it again" in said[0], done.stderr
    again = run(cache, 2)        # what was built again is whole, and nothing more is said
    assert again.returncode == 0 and "results True True True" in again.stdout and not damage_lines(again), \
        again.stderr[-3000:]


def _entry_of(cache, kernel):
    for entry in glob.glob(os.path.join(cache, "k*.json")):
        with open(entry) as f:
            if any(k[1] == kernel for k in json.load(f).get("kernels", [])):
                return entry
    raise AssertionError(f"no cached module of {kernel}")


@pytest.mark.parametrize("entry", ["worker-*.json", "k*.json"])
def test_a_damaged_entry_is_said_and_built_again(warm, tmp_path, entry):
    cache = tmp_path / "cache"
    shutil.copytree(warm, cache, symlinks=True)
    for path in glob.glob(os.path.join(cache, entry)):
        with open(path, "w") as f:
            f.write('{"file": "worker-')          # cut short
    done = run(cache, 3)
    assert done.returncode == 0 and "results True True True" in done.stdout, done.stderr[-3000:]
    assert damage_lines(done) and all("is not the JSON gpuedu wrote" in line for line in damage_lines(done))


def test_an_entry_that_names_a_file_outside_the_cache_is_refused(warm, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(warm, cache, symlinks=True)
    (entry,) = glob.glob(os.path.join(cache, "worker-*.json"))
    outside = tmp_path / "planted.so"
    outside.write_bytes(b"\x7fELF")
    with open(entry, "w") as f:
        json.dump({"file": "planted.so", "sealed": "../planted.so", "size": 4, "sha256": "0" * 64}, f)
    done = run(cache, 4)
    assert done.returncode == 0 and "results True True True" in done.stdout, done.stderr[-3000:]
    assert any("names no file of the cache" in line for line in damage_lines(done))


# ---- killed while writing ----------------------------------------------------------------------------------

# The compiler stands in for the real one and, when asked to, writes half an output file and kills itself,
# as the kernel's out-of-memory killer would: the build fails with that reason, the process goes on, and
# nothing half-written is ever loaded.
WRAPPER = """#!/bin/sh
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
if [ -f "$KILL_MARK" ] && [ -n "$out" ]; then
  head -c 4096 /bin/sh > "$out"
  kill -9 $$
fi
exec "$REAL_CXX" "$@"
"""

KILLED_SCRIPT = textwrap.dedent(r'''
    import os, sys, warnings
    import numpy as np
    warnings.simplefilter("always")
    from gpuedu.emulator import driver as drv
    from gpuedu.emulator import compiler
    from gpuedu.emulator._errors import CompileError
    drv.init()
    ctx = drv.Device(0).make_context()
    src = "__global__ void twice(float* a) { a[threadIdx.x] *= 2.0f; }"
    try:
        compiler.SourceModule(src)
        print("NO ERROR")
    except CompileError as exc:
        print("CompileError:", str(exc).splitlines()[0])
    os.remove(os.environ["KILL_MARK"])
    a = np.arange(8, dtype=np.float32)
    compiler.SourceModule(src).get_function("twice")(drv.InOut(a), block=(8, 1, 1))
    print("afterwards", a.tolist() == [2.0 * i for i in range(8)])
''')


def test_a_compiler_killed_mid_write_is_named_and_nothing_half_written_is_kept(tmp_path):
    wrapper = tmp_path / "cxx"
    wrapper.write_text(WRAPPER)
    wrapper.chmod(0o755)
    mark = tmp_path / "kill"
    mark.write_text("")
    env = dict(os.environ, GPUEDU_CACHE_DIR=str(tmp_path / "cache"), CXX=str(wrapper),
               REAL_CXX=compiler.find_cxx()[0], KILL_MARK=str(mark))
    done = subprocess.run([sys.executable, "-c", KILLED_SCRIPT], capture_output=True, text=True, timeout=600,
                          env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "CompileError: compiling the emulator's worker library (gpuedu_worker.cpp) was stopped: the C++ " \
           "compiler was killed by SIGKILL" in done.stdout, done.stdout + done.stderr[-2000:]
    assert "afterwards True" in done.stdout, done.stderr[-3000:]
    assert not glob.glob(str(tmp_path / "cache" / "*.tmp*")), os.listdir(tmp_path / "cache")


# The Python process killed at each step of putting a built module in place: before the library is renamed
# into the cache, after it, while its entry is written (half of it), and after. A fresh process then runs the
# kernel without a crash and without a word of damage: a kill leaves no entry, or a whole one.
STEP_SCRIPT = textwrap.dedent(r'''
    import os, signal, sys
    import numpy as np
    from gpuedu.emulator import driver as drv
    from gpuedu.emulator import _cache, compiler
    step, where = int(sys.argv[1]), sys.argv[2]
    drv.init()
    ctx = drv.Device(0).make_context()
    calls = [0]
    real_replace, real_sync = os.replace, _cache.sync_file

    def replace(src, dst):
        calls[0] += 1
        if where == "before" and calls[0] == step:
            os.kill(os.getpid(), signal.SIGKILL)
        real_replace(src, dst)
        if where == "after" and calls[0] == step:
            os.kill(os.getpid(), signal.SIGKILL)

    def sync_half(path):           # the copy cut short: half its bytes written when the process dies
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
        os.kill(os.getpid(), signal.SIGKILL)

    compiler.SourceModule("__global__ void warm(int* x) { x[0] = 1; }")   # the runtime is in place
    os.replace = replace
    if where == "copy":
        _cache.sync_file = sync_half
    src = "__global__ void twice(float* a) { a[threadIdx.x] *= 2.0f; }"
    compiler.SourceModule(src)
    if where == "buffer":
        _cache.os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
        drv.module_from_buffer(compiler.compile(src))
    print("not killed")
''')


@pytest.mark.parametrize("step, where", [(1, "before"), (1, "after"), (2, "before"), (2, "after"),
                                         (1, "copy"), (1, "buffer")])
def test_a_process_killed_while_storing_a_module_leaves_nothing_that_crashes_the_next(tmp_path, step, where):
    cache = tmp_path / "cache"
    env = dict(os.environ, GPUEDU_CACHE_DIR=str(cache))
    killed = subprocess.run([sys.executable, "-c", STEP_SCRIPT, str(step), where], capture_output=True, text=True,
                            timeout=600, env=env)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stdout, killed.stderr[-2000:])
    done = run(cache, 5)
    assert done.returncode == 0 and "results True True True" in done.stdout, done.stderr[-3000:]
    assert not damage_lines(done), done.stderr


def test_a_process_killed_mid_build_from_outside_leaves_a_cache_that_works(tmp_path):
    """SIGKILL at an arbitrary moment of a cold build (while the compiler runs), then a fresh process."""
    cache = tmp_path / "cache"
    env = dict(os.environ, GPUEDU_CACHE_DIR=str(cache))
    child = subprocess.Popen([sys.executable, "-c", SCRIPT, "6"], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not glob.glob(str(cache / "gpuedu-build-*" / "module.cpp")) \
            and child.poll() is None:
        time.sleep(0.02)
    child.kill()
    child.wait()
    done = run(cache, 6)
    assert done.returncode == 0 and "results True True True" in done.stdout, done.stderr[-3000:]
    assert not damage_lines(done), done.stderr


def test_leftovers_of_dead_processes_are_swept_and_a_living_ones_kept(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    names = {f"k0.{dead}.tmp": False, f"worker-1.{dead}.tmp.so": False, f"gpuedu-build-{dead}-abc": False,
             f"pch-2.{dead}.tmp": False, f"k3.{os.getpid()}.tmp": True, "k4-0123.so": True, "k4.json": True}
    for name in names:
        if "build" in name or name.startswith("pch"):
            (folder / name).mkdir()
            (folder / name / "module.o").write_bytes(b"x")
        else:
            (folder / name).write_bytes(b"x")
    _cache.sweep_leftovers(str(folder))          # too recent: a process of another PID namespace may own them
    assert sorted(os.listdir(folder)) == sorted(names)
    _cache.sweep_leftovers(str(folder), now=time.time() + _cache.LEFTOVER_AGE_S + 1)
    assert sorted(os.listdir(folder)) == sorted(n for n, kept in names.items() if kept)
