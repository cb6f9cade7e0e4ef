"""The benchmark scripts (profiler, model, all-reduce): their arithmetic and a small run of their core, no timings asserted."""
import json
import os

import numpy as np
import pytest
from benchmark_helpers import load_benchmark as load

import gpuedu


@pytest.fixture(scope="module")
def emulator():
    if gpuedu.setup(verbose=False).name != "cpu":
        pytest.skip("the benchmarks profile on the emulator")


def test_spearman_is_one_for_the_same_order_and_minus_one_for_the_reverse():
    mvp = load("model_vs_published")
    assert mvp.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert mvp.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0


def test_two_counted_sizes_predict_a_third_and_the_comparison_is_well_formed(emulator):
    mvp = load("model_vs_published")
    records = mvp.count_ladder(sizes=(32, 64, 128), versions=(1, 2, 3))
    predicted = mvp.at_size({32: records[32], 64: records[64]}, 128, sizes=(32, 64))
    for v in (1, 2, 3):
        assert predicted[v].metrics == records[128][v].metrics
    rows = mvp.compare(predicted, size=128)
    assert [r["version"] for r in rows] == [1, 2, 3]
    assert all(r["modelled_gflops"] > 0 and r["limiter"] for r in rows)
    assert rows[1]["step_published"] == pytest.approx(1986.5 / 309.0)


def test_the_overhead_benchmark_covers_every_ladder_of_the_lessons(emulator):
    from gpuedu import ops
    names = [name for name, _ in load("profiler_bench").cases()]
    assert sum(n.startswith("matmul") for n in names) == len(ops.MATMUL_VERSIONS)
    assert sum(n.startswith("reduction") for n in names) == len(ops.REDUCE_VERSIONS)
    assert sum(n.startswith("transpose") for n in names) == len(ops.TRANSPOSE_VERSIONS)
    assert np.isfinite(load("profiler_bench").TARGET)


def test_the_overhead_summary_takes_the_geometric_mean_and_the_worst_kernel_against_both_targets():
    bench = load("profiler_bench")
    rows = [{"kernel": "a", "ratio": 2.0}, {"kernel": "b", "ratio": 8.0}]
    totals = bench.summary(rows)
    assert totals["geometric_mean_ratio"] == pytest.approx(4.0)
    assert totals["worst"] == {"kernel": "b", "ratio": 8.0}
    assert totals["kernels"] == 2 and totals["kernels_within_worst_target"] == 2 and totals["targets_met"]
    slow = bench.summary(rows + [{"kernel": "c", "ratio": bench.WORST_TARGET + 1}])
    assert slow["worst"]["kernel"] == "c" and slow["kernels_within_worst_target"] == 2
    assert not slow["targets_met"]   # one kernel over the worst-case target fails it, whatever the mean
    assert not bench.summary([{"kernel": "d", "ratio": bench.TARGET * 2}])["targets_met"]
    with pytest.raises(ValueError, match="at least one row"):
        bench.summary([])


def test_the_committed_overhead_record_covers_every_kernel_and_meets_both_targets(emulator):
    """The recorded run (benchmarks/results/cpu-emulator-profiler.json): its rows are the benchmark's kernels, its
    summary is the one its rows give, and that summary meets the geometric-mean and the worst-kernel targets."""
    bench = load("profiler_bench")
    path = os.path.join(os.path.dirname(bench.__file__), "results", "cpu-emulator-profiler.json")
    with open(path) as f:
        record = json.load(f)
    assert [row["kernel"] for row in record["rows"]] == [name for name, _ in bench.cases()]
    for row in record["rows"]:
        assert row["ratio"] == pytest.approx(row["profiled_s"] / row["plain_s"])
    if "profiled_workers" in record:   # (a record from before profiled launches ran on every core lacks it)
        assert record["plain_workers"] == record["profiled_workers"]
    totals = bench.summary(record["rows"])
    assert record["geometric_mean_ratio"] == pytest.approx(totals["geometric_mean_ratio"])
    assert record["worst"] == totals["worst"]
    assert totals["targets_met"] and record["targets_met"], (totals["geometric_mean_ratio"], totals["worst"])


@pytest.mark.skipif(not __import__("gpuedu.distributed").distributed.mpi_status()[0], reason="needs gpuedu[mpi]")
def test_the_allreduce_benchmark_runs_on_two_ranks_and_compares_with_the_model(tmp_path):
    bench = load("allreduce_bench")
    out = tmp_path / "allreduce.json"
    assert bench.main(["--quick", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    (run,) = result["runs"]
    assert run["ranks"] == 2 and run["alpha_seconds"] >= 0 and run["beta_bytes_per_second"] > 0
    assert [r["elements"] for r in run["rows"]] == list(bench.QUICK_SIZES)
    for row in run["rows"]:
        assert row["ring_seconds"] > 0 and row["modelled_ring_seconds"] > 0
        assert row["measured_over_modelled"] == pytest.approx(row["ring_seconds"] / row["modelled_ring_seconds"])
    assert result["labels"]["modelled_ring_seconds"] == "modelled"


def test_lesson_12_quotes_the_recorded_ring_against_the_model():
    # The lesson's words on how much slower the ring is than the alpha-beta model are the recorded run's ratios.
    import re

    import nbformat
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(repo, "benchmarks", "results", "cpu-mpich-allreduce.json")) as f:
        record = json.load(f)
    ratios = {run["ranks"]: [row["measured_over_modelled"] for row in run["rows"]] for run in record["runs"]}
    nb = nbformat.read(os.path.join(repo, "lessons", "12_beyond_one_gpu.ipynb"), as_version=4)
    text = re.sub(r"\s+", " ", "\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    quote = (f"({record['date']}, this 2-core machine, buffers of 1 KiB to 16 MiB) the ring took "
             f"{min(ratios[2]):.1f} to {max(ratios[2]):.1f} times the model's time at 2 ranks and "
             f"{min(ratios[4]):.1f} to {max(ratios[4]):.1f} times at 4")
    assert quote in text, quote
    assert [row["bytes"] for row in record["runs"][0]["rows"]] == [1 << 10, 1 << 14, 1 << 18, 1 << 22, 1 << 24]


def test_the_emulator_bench_times_one_worker_against_several_and_checks_the_results(emulator):
    bench = load("emulator_bench")
    from gpuedu.emulator import compiler
    rows = bench.worker_speedups(compiler.SourceModule(bench.BENCH_SRC), np.random.default_rng(0), 2,
                                 n=1 << 14, m=1 << 12, size=128)
    names = [row["kernel"] for row in rows]
    assert names[:2] == ["vector add (2^14)", "barrier reduction (2^12)"]
    assert names[2:] == [f"matmul v{v} (128^3)" for v in range(1, 8)]
    for row in rows:
        assert row["one_worker_s"] > 0 and row["all_cores_s"] > 0
        assert row["speedup"] == row["one_worker_s"] / row["all_cores_s"]


def test_the_emulator_bench_s_first_compile_finds_the_runtime_already_built(emulator, tmp_path, monkeypatch):
    """The bench times a first compile with the runtime copied in: only the module's own steps run the compiler."""
    bench = load("emulator_bench")
    from gpuedu.emulator import compiler, hooks
    compiler.SourceModule(bench.BENCH_SRC)                 # the runtime is in the cache in use
    bench.copy_runtime(hooks.cache_dir(), str(tmp_path))
    monkeypatch.setenv("GPUEDU_CACHE_DIR", str(tmp_path))
    ran = []
    real_run = compiler._run
    monkeypatch.setattr(compiler, "_run", lambda cmd, cwd: ran.append(cmd) or real_run(cmd, cwd))
    compiler.SourceModule(bench.BENCH_SRC + f"\n// {tmp_path}\n")
    outputs = [os.path.basename(c[c.index("-o") + 1]) for c in ran if "-o" in c]
    assert outputs == ["module.o", "module.so"], ran
    assert len(ran) == 3, ran       # preprocess (scan), compile, link: nothing of the runtime again


def _profile_rows(name):
    import csv
    with open(os.path.join(os.path.dirname(__file__), "..", "benchmarks", "results", name)) as f:
        return {(r["ID"], r["Kernel Name"], r["Metric Name"]): (r["Metric Kind"], r["Metric Value"])
                for r in csv.DictReader(f)}


def test_the_committed_arm64_profile_counts_every_launch_as_x86_64_does():
    # `gpuedu profile --gpu H200 --csv` of ncu_compare.py's workload (the lessons' ladders), on this x86-64 machine
    # and in the arm64 chroot (README.md, "Platforms"): every counted and modelled figure the same; the figures
    # nvcc gives (registers, static shared memory, occupancy) only where nvcc is installed, which the chroot is not.
    x86, arm = _profile_rows("cpu-emulator-profile-x86_64.csv"), _profile_rows("cpu-emulator-profile-arm64.csv")
    assert {k[:2] for k in x86} == {k[:2] for k in arm} and len({k[:2] for k in x86}) >= 21
    assert {kind for kind, _ in arm.values()} == {"counted", "modelled"}
    compared = [k for k, (kind, _) in x86.items() if kind != "compiler"]
    assert len(compared) >= 700 and sorted(compared) == sorted(arm)
    assert [k for k in compared if x86[k] != arm[k]] == []


def test_the_atomics_benchmark_is_aarch64s_and_says_so_elsewhere():
    import platform
    import subprocess
    import sys
    if platform.machine() == "aarch64":
        pytest.skip("on aarch64 it runs: tests/emulator/test_aarch64.py runs its measurement")
    script = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "atomics_bench.py")
    done = subprocess.run([sys.executable, script, "--rounds", "1"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"this compares aarch64's ways of building atomics; this machine is {platform.machine()}" in done.stderr


def test_the_committed_cache_check_record_meets_its_target_and_the_readme_quotes_it():
    import re
    root = os.path.join(os.path.dirname(__file__), "..")
    with open(os.path.join(root, "benchmarks", "results", "cpu-emulator-cache-x86_64.json")) as f:
        record = json.load(f)
    costs = sorted(p["check_s"] / (p["load_s"] - p["check_s"]) for p in record["per_process"])
    assert len(costs) == record["processes"] >= 10
    assert record["met"] and record["median_cost"] < 0.05 and max(costs) == pytest.approx(record["worst_cost"], abs=1e-4)
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    quoted = re.search(r"\[(\d+\.\d) %\]\(benchmarks/results/cpu-emulator-cache-x86_64\.json\)", readme)
    assert quoted and float(quoted.group(1)) == round(100 * record["median_cost"], 1)


def test_the_ncu_workload_launches_on_the_emulator_the_rungs_the_gpu_ran():
    # ncu's side runs the rungs the GPU has (mma.sync from sm_80; TMA, mbarrier and wgmma on sm_90a): the emulator's
    # side reads which from ncu's launches, so the two lists of launches match on any GPU
    ncu = load("ncu_compare")
    on = lambda *names: [(name, {}) for name in ("reduce_v1", *names)]   # noqa: E731
    assert ncu.rungs_launched(on()) == 0
    assert ncu.rungs_launched(on("mma_gemm_kernel6", "mma_gemm_kernel10_nn")) == 80
    assert ncu.rungs_launched(on("mma_gemm_kernel10_nn", "wgmma_gemm_kernel11", "wgmma_gemm_kernel13")) == 90
    assert [v for v, sm in ncu.TENSOR_RUNGS.items() if sm <= 80] == [6, 7, 8, 9, 10]
    assert [v for v, sm in ncu.TENSOR_RUNGS.items() if sm == 90] == [11, 12, 13]
