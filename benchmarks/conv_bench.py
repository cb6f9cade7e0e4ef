"""Each conv2d.cu version against NumPy (and cuDNN through PyTorch on a GPU), as ratios measured in one run.

    .venv/bin/python benchmarks/conv_bench.py [--quick] [--out benchmarks/results/cpu-emulator-conv.json]

For each layer shape, the best of several timings of: NumPy float32 (im2col in NumPy, then one BLAS GEMM), the
four versions of gpuedu.ops.conv.conv2d (NumPy's BLAS on one thread, for a steady baseline on a shared machine), the
backward pass (conv2d_backward) and, on a GPU with PyTorch, cuDNN (torch.nn.functional.conv2d). Each ratio is a version's time over NumPy's on the same machine in the same
process; the results file records the machine, the backend and the load average, since CPU timings on a shared
machine are noisy. On the emulator a ratio says how the CPU runs the emulated threads, not how a GPU would.
"""
import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import gpuedu  # noqa: E402
from gpuedu.ops import conv  # noqa: E402

#: (label, x shape, w shape, stride, padding)
SHAPES = [
    ("article Conv2D 1->32 3x3 28x28, batch 8", (8, 1, 28, 28), (32, 1, 3, 3), 1, 1),
    ("CNN conv2 8->16 3x3 14x14, batch 16", (16, 8, 14, 14), (16, 8, 3, 3), 1, 1),
    ("16->32 3x3 stride 2 16x16, batch 4", (4, 16, 16, 16), (32, 16, 3, 3), 2, 1),
]
NUMPY_THREADS = 1   # BLAS threads of the NumPy baseline (see _numpy_time)
QUICK_SHAPES = [("8->16 3x3 9x9, batch 2", (2, 8, 9, 9), (16, 8, 3, 3), 1, 1)]


def numpy_conv(x, w, stride, padding):
    """float32 im2col with strided views, then one GEMM: what a careful NumPy user would write."""
    N, C, H, W = x.shape
    K, _, R, S = w.shape
    P, Q = conv.output_size(H, R, stride, padding), conv.output_size(W, S, stride, padding)
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    sn, sc, sh, sw = xp.strides
    windows = np.lib.stride_tricks.as_strided(xp, (C, R, S, N, P, Q), (sc, sh, sw, sn, sh * stride, sw * stride))
    cols = np.ascontiguousarray(windows).reshape(C * R * S, N * P * Q)
    return (w.reshape(K, -1) @ cols).reshape(K, N, P, Q).transpose(1, 0, 2, 3)


def best_time(fn, sync, repeats):
    fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return min(times)


def _numpy_time(x, w, stride, padding, repeats):
    """NumPy's best time with BLAS on one thread: on a shared 2-core machine a multi-threaded BLAS waiting for a
    busy core makes the baseline swing by 20x from run to run; one thread gives a steady yardstick."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return best_time(lambda: numpy_conv(x, w, stride, padding), lambda: None, repeats)
    with threadpool_limits(limits=NUMPY_THREADS, user_api="blas"):
        return best_time(lambda: numpy_conv(x, w, stride, padding), lambda: None, repeats)


def cudnn_time(x, w, stride, padding, repeats):
    """cuDNN through PyTorch on the GPU, or (None, why not)."""
    try:
        import torch
    except ImportError:
        return None, "PyTorch is not installed"
    if not torch.cuda.is_available():
        return None, "PyTorch sees no CUDA device"
    tx, tw = torch.tensor(x, device="cuda"), torch.tensor(w, device="cuda")
    t = best_time(lambda: torch.nn.functional.conv2d(tx, tw, stride=stride, padding=padding),
                  torch.cuda.synchronize, repeats)
    return t, None


def run(shapes, repeats=3, versions=conv.VERSIONS):
    backend = gpuedu.setup(verbose=False)
    ga, sync = backend.gpuarray, backend.driver.Context.synchronize
    rng = np.random.default_rng(0)
    rows = []
    for label, xs, ws, stride, padding in shapes:
        x = rng.standard_normal(xs).astype(np.float32)
        w = rng.standard_normal(ws).astype(np.float32)
        want = numpy_conv(x, w, stride, padding)
        xd, wd = ga.to_gpu(x), ga.to_gpu(w)
        row = {"shape": label, "x": list(xs), "w": list(ws), "stride": stride, "padding": padding,
               "gflop": conv.conv2d_flops(xs, ws, stride, padding) / 1e9,
               "numpy_s": _numpy_time(x, w, stride, padding, repeats)}
        for v in versions:
            if v == 2 and (w.size > conv.CONST_FLOATS or max(ws[2:]) > conv.MAX_KSIZE or stride > conv.MAX_STRIDE):
                row[f"v{v}_s"] = None
                continue
            got = conv.conv2d(xd, wd, stride=stride, padding=padding, version=v).get()
            assert np.allclose(got, want, atol=1e-3), f"version {v} disagrees with NumPy on {label}"
            row[f"v{v}_s"] = best_time(lambda: conv.conv2d(xd, wd, stride=stride, padding=padding, version=v),
                                       sync, repeats)
        dy = ga.to_gpu(rng.standard_normal(want.shape).astype(np.float32))
        row["backward_s"] = best_time(lambda: conv.conv2d_backward(dy, xd, wd, stride, padding), sync, repeats)
        row["cudnn_s"], row["cudnn_note"] = (cudnn_time(x, w, stride, padding, repeats) if backend.name == "cuda"
                                             else (None, "no GPU: the CPU emulator runs the kernels"))
        for key in [k for k in row if k.endswith("_s") and k != "numpy_s"]:
            row[key.replace("_s", "_vs_numpy")] = None if row[key] is None else row[key] / row["numpy_s"]
        rows.append(row)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"backend": backend.name, "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "load_average": load, "repeats": repeats,
            "numpy_blas_threads": NUMPY_THREADS,
            "note": "times are the best of `repeats` runs; ratios are a time over NumPy's in the same run",
            "results": rows}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small shape, CI-sized")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="results JSON (default: benchmarks/results/<device>-conv.json)")
    args = parser.parse_args(argv)
    results = run(QUICK_SHAPES if args.quick else SHAPES, repeats=args.repeats)
    device = "cpu-emulator" if results["backend"] == "cpu" else "gpu"
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                   f"{device}-conv{'-quick' if args.quick else ''}.json")
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    for row in results["results"]:
        ratios = ", ".join(f"v{v} {row[f'v{v}_vs_numpy']:.1f}x" if row[f"v{v}_vs_numpy"] else f"v{v} -"
                           for v in conv.VERSIONS)
        print(f"{row['shape']}: NumPy {row['numpy_s'] * 1e3:.2f} ms; {ratios}; "
              f"backward {row['backward_vs_numpy']:.1f}x")
    print("wrote", out)
    return results


if __name__ == "__main__":
    main()
