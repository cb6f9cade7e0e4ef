"""The FP16 tensor-core target takes the best of the WMMA GEMMs (wmma_gemm, wmma_gemm_v2, wmma_gemm_v3)."""
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
