"""What counting costs: each lesson kernel profiled vs run plainly on the emulator, both on every core, in one run.

    .venv/bin/python benchmarks/profiler_bench.py [--out benchmarks/results/cpu-emulator-profiler.json]

For every kernel of the lessons' ladders (activation, transpose, the reduction ladder, the matmul
ladder) at a lesson's size, the best of several plain launches and of several profiled launches
(after a first profiled launch that builds the instrumented module) are timed, interleaved, on this
machine's CPU. Both run their blocks on every core (the emulator's default worker threads, one per core): a
profiled launch runs on as many workers as a plain one and counts the same with any number. The ratio
profiled / plain is the figure, with the geometric mean over the kernels (target <= 10x) and the worst kernel
(target <= 20x). Each row also records a plain launch on one worker thread and the ratio to it (what counting
costs a worker, the cost the figure had before profiled launches ran on every core). Measured on the
emulator's CPU; nothing here is a GPU figure. The machine's load average is recorded with the result: a busy
machine slows both runs, but not alike (a launch on every core needs every core free), so rerun it when the
load is high.
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

TARGET = 10.0          # the geometric mean of profiled / plain (both on every core) over the kernels
WORST_TARGET = 20.0    # any one kernel


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
        plain, profiled, one_worker = [], [], []
        try:
            for _ in range(args.repeats):              # interleaved, so machine noise hits each alike
                compiler.set_threads(cores)
                plain.append(best(run, 1))
                with gpuedu.profile():
                    profiled.append(best(run, 1))
                compiler.set_threads(1)
                one_worker.append(best(run, 1))
        finally:
            compiler.set_threads(cores)
        ratio = min(profiled) / min(plain)
        rows.append({"kernel": name, "plain_s": min(plain), "profiled_s": min(profiled), "ratio": ratio,
                     "first_profiled_launch_s": first, "plain_one_worker_s": min(one_worker),
                     "ratio_to_one_worker": min(profiled) / min(one_worker)})
        print(f"{name:28s} plain {min(plain) * 1e3:8.2f} ms  profiled {min(profiled) * 1e3:9.2f} ms  "
              f"{ratio:6.1f}x   (on one worker: plain {min(one_worker) * 1e3:8.2f} ms; first profiled launch "
              f"{first:.1f} s)", flush=True)
    totals = summary(rows)
    print(f"geometric mean {totals['geometric_mean_ratio']:.1f}x (target <= {TARGET:g}x), worst "
          f"{totals['worst']['ratio']:.1f}x ({totals['worst']['kernel']}; target <= {WORST_TARGET:g}x), "
          f"{totals['kernels_within_worst_target']} of {totals['kernels']} kernels within it: targets "
          f"{'met' if totals['targets_met'] else 'not met'} (both on {cores} worker threads; load average "
          f"{os.getloadavg()[0]:.2f})")
    result = {
        "what": "profiled / plain emulator time per lesson kernel, both on every core (measured on this machine's CPU)",
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
                    "load_average": os.getloadavg()},
        "backend": backend.name, "repeats": args.repeats, "plain_workers": cores, "profiled_workers": cores,
        "one_worker_workers": 1, **totals, "rows": rows,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
