"""What the numbers were measured on: device, software versions, host, and how loaded the host was.

Every field is filled by asking the running system; a field it cannot answer is ``None`` and the
question's failure is kept under ``"unknown"`` so a reader sees why, rather than a guess.
"""
import datetime
import os
import platform
import re
import sys

import numpy as np


def slug(text):
    """A file-name-safe form of a device name: ``"NVIDIA H200"`` -> ``"nvidia-h200"``."""
    s = re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")
    return s or "device"


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


def load_average():
    """The 1-minute load average (runnable processes), or None where the OS does not report it."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def _version_of(module_name):
    try:
        from importlib.metadata import version
        return version(module_name)
    except Exception:
        return None


def describe(backend, drv):
    """The ``machine`` section of the results: device, versions, host. ``drv`` is pycuda.driver."""
    unknown = {}

    def ask(key, question):
        try:
            return question()
        except Exception as exc:   # any failure to answer is recorded, not fatal
            unknown[key] = f"{type(exc).__name__}: {exc}"
            return None

    device = ask("device", lambda: drv.Device(0))
    name = ask("device_name", lambda: device.name()) if device is not None else None
    cc = ask("compute_capability", lambda: list(device.compute_capability())) if device is not None else None
    l2 = None
    if device is not None:
        l2 = ask("l2_cache_bytes", lambda: int(device.get_attribute(drv.device_attribute.L2_CACHE_SIZE)))
    sms = None
    if device is not None:
        sms = ask("multiprocessors",
                  lambda: int(device.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)))
    memory = None
    if device is not None:
        memory = ask("device_memory_bytes", lambda: int(device.total_memory()))
    driver_version = ask("driver_version", lambda: _cuda_version_text(drv.get_driver_version()))
    cuda_version = ask("cuda_version", lambda: ".".join(str(p) for p in drv.get_version()))
    if backend.name == "cpu":
        # pycuda.* resolves to gpuedu.emulator here: report a real PyCUDA only if one is installed.
        pycuda_version = _version_of("pycuda")
        if pycuda_version is None:
            unknown["pycuda_version"] = "PyCUDA is not installed; the CPU emulator provides its API"
    else:
        pycuda_version = ask("pycuda_version", _pycuda_version)
    if name is None:
        name = "unknown device"
    cpu_count = os.cpu_count()
    return {
        "backend": backend.name,
        "backend_reason": getattr(backend, "reason", None),
        "device_name": name,
        "device_slug": "cpu-emulator" if backend.name == "cpu" else slug(name),
        "compute_capability": cc,
        "multiprocessors": sms,
        "l2_cache_bytes": l2,
        "device_memory_bytes": memory,
        "driver_version": driver_version,
        "cuda_version": cuda_version,
        "pycuda_version": pycuda_version,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "gpuedu_version": _gpuedu_version(),
        "host_cpu": host_cpu_model(),
        "host_cpu_count": cpu_count,
        "host_os": f"{platform.system()} {platform.release()}",
        "load_average_1min_before": load_average(),
        "unknown": unknown,
    }


def now_utc():
    """The current time in ISO 8601, UTC, to the second."""
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def _cuda_version_text(v):
    # CUDA encodes versions as 1000*major + 10*minor (12040 -> "12.4").
    if isinstance(v, int):
        return f"{v // 1000}.{(v % 1000) // 10}"
    return str(v)


def _pycuda_version():
    module = sys.modules.get("pycuda")
    text = getattr(module, "VERSION_TEXT", None) if module is not None else None
    if text:
        return str(text)
    installed = _version_of("pycuda")
    if installed:
        return installed
    return None


def _gpuedu_version():
    import gpuedu
    return getattr(gpuedu, "__version__", None)
