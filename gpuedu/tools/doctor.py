"""``gpuedu doctor``: what this machine has for the course, and what to do about what it lacks.

Each check is a ``Finding``: a label, what was found, whether it is fine, and advice when it is
not.  What the machine is comes from ``machine.describe()``, the description gpu-check and the
bench record too; whether kernels can be built comes from ``gpuedu.preflight``.  Missing GPU
pieces are not errors (the emulator runs everything); the exit code is 0 whenever the backend
the lessons will get can build and run kernels.
"""
import os
import platform
import sys
from dataclasses import dataclass

from .. import backend as backend_module, preflight
from .. import machine

MIN_PYTHON = (3, 10)


@dataclass
class Finding:
    label: str
    value: str
    ok: bool = True
    advice: str = ""


def _gib(nbytes):
    return f"{nbytes / 2**30:.1f} GiB"


def check_python(described):
    ok = sys.version_info[:2] >= MIN_PYTHON
    return Finding("Python", f"{described['python']} ({described['python_executable']})", ok,
                   "" if ok else f"gpuedu needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer")


def check_architecture(described):
    """The CPU the emulator compiles kernels for, and on aarch64 how their atomics are built (each way is
    ``gpuedu.emulator.compiler.atomics_path``'s)."""
    from ..emulator import compiler
    value = f"{platform.machine() or 'unknown'}, {described['host_cpu_count']} cores ({described['host_os']})"
    atomics = compiler.atomics_path()[1]
    return Finding("Architecture", value + (f"; atomics: {atomics}" if atomics else ""))


def check_numpy(described):
    version = described["numpy"]
    return Finding("NumPy", version or "not installed", version is not None,
                   "" if version else "pip install numpy (or reinstall gpuedu: pip install .)")


def check_pycuda(described):
    version = described["pycuda"]
    if version:
        return Finding("PyCUDA", version)
    return Finding("PyCUDA", "not installed (fine: the CPU emulator stands in for it)", True,
                   "for a GPU: pip install 'gpuedu[cuda]' (in a checkout: pip install -e '.[cuda]') on a machine "
                   "with the NVIDIA driver and nvcc")


def check_driver(described):
    version = described["nvidia_driver"]
    if version:
        return Finding("NVIDIA driver", version)
    return Finding("NVIDIA driver", "not found (no nvidia-smi, no libcuda)", True,
                   "for a GPU: install the NVIDIA driver (it provides libcuda.so and nvidia-smi)")


def check_nvcc(described):
    nvcc = described["nvcc_path"]
    if nvcc:
        return Finding("nvcc", f"{described['nvcc'] or 'unknown version'} ({nvcc})")
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
        version = machine.package_version(dist)
        if version and name not in found:
            found[name] = f"{name} {version}"
    if found:
        return Finding("Bench yardsticks", ", ".join(found.values()) + " (cuBLAS and PyTorch eager, same process)")
    return Finding("Bench yardsticks", "neither PyTorch nor CuPy is installed", True,
                   "on a GPU, `gpuedu bench` compares with cuBLAS through either: install one into this "
                   "environment (or make it with `python -m venv --system-site-packages` to see the machine's)")


def check_gpu_devices(described):
    """Real devices as the driver reports them, each with whether nvcc can build for it."""
    if preflight.find_real_pycuda() is None:
        return [Finding("GPU devices", "not probed (needs pycuda)")]
    devices = described["devices"]
    if not devices:
        _, reason, _ = preflight.check_gpu()
        return [Finding("GPU devices", reason, True, "the lessons use the CPU emulator instead")]
    findings = []
    nvcc = described["nvcc_path"]
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
    findings.append(Finding("CUDA (driver API)", described["cuda_driver_version"] or "?"))
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
    version = machine.first_line([cxx, "--version"]) or "version unknown"
    return Finding("C++ compiler", f"{version} ({cxx})")


def check_test_kernel(chosen):
    """The emulator builds and runs a small kernel module with this machine's compiler, C library and flags:
    setup() did so for ``chosen``; its finding, last, says in full what failed."""
    from ..emulator import compiler
    problem = chosen.toolchain_problem if chosen.toolchain_checked else preflight.emulator_problem()
    if problem:
        advice = ("why, and what to do: under \"Lessons will use\" below" if problem in chosen.problems
                  else problem)
        return Finding("Emulator test kernel", "failed", False, advice)
    return Finding("Emulator test kernel", f"built and ran ({compiler.toolchain()})")


def check_cache():
    from ..emulator.hooks import cache_problem
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


def check_grading_sandbox():
    """Whether ``gpuedu grade`` can sandbox submissions here (an instructor's concern: a learner needs none)."""
    from . import sandbox
    ok, why = sandbox.available()
    if ok:
        return Finding("Grading sandbox", f"bubblewrap ({sandbox.bwrap_path()}): gpuedu grade runs each submission in it")
    return Finding("Grading sandbox", "none (only gpuedu grade needs one; the lessons do not)", True,
                   f"to grade submissions: {why}")


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
    described = machine.describe()
    findings = [check_python(described), check_architecture(described), check_numpy(described),
                check_pycuda(described), check_driver(described), check_nvcc(described)]
    findings += check_gpu_devices(described)
    chosen, backend_finding = check_backend()
    if chosen is not None and chosen.is_emulator:
        findings.append(check_emulated_device(chosen))
    findings += [check_cxx(), check_cache(), check_grading_sandbox()]
    if chosen is not None and chosen.is_emulator and chosen.cxx:
        findings.append(check_test_kernel(chosen))
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
