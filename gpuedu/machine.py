"""What this machine is: the one description that ``gpuedu doctor``, ``gpuedu gpu-check``, ``gpuedu course``
and the bench's results read, so that they never disagree about a version.

``describe()`` returns a flat dict:

    python, python_implementation, python_executable     the interpreter
    gpuedu, numpy, pycuda                                 versions (None: not installed)
    host_cpu, host_cpu_count, host_os, host_platform      the host
    nvidia_driver                                         '550.54.15 (from nvidia-smi)', ... or None
    nvcc, nvcc_path                                       the CUDA toolkit on PATH, or None
    cuda_driver_version                                   the CUDA version the driver runs ('12.4'), or None
    cuda_version                                          the CUDA PyCUDA was built with ('12.4.0'), or None
    devices                                               [{index, name, arch, compute_capability,
                                                            total_memory, ...}] or None
    unknown                                               {field: why it could not be answered}

Devices come from the driver the caller hands in (``describe(drv)``: the bench asks the backend it measures,
the emulator's included, in this process), else from the preflight's child-process probe of real PyCUDA
(nothing in this process touches the GPU), else there are none to describe.
"""
import ctypes
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys

from . import preflight


def package_version(distribution):
    """The installed version of ``distribution``, or None."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def gpuedu_version():
    """The version of the gpuedu this process runs."""
    from ._version import __version__
    return __version__


def pycuda_version():
    """The real PyCUDA's version: the one imported in this process, else the installed one; None when there is none
    (``pycuda`` resolving to the emulator does not count)."""
    module = sys.modules.get("pycuda")
    if module is not None and not getattr(module, "__name__", "").startswith("gpuedu.emulator"):
        text = getattr(module, "VERSION_TEXT", None)
        if text:
            return str(text)
    return package_version("pycuda")


def first_line(command, timeout=30):
    """First non-empty line a command prints, or None when it cannot run."""
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [ln.strip() for ln in (proc.stdout or proc.stderr).splitlines() if ln.strip()]
    return lines[0] if proc.returncode == 0 and lines else None


def nvidia_driver_version():
    """'550.54.15 (from nvidia-smi)', 'supports CUDA 12.4 (from libcuda)', or None when no driver is found."""
    if shutil.which("nvidia-smi"):
        line = first_line(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        if line:
            return f"{line} (from nvidia-smi)"
    # libcuda answers cuDriverGetVersion without cuInit, so loading it here changes nothing.
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        version = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value:
            return f"supports CUDA {cuda_version_text(version.value)} (from {name})"
    return None


def cuda_version_text(v):
    """CUDA encodes versions as 1000*major + 10*minor: 12040 -> '12.4'."""
    if isinstance(v, int):
        return f"{v // 1000}.{(v % 1000) // 10}"
    return str(v)


def host_cpu_model():
    """The CPU's model name from /proc/cpuinfo, else what the platform module knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _devices_in_process(drv, unknown):
    """(device 0 as the driver ``drv`` reports it, CUDA versions), each question's failure kept in ``unknown``."""

    def ask(key, question):
        try:
            return question()
        except Exception as exc:   # any failure to answer is recorded, not fatal
            unknown[key] = f"{type(exc).__name__}: {exc}"
            return None

    devices = None
    device = ask("device", lambda: drv.Device(0))
    if device is not None:
        cc = ask("compute_capability", lambda: list(device.compute_capability()))
        devices = [{
            "index": 0,
            "name": ask("device_name", lambda: device.name()),
            "arch": f"{cc[0]}{cc[1]}" if cc else None,
            "compute_capability": cc,
            "l2_cache_bytes": ask("l2_cache_bytes",
                                  lambda: int(device.get_attribute(drv.device_attribute.L2_CACHE_SIZE))),
            "multiprocessors": ask("multiprocessors",
                                   lambda: int(device.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT))),
            "total_memory": ask("device_memory_bytes", lambda: int(device.total_memory())),
        }]
    driver_version = ask("driver_version", lambda: cuda_version_text(drv.get_driver_version()))
    cuda_version = ask("cuda_version", lambda: ".".join(str(p) for p in drv.get_version()))
    return devices, driver_version, cuda_version


def _devices_from_probe(unknown):
    """(every device the preflight's child process saw, the driver's CUDA version), or Nones with the reason."""
    pycuda_dir = preflight.find_real_pycuda()
    if pycuda_dir is None:
        unknown["devices"] = "pycuda is not installed"
        return None, None
    probe = preflight.probe_driver(pycuda_dir)     # cached: setup() and check_gpu() ask the same once
    if "devices" not in probe:
        unknown["devices"] = preflight.explain_driver_failure(probe)
    return probe.get("devices"), probe.get("cuda_driver_version")


def describe(drv=None, devices=True):
    """This machine, as the module docstring lays it out.  ``drv``: a ``pycuda.driver`` (real or emulated) to ask
    about device 0 in this process; ``devices=False``: leave the devices and CUDA versions out (None)."""
    unknown = {}
    nvcc = preflight.find_nvcc()
    found, driver_version, cuda_version = None, None, None
    if drv is not None:
        found, driver_version, cuda_version = _devices_in_process(drv, unknown)
    elif devices:
        found, driver_version = _devices_from_probe(unknown)
    return {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "python_executable": sys.executable,
        "gpuedu": gpuedu_version(),
        "numpy": package_version("numpy"),
        "pycuda": pycuda_version(),
        "host_cpu": host_cpu_model(),
        "host_cpu_count": os.cpu_count(),
        "host_os": f"{platform.system()} {platform.release()}",
        "host_platform": platform.platform(),
        "nvidia_driver": nvidia_driver_version(),
        "nvcc": preflight.nvcc_version(nvcc) if nvcc else None,
        "nvcc_path": nvcc,
        "cuda_driver_version": driver_version,
        "cuda_version": cuda_version,
        "devices": found,
        "unknown": unknown,
    }
