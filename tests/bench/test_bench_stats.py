"""Unit tests of the benchmark suite's statistics, records, targets and results-file checks (no timing)."""
import json
import math

import pytest

from gpuedu.bench import environment, results_file, stats, suite, targets
from gpuedu.bench.records import Run, Skipped


# ---- stats ---------------------------------------------------------------------------------------
def test_summarize_quartiles_by_linear_interpolation():
    s = stats.summarize([4.0, 1.0, 3.0, 2.0])
    assert s["median"] == 2.5
    assert s["q1"] == 1.75 and s["q3"] == 3.25
    assert s["iqr"] == pytest.approx(1.5)
    assert (s["min"], s["max"], s["repeats"]) == (1.0, 4.0, 4)


def test_summarize_is_robust_to_one_outlier():
    s = stats.summarize([1.0, 1.1, 0.9, 1.0, 1.05, 500.0])
    assert s["median"] == pytest.approx(1.025)
    assert s["max"] == 500.0
    assert s["iqr"] < 0.2      # the stray repeat moves neither the median nor the IQR


def test_summarize_one_sample_has_zero_spread():
    s = stats.summarize([7.0])
    assert s["median"] == 7.0 and s["iqr"] == 0.0 and s["repeats"] == 1


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf")]])
def test_summarize_rejects_empty_and_non_finite(bad):
    with pytest.raises(ValueError):
        stats.summarize(bad)


def test_rates_per_sample_swap_the_quartiles_of_durations():
    seconds = [1.0, 2.0, 4.0, 8.0]
    r = stats.summarize(stats.rates(seconds, 8.0))       # 8, 4, 2, 1 per second
    t = stats.summarize(seconds)
    assert r["median"] == pytest.approx(3.0)
    assert r["max"] == 8.0 / t["min"] and r["min"] == 8.0 / t["max"]


@pytest.mark.parametrize("bad", [0.0, -1e-6])
def test_rates_reject_durations_that_are_not_positive(bad):
    with pytest.raises(ValueError, match="resolution"):
        stats.rates([1e-3, bad], 1.0)


@pytest.mark.parametrize("value, baseline, expected", [
    (2.0, 4.0, 0.5), (3.0, 3.0, 1.0), (None, 1.0, None), (1.0, None, None),
    (1.0, 0.0, None), (0.0, 1.0, None), (float("nan"), 1.0, None), (1.0, float("inf"), None),
])
def test_ratio_is_finite_or_none(value, baseline, expected):
    assert stats.ratio(value, baseline) == expected


# ---- records -------------------------------------------------------------------------------------
def _run():
    return Run(backend=None, drv=None, timer=None, sizes={}, repeats=3, warmup=0, on_gpu=False,
               log=lambda *a: None)


def test_ratios_are_medians_over_the_baseline_and_missing_baselines_say_why():
    run = _run()
    run.add("mine", "g", "GB/s", [2.0, 4.0, 6.0], {"n": 1}, baselines=["roof", "absent"])
    run.add("roof", "g", "GB/s", [8.0, 8.0, 8.0], {"n": 1})
    run.skip("other", "g", "GB/s", "no GPU", baselines=["roof"])
    run.compute_ratios()
    mine = run.figures["mine"]
    assert mine["ratio"] == 0.5 and mine["ratios"] == {"roof": 0.5, "absent": None}
    assert "absent: not measured in this run" in mine["ratio_missing"]
    assert run.figures["roof"]["ratio"] is None and run.figures["roof"]["ratios"] == {}
    assert run.figures["other"]["ratio"] is None and "ratio_missing" not in run.figures["other"]


def test_figure_context_records_skips_and_failures_with_reasons():
    run = _run()
    with run.figure("a", "g", "GB/s", {}) as fig:
        fig.record([1.0, 2.0])
    with run.figure("b", "g", "GB/s", {}):
        raise Skipped("needs PyTorch")
    with run.figure("c", "g", "GB/s", {}):
        raise ZeroDivisionError("division by zero\nsecond line")
    assert run.figures["a"]["status"] == "ok" and run.figures["a"]["median"] == 1.5
    assert run.figures["b"] == {**run.figures["b"], "status": "skipped", "reason": "needs PyTorch", "median": None}
    assert run.figures["c"]["reason"] == "failed: ZeroDivisionError: division by zero"


def test_figure_context_lets_an_interrupt_through_and_demands_a_value():
    run = _run()
    with pytest.raises(KeyboardInterrupt):
        with run.figure("a", "g", "GB/s", {}):
            raise KeyboardInterrupt
    with pytest.raises(RuntimeError, match="without recording"):
        with run.figure("b", "g", "GB/s", {}):
            pass


def test_a_figure_name_is_recorded_once():
    run = _run()
    run.add("a", "g", "u", [1.0], {})
    with pytest.raises(ValueError, match="twice"):
        run.skip("a", "g", "u", "why")


# ---- targets -------------------------------------------------------------------------------------
def _fig(name, median, baselines=(), ratios=None, status="ok", reason=None, unit="GFLOP/s", sizes=None):
    f = {"name": name, "group": "g", "unit": unit, "status": status, "median": median,
         "baselines": list(baselines), "ratios": ratios or {}, "sizes": sizes or {}}
    if reason:
        f["reason"] = reason
    return f


GEMM_4096 = {"m": 4096, "n": 4096, "k": 4096}


def _by_name(entries):
    return {t["name"]: t for t in entries}


def test_targets_pick_the_best_version_and_compare_with_the_goal():
    figures = {
        "matmul_v1": _fig("matmul_v1", 10.0, ["cublas_sgemm"], {"cublas_sgemm": 0.01}, sizes=GEMM_4096),
        "matmul_v5": _fig("matmul_v5", 800.0, ["cublas_sgemm"], {"cublas_sgemm": 0.8}, sizes=GEMM_4096),
        "cublas_sgemm": _fig("cublas_sgemm", 1000.0),
        "reduce_sum_v6": _fig("reduce_sum_v6", 4000.0, ["copy_dtod"], {"copy_dtod": 0.95}),
        "reduce_sum_v7": _fig("reduce_sum_v7", 3000.0, ["copy_dtod"], {"copy_dtod": 0.7}),
        "launch_prepared_call": _fig("launch_prepared_call", 4.0, unit="us/launch"),
        "wmma_gemm": _fig("wmma_gemm", 50.0, ["cublas_hgemm"], {"cublas_hgemm": None}),
        "cublas_hgemm": _fig("cublas_hgemm", None, status="skipped", reason="PyTorch not importable"),
    }
    t = _by_name(targets.evaluate(figures, on_gpu=True))
    assert t["sgemm_vs_cublas"]["figure"] == "matmul_v5"
    assert (t["sgemm_vs_cublas"]["value"], t["sgemm_vs_cublas"]["status"]) == (0.8, "met")
    # "the final reduction" is the last version, even when an earlier one is faster.
    assert t["reduction_vs_copy"]["figure"] == "reduce_sum_v7"
    assert t["reduction_vs_copy"]["status"] == "missed"
    assert t["prepared_call_overhead"]["status"] == "met"
    assert t["fp16_wmma_vs_cublas"]["status"] == "unavailable"
    assert "PyTorch not importable" in t["fp16_wmma_vs_cublas"]["reason"]
    assert t["mlp_step_b128_vs_torch"]["status"] == "unavailable"
    assert "not run" in t["mlp_step_b128_vs_torch"]["reason"]


def test_a_goal_stated_at_a_size_does_not_apply_to_another_size():
    small = {"m": 1024, "n": 1024, "k": 1024}
    figures = {"matmul_v5": _fig("matmul_v5", 800.0, ["cublas_sgemm"], {"cublas_sgemm": 0.9}, sizes=small),
               "amp_step": _fig("amp_step", 3.0, ["fp32_step"], {"fp32_step": 2.0},
                                sizes={"widths": [784, 1024, 1024, 10], "batch": 256})}
    t = _by_name(targets.evaluate(figures, on_gpu=True))
    for name in ("sgemm_vs_cublas", "amp_step_vs_fp32"):
        assert t[name]["status"] == "unavailable" and "without --quick" in t[name]["reason"]


def test_gpu_targets_do_not_apply_on_the_cpu_but_launch_overhead_does():
    figures = {"launch_prepared_call": _fig("launch_prepared_call", 25.0, unit="us/launch"),
               "matmul_v5": _fig("matmul_v5", 1.0, ["numpy_matmul"], {"numpy_matmul": 0.1})}
    t = _by_name(targets.evaluate(figures, on_gpu=False))
    assert t["prepared_call_overhead"]["status"] == "missed"
    for name in ("sgemm_vs_cublas", "elementwise_vs_copy", "amp_step_vs_fp32"):
        assert t[name]["status"] == "not applicable" and "no GPU" in t[name]["reason"]


# ---- results file --------------------------------------------------------------------------------
def _results():
    run = _run()
    run.add("copy_dtod", "bandwidth", "GB/s", [10.0, 12.0, 11.0], {"bytes": 4}, ["numpy_copy"])
    run.add("numpy_copy", "bandwidth", "GB/s", [20.0, 22.0], {"bytes": 4})
    run.skip("cublas_sgemm", "matmul", "GFLOP/s", "no GPU")
    run.compute_ratios()
    return {"schema": results_file.SCHEMA, "schema_version": results_file.SCHEMA_VERSION, "date": "2026-01-01T00:00:00+00:00",
            "mode": "quick", "machine": {"device_name": "x", "backend": "cpu"}, "timing": {},
            "figures": run.figure_list(), "targets": targets.evaluate(run.figures, on_gpu=False)}


def test_a_well_formed_results_file_round_trips(tmp_path):
    results = _results()
    assert results_file.validate(results) == []
    path = tmp_path / "r.json"
    results_file.write(results, str(path))
    assert results_file.load(str(path)) == json.loads(path.read_text())
    assert "copy_dtod" in results_file.figures_table(results)
    assert "prepared_call_overhead" in results_file.targets_table(results)


@pytest.mark.parametrize("damage, complaint", [
    (lambda r: r["figures"][0].update(median=-1.0), "must be positive"),
    (lambda r: r["figures"][0]["spread"].update(iqr=-0.5), "IQR must be >= 0"),
    (lambda r: r["figures"][0]["ratios"].update(numpy_copy=math.inf), "ratio"),
    (lambda r: r["figures"][2].update(reason=""), "without a reason"),
    (lambda r: r["targets"][0].update(status="great"), "status"),
    (lambda r: r.update(schema_version=99), "schema_version"),
    (lambda r: r.pop("targets"), "missing top-level key 'targets'"),
])
def test_validate_names_what_is_wrong(damage, complaint):
    results = _results()
    damage(results)
    problems = results_file.validate(results)
    assert any(complaint in p for p in problems), problems


def test_load_explains_a_missing_or_broken_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="gpuedu bench --out"):
        results_file.load(str(tmp_path / "none.json"))
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": ')
    with pytest.raises(ValueError, match="not valid JSON"):
        results_file.load(str(broken))


# ---- selection, names, command line --------------------------------------------------------------
def test_only_adds_what_a_measurement_is_compared_with():
    assert suite.selected(["reduction"]) == ["copy", "reduction"]
    assert suite.selected(["launch", "matmul"]) == ["matmul", "launch"]
    assert suite.selected(None) == list(suite.MEASUREMENTS)
    with pytest.raises(ValueError, match="unknown measurement"):
        suite.selected(["nope"])


def test_device_slug():
    assert environment.slug("NVIDIA H200") == "nvidia-h200"
    assert environment.slug("  Tesla V100-SXM2-16GB ") == "tesla-v100-sxm2-16gb"
    assert environment.slug("???") == "device"


def test_main_reports_usage_errors_as_a_status(tmp_path, capsys):
    from gpuedu.bench import main
    assert main(["--only", "nope"]) == 2
    assert main(["--repeats", "0"]) == 2
    assert main(["--plot-only", str(tmp_path / "missing.json")]) == 2
    assert "no results file" in capsys.readouterr().err
    assert main(["--list"]) == 0
    assert "prepared_call" in capsys.readouterr().out


def test_plot_only_redraws_from_a_results_file(tmp_path):
    from gpuedu.bench import main
    path = tmp_path / "r.json"
    results_file.write(_results(), str(path))
    assert main(["--plot-only", str(path), "--plots", str(tmp_path / "figs")]) == 0
    drawn = sorted(p.name for p in (tmp_path / "figs").iterdir())
    assert drawn == ["r-bandwidth.png", "r-ratios.png"]


def test_the_closing_summary_names_failed_figures():
    from gpuedu.bench import _summary
    results = _results()
    results["duration_s"] = 3.0
    assert _summary(results) == "2 of 3 figures measured in 3 s"
    results["figures"][2]["reason"] = "failed: RuntimeError: matmul version 2 is wrong"
    assert _summary(results).endswith("FAILED (an error in gpuedu code, see the reasons): cublas_sgemm")


def test_plots_of_a_gpu_run_mark_the_goals(tmp_path):
    from gpuedu.bench import plots
    run = _run()
    run.add("copy_dtod", "bandwidth", "GB/s", [4000.0, 4100.0], {"bytes": 1 << 28})
    run.add("relu_v3", "bandwidth", "GB/s", [3600.0, 3700.0], {"n": 1 << 26}, ["copy_dtod"])
    run.compute_ratios()
    results = {**_results(), "figures": run.figure_list(), "targets": targets.evaluate(run.figures, on_gpu=True)}
    assert {t["name"]: t["status"] for t in results["targets"]}["elementwise_vs_copy"] == "met"
    paths = plots.draw(results, str(tmp_path), "gpu")
    assert sorted(p.rsplit("/", 1)[1] for p in paths) == ["gpu-bandwidth.png", "gpu-ratios.png"]


@pytest.mark.parametrize("quick", [False, True])
@pytest.mark.parametrize("l2", [50 << 20, 96 << 20, 0])
def test_gpu_sizes_keep_working_sets_above_4x_l2_and_at_least_10_repeats(quick, l2):
    from gpuedu.bench import config
    sizes = config.sizes_for(on_gpu=True, quick=quick, l2_bytes=l2)
    assert sizes["copy_bytes"] >= max(4 * l2, 200 * 10**6)
    assert 4 * sizes["elementwise_n"] >= 4 * l2 and 4 * sizes["reduce_n"] >= 4 * l2
    assert sizes["repeats"] >= 10 and sizes["warmup"] >= 1
    if not quick:
        assert sizes["matmul"] == 4096 and sizes["mlp_batches"] == [128, 4096]
        assert sizes["amp_widths"][1] == 4096 and sizes["amp_batch"] == 512


def test_the_gpuedu_command_hands_bench_its_own_options(capsys):
    from gpuedu.tools.cli import main
    assert main(["bench", "--list"]) == 0
    assert "launch" in capsys.readouterr().out
    assert main(["bench", "--only", "nope"]) == 2
