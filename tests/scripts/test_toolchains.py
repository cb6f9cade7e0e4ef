"""scripts/toolchains.py (`make toolchains`) and scripts/hardened-g++, without running the legs themselves:
CI runs them (.ci/run), each for minutes."""
import os
import shutil
import subprocess
import sys

import pytest

from gpuedu.emulator import compiler

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HARDENED = os.path.join(REPO, "scripts", "hardened-g++")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def _macros(*flags):
    done = subprocess.run([HARDENED, *flags, "-dM", "-E", "-x", "c++", os.devnull], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return {line.split()[1]: " ".join(line.split()[2:]) for line in done.stdout.splitlines()}


@needs_gxx
def test_the_hardened_compiler_has_ubuntus_defaults_and_the_command_line_overrides_them():
    on = _macros("-O2")
    assert on.get("_FORTIFY_SOURCE") == "3" and "__SSP_STRONG__" in on
    if "-fcf-protection=none" in compiler.CXX_FLAGS:   # x86: the only CPUs with CET
        assert "__CET__" in on
    off = _macros("-O2", "-U_FORTIFY_SOURCE", "-fcf-protection=none")
    assert "_FORTIFY_SOURCE" not in off and "__CET__" not in off


@needs_gxx
def test_the_emulators_flags_win_over_those_defaults():
    # what a kernel module is compiled with on Ubuntu: no fortified calls, no CET marking (the fibers switch
    # stacks by hand), the stack protector kept
    got = _macros(*[f for f in compiler.CXX_FLAGS if f != "-shared"])
    assert "_FORTIFY_SOURCE" not in got and "__CET__" not in got and "__SSP_STRONG__" in got


def test_the_legs_run_the_emulators_tests_and_three_lessons(toolchains):
    assert toolchains.LEGS == ("clang", "hardened", "debian13", "arm64")
    args = toolchains.PYTEST
    assert "tests/emulator" in args and "--nbval" in args and "--dist" in args
    assert [a for a in args if a.startswith("lessons/")] == [
        "lessons/01_first_kernel.ipynb", "lessons/03_parallel_patterns.ipynb", "lessons/04_matmul.ipynb"]
    for lesson in toolchains.LESSONS:
        assert os.path.isfile(os.path.join(REPO, lesson))
    # the g++ legs run the profiler's tests too; clang's leg does not (it merges an if/else's stores)
    assert toolchains.PYTEST_GXX == args + ["tests/profiler"] and "tests/profiler" not in args
    # arm64, under qemu: the part of the emulator's tests it has time for, and lessons 01 and 03
    arm = toolchains.PYTEST_ARM64
    assert "--nbval" in arm and [a for a in arm if a.startswith("lessons/")] == [
        "lessons/01_first_kernel.ipynb", "lessons/03_parallel_patterns.ipynb"]
    assert all(os.path.exists(os.path.join(REPO, path.split("::")[0])) for path in toolchains.ARM64_TESTS)


def test_an_unknown_leg_is_refused_with_the_legs_named(toolchains):
    done = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "toolchains.py"), "ubuntu"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "no leg called ubuntu: the legs are clang, hardened, debian13, arm64" in done.stderr


def test_a_legs_summary_is_pytests_last_line(toolchains, tmp_path):
    log = tmp_path / "leg.log"
    log.write_text("$ python -m pytest ...\n....\nFAILED tests/emulator/test_x.py::test_y\n"
                   "1 failed, 608 passed, 3 skipped in 90.1s\n")
    assert toolchains._summary(str(log)) == "1 failed, 608 passed, 3 skipped in 90.1s"
    log.write_text("$ debootstrap ...\nE: Failed getting release file\n")
    assert toolchains._summary(str(log)) == "E: Failed getting release file"


def test_the_chroot_gets_the_checkout_as_a_clone_has_it(toolchains):
    if shutil.which("git") is None or not os.path.isdir(os.path.join(REPO, ".git")):
        pytest.skip("needs a git checkout")
    files = toolchains._tracked_files()
    assert "scripts/toolchains.py" in files and "lessons/04_matmul.ipynb" in files
    assert not any(f.startswith((".venv/", "build/", ".git/")) for f in files)


def test_a_new_recipe_makes_a_new_chroot(toolchains, monkeypatch):
    monkeypatch.setenv("GPUEDU_CHROOT_CACHE", "/somewhere")
    cache, before = toolchains._chroot_dir()
    assert cache == "/somewhere" and before.startswith("/somewhere/debian13-")
    monkeypatch.setitem(toolchains.DEBIAN13, "include", toolchains.DEBIAN13["include"] + ["gdb"])
    assert toolchains._chroot_dir()[1] != before


def test_each_chroot_has_its_own_folder_and_only_a_foreign_one_needs_qemu(toolchains, monkeypatch):
    monkeypatch.setenv("GPUEDU_CHROOT_CACHE", "/somewhere")
    folders = {name: toolchains._chroot_dir(name)[1] for name in toolchains.CHROOTS}
    assert folders["arm64"].startswith("/somewhere/arm64-") and folders["debian13"].startswith("/somewhere/debian13-")
    assert toolchains._chroot_dir() == toolchains._chroot_dir("debian13")
    assert toolchains._foreign_arch(toolchains.DEBIAN13) is None            # debootstrap's default: this machine's
    native = {"x86_64": "amd64", "aarch64": "arm64"}[os.uname().machine]
    assert toolchains._foreign_arch(toolchains.ARM64) == (None if native == "arm64" else "arm64")
    assert toolchains._foreign_arch({"arch": native}) is None


def test_the_bench_comparison_keeps_each_sides_best_round(toolchains):
    rounds = {"here": [{"results": {"fiber_switch_ns": 6.0, "vector_add_vs_numpy": 1.9}},
                       {"results": {"fiber_switch_ns": 5.0, "vector_add_vs_numpy": 2.1}}],
              "debian13": [{"results": {"fiber_switch_ns": 5.5, "vector_add_vs_numpy": 1.8}},
                           {"results": {"fiber_switch_ns": 7.0, "vector_add_vs_numpy": 1.7}}]}
    best, ratios = toolchains.compare(rounds)
    assert best == {"here": {"fiber_switch_ns": 5.0, "vector_add_vs_numpy": 1.9},
                    "debian13": {"fiber_switch_ns": 5.5, "vector_add_vs_numpy": 1.7}}
    assert ratios == pytest.approx({"fiber_switch_ns": 1.1, "vector_add_vs_numpy": 1.7 / 1.9})


@needs_gxx
def test_the_hardened_compiler_precompiles_the_prelude_as_ubuntus_does(tmp_path):
    # Its linker flags stay out of commands that do not link: with them, g++ linked the precompiled header
    # and failed, and that leg ran without the precompiled prelude every real g++ has.
    version = subprocess.run([HARDENED, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    folder = compiler._precompiled_prelude(HARDENED, version, str(tmp_path))
    assert folder is not None and os.path.isfile(os.path.join(folder, "gpuedu_prelude.h.gch"))
