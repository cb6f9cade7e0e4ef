"""What counting costs: each lesson kernel profiled vs run plainly on the emulator, in one run.

    .venv/bin/python benchmarks/profiler_bench.py [--out benchmarks/results/cpu-emulator-profiler.json]

For every kernel of the lessons' ladders (activation, transpose, the reduction ladder, the matmul
ladder) at a lesson's size, the best of several plain launches and of several profiled launches
(after a first profiled launch that builds the instrumented module) are timed, interleaved, on this
machine's CPU: the ratio profiled / plain is the figure, with the geometric mean over the kernels
(target <= 10x) and the worst kernel (target <= 30x). A profiled launch runs its blocks on one worker thread
(the counters and the L2 model follow the grid's order), so the plain launches it is measured against run on
one too: the figure is the cost of counting. Plain launches on every core (the default) are faster again; each
row records that time as well, and the ratio to it. Measured on the emulator's CPU; nothing here is a
GPU figure. The machine's load average is recorded with the result: a busy machine slows both runs,
but not alike, so rerun it when the load is high.
"""
import argparse
import json
import math
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import gpuedu  # noqa: E402  (the benchmark measures the checkout it sits in)

TARGET = 10.0          # the geometric mean of profiled / plain over the kernels
WORST_TARGET = 30.0    # any one kernel


def best(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def summary(rows):
    """The geometric mean of the rows' ratios, the worst row, and how the rows stand against the targets."""
    if not rows:
        raise ValueError("no kernels were timed: the summary needs at least one row")
    geomean = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    worst = max(rows, key=lambda r: r["ratio"])
    return {
        "target_ratio": TARGET, "worst_target_ratio": WORST_TARGET, "geometric_mean_ratio": geomean,
        "worst": {"kernel": worst["kernel"], "ratio": worst["ratio"]},
        "kernels_within_worst_target": sum(r["ratio"] <= WORST_TARGET for r in rows), "kernels": len(rows),
        "targets_met": geomean <= TARGET and worst["ratio"] <= WORST_TARGET,
    }


def cases():
    import pycuda.gpuarray as gpuarray

    from gpuedu import ops
    rng = np.random.default_rng(0)
    x = gpuarray.to_gpu(rng.random(1 << 18, dtype=np.float32))
    square = gpuarray.to_gpu(rng.random((512, 512), dtype=np.float32))
    a = gpuarray.to_gpu(rng.random((256, 256), dtype=np.float32))
    yield "activation relu v1 (2^18)", lambda: ops.activation(x, "relu", version=1)
    for v in ops.TRANSPOSE_VERSIONS:
        yield f"transpose v{v} (512^2)", lambda v=v: ops.transpose(square, version=v)
    for v in ops.REDUCE_VERSIONS:
        yield f"reduction v{v} (2^18)", lambda v=v: ops.reduce_sum(x, version=v)
    for v in ops.MATMUL_VERSIONS:
        yield f"matmul v{v} (256^3)", lambda v=v: ops.matmul(a, a, version=v)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                      "cpu-emulator-profiler.json"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    backend = gpuedu.setup("cpu", verbose=False)
    from pycuda import compiler
    cores = compiler.get_threads()
    rows = []
    for name, run in cases():
        run()                                          # compile and warm the plain module
        with gpuedu.profile():
            t0 = time.perf_counter()
            run()                                      # builds the instrumented module
            first = time.perf_counter() - t0
        plain, profiled, all_cores = [], [], []
        try:
            for _ in range(args.repeats):              # interleaved, so machine noise hits both alike
                compiler.set_threads(1)
                plain.append(best(run, 1))
                with gpuedu.profile():
                    profiled.append(best(run, 1))
                compiler.set_threads(cores)
                all_cores.append(best(run, 1))
        finally:
            compiler.set_threads(cores)
        ratio = min(profiled) / min(plain)
        rows.append({"kernel": name, "plain_s": min(plain), "profiled_s": min(profiled), "ratio": ratio,
                     "first_profiled_launch_s": first, "plain_all_cores_s": min(all_cores),
                     "ratio_to_all_cores": min(profiled) / min(all_cores)})
        print(f"{name:28s} plain {min(plain) * 1e3:8.2f} ms  profiled {min(profiled) * 1e3:9.2f} ms  "
              f"{ratio:6.1f}x   (first profiled launch {first:.1f} s)", flush=True)
    totals = summary(rows)
    print(f"geometric mean {totals['geometric_mean_ratio']:.1f}x (target <= {TARGET:g}x), worst "
          f"{totals['worst']['ratio']:.1f}x ({totals['worst']['kernel']}; target <= {WORST_TARGET:g}x)")
    result = {
        "what": "profiled / plain emulator time per lesson kernel (measured on this machine's CPU)",
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
                    "load_average": os.getloadavg()},
        "backend": backend.name, "repeats": args.repeats, "plain_workers": 1, "all_cores_workers": cores,
        **totals, "rows": rows,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
