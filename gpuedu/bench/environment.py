"""What the numbers were measured on: device, software versions, host (``gpuedu.machine``), and how loaded
the host was.

Every field is filled by asking the running system; a field it cannot answer is ``None`` and the
question's failure is kept under ``"unknown"`` so a reader sees why, rather than a guess.
"""
import datetime
import os
import re

from .. import machine


def slug(text):
    """A file-name-safe form of a device name: ``"NVIDIA H200"`` -> ``"nvidia-h200"``."""
    s = re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")
    return s or "device"


def load_average():
    """The 1-minute load average (runnable processes), or None where the OS does not report it."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def describe(backend, drv):
    """The ``machine`` section of the results: device, versions, host. ``drv`` is pycuda.driver.

    Read from ``gpuedu.machine.describe(drv)``, the description ``gpuedu doctor`` and ``gpuedu gpu-check``
    read too, under the names the results have always used.
    """
    described = machine.describe(drv, devices=drv is not None)   # no driver here: run() says why, under "driver"
    unknown = dict(described["unknown"])
    device = (described["devices"] or [{}])[0]
    pycuda_version = described["pycuda"]
    if backend.name == "cpu" and pycuda_version is None:
        # pycuda.* resolves to gpuedu.emulator here: a real PyCUDA is reported only if one is installed.
        unknown["pycuda_version"] = "PyCUDA is not installed; the CPU emulator provides its API"
    name = device.get("name") or "unknown device"
    return {
        "backend": backend.name,
        "backend_reason": getattr(backend, "reason", None),
        "device_name": name,
        "device_slug": "cpu-emulator" if backend.name == "cpu" else slug(name),
        "compute_capability": device.get("compute_capability"),
        "multiprocessors": device.get("multiprocessors"),
        "l2_cache_bytes": device.get("l2_cache_bytes"),
        "device_memory_bytes": device.get("total_memory"),
        "driver_version": described["cuda_driver_version"],
        "cuda_version": described["cuda_version"],
        "pycuda_version": pycuda_version,
        "numpy_version": described["numpy"],
        "python_version": described["python"],
        "python_implementation": described["python_implementation"],
        "gpuedu_version": described["gpuedu"],
        "host_cpu": described["host_cpu"],
        "host_cpu_count": described["host_cpu_count"],
        "host_os": described["host_os"],
        "load_average_1min_before": load_average(),
        "unknown": unknown,
    }


def now_utc():
    """The current time in ISO 8601, UTC, to the second."""
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
