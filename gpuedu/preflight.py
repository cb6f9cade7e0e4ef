"""Can this machine build and run the course's kernels?  The checks ``setup()``, ``gpuedu doctor``,
``gpuedu gpu-check`` and lesson 00 share.

On a GPU, each step where mismatched installs fail later is checked once, up front:

1. ``find_real_pycuda``: is the real ``pycuda`` package installed (found on sys.path, past the emulator's
   import hook)?
2. ``probe_driver``: does the NVIDIA driver initialise (``cuInit``) and report devices?  In a child process:
   a broken driver can fail halfway through initialisation and leave this process with a half-made context.
3. ``find_nvcc``, ``nvcc_can_target``: can the ``nvcc`` on PATH build a kernel for the device's ``sm_XY``
   ("nvcc fatal: Value 'sm_30' is not defined for option 'gpu-architecture'")?
4. ``probe_launch``: does that kernel load and run ("PTX was compiled with an unsupported toolchain")?
   Also in a child process.

``check_gpu`` runs them in that order and says which one failed.  For the emulator: ``cxx_status`` and
``kernel_cache_dir`` ask the emulator itself for its C++ compiler and its kernel cache, so there is one
compiler lookup and one cache rule, and ``emulator_problem`` has it build and run a test kernel with that
compiler (a toolchain can be there and still not build kernels: a C library's new declarations, a
distribution's default flags).  Nothing here changes what ``import pycuda`` means; that is
``gpuedu.backend``'s.
"""
import atexit
import importlib.machinery
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The emulator's kernel cache folder is read from this variable (gpuedu.emulator.hooks.cache_path).
CACHE_ENV_VAR = "GPUEDU_CACHE_DIR"

# What to install when the emulator has no C++ compiler, per platform.
CXX_INSTALL_HINT = (
    "install a C++ compiler: Debian/Ubuntu `sudo apt install g++`, Fedora `sudo dnf install gcc-c++`, "
    "macOS (untested) `xcode-select --install`, conda `conda install -c conda-forge cxx-compiler`; "
    "or point the CXX environment variable at one"
)


def find_real_pycuda():
    """Where the real ``pycuda`` package is (a directory on sys.path), or None when not installed.

    Searches sys.path directly so that the emulator's import hook cannot answer for it.
    """
    spec = importlib.machinery.PathFinder.find_spec("pycuda")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.dirname(list(spec.submodule_search_locations)[0])


# Runs in a child process: import pycuda.driver, cuInit, describe every device.  Prints one JSON line.
_PROBE = r"""
import json, sys
out = {}
try:
    import pycuda
    out["pycuda_version"] = getattr(pycuda, "VERSION_TEXT", "?")
    import pycuda.driver as drv
except Exception as e:
    out["stage"], out["error"] = "import", f"{type(e).__name__}: {e}"
    print(json.dumps(out)); sys.exit(0)
try:
    drv.init()
    v = drv.get_driver_version()
    out["cuda_driver_version"] = f"{v // 1000}.{v % 1000 // 10}"
    devices = []
    for i in range(drv.Device.count()):
        d = drv.Device(i)
        major, minor = d.compute_capability()
        devices.append({"index": i, "name": d.name(), "arch": f"{major}{minor}",
                        "compute_capability": [major, minor], "total_memory": int(d.total_memory())})
    out["devices"] = devices
except Exception as e:
    out["stage"], out["error"] = "init", f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""

_probe_cache = {}


def probe_driver(pycuda_dir, timeout=120):
    """Initialise the CUDA driver through PyCUDA in a child process and describe its devices.

    Returns a dict: ``devices`` (list) on success, else ``stage`` ("import"/"init"/"probe") and
    ``error``.  Cached per process.
    """
    if pycuda_dir in _probe_cache:
        return _probe_cache[pycuda_dir]
    env = dict(os.environ)
    # The child must find the same pycuda this process would import.
    env["PYTHONPATH"] = os.pathsep.join([pycuda_dir] + [p for p in [env.get("PYTHONPATH")] if p])
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if lines:
            result = json.loads(lines[-1])
        else:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            result = {"stage": "probe", "error": f"the driver probe exited with code {proc.returncode}: {tail}"}
    except subprocess.TimeoutExpired:
        result = {"stage": "probe", "error": f"the driver probe did not answer within {timeout} s"}
    _probe_cache[pycuda_dir] = result
    return result


def explain_driver_failure(probe):
    """A short reason for a failed driver probe, in the learner's terms."""
    error = probe.get("error", "")
    low = error.lower()
    if probe.get("stage") == "import":
        if "libcuda" in low:
            return "no NVIDIA driver (pycuda is installed but libcuda.so, the driver library, is missing)"
        return f"pycuda is installed but does not import ({error})"
    if "no cuda-capable device" in low or "no_device" in low:
        return "no CUDA device (the NVIDIA driver is installed but sees no GPU)"
    if "insufficient" in low:
        return ("the NVIDIA driver is older than the CUDA this PyCUDA was built with "
                f"({error}); update the driver or rebuild pycuda against your CUDA")
    if probe.get("stage") == "init":
        return f"the NVIDIA driver did not initialise ({error})"
    return error or "the driver probe failed"


def find_nvcc():
    """Path of the nvcc PyCUDA will run (the one on PATH), or None."""
    return shutil.which("nvcc")


def nvcc_hint():
    """Where an nvcc lies that is not on PATH, as advice, or ''."""
    for root in [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]:
        if root and os.path.isfile(os.path.join(root, "bin", "nvcc")):
            return f" (found {os.path.join(root, 'bin', 'nvcc')}: add {os.path.join(root, 'bin')} to PATH)"
    return ""


_nvcc_versions = {}


def nvcc_version(nvcc):
    """'13.0' for the nvcc at this path, or None when it cannot say."""
    if nvcc not in _nvcc_versions:
        try:
            text = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60,
                                  stdin=subprocess.DEVNULL).stdout
            match = re.search(r"release (\d+\.\d+)", text)
            _nvcc_versions[nvcc] = match.group(1) if match else None
        except (OSError, subprocess.TimeoutExpired):
            _nvcc_versions[nvcc] = None
    return _nvcc_versions[nvcc]


_TINY_KERNEL = 'extern "C" __global__ void gpuedu_preflight(float *x) { x[threadIdx.x] = 1.0f; }\n'
_nvcc_targets = {}
_preflight_dir = None


def _preflight_folder():
    global _preflight_dir
    if _preflight_dir is None:
        _preflight_dir = tempfile.mkdtemp(prefix="gpuedu-preflight-")
        atexit.register(shutil.rmtree, _preflight_dir, True)
    return _preflight_dir


def nvcc_can_target(nvcc, arch, timeout=120):
    """Build a one-line kernel with ``nvcc -cubin -arch=sm_<arch>``; (ok, first error line).

    Cached per (nvcc, arch) for the life of the process; the cubin is kept for ``probe_launch``.
    """
    key = (nvcc, str(arch))
    if key not in _nvcc_targets:
        folder = _preflight_folder()
        src = os.path.join(folder, f"sm_{arch}.cu")
        with open(src, "w") as f:
            f.write(_TINY_KERNEL)
        try:
            proc = subprocess.run([nvcc, "-cubin", f"-arch=sm_{arch}", "-o", preflight_cubin(arch), src],
                                  capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
            lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
            _nvcc_targets[key] = (proc.returncode == 0, lines[0] if lines else "")
        except (OSError, subprocess.TimeoutExpired) as e:
            _nvcc_targets[key] = (False, f"{type(e).__name__}: {e}")
    return _nvcc_targets[key]


def preflight_cubin(arch):
    """Where ``nvcc_can_target`` writes the test kernel built for sm_<arch>."""
    return os.path.join(_preflight_folder(), f"sm_{arch}.cubin")


# Runs in a child process: load the preflight cubin on device 0 and run it once.
_LAUNCH = r"""
import json, sys
import numpy as np
import pycuda.driver as drv
out = {}
try:
    drv.init()
    context = drv.Device(0).make_context()
    try:
        kernel = drv.module_from_file(sys.argv[1]).get_function("gpuedu_preflight")
        x = np.zeros(32, dtype=np.float32)
        kernel(drv.Out(x), block=(32, 1, 1), grid=(1, 1))
        out["ok"] = bool((x == 1.0).all())
        if not out["ok"]:
            out["error"] = "the test kernel ran but wrote wrong values"
    finally:
        context.pop()
except Exception as e:
    out["ok"], out["error"] = False, f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


def probe_launch(pycuda_dir, cubin, timeout=120):
    """Load ``cubin`` on device 0 and launch it, in a child process; {"ok": bool, "error": str}."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([pycuda_dir] + [p for p in [env.get("PYTHONPATH")] if p])
    try:
        proc = subprocess.run([sys.executable, "-c", _LAUNCH, cubin], env=env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"the test kernel did not finish within {timeout} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"ok": False, "error": f"the launch probe exited with code {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


def find_cxx():
    """The C++ compiler the emulator builds kernels with, or None: the emulator's own lookup ($CXX if set,
    else g++, clang++, c++), so that doctor and the emulator always agree."""
    return cxx_status()[0]


def cxx_status():
    """(path or None, None or the emulator's reason for having no compiler, e.g. a $CXX that does not work)."""
    from .emulator import compiler
    try:
        return compiler.find_cxx()[0], None
    except compiler.CompileError as e:
        return None, str(e)


def emulator_problem():
    """None if the emulator builds and runs a test kernel with this machine's toolchain; else what failed, on
    which toolchain, and what to do. In this process: the emulator's guards keep it alive whatever happens."""
    from .emulator import compiler
    return compiler.check_toolchain()


def kernel_cache_dir():
    """Folder where the emulator caches compiled kernels: the emulator's own rule (``$GPUEDU_CACHE_DIR``, else
    the platform's cache folder), reported without creating anything."""
    from .emulator.hooks import cache_path
    return cache_path()


def check_gpu():
    """Is a GPU usable by PyCUDA here?  Returns (ok, reason, details) without touching this process."""
    pycuda_dir = find_real_pycuda()
    if pycuda_dir is None:
        return False, "pycuda is not installed", {}
    probe = probe_driver(pycuda_dir)
    details = {"probe": probe}
    if "devices" not in probe:
        return False, explain_driver_failure(probe), details
    if not probe["devices"]:
        return False, "no CUDA device (the NVIDIA driver is installed but sees no GPU)", details
    device = probe["devices"][0]
    details["device"] = device
    nvcc = find_nvcc()
    if nvcc is None:
        return False, f"nvcc is not on PATH{nvcc_hint()}, so kernels cannot be compiled", details
    version = nvcc_version(nvcc)
    details["nvcc"] = (nvcc, version)
    ok, first_error = nvcc_can_target(nvcc, device["arch"])
    if not ok:
        return False, (f"nvcc {version or '(unknown version)'} cannot target sm_{device['arch']} "
                       f"of {device['name']} ({first_error})"), details
    launch = probe_launch(pycuda_dir, preflight_cubin(device["arch"]))
    details["launch"] = launch
    if not launch.get("ok"):
        error = launch.get("error", "")
        if "toolchain" in error.lower() or "ptx" in error.lower():
            return False, (f"the NVIDIA driver (CUDA {probe.get('cuda_driver_version', '?')}) cannot run code "
                           f"built by nvcc {version} ({error}); update the driver, or use a CUDA toolkit "
                           f"no newer than the driver"), details
        return False, f"a test kernel built by nvcc {version} for sm_{device['arch']} did not run ({error})", details
    return True, "a usable GPU was found", details
