"""The first GPU record (benchmarks/results/nvidia-h200.json): valid, says where it came from, and every figure
README and the lessons quote from it is the record's own (a quote that drifts from the record fails here); the
same for the probes' records that lessons 08 and 14 quote."""
import json
import math
import os
import re

import nbformat
import pytest

from gpuedu.bench import results_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECORD = os.path.join(REPO, "benchmarks", "results", "nvidia-h200.json")


@pytest.fixture(scope="module")
def record():
    return results_file.load(RECORD)


@pytest.fixture(scope="module")
def median(record):
    values = {f["name"]: f["median"] for f in record["figures"] if f["status"] == "ok"}
    return values.__getitem__


def _text(path):
    """A README or a lesson's markdown, with its line breaks and runs of spaces made single spaces."""
    if path.endswith(".ipynb"):
        nb = nbformat.read(path, as_version=4)
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    else:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    return re.sub(r"\s+", " ", text)


def _list(values, last=", "):
    values = [str(v) for v in values]
    return ", ".join(values[:-1]) + last + values[-1]


def _pct(value, baseline):
    return f"{100 * value / baseline:.1f}"


def _tflops(gflops):
    return f"{gflops / 1000:.2f}" if gflops < 1000 else f"{gflops / 1000:.1f}"


def test_the_record_is_valid_and_says_where_it_came_from(record):
    assert results_file.validate(record) == []
    assert record["machine"]["device_name"] == "NVIDIA H200" and record["machine"]["backend"] == "cuda"
    assert record["date"].startswith("2026-11-26") and record["mode"] == "full"
    assert any("commit 4748031" in note for note in record["notes"])
    assert {t["name"]: t["status"] for t in record["targets"]} == {
        "sgemm_vs_cublas": "met", "elementwise_vs_copy": "met", "reduction_vs_copy": "missed",
        "fp16_wmma_vs_cublas": "missed", "mlp_step_b128_vs_torch": "met", "mlp_step_b4096_vs_torch": "met",
        "amp_step_vs_fp32": "missed", "prepared_call_overhead": "met"}
    for plot in ("bandwidth", "matmul", "fp16_gemm", "training", "launch", "ratios"):
        assert os.path.isfile(os.path.join(REPO, "benchmarks", "results", f"nvidia-h200-{plot}.png")), plot


def test_readme_quotes_the_record(median):
    text = _text(os.path.join(REPO, "README.md"))
    sgemm = median("cublas_sgemm")
    hgemm = median("cublas_hgemm")
    quotes = [
        f"{median('copy_dtod'):,.0f} GB/s, {100 * median('copy_dtod') / 4800:.0f} % of the 4.8 TB/s peak",
        ", ".join(f"{100 * median(f'relu_v{v}') / median('copy_dtod'):.0f}" for v in (1, 2, 3)) + " %",
        ", ".join(_pct(median(f"matmul_v{v}"), sgemm) for v in range(1, 8)) + " %",
        ", ".join(f"{median(f'reduce_sum_v{v}'):,.0f}" for v in range(1, 8)),
        ", ".join(f"{100 * median(n) / hgemm:.1f}" for n in ("hgemm_naive", "hgemm_tiled", "wmma_gemm",
                                                            "wmma_gemm_v2", "wmma_gemm_v3")) + " %",
        f"{median('mlp_step_b128') / median('torch_mlp_step_b128'):.2f}× and "
        f"{median('mlp_step_b4096') / median('torch_mlp_step_b4096'):.2f}×",
        f"{median('amp_step') / median('fp32_step'):.2f}×",
        f"{median('launch_prepared_call'):.1f} µs / {median('launch_call'):.1f} µs",
    ]
    for quote in quotes:
        assert quote in text, quote


def test_lessons_quote_the_record_as_measured(median):
    sgemm, hgemm = median("cublas_sgemm"), median("cublas_hgemm")
    lesson = {n: _text(os.path.join(REPO, "lessons", f"{n}.ipynb"))
              for n in ("04_matmul", "07_mixed_precision", "08_tensor_cores_bf16_tf32", "13_libraries_and_profiling")}
    quotes = {
        "04_matmul": [
            _list([_tflops(median(f"matmul_v{v}")) for v in range(1, 8)], " and ") + " TFLOP/s",
            _list([_pct(median(f"matmul_v{v}"), sgemm) for v in range(1, 8)], " and ") + " % of cuBLAS",
            f"{_tflops(sgemm)} TFLOP/s in the same run"],
        "07_mixed_precision": [
            f"ran {median('amp_step') / median('fp32_step'):.2f}× as fast as gpuedu's FP32 step"],
        "08_tensor_cores_bf16_tf32": [
            f"WMMA v1, as first written, ran at {_tflops(median('wmma_gemm'))} TFLOP/s",
            f"({_tflops(median('matmul_v7'))} TFLOP/s on",
            f"{_pct(median('wmma_gemm'), hgemm)} % of cuBLAS FP16 ({_tflops(hgemm)} TFLOP/s",
            f"WMMA v2 ran at {_tflops(median('wmma_gemm_v2'))} TFLOP/s ({_pct(median('wmma_gemm_v2'), hgemm)} %)",
            f"WMMA v3 at {_tflops(median('wmma_gemm_v3'))} ({_pct(median('wmma_gemm_v3'), hgemm)} %)"],
        "13_libraries_and_profiling": [
            _list([f"{median(f'reduce_sum_v{v}'):,.0f}" for v in range(1, 8)], " and ") + " GB/s",
            f"took {median('launch_prepared_call'):.1f} µs of host time",
            f"and {median('launch_call'):.1f} µs with a plain call",
            f"ran at {_tflops(median('matmul_v7'))} TFLOP/s, {_pct(median('matmul_v7'), sgemm)} % of cuBLAS's FP32 "
            f"SGEMM at {_tflops(sgemm)} TFLOP/s",
            f"at {_tflops(hgemm)} TFLOP/s, which no CUDA-core kernel"],
    }
    for name, wanted in quotes.items():
        assert "Measured on" in lesson[name] and "H200" in lesson[name] and "2026-11-26" in lesson[name], name
        for quote in wanted:
            assert quote in lesson[name], (name, quote)


def test_lesson_08_quotes_the_tile_sweep_as_measured():
    # The sweep's table in lesson 08 is the probes' own figures: registers, warps per SM by the occupancy
    # calculator, TFLOP/s and the share of cuBLAS in the same run.
    import json
    from gpuedu.profiler import occupancy
    text = _text(os.path.join(REPO, "lessons", "08_tensor_cores_bf16_tf32.ipynb"))
    assert "Measured on an H200" in text and "nvidia-h200-probe-tiles.json" in text
    shown = 0
    for name, blocks_asked in (("nvidia-h200-probe-tiles.json", False), ("nvidia-h200-probe-tiles-blocks.json", True)):
        with open(os.path.join(REPO, "benchmarks", "results", name)) as f:
            probe = json.load(f)
        assert probe["device"] == "NVIDIA H200" and probe["date"].startswith("2026-11-26")
        rows = probe["result"]["rows"]
        cublas = next(r["tflops"] for r in rows if r["kernel"].startswith("cublas"))
        for r in rows:
            if not r["kernel"].endswith("_nn") or ("_b" in r["kernel"]) != blocks_asked:
                continue
            warps = occupancy.theoretical_occupancy("H200", r["threads"], r["registers"],
                                                    r["shared_bytes"]).active_warps_per_sm
            bm, bn, bk, stages, wm, wn = r["shape"][:6]
            quote = (f"| {bk} × {stages} | {wm * wn} | {r['registers']} | {warps} | {r['tflops']:.1f} | "
                     f"{100 * r['tflops'] / cublas:.1f} |")
            assert quote in text, (r["kernel"], quote)
            shown += 1
    assert shown == 14


def test_lesson_08_quotes_the_later_runs_of_the_rewritten_wmma_kernel():
    # the plain WMMA kernel was measured again after its staging loops were rewritten: the FP16 ladder in a later
    # bench run, and before against after in one process
    later = {f["name"]: f for f in results_file.load(os.path.join(REPO, "benchmarks", "results",
                                                                   "nvidia-h200-fp16.json"))["figures"]}
    with open(os.path.join(REPO, "benchmarks", "results", "nvidia-h200-wmma-staging.json")) as f:
        staging = json.load(f)
    assert staging["device"] == "NVIDIA H200" and staging["check_4096"]["bit_identical"]
    assert staging["old_over_new"] == pytest.approx(staging["seconds"]["old"]["median"]
                                                    / staging["seconds"]["new"]["median"])
    lesson = _text(os.path.join(REPO, "lessons", "08_tensor_cores_bf16_tf32.ipynb"))
    assert f"ran it at **{_tflops(later['wmma_gemm']['median'])} TFLOP/s**" in lesson
    assert f"{staging['old_over_new']:.2f}× faster" in lesson
    assert f"{_tflops(staging['tflops_median']['new'] * 1e3)}" == _tflops(later["wmma_gemm"]["median"])


def test_lesson_14_quotes_the_attention_probe_as_measured():
    # Lesson 14's GPU figures are the attention probe's (benchmarks/gpu_probe.py attention): the times of each
    # kernel at both lengths, the ratios to PyTorch's SDPA, version 3's FLOP rate against the FP32 peak, its error.
    with open(os.path.join(REPO, "benchmarks", "results", "nvidia-h200-probe-attention.json")) as f:
        probe = json.load(f)
    assert probe["device"] == "NVIDIA H200" and probe["date"].startswith("2026-11-26")
    assert probe["result"]["causal"] and (probe["result"]["batch"], probe["result"]["heads"],
                                          probe["result"]["head_dim"]) == (4, 8, 64)
    rows = {(r["seq"], r["kernel"]): r for r in probe["result"]["rows"]}
    assert {seq for seq, _ in rows} == {1024, 2048}      # the lesson says no record holds N = 4096

    def ms(seq, kernel):
        """Milliseconds to three significant figures, as the lesson writes them."""
        value = rows[seq, kernel]["seconds"] * 1e3
        return f"{value:.{max(0, 2 - math.floor(math.log10(value)))}f}"

    def ratio(seq, ours, theirs):
        return rows[seq, ours]["seconds"] / rows[seq, theirs]["seconds"]

    from gpuedu.profiler.gpus import get_gpu
    lesson = _text(os.path.join(REPO, "lessons", "14_attention.ipynb"))
    v3 = rows[2048, "v3 tiled fp32"]["tflops"]
    peak = get_gpu("H200").fp32_flops / 1e12
    quotes = [
        "benchmarks/results/nvidia-h200-probe-attention.json",
        f"version 1 took {ms(1024, 'v1 naive fp32')} ms, version 2 {ms(1024, 'v2 fused fp32')} ms and version 3 "
        f"{ms(1024, 'v3 tiled fp32')} ms, against {ms(1024, 'torch sdpa float32')} ms for PyTorch's SDPA",
        f"in FP16 version 3 took {ms(1024, 'v3 tiled fp16')} ms and SDPA {ms(1024, 'torch sdpa float16')} ms",
        f"{ms(2048, 'v1 naive fp32')}, {ms(2048, 'v2 fused fp32')} and {ms(2048, 'v3 tiled fp32')} ms for versions "
        f"1-3 and {ms(2048, 'torch sdpa float32')} ms for SDPA in float32, {ms(2048, 'v3 tiled fp16')} ms for version 3 "
        f"and {ms(2048, 'torch sdpa float16')} ms for SDPA in FP16",
        f"{ratio(1024, 'v3 tiled fp32', 'torch sdpa float32'):.1f} and "
        f"{ratio(2048, 'v3 tiled fp32', 'torch sdpa float32'):.1f} times slower than the library in float32",
        f"{ratio(1024, 'v3 tiled fp16', 'torch sdpa float16'):.0f} and "
        f"{ratio(2048, 'v3 tiled fp16', 'torch sdpa float16'):.0f} times slower in FP16",
        f"version 3 ran at {v3:.1f} TFLOP/s (measured",
        f"{100 * v3 / peak:.0f} % of the H200's {peak:.0f} TFLOP/s FP32 peak",
    ]
    for kernel in ("v3 tiled fp32", "v3 tiled fp16"):
        mantissa, exponent = f"{rows[1024, kernel]['rel_error']:.1e}".split("e")
        quotes.append(f"{mantissa} \\times 10^{{{int(exponent)}}}")
    assert "Measured on an H200" in lesson
    for quote in quotes:
        assert quote in lesson, quote
