"""The GPU branch of the suite (event timing with an L2 flush, cuBLAS and PyTorch yardsticks, GPU
targets), run on the CPU emulator's PyCUDA API so it is exercised on every machine.

Without PyTorch or CuPy the vendor yardsticks must be skipped with a reason that says what to
install, and the GPU targets must then be "unavailable" (not "not applicable", not met or missed).
"""
import importlib.util

import pytest

import gpuedu
from gpuedu.bench import config, records, suite, targets, timers


@pytest.fixture(scope="module")
def gpu_mode_run():
    if importlib.util.find_spec("torch") or importlib.util.find_spec("cupy"):
        pytest.skip("PyTorch or CuPy is installed: this test is about their absence")
    backend = gpuedu.setup(verbose=False)
    if backend.name != "cpu":
        pytest.skip("runs the GPU branch on the CPU emulator; on a GPU the real run covers it")
    import pycuda.driver as drv
    sizes = config.sizes_for(on_gpu=False, quick=True, l2_bytes=0)
    timer = timers.CudaEventTimer(drv, l2_bytes=1 << 20)
    run = records.Run(backend, drv, timer, sizes, repeats=2, warmup=1, on_gpu=True, log=lambda *a: None)
    suite.run_all(run, suite.selected(["elementwise", "matmul", "fp16_gemm", "mlp", "launch"]))
    run.compute_ratios()
    return run


def test_gpuedu_figures_are_timed_with_events_and_compared_with_the_gpu_yardsticks(gpu_mode_run):
    figures = gpu_mode_run.figures
    for name in ("copy_dtod", "relu_v1", "matmul_v1", "wmma_gemm", "mlp_step_b32", "launch_prepared_call"):
        assert figures[name]["status"] == "ok", figures[name]
        assert figures[name]["median"] > 0
    assert figures["relu_v1"]["baselines"] == ["copy_dtod"] and figures["relu_v1"]["ratio"] > 0
    assert figures["matmul_v1"]["baselines"] == ["cublas_sgemm"]
    assert figures["mlp_step_b32"]["baselines"] == ["torch_mlp_step_b32"]
    assert not any(name.startswith("numpy_") for name in figures)    # NumPy is the CPU backend's yardstick


def test_missing_vendor_libraries_are_skipped_with_what_to_install(gpu_mode_run):
    figures = gpu_mode_run.figures
    for name in ("cublas_sgemm", "cublas_hgemm"):
        assert figures[name]["status"] == "skipped"
        assert "install PyTorch or CuPy" in figures[name]["reason"]
    assert "PyTorch not importable" in figures["torch_mlp_step_b32"]["reason"]
    assert figures["matmul_v1"]["ratio"] is None and "cublas_sgemm" in figures["matmul_v1"]["ratio_missing"]


def test_vendor_yardsticks_run_after_every_gpuedu_figure(gpu_mode_run):
    order = list(gpu_mode_run.figures)
    vendor = [order.index(n) for n in ("cublas_sgemm", "cublas_hgemm", "torch_mlp_step_b32")]
    gpuedu_figures = [order.index(n) for n in ("matmul_v1", "wmma_gemm", "mlp_step_b32", "launch_prepared_call")]
    assert min(vendor) > max(gpuedu_figures)
    assert gpu_mode_run.deferred == []


def test_gpu_targets_become_unavailable_with_a_reason(gpu_mode_run):
    entries = {t["name"]: t for t in targets.evaluate(gpu_mode_run.figures, on_gpu=True)}
    for name in ("sgemm_vs_cublas", "fp16_wmma_vs_cublas", "mlp_step_b128_vs_torch", "amp_step_vs_fp32"):
        assert entries[name]["status"] == "unavailable" and entries[name]["reason"], entries[name]
    # The copy roof was measured, so the elementwise goal is compared (met or missed, never skipped).
    assert entries["elementwise_vs_copy"]["status"] in ("met", "missed")
    assert entries["prepared_call_overhead"]["status"] in ("met", "missed")
