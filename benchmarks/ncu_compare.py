"""The profiler's counts against Nsight Compute's, launch by launch, on the course's own kernels.

On a GPU, measure:

    ncu --csv --clock-control none --metrics $(python benchmarks/ncu_compare.py metrics) \
        python benchmarks/ncu_compare.py workload > ncu.csv

Anywhere (the emulator counts the same launches), compare:

    python benchmarks/ncu_compare.py compare ncu.csv [--gpu H200] [--out comparison.json]

or count them with ``gpuedu profile`` on any script, and compare the two files of the same script:

    GPUEDU_BACKEND=cpu gpuedu profile --gpu H200 --csv counted.csv script.py
    python benchmarks/ncu_compare.py compare ncu.csv --counted counted.csv

The workload is a fixed list of launches: the reduction ladder's passes (versions 1-6 one pass each, version 7
whole), the ReLU ladder, the SGEMM ladder's first three versions, the transpose ladder, and the FP16 GEMMs
(naive, tiled, the two pipelined WMMA versions and the WMMA GEMM that loads its fragments from global memory), on
fixed sizes and seeds. ``compare`` runs it under ``gpuedu.profile(gpu=...)`` on the emulator and prints, for every metric both
sides have, how many launches agree exactly, and each disagreement with both values. Launches match by kernel
name and order (PyCUDA's own helper kernels, e.g. ``fill``, are left out on both sides).
"""
import argparse
import csv
import json
import os
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def metric_names():
    """What ncu is asked for: every counted and modelled metric the profiler gives, and the registers."""
    from gpuedu.profiler import metrics
    names = list(metrics.COUNTED) + list(metrics.MODELLED) + ["launch__registers_per_thread"]
    return list(dict.fromkeys(metrics.ncu_name(n) for n in names))


def workload():
    """The launches, in order, on the active backend."""
    from gpuedu import backend, ops
    gpuarray = backend.active().gpuarray
    rng = np.random.default_rng(0)
    x = gpuarray.to_gpu(rng.standard_normal(1 << 16).astype(np.float32))
    for version in range(1, 7):
        ops.reduce_pass(x, version)
    ops.reduce_sum(x, version=7)
    y = gpuarray.to_gpu(rng.standard_normal(1 << 20).astype(np.float32))
    for version in (1, 2, 3):
        ops.relu(y, version=version)
    a = gpuarray.to_gpu(rng.standard_normal((256, 256)).astype(np.float32))
    for version in (1, 2, 3):
        ops.matmul(a, a, version=version)
    m = gpuarray.to_gpu(rng.standard_normal((512, 512)).astype(np.float32))
    for version in ops.TRANSPOSE_VERSIONS:
        ops.transpose(m, version=version)
    h = gpuarray.to_gpu(rng.standard_normal((256, 256)).astype(np.float16))
    for version in (2, 3, 4, 5):          # the FP16 ladder: naive and tiled FP32 sums, the pipelined WMMA GEMMs
        ops.fp16.matmul(h, h, version=version)
    ops.fp16.wmma_matmul(h, h)            # WMMA fragments loaded straight from global memory
    backend.active().driver.Context.synchronize()


def read_ncu_csv(path):
    """[(kernel name, {metric: value})] in launch order, from ``ncu --csv`` output (other lines skipped)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [ln for ln in f if ln.startswith('"')]
    launches = {}
    for row in csv.DictReader(lines):
        try:
            key = int(row["ID"])
        except (KeyError, ValueError):
            continue
        name = row.get("Kernel Name", "").split("(")[0].strip()
        entry = launches.setdefault(key, (name, {}))
        value = row.get("Metric Value", "").replace(",", "")
        try:
            entry[1][row["Metric Name"]] = float(value)
        except ValueError:
            entry[1][row["Metric Name"]] = value
    return [launches[k] for k in sorted(launches)]


def emulator_launches(gpu):
    """[(kernel name, {metric: value})] of the workload counted on the emulator, DRAM through ``gpu``'s L2."""
    import gpuedu
    gpuedu.setup("cpu", verbose=False)
    try:
        session = gpuedu.profile(gpu=gpu)
    except TypeError:        # a profiler without per-GPU DRAM models
        session = gpuedu.profile()
    with session as prof:
        workload()
    return [(rec.name, dict(rec.metrics)) for rec in prof.kernels]


def compare(ncu, emu, ours=lambda name: True):
    ncu = [(n, m) for n, m in ncu if ours(n)]
    emu = [(n, m) for n, m in emu if ours(n)]
    if [n for n, _ in ncu] != [n for n, _ in emu]:
        raise SystemExit("the two runs launched different kernels:\n  ncu: " + ", ".join(n for n, _ in ncu)
                         + "\n  emulator: " + ", ".join(n for n, _ in emu))
    per_metric, differences = {}, []
    for (name, measured), (_, counted) in zip(ncu, emu):
        for metric, value in measured.items():
            if metric not in counted or counted[metric] is None or not isinstance(value, float):
                continue
            same = float(counted[metric]) == value
            tally = per_metric.setdefault(metric, [0, 0])
            tally[0 if same else 1] += 1
            if not same:
                differences.append({"kernel": name, "metric": metric, "ncu": value, "emulator": counted[metric]})
    return per_metric, differences


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("metrics", help="print the comma-separated metric list for ncu --metrics")
    sub.add_parser("workload", help="run the launches (under ncu, on a GPU)")
    cmp_ = sub.add_parser("compare", help="count the same launches on the emulator and compare with ncu's CSV")
    cmp_.add_argument("csv")
    cmp_.add_argument("--gpu", default="H200", help="the GPU whose L2 the DRAM model uses (default H200)")
    cmp_.add_argument("--out", help="write the comparison as JSON here")
    cmp_.add_argument("--counted", metavar="CSV",
                      help="the emulator's side from `gpuedu profile --csv CSV` of the same script, instead of "
                           "counting the workload here")
    args = parser.parse_args(argv)
    if args.command == "metrics":
        print(",".join(metric_names()))
        return 0
    if args.command == "workload":
        import gpuedu
        gpuedu.setup(verbose=False)
        workload()
        return 0
    measured = read_ncu_csv(args.csv)
    if not measured:
        raise SystemExit(f"{args.csv} holds no ncu --csv rows")
    if args.counted:
        counted = read_ncu_csv(args.counted)
        if not counted:
            raise SystemExit(f"{args.counted} holds no gpuedu profile --csv rows")
    else:
        counted = emulator_launches(args.gpu)
    course = {name for name, _ in counted}
    per_metric, differences = compare(measured, counted, ours=lambda name: name in course)
    width = max(len(m) for m in per_metric)
    agree = sum(t[0] for t in per_metric.values())
    total = sum(sum(t) for t in per_metric.values())
    for metric, (same, other) in sorted(per_metric.items()):
        print(f"{metric:<{width}}  {same:3d} equal  {other:3d} differ")
    print(f"\n{agree} of {total} (launch, metric) pairs equal over {len(counted)} launches")
    for d in differences:
        print(f"  {d['kernel']:<28} {d['metric']:<{width}} ncu {d['ncu']:>14,.0f}  emulator {d['emulator']:>14,.0f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": args.gpu, "csv": os.path.basename(args.csv),
                       "counted": os.path.basename(args.counted) if args.counted else "counted here",
                       "equal": agree, "pairs": total,
                       "per_metric": per_metric, "differences": differences}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
