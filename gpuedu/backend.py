"""Choose the backend for this process: real PyCUDA on a usable GPU, else the CPU emulator.

``setup()`` is the first cell of every lesson.  The GPU is used when all of these hold:

1. ``pycuda`` is importable;
2. the NVIDIA driver initialises (``cuInit``) and reports at least one device;
3. the ``nvcc`` on PATH can build a kernel for device 0's architecture (``sm_XY``).

Steps 2 and 3 are exactly where mismatched installs fail later with messages such as
"PTX was compiled with an unsupported toolchain" or "nvcc fatal: Value 'sm_30' is not defined
for option 'gpu-architecture'", so the preflight (``gpuedu.preflight.check_gpu``) checks them
once, up front, and says which one failed.  Step 2 runs in a child process: a broken driver can
fail halfway through initialisation and leave this process with a half-made context.

On the GPU, setup() imports ``pycuda.autoprimaryctx``: PyCUDA works in device 0's primary context,
the same one PyTorch and CuPy use, so the bench's cuBLAS yardsticks and gpuedu's kernels share
one process.  A learner who imported ``pycuda.autoinit`` (or autoprimaryctx) before setup() keeps
the context they made.

Otherwise (or with ``GPUEDU_BACKEND=cpu``) ``import pycuda.driver``, ``pycuda.compiler``,
``pycuda.gpuarray`` ... resolve to ``gpuedu.emulator.*`` for the rest of the process.
"""
import importlib
import importlib.abc
import importlib.util
import os
import pkgutil
import sys

from . import preflight

CHOICES = ("auto", "cuda", "cpu")
ENV_VAR = "GPUEDU_BACKEND"


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
        # Only PyCUDA's own module names resolve: the emulator's internals (_module, _memory, _errors...)
        # are not part of PyCUDA, and code written against them would break on a real GPU.
        top = fullname.split(".")[1] if "." in fullname else None
        if top is not None and top not in PYCUDA_MODULES:
            machinery = (f" (gpuedu.emulator.{top} is the emulator's own machinery; use pycuda.driver and friends)"
                         if importlib.util.find_spec("gpuedu.emulator." + top) is not None else "")
            raise ModuleNotFoundError(f"No module named {fullname!r}: PyCUDA has no such module{machinery}",
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
        self.toolchain_checked = False  # the emulator: whether a test kernel was built and run (setup() does)
        self.toolchain_problem = None   # ... and what failed, if it did (also among problems)

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
# The choice asked for
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


# --------------------------------------------------------------------------------------------
# setup()
# --------------------------------------------------------------------------------------------

def _cpu_backend(reason):
    """The emulator backend, with a check that it can build kernels (it needs a C++ compiler)."""
    cxx, why = preflight.cxx_status()
    problems = [] if cxx else [f"the emulator cannot build kernels: {why}"]
    return Backend("cpu", reason, cxx=cxx, problems=problems)


def _emulator_backend(reason):
    use_emulator()
    backend = _cpu_backend(reason)
    importlib.import_module("pycuda.autoprimaryctx")   # the emulated device's primary context, as on a GPU
    if backend.usable:   # a compiler is there: does it build and run a kernel (its C library, its defaults)?
        backend.toolchain_problem = preflight.emulator_problem()
        backend.toolchain_checked = True
        if backend.toolchain_problem:
            backend.problems.append(backend.toolchain_problem)
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
    ok, reason, details = preflight.check_gpu()
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
