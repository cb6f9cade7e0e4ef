"""benchmarks/conv_bench.py: a quick run's results file is well formed (no timing is asserted)."""
import json

import numpy as np
from benchmark_helpers import load_benchmark


def load_bench():
    return load_benchmark("conv_bench")


def test_numpy_baseline_is_the_convolution():
    from gpuedu import reference
    bench = load_bench()
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 7, 8)).astype(np.float32), rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    for stride, pad in ((1, 0), (2, 1)):
        np.testing.assert_allclose(bench.numpy_conv(x, w, stride, pad), reference.conv2d(x, w, None, stride, pad),
                                   atol=1e-4)


def test_quick_run_writes_every_version_and_ratio(tmp_path):
    bench = load_bench()
    out = tmp_path / "conv.json"
    bench.main(["--quick", "--repeats", "1", "--out", str(out)])
    results = json.loads(out.read_text())
    assert results["backend"] in ("cpu", "cuda") and results["results"]
    row = results["results"][0]
    for v in (1, 2, 3, 4):
        assert row[f"v{v}_s"] > 0 and row[f"v{v}_vs_numpy"] == row[f"v{v}_s"] / row["numpy_s"]
    assert row["backward_s"] > 0 and row["numpy_s"] > 0
    assert row["cudnn_s"] is None or row["cudnn_s"] > 0


def test_cnn_vs_mlp_script_records_both_models(tmp_path):
    module = load_benchmark("cnn_vs_mlp")
    out = tmp_path / "runs.json"
    module.main(["--epochs", "1", "--train", "64", "--out", str(out)])
    results = json.loads(out.read_text())
    assert results["train_images"] == 64 and results["epochs"] == 1
    for name in ("cnn", "mlp"):
        model = results["models"][name]
        assert 0.0 <= model["test_accuracy"] <= 1.0 and len(model["loss"]) == 1 and model["parameters"] > 0
