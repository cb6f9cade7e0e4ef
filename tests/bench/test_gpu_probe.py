"""benchmarks/gpu_probe.py: its shape list is wmma_tiles.cu's, and its probes run on the emulator (checking
themselves against their references) at small sizes."""
import json
import os
import re

import numpy as np
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
    result = json.loads((tmp_path / "probe-attention.json").read_text())["result"]
    rows = result["rows"]
    assert [r["kernel"] for r in rows] == ["v1 naive fp32", "v2 fused fp32", "v3 tiled fp32", "v3 tiled fp16",
                                           "v4 tensor cores fp16", "v4 tensor cores bf16"]
    # against the float64 result of the float32 inputs: float32 kernels to float32's rounding, FP16 ones to
    # FP16's (the inputs' rounding included), BF16 to BF16's (3 fraction bits fewer)
    limits = {"fp32": 1e-5, "fp16": 1e-3, "bf16": 8e-3}
    assert all(r["rel_error"] < limits[r["kernel"][-4:]] and r["seconds"] > 0 for r in rows), rows
    assert result["comparisons"] == [] and result["torch"] is None     # no PyTorch timed on the emulator


# ---- the attention probe's SDPA side, with a stand-in for PyTorch --------------------------------------------

def fake_torch(seconds, missing=()):
    """Modules standing in for torch, torch.nn, torch.nn.functional and torch.nn.attention, enough for the
    attention probe: tensors are NumPy arrays, scaled_dot_product_attention computes causal attention in NumPy,
    and CUDA events read a clock that each SDPA call advances by ``seconds[backend]`` (None: the dispatcher's
    choice). A backend in ``missing`` fails as PyTorch does where a backend cannot run."""
    import types
    clock = [0.0]
    chosen = [None]

    class Dtype:
        def __init__(self, name):
            self.name, self.numpy = name, np.dtype(name)

        def __str__(self):
            return f"torch.{self.name}"

    class Tensor:
        def __init__(self, a):
            self.a = np.asarray(a)

        def cuda(self):
            return self

        def cpu(self):
            return self

        def to(self, dtype):
            return Tensor(self.a.astype(dtype.numpy))

        def double(self):
            return Tensor(self.a.astype(np.float64))

        def view(self, *shape):
            return Tensor(self.a.reshape(shape))

        reshape = view

        def transpose(self, i, j):
            return Tensor(np.swapaxes(self.a, i, j))

        def contiguous(self):
            return Tensor(np.ascontiguousarray(self.a))

        def numpy(self):
            return self.a

        def zero_(self):
            self.a[...] = 0
            return self

    class Event:
        def __init__(self, enable_timing=False):
            self.at = None

        def record(self):
            self.at = clock[0]

        def elapsed_time(self, end):
            return (end.at - self.at) * 1e3                      # milliseconds, as CUDA events give them

    def sdpa(q, k, v, is_causal=False):
        if chosen[0] in missing:
            raise RuntimeError("No available kernel. Aborting execution.\n(the reasons, line by line)")
        clock[0] += seconds[chosen[0]]
        s = q.a.astype(np.float64) @ np.swapaxes(k.a, -1, -2) / np.sqrt(q.a.shape[-1])
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)) | (not is_causal), s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        return Tensor((p / p.sum(axis=-1, keepdims=True) @ v.a).astype(q.a.dtype))

    class SDPBackend:
        FLASH_ATTENTION, EFFICIENT_ATTENTION, CUDNN_ATTENTION, MATH = "flash", "efficient", "cudnn", "math"

    import contextlib

    @contextlib.contextmanager
    def sdpa_kernel(backend):
        chosen[0] = backend
        try:
            yield
        finally:
            chosen[0] = None

    torch = types.ModuleType("torch")
    torch.__version__ = "0.0-stand-in"
    torch.float16, torch.float32, torch.int32 = Dtype("float16"), Dtype("float32"), Dtype("int32")
    torch.from_numpy = Tensor
    torch.empty = lambda n, dtype, device: Tensor(np.zeros(n, dtype.numpy))
    torch.cuda = types.SimpleNamespace(Event=Event, synchronize=lambda: None, is_available=lambda: True)
    nn, functional, attention = (types.ModuleType(f"torch.nn{m}") for m in ("", ".functional", ".attention"))
    functional.scaled_dot_product_attention = sdpa
    attention.SDPBackend, attention.sdpa_kernel = SDPBackend, sdpa_kernel
    torch.nn, nn.functional, nn.attention = nn, functional, attention
    return {"torch": torch, "torch.nn": nn, "torch.nn.functional": functional, "torch.nn.attention": attention}


def test_the_attention_probe_times_each_sdpa_backend_and_compares_with_the_fastest(probe, tmp_path, monkeypatch):
    import sys
    seconds = {None: 3e-4, "flash": 2e-4, "efficient": 5e-4, "cudnn": 1e-4, "math": 9e-3}
    modules = fake_torch(seconds, missing=("cudnn",))          # the fastest one fails: it must not be the one
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(probe, "_attention_torch", lambda: modules["torch"])
    assert probe.main(["attention", "--seq", "24", "--kernels", "v4-fp16", "--repeats", "3", "--warmup", "1",
                       "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "probe-attention.json").read_text())["result"]
    rows = {r["kernel"]: r for r in result["rows"]}
    assert list(rows) == ["v4 tensor cores fp16", "torch sdpa float16", "torch sdpa float32",
                          "torch sdpa float16 flash", "torch sdpa float16 efficient", "torch sdpa float16 cudnn",
                          "torch sdpa float16 math"]
    assert rows["torch sdpa float16 cudnn"] == {"seq": 24, "kernel": "torch sdpa float16 cudnn",
                                                "error": "RuntimeError: No available kernel. Aborting execution."}
    for name, backend in (("torch sdpa float16", None), ("torch sdpa float32", None),
                          ("torch sdpa float16 flash", "flash"), ("torch sdpa float16 efficient", "efficient"),
                          ("torch sdpa float16 math", "math")):
        assert rows[name]["seconds"] == pytest.approx(seconds[backend]), name
        # the same problem as gpuedu's kernels, laid out [batch, seq, heads * 64] again: a wrong transpose of
        # the heads would be far off
        limit = 1e-5 if "float32" in name else 1e-3
        assert rows[name]["rel_error"] < limit, (name, rows[name]["rel_error"])
    ours = rows["v4 tensor cores fp16"]["seconds"]
    assert result["comparisons"] == [{"seq": 24, "ours": "v4 tensor cores fp16", "sdpa": "torch sdpa float16 flash",
                                      "ours_seconds": ours, "sdpa_seconds": rows["torch sdpa float16 flash"]["seconds"],
                                      "ratio": ours / rows["torch sdpa float16 flash"]["seconds"], "target": 2.0,
                                      "met": ours <= 2.0 * rows["torch sdpa float16 flash"]["seconds"]}]
    assert result["torch"] == "0.0-stand-in"


def test_sdpa_comparisons_take_the_fastest_backend_that_ran_at_each_length(probe):
    rows = [{"seq": 2048, "kernel": "v4 tensor cores fp16", "seconds": 3e-4},
            {"seq": 2048, "kernel": "torch sdpa float16", "seconds": 1e-5},          # the dispatcher's: not a backend
            {"seq": 2048, "kernel": "torch sdpa float16 flash", "seconds": 1.6e-4},
            {"seq": 2048, "kernel": "torch sdpa float16 cudnn", "error": "RuntimeError: ..."},
            {"seq": 2048, "kernel": "torch sdpa float32 flash", "seconds": 1e-6},    # not FP16
            {"seq": 4096, "kernel": "v4 tensor cores fp16", "seconds": 1e-3},
            {"seq": 4096, "kernel": "torch sdpa float16 efficient", "seconds": 4e-4},
            {"seq": 4096, "kernel": "torch sdpa float16 math", "seconds": 9e-4},
            {"seq": 8192, "kernel": "v4 tensor cores fp16", "error": "RuntimeError: ..."}]
    got = probe.sdpa_comparisons(rows)
    assert [(c["seq"], c["sdpa"], c["met"]) for c in got] == [(2048, "torch sdpa float16 flash", True),
                                                              (4096, "torch sdpa float16 efficient", False)]
    assert got[0]["ratio"] == pytest.approx(3e-4 / 1.6e-4) and got[1]["ratio"] == pytest.approx(2.5)


def test_the_attention_probe_refuses_unknown_kernels_and_backends(probe, capsys):
    for argv in (["attention", "--kernels", "v5"], ["attention", "--sdpa-backends", "triton"]):
        with pytest.raises(SystemExit):
            probe.main(argv)
        assert "invalid choice" in capsys.readouterr().err
