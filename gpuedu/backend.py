"""Choose the backend for this process: real PyCUDA on a usable GPU, else the CPU emulator.

(Minimal first version; the full preflight lives here too.)
"""
import importlib
import importlib.abc
import importlib.util
import os
import sys

_EMULATED = ("driver", "compiler", "gpuarray", "autoinit", "elementwise", "reduction", "tools")


class _EmulatorFinder(importlib.abc.MetaPathFinder):
    """Make ``import pycuda.X`` load ``gpuedu.emulator.X``."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "pycuda" and not fullname.startswith("pycuda."):
            return None
        target_name = "gpuedu.emulator" + fullname[len("pycuda"):]
        return importlib.util.spec_from_loader(fullname, _AliasLoader(target_name))


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module):
        pass


class Backend:
    def __init__(self, name, reason):
        self.name = name
        self.reason = reason

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

    def __repr__(self):
        return f"Backend({self.name!r}, {self.reason!r})"


_active = None


def use_emulator():
    """Route ``pycuda.*`` imports to the emulator in this process."""
    for key in [k for k in sys.modules if k == "pycuda" or k.startswith("pycuda.")]:
        mod = sys.modules[key]
        if not getattr(mod, "__name__", "").startswith("gpuedu.emulator"):
            del sys.modules[key]
    if not any(isinstance(f, _EmulatorFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _EmulatorFinder())


def setup(verbose=True):
    """Pick the backend (see the module docstring) and return it."""
    global _active
    if _active is None:
        use_emulator()
        _active = Backend("cpu", "minimal preflight: the CPU emulator is used")
    if verbose:
        print(f"gpuedu: backend {_active.name} ({_active.reason})")
    return _active


def active():
    """The backend chosen by ``setup()``; chooses one quietly if setup was not called."""
    return _active if _active is not None else setup(verbose=False)
