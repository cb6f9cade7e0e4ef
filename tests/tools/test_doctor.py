"""`gpuedu doctor` in the situations this machine can produce, each in a child process."""
import os
import platform
import shutil
import subprocess
import sys

import pytest

from test_backend import FAKE_DRIVER_NO_LIBCUDA, REPO, child_pythonpath, fake_device, make_fake_pycuda, needs_nvcc


# `gpuedu doctor` as it runs where PyCUDA is not installed, on any machine (a GPU machine has the real one):
# the preflight finds no PyCUDA package and the installed packages list none.
DOCTOR_WITHOUT_PYCUDA = ("-c", "import sys, gpuedu.preflight, gpuedu.machine\n"
                               "gpuedu.preflight.find_real_pycuda = lambda: None\n"
                               "gpuedu.machine.pycuda_version = lambda: None\n"
                               "from gpuedu.tools.cli import main\n"
                               "sys.exit(main(['doctor']))\n")


# `gpuedu doctor` as it is: on a GPU machine it finds the real PyCUDA and the device.
REAL_DOCTOR = ("-m", "gpuedu", "doctor")


def doctor(fake=None, backend_env=None, path=None, args=DOCTOR_WITHOUT_PYCUDA):
    """``gpuedu doctor`` in a child process; without ``fake`` (a stand-in PyCUDA) the child sees no PyCUDA."""
    if fake is not None and args is DOCTOR_WITHOUT_PYCUDA:
        args = ("-m", "gpuedu", "doctor")
    env = {k: v for k, v in os.environ.items() if k not in ("GPUEDU_BACKEND", "PYTHONPATH", "CXX")}
    env["PYTHONPATH"] = child_pythonpath(fake, REPO)
    if backend_env:
        env["GPUEDU_BACKEND"] = backend_env
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=300,
                          cwd=REPO, stdin=subprocess.DEVNULL)


def with_dist_info(root, version="2099.1"):
    """Make the fake pycuda visible to importlib.metadata, as an installed one is."""
    info = os.path.join(root, f"pycuda-{version}.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: pycuda\nVersion: {version}\n")
    return root


def line(report, label):
    found = [ln for ln in report.splitlines() if f"] {label}:" in ln]
    assert found, f"no {label!r} line in:\n{report}"
    return found[0]


def test_doctor_on_this_machine_reports_everything_and_passes():
    proc = doctor()
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in line(out, "Python")
    import numpy
    assert numpy.__version__ in line(out, "NumPy")
    assert "not installed" in line(out, "PyCUDA")
    assert "pip install 'gpuedu[cuda]'" in out       # what to do about it
    assert "[ok ]" in line(out, "C++ compiler")
    arch = line(out, "Architecture")
    assert platform.machine() in arch and f"{os.cpu_count()} cores" in arch
    # aarch64 names the way its atomics are built (LSE or exclusive loops, inline); x86-64 has only one way
    assert ("atomics: " in arch) == (platform.machine() == "aarch64"), arch
    assert "compute capability" in line(out, "Emulated device")
    assert "cpu (CPU emulator), because no usable GPU: pycuda is not installed" in line(out, "Lessons will use")
    assert "Result: ready" in out
    from gpuedu.tools import sandbox
    assert ("bubblewrap" in line(out, "Grading sandbox")) == sandbox.available()[0]


def test_doctor_says_how_to_get_the_grading_sandbox_and_is_still_ready_without_it(tmp_path):
    bin_dir = tmp_path / "bin"                    # a PATH with the compiler and no bwrap
    bin_dir.mkdir()
    for tool in ("g++", "c++", "gcc", "cc", "ld", "as"):
        found = shutil.which(tool)
        if found:
            os.symlink(found, bin_dir / tool)
    proc = doctor(path=str(bin_dir))
    assert "[ok ] Grading sandbox:" in proc.stdout and "apt install bubblewrap" in proc.stdout
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_doctor_kernel_cache_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUEDU_CACHE_DIR", str(tmp_path / "cache"))
    out = doctor().stdout
    assert str(tmp_path / "cache") in line(out, "Kernel cache")


def test_doctor_fails_without_a_cxx_compiler(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    proc = doctor(path=str(empty))
    assert proc.returncode == 1
    assert "[BAD] C++ compiler:" in proc.stdout
    assert "sudo apt install g++" in proc.stdout
    assert "NOT ready" in proc.stdout


def test_doctor_with_forced_cuda_and_no_gpu_fails_with_the_reason():
    proc = doctor(backend_env="cuda")
    assert proc.returncode == 1
    assert "no backend (GPUEDU_BACKEND=cuda)" in line(proc.stdout, "Lessons will use")
    assert "pycuda is not installed" in proc.stdout


def test_doctor_with_pycuda_but_no_driver(tmp_path):
    fake = with_dist_info(make_fake_pycuda(str(tmp_path / "fake"), FAKE_DRIVER_NO_LIBCUDA))
    proc = doctor(fake=fake)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2099.1" in line(proc.stdout, "PyCUDA")
    assert "no NVIDIA driver" in line(proc.stdout, "GPU devices")
    assert "cpu (CPU emulator)" in line(proc.stdout, "Lessons will use")


@needs_nvcc
def test_doctor_lists_a_usable_device(tmp_path):
    fake = with_dist_info(fake_device(tmp_path, cc=(9, 0)))
    proc = doctor(fake=fake, args=("-c", "import sys; from gpuedu.tools.cli import main; sys.exit(main(['doctor']))"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Fake GPU, compute capability 9.0, 80.0 GiB, nvcc builds sm_90: yes" in line(proc.stdout, "GPU 0")
    assert "13.0" in line(proc.stdout, "CUDA (driver API)")
    assert "cuda (real GPU), because a usable GPU was found" in line(proc.stdout, "Lessons will use")


@needs_nvcc
def test_doctor_says_which_toolkit_a_device_needs(tmp_path):
    fake = with_dist_info(fake_device(tmp_path, cc=(3, 0)))
    proc = doctor(fake=fake)
    assert "nvcc builds sm_30: no" in line(proc.stdout, "GPU 0")
    assert "install a CUDA toolkit whose nvcc supports sm_30" in proc.stdout
    assert "cannot target sm_30" in line(proc.stdout, "Lessons will use")


def test_cli_without_a_command_prints_help():
    proc = doctor(args=("-m", "gpuedu"))
    assert proc.returncode == 2
    assert "doctor" in proc.stdout and "course" in proc.stdout


@pytest.mark.parametrize("value,code", [("cpu", 0), ("nonsense", 1)])
def test_backend_command(value, code):
    proc = doctor(backend_env=value, args=("-m", "gpuedu", "backend"))
    assert proc.returncode == code
    if code:
        assert "is not a backend gpuedu knows" in proc.stderr
    else:
        assert proc.stdout.startswith("gpuedu: backend cpu")


def test_nvcc_off_path_is_found_and_the_fix_named(tmp_path, monkeypatch):
    toolkit = tmp_path / "cuda" / "bin"
    toolkit.mkdir(parents=True)
    (toolkit / "nvcc").write_text("#!/bin/sh\nexit 1\n")
    (toolkit / "nvcc").chmod(0o755)
    only_cxx = tmp_path / "bin"
    only_cxx.mkdir()
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler on this machine")
    os.symlink(cxx, only_cxx / "g++")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    proc = doctor(path=str(only_cxx))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"not on PATH (found {toolkit / 'nvcc'}: add {toolkit} to PATH)" in line(proc.stdout, "nvcc")


def test_cli_hands_bench_its_own_options():
    proc = doctor(args=("-m", "gpuedu", "bench", "--help"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: gpuedu bench")
    assert "bench" in doctor(args=("-m", "gpuedu", "--help")).stdout


def test_yardsticks_are_read_from_the_installed_packages(tmp_path, monkeypatch):
    from gpuedu import machine
    from gpuedu.tools import doctor as doctor_module
    versions = {"torch": "2.9.0", "cupy-cuda13x": "14.0.0"}
    monkeypatch.setattr(machine, "package_version", versions.get)
    finding = doctor_module.check_yardsticks()
    assert finding.ok and finding.value.startswith("PyTorch 2.9.0, CuPy 14.0.0")
    monkeypatch.setattr(machine, "package_version", {}.get)
    finding = doctor_module.check_yardsticks()
    assert finding.ok and finding.value == "neither PyTorch nor CuPy is installed"
    assert "--system-site-packages" in finding.advice


def test_doctor_reports_a_kernel_cache_the_emulator_would_refuse(tmp_path, monkeypatch):
    from gpuedu.tools import doctor
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("GPUEDU_CACHE_DIR", str(shared))
    finding = doctor.check_cache()
    assert not finding.ok and "refused: other users may write into it" in finding.advice
    monkeypatch.setenv("GPUEDU_CACHE_DIR", str(tmp_path / "mine"))
    assert doctor.check_cache().ok


@pytest.mark.gpu
def test_doctor_lists_the_device_and_passes():
    proc = doctor(args=REAL_DOCTOR)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ": yes" in line(proc.stdout, "GPU 0")
    assert "cuda (real GPU)" in line(proc.stdout, "Lessons will use")


@pytest.mark.gpu
def test_doctor_on_a_gpu_reports_the_bench_yardsticks():
    proc = doctor(args=REAL_DOCTOR)
    assert "Bench yardsticks:" in proc.stdout
    assert "CUDA (driver API)" in proc.stdout


def fake_cxx(folder, message):
    """A g++ that says its version but fails every compile with ``message``, as a broken toolchain does."""
    folder.mkdir()
    script = folder / "g++"
    script.write_text("#!/bin/sh\n"
                      'for a in "$@"; do [ "$a" = --version ] && { echo "g++ (Fake) 99.0"; exit 0; }; done\n'
                      f"echo {message!r} >&2\nexit 1\n")
    script.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def test_doctor_builds_and_runs_a_test_kernel_and_names_the_toolchain():
    out = doctor().stdout
    found = line(out, "Emulator test kernel")
    assert "[ok ]" in found and "built and ran" in found
    import platform
    libc, version = platform.libc_ver()
    assert f"{libc} {version}" in found


def test_a_compiler_that_cannot_build_kernels_is_not_ready_and_the_toolchain_is_named(tmp_path):
    # A compiler can be on PATH and still build nothing (glibc 2.41's sinpif against an older prelude):
    # doctor used to say "ready" there.
    error = "gpuedu_device.h:146: error: 'float sinpif(float)' was declared 'extern' and later 'static'"
    proc = doctor(path=fake_cxx(tmp_path / "bin", error))
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "[ok ]" in line(out, "C++ compiler") and "g++ (Fake) 99.0" in line(out, "C++ compiler")
    assert "[BAD] Emulator test kernel: failed" in out
    assert "the emulator cannot build a test kernel with this toolchain (g++ (Fake) 99.0" in out
    assert "'float sinpif(float)' was declared 'extern' and later 'static'" in out
    assert "CXX=clang++" in out and "README.md" in out
    assert "NOT ready" in out


def test_setup_warns_when_the_toolchain_cannot_build_kernels(tmp_path):
    proc = doctor(path=fake_cxx(tmp_path / "bin", "error: this compiler is broken"),
                  args=("-c", "import gpuedu; b = gpuedu.setup('cpu'); print('usable:', b.usable)"))
    assert proc.returncode == 0, proc.stderr
    assert "gpuedu: backend cpu, the CPU emulator, because backend='cpu' was asked for" in proc.stdout
    assert "gpuedu: WARNING the emulator cannot build a test kernel with this toolchain (g++ (Fake) 99.0" \
        in proc.stdout
    assert "error: this compiler is broken" in proc.stdout and "usable: False" in proc.stdout
