"""The FP16 tensor-core targets: the WMMA one takes the best of wmma_gemm, wmma_gemm_v2 and wmma_gemm_v3, the PTX one
the best of mma_gemm_v6 .. _v10, at 4096^3 on an H100 or H200."""
import numpy as np

from gpuedu.bench import targets


def _fig(name, ratio, status="ok", reason=None):
    f = {"name": name, "group": "fp16_gemm", "unit": "GFLOP/s", "status": status,
         "median": None if ratio is None else 1000.0 * ratio, "baselines": ["cublas_hgemm"],
         "ratios": {"cublas_hgemm": ratio}, "sizes": {"m": 4096, "n": 4096, "k": 4096}}
    if reason:
        f["reason"] = reason
    return f


def _fp16_target(figures):
    return {t["name"]: t for t in targets.evaluate(figures, on_gpu=True)}["fp16_wmma_vs_cublas"]


def test_the_faster_tensor_core_gemm_is_compared_with_the_goal():
    t = _fp16_target({"wmma_gemm": _fig("wmma_gemm", 0.08), "wmma_gemm_v2": _fig("wmma_gemm_v2", 0.45),
                      "hgemm_tiled": _fig("hgemm_tiled", 0.9)})   # not a tensor-core GEMM: not a candidate
    assert (t["figure"], t["value"], t["status"]) == ("wmma_gemm_v2", 0.45, "met")
    t = _fp16_target({"wmma_gemm": _fig("wmma_gemm", 0.08), "wmma_gemm_v2": _fig("wmma_gemm_v2", 0.2),
                      "wmma_gemm_v3": _fig("wmma_gemm_v3", 0.25)})
    assert (t["figure"], t["value"], t["status"]) == ("wmma_gemm_v3", 0.25, "missed")


def test_a_failed_version_leaves_the_other():
    t = _fp16_target({"wmma_gemm": _fig("wmma_gemm", 0.31),
                      "wmma_gemm_v2": _fig("wmma_gemm_v2", None, status="error", reason="launch failed")})
    assert (t["figure"], t["status"]) == ("wmma_gemm", "met")


def test_no_tensor_core_gemm_in_the_run():
    t = _fp16_target({"hgemm_tiled": _fig("hgemm_tiled", 0.9)})
    assert t["status"] == "unavailable" and "none of wmma_gemm, wmma_gemm_v2, wmma_gemm_v3 was run" in t["reason"]


# ---- the PTX rungs (ops.fp16.matmul versions 6-10): >= 60 % of cuBLAS FP16 at 4096^3 on an H100 or H200 ----
def _gemm_target(figures, device="NVIDIA H200"):
    return {t["name"]: t for t in targets.evaluate(figures, on_gpu=True, device=device)}["fp16_gemm_vs_cublas"]


def test_the_best_ptx_rung_is_compared_with_the_goal():
    figures = {"mma_gemm_v6": _fig("mma_gemm_v6", 0.2), "mma_gemm_v9": _fig("mma_gemm_v9", 0.55),
               "mma_gemm_v10": _fig("mma_gemm_v10", 0.64),
               "wmma_gemm_v2": _fig("wmma_gemm_v2", 0.9)}   # a WMMA GEMM: not a candidate for this target
    t = _gemm_target(figures)
    assert (t["figure"], t["value"], t["status"]) == ("mma_gemm_v10", 0.64, "met")
    assert _gemm_target(dict(figures, mma_gemm_v10=_fig("mma_gemm_v10", 0.5)))["status"] == "missed"
    assert _gemm_target(figures, device="NVIDIA H100 80GB HBM3")["status"] == "met"


def test_the_ptx_goal_applies_to_an_h100_or_h200_at_4096_cubed_only():
    figures = {"mma_gemm_v10": _fig("mma_gemm_v10", 0.64)}
    t = _gemm_target(figures, device="NVIDIA A100-SXM4-80GB")
    assert t["status"] == "not applicable" and "H100 and H200; this run's GPU is NVIDIA A100" in t["reason"]
    assert _gemm_target(figures, device=None)["status"] == "not applicable"
    small = dict(_fig("mma_gemm_v10", 0.64), sizes={"m": 1024, "n": 1024, "k": 1024})
    t = _gemm_target({"mma_gemm_v10": small})
    assert t["status"] == "unavailable" and "without --quick" in t["reason"]
    t = _gemm_target({"wmma_gemm_v3": _fig("wmma_gemm_v3", 0.3)})
    assert t["status"] == "unavailable" and "none of mma_gemm_v6" in t["reason"]


def test_the_bench_measures_every_ptx_rung_of_the_ladder():
    from gpuedu.bench import gemm
    from gpuedu.ops import fp16
    assert gemm.MMA_FIGURES == tuple(f"mma_gemm_v{v}" for v in sorted(fp16.MMA_GEMMS))
    assert all(gemm.FP16_GEMMS[name][1] == np.float16 for name in gemm.MMA_FIGURES)   # FP16 C, like cuBLAS's


# ---- the Hopper rungs (versions 11-13): 60 / 80 / 90 % of cuBLAS at 4096^3 and 8192^3 on an H200, and 2 of the 3
# faster than the best mma.sync rung ----
def _targets(figures, device="NVIDIA H200"):
    return {t["name"]: t for t in targets.evaluate(figures, on_gpu=True, device=device)}


def _large(name, ratio, median=None):
    f = _fig(name, ratio)
    f.update(baselines=["cublas_hgemm_large"], ratios={"cublas_hgemm_large": ratio},
             sizes={"m": 8192, "n": 8192, "k": 8192})
    return f


def test_each_hopper_rung_has_its_goal_at_both_sizes():
    from gpuedu.bench import gemm
    assert gemm.HOPPER_FIGURES == ("wgmma_gemm_v11", "wgmma_gemm_v12", "wgmma_gemm_v13")
    figures = {"wgmma_gemm_v11": _fig("wgmma_gemm_v11", 0.61), "wgmma_gemm_v12": _fig("wgmma_gemm_v12", 0.79),
               "wgmma_gemm_v13": _fig("wgmma_gemm_v13", 0.95),
               "wgmma_gemm_v11_large": _large("wgmma_gemm_v11_large", 0.59),
               "wgmma_gemm_v12_large": _large("wgmma_gemm_v12_large", 0.85)}
    t = _targets(figures)
    assert [t[f"fp16_wgmma_v{v}_vs_cublas"]["status"] for v in (11, 12, 13)] == ["met", "missed", "met"]
    assert [t[f"fp16_wgmma_v{v}_vs_cublas_8192"]["status"] for v in (11, 12)] == ["missed", "met"]
    assert t["fp16_wgmma_v13_vs_cublas_8192"]["status"] == "unavailable"
    assert [t[f"fp16_wgmma_v{v}_vs_cublas"]["goal"] for v in (11, 12, 13)] == [0.60, 0.80, 0.90]
    # at 4096^3 only where the figure says 4096^3; on an H100 (or the emulator) not applicable
    small = {"wgmma_gemm_v11": dict(_fig("wgmma_gemm_v11", 0.9), sizes={"m": 1024, "n": 1024, "k": 1024})}
    assert "without --quick" in _targets(small)["fp16_wgmma_v11_vs_cublas"]["reason"]
    assert _targets(figures, device="NVIDIA H100 80GB HBM3")["fp16_wgmma_v11_vs_cublas"]["status"] == "not applicable"
    cpu = {t["name"]: t for t in targets.evaluate(figures, on_gpu=False)}
    assert cpu["fp16_wgmma_v13_vs_cublas"]["status"] == "not applicable"


def test_two_of_the_three_hopper_rungs_must_beat_the_best_mma_rung():
    mma = {"mma_gemm_v9": _fig("mma_gemm_v9", 0.5), "mma_gemm_v10": _fig("mma_gemm_v10", 0.65)}
    mma.update({f"mma_gemm_v{v}": _fig(f"mma_gemm_v{v}", 0.2) for v in (6, 7, 8)})
    hopper = {"wgmma_gemm_v11": _fig("wgmma_gemm_v11", 0.6), "wgmma_gemm_v12": _fig("wgmma_gemm_v12", 0.8),
              "wgmma_gemm_v13": _fig("wgmma_gemm_v13", 0.9)}
    t = _targets({**mma, **hopper})["fp16_wgmma_vs_mma"]
    assert (t["value"], t["status"], t["figure"], t["baseline"]) == (2, "met", "wgmma_gemm_v13", "mma_gemm_v10")
    t = _targets({**mma, **hopper, "wgmma_gemm_v12": _fig("wgmma_gemm_v12", 0.64)})["fp16_wgmma_vs_mma"]
    assert (t["value"], t["status"]) == (1, "missed")
    failed = dict(_fig("wgmma_gemm_v12", None, status="error"), reason="launch failed")
    t = _targets({**mma, **hopper, "wgmma_gemm_v12": failed})["fp16_wgmma_vs_mma"]
    assert t["status"] == "unavailable" and "wgmma_gemm_v12: launch failed" in t["reason"]
    t = _targets(hopper)["fp16_wgmma_vs_mma"]
    assert t["status"] == "unavailable" and "not run: mma_gemm_v6" in t["reason"]
