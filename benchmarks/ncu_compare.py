"""The profiler's counts against Nsight Compute's, launch by launch, on the course's own kernels.

On a GPU, measure:

    ncu --csv --clock-control none --metrics $(python benchmarks/ncu_compare.py metrics) \
        python benchmarks/ncu_compare.py workload > ncu.csv

Anywhere (the emulator counts the same launches), compare:

    python benchmarks/ncu_compare.py compare ncu.csv [--gpu H200] [--out comparison.json]

or count them with ``gpuedu profile`` on any script, and compare the two files of the same script:

    GPUEDU_BACKEND=cpu gpuedu profile --gpu H200 --csv counted.csv script.py
    python benchmarks/ncu_compare.py compare ncu.csv --counted counted.csv

Both at once, on a GPU with Nsight Compute (``gpuedu gpu-check`` runs this as its ``ncu`` step):

    python benchmarks/ncu_compare.py measure --out-dir DIR [--gpu H200]

runs the workload under ncu (``DIR/ncu.csv``), counts it on the emulator, and writes the comparison
(``DIR/ncu-compare.json``).

The workload is a fixed list of launches: the reduction ladder's passes (versions 1-6 one pass each, version 7
whole), the ReLU ladder, the SGEMM ladder's first three versions, the transpose ladder, the FP16 GEMMs
(naive, tiled, the two pipelined WMMA versions and the WMMA GEMM that loads its fragments from global memory), the
inline PTX instructions of ``ptx_counts.cu`` (mma.sync, ldmatrix at three layouts, cp.async with and without a
zero-filling tail, and ``__pipeline_memcpy_async``), and the FP16 GEMM's rungs in inline PTX the GPU has
(``TENSOR_RUNGS``: versions 6-10 from sm_80, Hopper's 11-13 with TMA, mbarriers and wgmma on sm_90a), on fixed sizes
and seeds; the emulator launches the rungs ncu's launches hold. ``compare`` runs it under
``gpuedu.profile(gpu=...)`` on the emulator and prints, for every metric both sides have, how many launches agree
exactly, and each disagreement with both values. Launches match by kernel
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

#: The inline PTX kernels of the workload, each with what Nsight Compute counts for it in its comment.
PTX_KERNELS = os.path.join(REPO, "benchmarks", "ptx_counts.cu")
#: Launches of ptx_counts.cu's kernels: (kernel, block, grid, what the launch passes besides its buffers).
PTX_LAUNCHES = (
    ("ptx_mma", 64, 2, {"calls": 3}),
    ("ptx_ldmatrix", 64, 2, {"layout": 0}),
    ("ptx_ldmatrix", 64, 2, {"layout": 1}),
    ("ptx_ldmatrix", 64, 2, {"layout": 2}),
    ("ptx_cp_async", 128, 2, {"zeros": 0}),
    ("ptx_cp_async", 128, 2, {"zeros": 8}),
    ("ptx_pipeline", 128, 2, {"stages": 4}),
)
#: Nsight Compute's file and the comparison's, in ``measure``'s folder.
NCU_CSV, COMPARISON = "ncu.csv", "ncu-compare.json"


def metric_names():
    """What ncu is asked for: every counted and modelled metric the profiler gives, and the registers."""
    from gpuedu.profiler import metrics
    names = list(metrics.COUNTED) + list(metrics.MODELLED) + ["launch__registers_per_thread"]
    return list(dict.fromkeys(metrics.ncu_name(n) for n in names))


def ptx_launches(active):
    """Launch each of ``PTX_LAUNCHES`` on the ``active`` backend (its SourceModule compiles ptx_counts.cu: nvcc for
    the GPU's architecture there, sm_80 on the emulator); the results of each are checked, so that a launch
    counts only when its kernel worked."""
    with open(PTX_KERNELS, encoding="utf-8") as f:
        module = active.compiler.SourceModule(f.read(), no_extern_c=True)
    drv, gpuarray = active.driver, active.gpuarray
    rng = np.random.default_rng(1)
    for name, block, grid, args in PTX_LAUNCHES:
        threads = block * grid
        fn = module.get_function(name)
        if name == "ptx_mma":
            # A = B = 1 in halves (0x3c00 twice a register): every sum of calls + 1 products of 16 (or 8) ones.
            regs = gpuarray.to_gpu(np.full(32 * 6, 0x3C003C00, np.uint32))
            out = gpuarray.zeros(threads * 4, np.float32)
            fn(out.gpudata, regs.gpudata, np.int32(args["calls"]), block=(block, 1, 1), grid=(grid, 1))
            expect = np.full(threads * 4, 16.0 * args["calls"] + 8.0, np.float32)
        elif name == "ptx_ldmatrix":
            fill = rng.integers(0, 2**32, 1024, dtype=np.uint32)
            out, fill_gpu = gpuarray.zeros(threads * 7, np.uint32), gpuarray.to_gpu(fill)
            fn(out.gpudata, fill_gpu.gpudata, np.int32(args["layout"]), block=(block, 1, 1), grid=(grid, 1))
            expect = _ldmatrix_expected(fill.view(np.uint16), args["layout"], threads // 32)
        elif name == "ptx_cp_async":
            x = rng.standard_normal(5 * threads).astype(np.float32)
            out, x_gpu = gpuarray.zeros(5 * threads, np.float32), gpuarray.to_gpu(x)
            fn(out.gpudata, x_gpu.gpudata, np.int32(args["zeros"]), block=(block, 1, 1), grid=(grid, 1))
            wide = x[:4 * threads].reshape(threads, 4).copy()
            wide[threads - args["zeros"]:] = 0.0                 # the zero-filled tail
            nxt = (np.arange(threads) % block + 1) % block + np.arange(threads) // block * block
            expect = np.concatenate([wide[nxt].ravel(), x[4 * threads:][nxt]])
        else:
            stages = args["stages"]
            x = rng.standard_normal((grid, stages, block, 4)).astype(np.float32)
            out, x_gpu = gpuarray.zeros(threads, np.float32), gpuarray.to_gpu(x)
            fn(out.gpudata, x_gpu.gpudata, np.int32(stages), block=(block, 1, 1), grid=(grid, 1))
            expect = np.roll(x.sum(axis=(1, 3)), -1, axis=1).ravel()
        got = out.get()
        if not np.allclose(got, expect, rtol=1e-5, atol=1e-5):
            raise SystemExit(f"{name} {args}: wrong results, {np.sum(~np.isclose(got, expect))} of {got.size} values "
                             f"differ from the NumPy reference: its counts would mean nothing")
    drv.Context.synchronize()


def _ldmatrix_expected(halves, layout, warps):
    """What ptx_ldmatrix writes for each lane of each warp: its registers of .x4, .x2 and .x1.trans, by the PTX
    ISA's ldmatrix layout (lane l gets row l / 4, halves 2 (l % 4) and the next of each matrix; .trans the
    transpose's), from the tile the block filled (4096 bytes: `halves`)."""
    lanes = np.arange(32)
    offsets = {0: lanes * 16, 1: lanes * 128, 2: lanes * 128 + (lanes % 8) * 16}[layout] // 2
    rows = np.stack([halves[o:o + 8] for o in offsets]).astype(np.uint32)    # row r: the 8 halves lane r names
    out = np.zeros((32, 7), np.uint32)
    for lane in range(32):
        q, p = lane // 4, 2 * (lane % 4)
        for j in range(4):
            m = rows[8 * j:8 * j + 8]
            out[lane, j] = m[q, p] | m[q, p + 1] << 16
        out[lane, 4:6] = out[lane, 0:2]
        t = rows[0:8].T                                    # .x1.trans: matrix 0 transposed
        out[lane, 6] = t[q, p] | t[q, p + 1] << 16
    return np.tile(out, (warps, 1)).ravel()


#: matmul's rungs in inline PTX, each launched where the device has its instructions: version -> the sm it needs
#: (mma.sync, ldmatrix and cp.async from sm_80; TMA, mbarrier and wgmma on sm_90a, compute capability 9.0 alone).
TENSOR_RUNGS = {6: 80, 7: 80, 8: 80, 9: 80, 10: 80, 11: 90, 12: 90, 13: 90}


def workload(sm=None):
    """The launches, in order, on the active backend; ``sm``: the architecture whose rungs to launch (default: the
    device's)."""
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
    ptx_launches(backend.active())        # inline PTX: mma.sync, ldmatrix, cp.async (ptx_counts.cu)
    sm = _device_sm(backend.active()) if sm is None else sm
    for version in TENSOR_RUNGS:          # matmul's rungs in inline PTX, where the device has their instructions
        if sm >= TENSOR_RUNGS[version]:
            ops.fp16.matmul(h, h, version=version)
    backend.active().driver.Context.synchronize()


def _device_sm(active):
    """The GPU's architecture as a number (90 for sm_90); 0 on the emulator, whose side follows the GPU's launches
    (``rungs_launched``)."""
    if active.is_emulator:
        return 0
    major, minor = active.driver.Context.get_device().compute_capability()
    return 10 * major + minor


def rungs_launched(measured):
    """The architecture whose rungs ncu's launches (``read_ncu_csv``) hold: 90 when they hold the Hopper rungs, 80
    with the mma.sync ones, else 0; the emulator then launches the same."""
    names = {name for name, _ in measured}
    return max((sm for version, sm in TENSOR_RUNGS.items() if _rung_kernel(version) & names), default=0)


def _rung_kernel(version):
    """The kernel names matmul's tensor-core ``version`` launches."""
    return {f"wgmma_gemm_kernel{version}"} if version >= 11 else {f"mma_gemm_kernel{version}",
                                                                  f"mma_gemm_kernel{version}_nn"}


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


def emulator_launches(gpu, sm=0):
    """[(kernel name, {metric: value})] of the workload counted on the emulator, DRAM through ``gpu``'s L2, with the
    rungs a GPU of architecture ``sm`` launches."""
    import gpuedu
    gpuedu.setup("cpu", verbose=False)
    try:
        session = gpuedu.profile(gpu=gpu)
    except TypeError:        # a profiler without per-GPU DRAM models
        session = gpuedu.profile()
    with session as prof:
        workload(sm)
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


def ncu_command(ncu="ncu"):
    """The command line that runs the workload under Nsight Compute, its CSV on standard output."""
    return [ncu, "--csv", "--print-units", "base", "--clock-control", "none", "--metrics", ",".join(metric_names()),
            sys.executable, os.path.abspath(__file__), "workload"]


def measure(out_dir, gpu, ncu=None):
    """Run the workload under Nsight Compute into ``out_dir/ncu.csv``, count it on the emulator, and write the
    comparison to ``out_dir/ncu-compare.json``; returns the comparison (a dict). Raises SystemExit saying what is
    missing when ncu is not installed or fails."""
    import shutil
    import subprocess
    ncu = ncu or shutil.which("ncu")
    if ncu is None:
        raise SystemExit("ncu (Nsight Compute's command line) is not on PATH: install Nsight Compute (it comes with "
                         "the CUDA toolkit, or apt install nsight-compute) and put its folder on PATH")
    os.makedirs(out_dir, exist_ok=True)
    csv_path = os.path.join(out_dir, NCU_CSV)
    with open(csv_path, "w", encoding="utf-8") as out:
        done = subprocess.run(ncu_command(ncu), stdout=out, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"ncu failed (exit code {done.returncode}): {done.stderr.strip()[-2000:]}")
    measured = read_ncu_csv(csv_path)
    if not measured:
        raise SystemExit(f"ncu wrote no metric rows to {csv_path}: {done.stderr.strip()[-2000:]}")
    return report(measured, emulator_launches(gpu, rungs_launched(measured)), gpu, os.path.join(out_dir, COMPARISON),
                  csv_path, None)


def report(measured, counted, gpu, out, csv_name, counted_name):
    """Print the comparison of ``measured`` (ncu) and ``counted`` (the emulator) metric by metric, write it as
    JSON to ``out`` (when given) and return it."""
    course = {name for name, _ in counted}
    per_metric, differences = compare(measured, counted, ours=lambda name: name in course)
    width = max((len(m) for m in per_metric), default=10)
    agree = sum(t[0] for t in per_metric.values())
    total = sum(sum(t) for t in per_metric.values())
    for metric, (same, other) in sorted(per_metric.items()):
        print(f"{metric:<{width}}  {same:3d} equal  {other:3d} differ")
    print(f"\n{agree} of {total} (launch, metric) pairs equal over {len(counted)} launches")
    for d in differences:
        print(f"  {d['kernel']:<28} {d['metric']:<{width}} ncu {d['ncu']:>14,.0f}  emulator {d['emulator']:>14,.0f}")
    record = {"gpu": gpu, "csv": os.path.basename(csv_name),
              "counted": os.path.basename(counted_name) if counted_name else "counted here",
              "equal": agree, "pairs": total, "per_metric": per_metric, "differences": differences}
    if out:
        with open(out, "w") as f:
            json.dump(record, f, indent=1)
    return record


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
    meas = sub.add_parser("measure", help="on a GPU: run the workload under ncu, count it here, compare")
    meas.add_argument("--out-dir", required=True, help=f"where {NCU_CSV} and {COMPARISON} go")
    meas.add_argument("--gpu", default="H200", help="the GPU whose L2 the DRAM model uses (default H200)")
    meas.add_argument("--ncu", default=None, help="the ncu program (default: ncu on PATH)")
    args = parser.parse_args(argv)
    if args.command == "metrics":
        print(",".join(metric_names()))
        return 0
    if args.command == "workload":
        import gpuedu
        gpuedu.setup(verbose=False)
        workload()
        return 0
    if args.command == "measure":
        measure(args.out_dir, args.gpu, args.ncu)
        return 0
    measured = read_ncu_csv(args.csv)
    if not measured:
        raise SystemExit(f"{args.csv} holds no ncu --csv rows")
    if args.counted:
        counted = read_ncu_csv(args.counted)
        if not counted:
            raise SystemExit(f"{args.counted} holds no gpuedu profile --csv rows")
    else:
        counted = emulator_launches(args.gpu, rungs_launched(measured))
    report(measured, counted, args.gpu, args.out, args.csv, args.counted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
