"""Smoke test of `gpuedu bench --quick` on the CPU emulator: the results file's shape and sanity.

No timing thresholds: only that every figure is either measured (positive median, spread >= 0,
finite ratios) or skipped with a reason, that the yardsticks measured in the same run are there,
and that every target has a status.
"""
import json
import math
import os
import subprocess
import sys

import pytest

# One --quick run (about 15 s with compiled kernels cached, under a minute cold) shared by the tests.
pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench")
    out = folder / "quick.json"
    env = dict(os.environ, GPUEDU_BACKEND="cpu", MPLBACKEND="Agg")
    proc = subprocess.run(
        [sys.executable, "-m", "gpuedu.bench", "--quick", "--out", str(out), "--plots", str(folder / "plots")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout, folder


def test_the_file_has_the_documented_shape(quick_run):
    from gpuedu.bench import results_file
    results, _, _ = quick_run
    assert results_file.validate(results) == []
    assert results["mode"] == "quick"
    machine = results["machine"]
    assert machine["backend"] == "cpu" and machine["device_slug"] == "cpu-emulator"
    for key in ("device_name", "compute_capability", "numpy_version", "python_version", "host_cpu",
                "driver_version", "cuda_version", "pycuda_version"):
        assert key in machine
    assert results["timing"]["repeats"] >= 1


def test_every_figure_is_measured_sanely_or_skipped_with_a_reason(quick_run):
    results, _, _ = quick_run
    names = [f["name"] for f in results["figures"]]
    assert len(names) == len(set(names))
    for f in results["figures"]:
        if f["status"] == "ok":
            assert f["median"] > 0 and math.isfinite(f["median"]), f
            assert f["spread"]["iqr"] >= 0 and f["spread"]["min"] <= f["median"] <= f["spread"]["max"], f
            assert f["repeats"] >= 1
            for value in f["ratios"].values():
                assert value is None or (math.isfinite(value) and value > 0), f
        else:
            assert f["status"] == "skipped" and f["reason"].strip(), f


def test_no_gpuedu_code_failed_while_measured(quick_run):
    # "failed: ..." marks an exception in gpuedu code (or a wrong result caught before timing);
    # anything else this machine lacks (no GPU, no PyTorch) is a plain skip.
    results, _, _ = quick_run
    failed = {f["name"]: f["reason"] for f in results["figures"]
              if f["status"] == "skipped" and f["reason"].startswith("failed:")}
    assert not failed, failed


def test_every_measurement_is_there_with_its_yardstick(quick_run):
    results, _, _ = quick_run
    figures = {f["name"]: f for f in results["figures"]}
    groups = {f["group"] for f in results["figures"]}
    assert {"bandwidth", "matmul", "fp16_gemm", "training", "launch"} <= groups
    for name in ("copy_dtod", "relu_v1", "reduce_sum_v1", "matmul_v1", "wmma_gemm", "fp32_step", "amp_step",
                 "launch_call", "launch_prepared_call"):
        assert name in figures, name
    # On the CPU backend the yardstick is NumPy, measured in the same run; cuBLAS says why it is absent.
    for name in ("numpy_copy", "numpy_relu", "numpy_sum", "numpy_matmul", "numpy_hgemm"):
        assert figures[name]["status"] == "ok", figures[name]
    assert figures["cublas_sgemm"]["status"] == "skipped" and "no GPU" in figures["cublas_sgemm"]["reason"]
    assert figures["matmul_v1"]["baselines"][0] == "numpy_matmul"
    assert figures["launch_prepared_call"]["baselines"] == ["launch_call"]


def test_targets_have_a_status_and_gpu_ones_do_not_apply(quick_run):
    from gpuedu.bench import targets
    results, _, _ = quick_run
    entries = {t["name"]: t for t in results["targets"]}
    assert set(entries) == {t[0] for t in targets.TARGETS}
    for t in entries.values():
        assert t["status"] in {"met", "missed", "not applicable", "unavailable"}
        if t["status"] in ("met", "missed"):
            assert math.isfinite(t["value"])
        else:
            assert t["reason"]
    assert entries["sgemm_vs_cublas"]["status"] == "not applicable"
    assert entries["prepared_call_overhead"]["status"] != "not applicable"


def test_tables_and_plots_are_written(quick_run):
    results, stdout, folder = quick_run
    assert "target" in stdout and "prepared_call_overhead" in stdout
    plots = sorted(p.name for p in (folder / "plots").iterdir())
    assert "quick-bandwidth.png" in plots and "quick-ratios.png" in plots
    for name in plots:
        with open(folder / "plots" / name, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
