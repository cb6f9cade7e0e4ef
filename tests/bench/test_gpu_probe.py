"""benchmarks/gpu_probe.py: its shape list is wmma_tiles.cu's, and its probes run on the emulator (checking
themselves against their references) at small sizes."""
import json
import os
import re

import pytest
from benchmark_helpers import BENCHMARKS, load_benchmark


@pytest.fixture(scope="module")
def probe():
    return load_benchmark("gpu_probe")


def test_the_sweep_names_every_kernel_wmma_tiles_cu_defines_and_sizes_its_shared_memory(probe):
    with open(os.path.join(BENCHMARKS, "wmma_tiles.cu")) as f:
        source = f.read()
    plain = [tuple(map(int, m)) + (0,) for m in re.findall(r"^TILE_LAYOUTS\((\d+), (\d+), (\d+), (\d+), (\d+), (\d+)\)",
                                                           source, re.M)]
    bounded = [tuple(map(int, m)) for m in re.findall(
        r"^TILE_LAYOUTS_B\((\d+), (\d+), (\d+), (\d+), (\d+), (\d+), (\d+)\)", source, re.M)]
    assert probe.TILE_SHAPES == plain + bounded and len(probe.TILE_SHAPES) == 14
    assert probe.tile_name((128, 128, 32, 3, 2, 4, 0), "tn") == "tile_128x128x32_s3_w2x4_tn"
    assert probe.tile_name((128, 128, 32, 3, 2, 4, 3)) == "tile_128x128x32_s3_w2x4_b3_nn"
    # version 2's shape takes version 2's shared memory (ops.fp16 reads it from wmma_gemm.cu)
    from gpuedu.ops import fp16
    assert probe.tile_shared_bytes((128, 128, 32, 3, 2, 4, 0)) == fp16.WMMA_PIPELINED[2][1]
    assert probe.tile_shared_bytes((128, 256, 32, 3, 2, 4, 0)) == fp16.WMMA_PIPELINED[3][1]


def test_the_step_and_attention_probes_run_and_check_themselves_on_the_emulator(probe, tmp_path):
    assert probe.main(["steps", "--widths", "16", "32", "4", "--batch", "8", "--repeats", "1", "--warmup", "0",
                       "--out", str(tmp_path)]) == 0
    steps = json.loads((tmp_path / "probe-steps.json").read_text())["result"]
    assert steps["amp_step"]["kernels"]["unscale_half_to_float_multi"]["launches"] == 1
    assert steps["fp32_step"]["launches"] > 0 and "kernel" not in steps["amp_step"]["kernels"]
    assert probe.main(["attention", "--seq", "32", "--repeats", "1", "--warmup", "0", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "probe-attention.json").read_text())["result"]["rows"]
    assert [r["kernel"] for r in rows] == ["v1 naive fp32", "v2 fused fp32", "v3 tiled fp32", "v3 tiled fp16"]
    assert all(r["rel_error"] < 1e-3 for r in rows), rows
