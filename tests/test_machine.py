"""One description of the machine: `gpuedu doctor`, `gpuedu gpu-check`, `gpuedu course` and the bench's results
all read `gpuedu.machine.describe()`, so a version is found one way and said the same everywhere."""
import json
import os
import platform
import sys
import types

import gpuedu
from gpuedu import preflight
from gpuedu.bench import environment
from gpuedu import machine
from gpuedu.tools import course, doctor, gpu_check

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A machine no test process runs on: every field differs from the real one.
MADE_UP = {
    "python": "3.99.1", "python_implementation": "CPython", "python_executable": "/opt/py/bin/python",
    "gpuedu": "9.9.9", "numpy": "7.0.0", "pycuda": "2099.1",
    "host_cpu": "Made-up CPU", "host_cpu_count": 96, "host_os": "Linux 9.9", "host_platform": "Linux-9.9-x86_64",
    "nvidia_driver": "999.1 (from nvidia-smi)", "nvcc": "99.0", "nvcc_path": "/opt/cuda/bin/nvcc",
    "cuda_driver_version": "99.0", "cuda_version": "99.0.0",
    "devices": [{"index": 0, "name": "Made-up GPU", "arch": "90", "compute_capability": [9, 0],
                 "total_memory": 80 * 2**30}],
    "unknown": {},
}


def test_the_description_answers_from_this_process():
    described = machine.describe(devices=False)
    assert described["python"] == platform.python_version() and described["python_executable"] == sys.executable
    assert described["gpuedu"] == gpuedu.__version__
    import numpy
    assert described["numpy"] == numpy.__version__
    assert described["host_cpu"] and described["host_cpu_count"] == os.cpu_count()
    assert described["nvcc_path"] == preflight.find_nvcc()
    assert described["devices"] is None and described["cuda_driver_version"] is None


def test_without_a_driver_in_hand_the_devices_come_from_the_preflight_probe():
    described = machine.describe()
    pycuda_dir = preflight.find_real_pycuda()
    if pycuda_dir is None:
        assert described["devices"] is None and described["unknown"]["devices"] == "pycuda is not installed"
    else:
        probe = preflight.probe_driver(pycuda_dir)
        assert described["devices"] == probe.get("devices")
        assert described["cuda_driver_version"] == probe.get("cuda_driver_version")


def test_the_emulator_standing_in_for_pycuda_is_not_reported_as_pycuda():
    gpuedu.setup(verbose=False)
    import pycuda
    if pycuda.__name__.startswith("gpuedu.emulator"):
        assert machine.pycuda_version() == machine.package_version("pycuda")
    else:
        assert machine.pycuda_version() == pycuda.VERSION_TEXT


def test_the_bench_record_keeps_its_keys_and_takes_its_values_from_the_description():
    backend = gpuedu.setup(verbose=False)
    described = machine.describe(backend.driver)
    record = environment.describe(backend, backend.driver)
    with open(os.path.join(REPO, "benchmarks", "results", "cpu-emulator.json")) as f:
        stored = json.load(f)["machine"]
    stored.pop("load_average_1min_after")          # added by the bench once it has measured
    assert list(record) == list(stored)
    device = described["devices"][0]
    assert record["device_name"] == device["name"] == backend.driver.Device(0).name()
    assert record["compute_capability"] == device["compute_capability"]
    assert record["device_memory_bytes"] == device["total_memory"]
    assert record["driver_version"] == described["cuda_driver_version"]
    assert record["cuda_version"] == described["cuda_version"]
    for key, field in (("python_version", "python"), ("numpy_version", "numpy"), ("gpuedu_version", "gpuedu"),
                       ("host_cpu", "host_cpu"), ("host_os", "host_os"), ("pycuda_version", "pycuda")):
        assert record[key] == described[field], key


def test_a_device_the_driver_cannot_describe_is_kept_with_the_reason():
    class Refusing:
        device_attribute = types.SimpleNamespace(L2_CACHE_SIZE=1, MULTIPROCESSOR_COUNT=2)

        class Device:
            def __init__(self, index):
                raise RuntimeError("cuInit failed")

        @staticmethod
        def get_driver_version():
            return 12040

        @staticmethod
        def get_version():
            return (12, 4, 0)

    described = machine.describe(Refusing)
    assert described["devices"] is None and described["unknown"]["device"] == "RuntimeError: cuInit failed"
    assert described["cuda_driver_version"] == "12.4" and described["cuda_version"] == "12.4.0"


def test_doctor_reports_the_description(monkeypatch):
    monkeypatch.setattr(preflight, "nvcc_can_target", lambda nvcc, arch: (True, ""))
    monkeypatch.setattr(preflight, "find_real_pycuda", lambda: "/opt/pycuda")
    value = {f.label: f.value for f in [doctor.check_python(MADE_UP), doctor.check_numpy(MADE_UP),
                                        doctor.check_pycuda(MADE_UP), doctor.check_driver(MADE_UP),
                                        doctor.check_nvcc(MADE_UP), *doctor.check_gpu_devices(MADE_UP)]}
    assert value["Python"] == "3.99.1 (/opt/py/bin/python)"
    assert value["NumPy"] == "7.0.0" and value["PyCUDA"] == "2099.1"
    assert value["NVIDIA driver"] == "999.1 (from nvidia-smi)" and value["nvcc"] == "99.0 (/opt/cuda/bin/nvcc)"
    assert value["GPU 0"] == "Made-up GPU, compute capability 9.0, 80.0 GiB, nvcc builds sm_90: yes"
    assert value["CUDA (driver API)"] == "99.0"


def test_gpu_check_records_the_description(monkeypatch):
    monkeypatch.setattr(machine, "package_version", {"pytest": "8.9"}.get)
    found = gpu_check.versions(MADE_UP)
    assert found["python"] == "3.99.1" and found["gpuedu"] == "9.9.9"
    assert found["numpy"] == "7.0.0" and found["pycuda"] == "2099.1"
    assert found["nvcc"] == "99.0" and found["nvidia_driver"] == "999.1 (from nvidia-smi)"
    assert found["pytest"] == "8.9" and found["torch"] is None and "cupy" not in found
    assert list(found)[0] == "python" and list(found)[-2:] == ["nvcc", "nvidia_driver"]


def test_the_course_report_names_the_described_versions(monkeypatch, tmp_path):
    monkeypatch.setattr(machine, "describe", lambda drv=None, devices=True: MADE_UP)
    facts = course.run_facts(str(tmp_path))
    assert {k: facts[k] for k in ("gpuedu", "python", "numpy", "platform")} == \
        {"gpuedu": "9.9.9", "python": "3.99.1", "numpy": "7.0.0", "platform": "Linux-9.9-x86_64"}
