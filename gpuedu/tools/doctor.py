"""``gpuedu doctor``: what this machine has for the course, and what to do about what it lacks.

Each check is a ``Finding``: a label, what was found, whether it is fine, and advice when it is
not.  Missing GPU pieces are not errors (the emulator runs everything); the exit code is 0
whenever the backend the lessons will get can build and run kernels.
"""
import ctypes
import importlib
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass

from .. import backend as backend_module, preflight

MIN_PYTHON = (3, 10)


@dataclass
class Finding:
    label: str
    value: str
    ok: bool = True
    advice: str = ""


def _version_of(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _first_line(command, timeout=30):
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
        line = _first_line(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
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
            v = version.value
            return f"supports CUDA {v // 1000}.{v % 1000 // 10} (from {name})"
    return None


def _gib(nbytes):
    return f"{nbytes / 2**30:.1f} GiB"


def check_python():
    ok = sys.version_info[:2] >= MIN_PYTHON
    return Finding("Python", f"{platform.python_version()} ({sys.executable})", ok,
                   "" if ok else f"gpuedu needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer")


def check_numpy():
    version = _version_of("numpy")
    return Finding("NumPy", version or "not installed", version is not None,
                   "" if version else "pip install numpy (or reinstall gpuedu: pip install .)")


def check_pycuda():
    version = _version_of("pycuda")
    if version:
        return Finding("PyCUDA", version)
    return Finding("PyCUDA", "not installed (fine: the CPU emulator stands in for it)", True,
                   "for a GPU: pip install 'gpuedu[cuda]' (in a checkout: pip install -e '.[cuda]') on a machine "
                   "with the NVIDIA driver and nvcc")


def check_driver():
    version = nvidia_driver_version()
    if version:
        return Finding("NVIDIA driver", version)
    return Finding("NVIDIA driver", "not found (no nvidia-smi, no libcuda)", True,
                   "for a GPU: install the NVIDIA driver (it provides libcuda.so and nvidia-smi)")


def check_nvcc():
    nvcc = preflight.find_nvcc()
    if nvcc:
        return Finding("nvcc", f"{preflight.nvcc_version(nvcc) or 'unknown version'} ({nvcc})")
    return Finding("nvcc", "not on PATH" + preflight.nvcc_hint(), True,
                   "for a GPU: install the CUDA toolkit and put its bin/ on PATH "
                   "(the nvcc-marked tests also need it)")


# The bench's cuBLAS and PyTorch yardsticks: (distribution, what the report calls it).
YARDSTICKS = (("torch", "PyTorch"), ("cupy-cuda13x", "CuPy"), ("cupy-cuda12x", "CuPy"), ("cupy", "CuPy"))


def check_yardsticks():
    """PyTorch and CuPy, which `gpuedu bench` measures cuBLAS and PyTorch eager through on a GPU.

    Read from the installed packages' metadata: importing them would be slow, and is not needed.
    Never a problem: without them the bench records those figures as unavailable, with the reason.
    """
    found = {}
    for dist, name in YARDSTICKS:
        version = _version_of(dist)
        if version and name not in found:
            found[name] = f"{name} {version}"
    if found:
        return Finding("Bench yardsticks", ", ".join(found.values()) + " (cuBLAS and PyTorch eager, same process)")
    return Finding("Bench yardsticks", "neither PyTorch nor CuPy is installed", True,
                   "on a GPU, `gpuedu bench` compares with cuBLAS through either: install one into this "
                   "environment (or make it with `python -m venv --system-site-packages` to see the machine's)")


def check_gpu_devices():
    """Real devices as the driver reports them, each with whether nvcc can build for it."""
    if preflight.find_real_pycuda() is None:
        return [Finding("GPU devices", "not probed (needs pycuda)")]
    ok, reason, details = preflight.check_gpu()
    probe = details.get("probe", {})
    devices = probe.get("devices")
    if not devices:
        return [Finding("GPU devices", reason, True, "the lessons use the CPU emulator instead")]
    findings = []
    nvcc = preflight.find_nvcc()
    for dev in devices:
        value = f"{dev['name']}, compute capability {dev['arch'][:-1]}.{dev['arch'][-1]}, {_gib(dev['total_memory'])}"
        if nvcc:
            builds, error = preflight.nvcc_can_target(nvcc, dev["arch"])
            value += f", nvcc builds sm_{dev['arch']}: {'yes' if builds else 'no'}"
            if not builds:
                findings.append(Finding(f"GPU {dev['index']}", value, True,
                                        f"install a CUDA toolkit whose nvcc supports sm_{dev['arch']} ({error})"))
                continue
        findings.append(Finding(f"GPU {dev['index']}", value))
    findings.append(Finding("CUDA (driver API)", probe.get("cuda_driver_version", "?")))
    return findings


def check_emulated_device(backend):
    """The device the lessons see on the emulator, through the same driver API they use."""
    try:
        dev = backend.driver.Device(0)
        major, minor = dev.compute_capability()
        return Finding("Emulated device", f"{dev.name()}, compute capability {major}.{minor}, "
                                          f"{_gib(dev.total_memory())} (host memory)")
    except Exception as e:   # the emulator's driver reports its own problems; show them rather than crash
        return Finding("Emulated device", f"unavailable ({type(e).__name__}: {e})", False,
                       "reinstall gpuedu (pip install .); if it persists, report this output")


def check_cxx():
    cxx, why = preflight.cxx_status()
    if cxx is None:
        return Finding("C++ compiler", (why or "not found").splitlines()[0], False, preflight.CXX_INSTALL_HINT)
    version = _first_line([cxx, "--version"]) or "version unknown"
    return Finding("C++ compiler", f"{version} ({cxx})")


def check_cache():
    from ..emulator.compiler import cache_problem
    folder = preflight.kernel_cache_dir()
    problem = cache_problem(folder)
    if problem:   # the emulator refuses it: compiled kernels run as the learner's own code
        return Finding("Kernel cache", folder, False,
                       f"refused: {problem}; set {preflight.CACHE_ENV_VAR} to a folder of your own")
    parent = folder
    while not os.path.exists(parent) and os.path.dirname(parent) != parent:
        parent = os.path.dirname(parent)
    writable = os.access(parent, os.W_OK)
    return Finding("Kernel cache", folder, writable,
                   "" if writable else f"{parent} is not writable: set {preflight.CACHE_ENV_VAR} to a writable folder")


def check_backend():
    """The backend the lessons will get (setup() in this process) and the finding for it."""
    asked = os.environ.get(backend_module.ENV_VAR, "").strip() or "auto"
    try:
        chosen = backend_module.setup(verbose=False)
    except (backend_module.BackendError, ValueError) as e:
        return None, Finding("Lessons will use", f"no backend ({backend_module.ENV_VAR}={asked})", False, str(e))
    value = f"{chosen.name} ({'real GPU' if chosen.name == 'cuda' else 'CPU emulator'}), because {chosen.reason}"
    return chosen, Finding("Lessons will use", value, chosen.usable, "; ".join(chosen.problems))


def collect():
    """Every finding, in the order the report prints them, and the chosen backend (or None)."""
    findings = [check_python(), check_numpy(), check_pycuda(), check_driver(), check_nvcc()]
    findings += check_gpu_devices()
    chosen, backend_finding = check_backend()
    if chosen is not None and chosen.is_emulator:
        findings.append(check_emulated_device(chosen))
    findings += [check_cxx(), check_cache()]
    if chosen is not None and not chosen.is_emulator:
        findings.append(check_yardsticks())      # they matter to the bench on a GPU only
    findings.append(backend_finding)
    return findings, chosen


def format_report(findings):
    width = max(len(f.label) for f in findings) + 1
    lines = ["gpuedu doctor"]
    for f in findings:
        mark = "ok " if f.ok else "BAD"
        lines.append(f"  [{mark}] {f.label + ':':<{width}} {f.value}")
        if f.advice:
            lines.append(f"        {'':<{width}} -> {f.advice}")
    return "\n".join(lines)


def main(argv=None):
    """Print the report; exit code 0 when the lessons' backend can build and run kernels."""
    findings, chosen = collect()
    print(format_report(findings))
    usable = chosen is not None and chosen.usable and all(f.ok for f in findings)
    print("\nResult: " + ("ready, the lessons will run." if usable else
                          "NOT ready: fix the lines marked BAD (the advice under each says how)."))
    return 0 if usable else 1
