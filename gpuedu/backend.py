"""Choose the backend for this process: real PyCUDA on a usable GPU, else the CPU emulator.

``setup()`` is the first cell of every lesson.  The GPU is used when all of these hold:

1. ``pycuda`` is importable;
2. the NVIDIA driver initialises (``cuInit``) and reports at least one device;
3. the ``nvcc`` on PATH can build a kernel for device 0's architecture (``sm_XY``).

Steps 2 and 3 are exactly where mismatched installs fail later with messages such as
"PTX was compiled with an unsupported toolchain" or "nvcc fatal: Value 'sm_30' is not defined
for option 'gpu-architecture'", so the preflight checks them once, up front, and says which
one failed.  Step 2 runs in a child process: a broken driver can fail halfway through
initialisation and leave this process with a half-made context.

On the GPU, setup() imports ``pycuda.autoprimaryctx``: PyCUDA works in device 0's primary context,
the same one PyTorch and CuPy use, so the bench's cuBLAS yardsticks and gpuedu's kernels share
one process.  A learner who imported ``pycuda.autoinit`` (or autoprimaryctx) before setup() keeps
the context they made.

Otherwise (or with ``GPUEDU_BACKEND=cpu``) ``import pycuda.driver``, ``pycuda.compiler``,
``pycuda.gpuarray`` ... resolve to ``gpuedu.emulator.*`` for the rest of the process.
"""
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import atexit
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import tempfile

CHOICES = ("auto", "cuda", "cpu")
ENV_VAR = "GPUEDU_BACKEND"
CACHE_ENV_VAR = "GPUEDU_CACHE_DIR"

# What to install when the emulator has no C++ compiler, per platform.
CXX_INSTALL_HINT = (
    "install a C++ compiler: Debian/Ubuntu `sudo apt install g++`, Fedora `sudo dnf install gcc-c++`, "
    "macOS `xcode-select --install`, conda `conda install -c conda-forge cxx-compiler`; "
    "or point the CXX environment variable at one"
)


class BackendError(RuntimeError):
    """The requested backend cannot be used in this process; the message says why and what to do."""


# --------------------------------------------------------------------------------------------
# Routing ``pycuda.*`` to the emulator
# --------------------------------------------------------------------------------------------

class _EmulatorFinder(importlib.abc.MetaPathFinder):
    """Make ``import pycuda.X`` load ``gpuedu.emulator.X`` (the same module object under both names)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "pycuda" and not fullname.startswith("pycuda."):
            return None
        target_name = "gpuedu.emulator" + fullname[len("pycuda"):]
        # Only PyCUDA's own module names resolve: the emulator's internals (function, memory, _errors...)
        # are not part of PyCUDA, and code written against them would break on a real GPU.
        top = fullname.split(".")[1] if "." in fullname else None
        if top is not None and top not in PYCUDA_MODULES and \
                importlib.util.find_spec("gpuedu.emulator." + top) is not None:
            raise ModuleNotFoundError(f"No module named {fullname!r}: PyCUDA has no such module (gpuedu.emulator."
                                      f"{top} is the emulator's own machinery; use pycuda.driver and friends)",
                                      name=fullname)
        if importlib.util.find_spec(target_name) is None:
            provided = ", ".join(f"pycuda.{name}" for name in emulated_modules())
            raise ModuleNotFoundError(
                f"{fullname} is not part of the gpuedu CPU emulator, which provides {provided}; "
                f"run this code on an NVIDIA GPU with real PyCUDA to use {fullname}", name=fullname)
        return importlib.util.spec_from_loader(fullname, _AliasLoader(target_name))


# PyCUDA's own modules; the emulator provides those of them the lessons use.
PYCUDA_MODULES = ("autoinit", "autoprimaryctx", "characterize", "compiler", "cumath", "curandom", "debug",
                  "driver", "elementwise", "gl", "gpuarray", "reduction", "scan", "tools")


def emulated_modules():
    """The PyCUDA modules the emulator provides, sorted."""
    emulator = importlib.import_module("gpuedu.emulator")
    return sorted(m.name for m in pkgutil.iter_modules(emulator.__path__) if m.name in PYCUDA_MODULES)


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target):
        self.target = target
        self._target_spec = None

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self._target_spec = module.__spec__
        return module

    def exec_module(self, module):
        # The import system has just set module.__spec__ to the alias spec; give the module back
        # its own, so that its relative imports and importlib.reload keep working.
        module.__spec__ = self._target_spec


def _is_emulator_module(module):
    return getattr(module, "__name__", "").startswith("gpuedu.emulator")


def _loaded_real_pycuda():
    """Names of real (not emulated) ``pycuda`` modules already imported in this process."""
    return [name for name, mod in list(sys.modules.items())
            if (name == "pycuda" or name.startswith("pycuda.")) and mod is not None
            and not _is_emulator_module(mod)]


# The PyCUDA modules whose import leaves a context current (autoinit: a new one; autoprimaryctx:
# the device's primary context, the one the CUDA runtime behind PyTorch and CuPy uses).
CONTEXT_MODULES = ("pycuda.autoinit", "pycuda.autoprimaryctx")


def _real_pycuda_is_initialised():
    """True when real PyCUDA in this process already holds a CUDA context (e.g. pycuda.autoinit ran)."""
    driver = sys.modules.get("pycuda.driver")
    if driver is None or _is_emulator_module(driver):
        return False
    if any(name in sys.modules for name in CONTEXT_MODULES):
        return True
    try:
        return driver.Context.get_current() is not None
    except Exception:   # driver not initialised yet: get_current raises before cuInit
        return False


def use_emulator():
    """Route ``pycuda.*`` imports to the emulator in this process.

    Refuses when real PyCUDA already holds a CUDA context here: swapping modules under live GPU
    objects would shadow a working GPU.
    """
    global _active
    if _real_pycuda_is_initialised():
        raise BackendError(
            "real PyCUDA is already initialised in this process (a CUDA context exists), so gpuedu will "
            "not swap in the CPU emulator under it; restart the kernel (Jupyter: Kernel > Restart) and "
            "call gpuedu.setup('cpu') before importing pycuda, or set GPUEDU_BACKEND=cpu")
    for name in _loaded_real_pycuda():
        del sys.modules[name]
    if not any(isinstance(f, _EmulatorFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _EmulatorFinder())
    if _active is None:
        _active = _cpu_backend("use_emulator() was called")


# --------------------------------------------------------------------------------------------
# The backend object
# --------------------------------------------------------------------------------------------

class Backend:
    """The backend this process uses.

    ``name`` is ``"cuda"`` (real PyCUDA) or ``"cpu"`` (the emulator); ``reason`` says why it was
    chosen (for ``cpu``: why the GPU was not usable).  ``driver``, ``compiler`` and ``gpuarray`` are
    the ``pycuda.*`` modules of that backend.
    """

    def __init__(self, name, reason, *, device=None, nvcc=None, cxx=None, problems=()):
        if name not in ("cuda", "cpu"):
            raise ValueError(f"backend name must be 'cuda' or 'cpu', got {name!r}")
        self.name = name
        self.reason = reason
        self.device = device          # probe result for device 0 (dict) on cuda, else None
        self.nvcc = nvcc              # (path, version) of the nvcc that builds kernels, or None
        self.cxx = cxx                # path of the C++ compiler the emulator uses, or None
        self.problems = list(problems)  # what would stop kernels from building, with what to do

    @property
    def driver(self):
        return importlib.import_module("pycuda.driver")

    @property
    def compiler(self):
        return importlib.import_module("pycuda.compiler")

    @property
    def gpuarray(self):
        return importlib.import_module("pycuda.gpuarray")

    @property
    def is_emulator(self):
        return self.name == "cpu"

    @property
    def usable(self):
        """Whether kernels can be built and run (the emulator needs a C++ compiler)."""
        return not self.problems

    def summary(self):
        """The one line ``setup()`` prints."""
        if self.name == "cuda":
            dev = self.device or {}
            what = f"{dev.get('name', 'NVIDIA GPU')} (sm_{dev.get('arch', '?')})"
            line = f"gpuedu: backend cuda, {what}, because {self.reason}"
        else:
            line = f"gpuedu: backend cpu, the CPU emulator, because {self.reason}"
        for problem in self.problems:
            line += f"\ngpuedu: WARNING {problem}"
        return line

    def __repr__(self):
        return f"Backend({self.name!r}, {self.reason!r})"


_active = None


def active():
    """The backend chosen by ``setup()``; chooses one quietly if setup was not called."""
    return _active if _active is not None else setup(verbose=False)


# --------------------------------------------------------------------------------------------
# Probes
# --------------------------------------------------------------------------------------------

def requested_backend(backend=None):
    """The choice asked for: the argument, else ``$GPUEDU_BACKEND``, else ``"auto"``."""
    source = "backend="
    if backend is None:
        backend, source = os.environ.get(ENV_VAR, "") or "auto", f"{ENV_VAR}="
    choice = str(backend).strip().lower()
    if choice not in CHOICES:
        raise ValueError(f"{source}{backend!r} is not a backend gpuedu knows; use one of "
                         f"{', '.join(CHOICES)} (auto: the GPU when usable, else the CPU emulator)")
    return choice


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


def kernel_cache_dir():
    """Folder where the emulator caches compiled kernels: the emulator's own rule (``$GPUEDU_CACHE_DIR``, else
    the platform's cache folder), reported without creating anything."""
    from .emulator.compiler import cache_path
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


# --------------------------------------------------------------------------------------------
# setup()
# --------------------------------------------------------------------------------------------

def _cpu_backend(reason):
    """The emulator backend, with a check that it can build kernels (it needs a C++ compiler)."""
    cxx, why = cxx_status()
    problems = [] if cxx else [f"the emulator cannot build kernels: {why}"]
    return Backend("cpu", reason, cxx=cxx, problems=problems)


def _emulator_backend(reason):
    use_emulator()
    backend = _cpu_backend(reason)
    importlib.import_module("pycuda.autoprimaryctx")   # the emulated device's primary context, as on a GPU
    return backend


def _cuda_backend(reason, details):
    # The device's primary context, not a new one (pycuda.autoinit's cuCtxCreate): the CUDA runtime
    # behind PyTorch and CuPy makes the primary context current on this thread the first time it is
    # used, after which PyCUDA objects made in a context of their own are "invalid resource handle"s.
    # Sharing the primary context lets kernels, GPUArrays and torch tensors mix in one process.
    try:
        importlib.import_module("pycuda.autoprimaryctx")   # retained and pushed on device 0, popped at exit
    except Exception as e:   # the child-process probe passed, so this is a change since, e.g. a GPU reset
        raise BackendError(
            f"the GPU passed the preflight in a child process but PyCUDA failed to start here "
            f"({type(e).__name__}: {e}); restart the kernel, run `gpuedu doctor`, or set {ENV_VAR}=cpu "
            f"to use the CPU emulator") from e
    return Backend("cuda", reason, device=details.get("device"), nvcc=details.get("nvcc"))


def _choose(choice, asked):
    """The backend for ``choice``; ``asked`` says who asked, e.g. "GPUEDU_BACKEND=cpu"."""
    if _real_pycuda_is_initialised():
        # Never shadow a working GPU: whoever initialised PyCUDA here chose it already.
        if choice == "cpu":
            raise BackendError(
                f"{asked} was asked for, but real PyCUDA is already initialised in this process; "
                "restart the kernel (Jupyter: Kernel > Restart) and run gpuedu.setup('cpu') first")
        drv = sys.modules["pycuda.driver"]
        dev = drv.Context.get_device()
        major, minor = dev.compute_capability()
        reason = "real PyCUDA was already initialised in this process"
        if "pycuda.autoinit" in sys.modules and "pycuda.autoprimaryctx" not in sys.modules:
            reason += (" by pycuda.autoinit, in a context of its own: PyTorch and CuPy use the device's "
                       "primary context, so do not mix them into this process (import pycuda.autoprimaryctx "
                       "instead, or leave it to gpuedu.setup())")
        return Backend("cuda", reason, device={"name": dev.name(), "arch": f"{major}{minor}"})
    if choice == "cpu":
        return _emulator_backend(f"{asked} was asked for")
    ok, reason, details = check_gpu()
    if ok:
        return _cuda_backend(reason if choice == "auto" else f"{asked} was asked for and the GPU is usable",
                             details)
    if choice == "cuda":
        raise BackendError(
            f"{asked} was asked for but the GPU is not usable: {reason}. Run `gpuedu doctor` for "
            f"details; on a machine with an NVIDIA GPU install the driver, the CUDA toolkit (nvcc) and "
            f"`pip install 'gpuedu[cuda]'`, or use the CPU emulator ({ENV_VAR}=cpu or auto)")
    return _emulator_backend(f"no usable GPU: {reason}")


def setup(backend=None, verbose=True):
    """Pick the backend for this process, print one line saying which and why, and return it.

    ``backend``: "auto" (default; or $GPUEDU_BACKEND), "cuda" (raise when no usable GPU) or "cpu".
    Calling it again returns the same backend without probing again; asking for a different one
    once a backend is in use raises ``BackendError`` telling you to restart the kernel.
    """
    global _active
    choice = requested_backend(backend)
    asked = f"backend={choice!r}" if backend is not None else f"{ENV_VAR}={choice}"
    if _active is not None:
        if choice not in ("auto", _active.name):
            raise BackendError(
                f"this process already uses the {_active.name} backend ({_active.reason}); modules and "
                f"device memory cannot switch backends mid-process. Restart the kernel (Jupyter: Kernel > "
                f"Restart) and call gpuedu.setup({choice!r}) first, or set {ENV_VAR}={choice} before starting")
    else:
        _active = _choose(choice, asked)
    if verbose:
        print(_active.summary())
    return _active
