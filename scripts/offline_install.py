#!/usr/bin/env python3
"""Install gpuedu on an air-gapped machine (a GPU cluster node with no internet).

Step 1, on a machine with internet (any OS), gather everything into one folder, for the target's
Python (here 3.12):

    python scripts/offline_install.py gather --dest wheelhouse --python 3.12

  It downloads binary wheels of gpuedu's dependencies (and of the extras asked for, default
  ``cuda,test``) built for the target Python and platform, builds the gpuedu wheel from this
  checkout, and downloads the PyCUDA source distribution (PyCUDA publishes no Linux wheels).

Step 2, copy the folder and this checkout to the target, then on the target, in the checkout:

    python3 scripts/offline_install.py install --dest wheelhouse --system-site-packages

  It makes ``.venv`` and installs this checkout into it (editable, so the tests, the lessons and
  ``gpuedu`` all use the same code) with ``pip --no-index --find-links wheelhouse``.
  ``--system-site-packages`` lets the environment see what the machine already has, e.g. PyTorch
  and CuPy, the bench's cuBLAS yardsticks.  Building PyCUDA from its source needs, on the target:
  the NVIDIA driver (``libcuda.so``), the CUDA toolkit (``nvcc`` on PATH, ``cuda.h``; set CUDA_ROOT
  when the toolkit is not at nvcc's ``..``), a C++ compiler and Python's headers (``Python.h``,
  e.g. the python3.12-dev package); the install step checks these first and says what is missing.
  Without the ``cuda`` extra nothing needs building.

``--dry-run`` prints the commands without running them.
"""
import argparse
import ctypes.util
import glob
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYCUDA = "pycuda>2025.1.1"
# What building PyCUDA's sdist and running it need, beyond gpuedu's own dependencies.
PYCUDA_RUNTIME = ["pytools>=2011.2", "platformdirs>=2.2.0", "mako"]
PYCUDA_BUILD = ["setuptools", "wheel", "numpy>=1.24"]


def read_pyproject(path=os.path.join(REPO, "pyproject.toml")):
    try:
        import tomllib
    except ModuleNotFoundError:      # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            sys.exit("offline_install.py: reading pyproject.toml needs Python 3.11+ or `pip install tomli`")
    with open(path, "rb") as f:
        return tomllib.load(f)["project"]


def requirements(project, extras):
    """gpuedu's requirements for these extras; PyCUDA itself is left out (it comes as an sdist)."""
    reqs = list(project["dependencies"])
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            raise ValueError(f"unknown extra {extra!r}; pyproject.toml defines {', '.join(sorted(optional))}")
        reqs += [r for r in optional[extra] if not r.replace(" ", "").startswith("pycuda")]
    if "cuda" in extras:
        reqs += PYCUDA_RUNTIME
    reqs += PYCUDA_BUILD if "cuda" in extras else ["setuptools", "wheel"]
    return list(dict.fromkeys(reqs))


def python_tags(python):
    """'3.11' -> ('311', 'cp311'): the version and ABI pip download must match."""
    parts = python.split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"--python must look like 3.11, got {python!r}")
    return "".join(parts), "cp" + "".join(parts)


def gather_commands(dest, python, platforms, extras, pip=(sys.executable, "-m", "pip")):
    """The commands that fill ``dest`` for the target; a list of argument lists."""
    version, abi = python_tags(python)
    project = read_pyproject()
    binary = [*pip, "download", "--dest", dest, "--only-binary=:all:", "--python-version", version,
              "--implementation", "cp", "--abi", abi, "--abi", "abi3", "--abi", "none"]
    for platform in platforms:
        binary += ["--platform", platform]
    commands = [binary + requirements(project, extras),
                [*pip, "wheel", "--no-deps", "--wheel-dir", dest, REPO]]
    if "cuda" in extras:
        # --no-binary only for pycuda: `:all:` would also force its build tools (numpy) from source.
        commands.append([*pip, "download", "--dest", dest, "--no-deps", "--no-binary", "pycuda", PYCUDA])
    return commands


def install_commands(dest, extras, venv=".venv", python=sys.executable, system_site_packages=False):
    pip = [os.path.join(venv, "bin", "python"), "-m", "pip"]
    spec = f"{REPO}[{','.join(extras)}]" if extras else REPO
    make_venv = [python, "-m", "venv", venv] + (["--system-site-packages"] if system_site_packages else [])
    return [make_venv, pip + ["install", "--no-index", "--find-links", dest, "-e", spec]]


def cuda_root():
    """The CUDA toolkit PyCUDA's build will use: $CUDA_ROOT, else the folder above nvcc's bin/, else None."""
    if os.environ.get("CUDA_ROOT"):
        return os.environ["CUDA_ROOT"]
    nvcc = shutil.which("nvcc")
    return os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) if nvcc else None


def pycuda_build_problems(python_include=None):
    """What building PyCUDA from source on this machine would trip over, each with what to do; [] if nothing."""
    problems = []
    include = python_include or sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        problems.append(f"Python's headers are missing ({include}/Python.h): install them, e.g. "
                        f"`apt install python{sys.version_info.major}.{sys.version_info.minor}-dev`")
    if not any(shutil.which(c) for c in [os.environ.get("CXX"), "c++", "g++", "clang++"] if c):
        problems.append("no C++ compiler: install one, e.g. `apt install g++`")
    root = cuda_root()
    if root is None:
        problems.append("nvcc is not on PATH and CUDA_ROOT is not set: put the CUDA toolkit's bin/ on PATH "
                        "(e.g. export PATH=/usr/local/cuda/bin:$PATH) or set CUDA_ROOT to the toolkit")
    elif not os.path.isfile(os.path.join(root, "include", "cuda.h")):
        problems.append(f"no cuda.h under {root}/include: set CUDA_ROOT to the CUDA toolkit's folder "
                        f"(the one with include/ and lib64/)")
    # PyCUDA links -lcuda: the driver's library, or the toolkit's stub of it.
    stubs = glob.glob(os.path.join(root, "lib*", "stubs", "libcuda.so")) if root else []
    if not stubs and ctypes.util.find_library("cuda") is None:
        problems.append("libcuda.so (the NVIDIA driver's library) is not found: install the NVIDIA driver")
    return problems


def run(commands, dry_run):
    for command in commands:
        print("+ " + shlex.join(command), flush=True)
        if not dry_run:
            subprocess.run(command, check=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    gather = sub.add_parser("gather", help="on a machine with internet: fill a folder for the target")
    gather.add_argument("--python", default=f"{sys.version_info.major}.{sys.version_info.minor}",
                        help="the target's Python, e.g. 3.11")
    gather.add_argument("--platform", action="append", default=None,
                        help="the target's wheel platform (repeatable); default manylinux2014_x86_64 "
                             "and manylinux_2_28_x86_64 (aarch64 for ARM nodes)")
    install = sub.add_parser("install", help="on the target: install from the folder, offline")
    install.add_argument("--venv", default=".venv")
    install.add_argument("--system-site-packages", action="store_true",
                         help="let .venv see the machine's packages (PyTorch, CuPy: the bench's yardsticks)")
    for p in (gather, install):
        p.add_argument("--dest", default="wheelhouse", help="the folder (default: wheelhouse)")
        p.add_argument("--extras", default="cuda,test", help="comma-separated extras (default: cuda,test)")
        p.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = parser.parse_args(argv)
    extras = [e for e in args.extras.split(",") if e]
    try:
        if args.step == "gather":
            platforms = args.platform or ["manylinux2014_x86_64", "manylinux_2_28_x86_64"]
            commands = gather_commands(args.dest, args.python, platforms, extras)
        else:
            commands = install_commands(args.dest, extras, venv=args.venv,
                                        system_site_packages=args.system_site_packages)
    except ValueError as e:
        parser.error(str(e))
    if args.step == "install" and "cuda" in extras:
        problems = pycuda_build_problems()
        for problem in problems:
            print(f"offline_install.py: building pycuda will fail: {problem}", file=sys.stderr)
        if problems and not args.dry_run:
            print("offline_install.py: fix the above and run this again (or leave PyCUDA out: --extras test)",
                  file=sys.stderr)
            return 1
    try:
        run(commands, args.dry_run)
    except subprocess.CalledProcessError as e:
        print(f"offline_install.py: this step failed (exit {e.returncode}): {shlex.join(e.cmd)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
