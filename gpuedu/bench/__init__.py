"""`gpuedu bench`: measure gpuedu's kernels against the roofs and libraries of the same machine.

    gpuedu bench                       full run on the active backend (a GPU, else the CPU emulator)
    gpuedu bench --quick               CI-sized run: small sizes, few repeats
    gpuedu bench --only matmul launch  some measurements (and what they are compared with)
    gpuedu bench --out r.json --plots figs/
    gpuedu bench --plot-only benchmarks/results/nvidia-h200.json    redraw the plots of a results file

Also ``python -m gpuedu.bench``. Results go to ``benchmarks/results/<device>.json`` (``-quick`` added
for --quick) with PNG plots beside it; ``benchmarks/README.md`` explains how to read them.
Modules: ``stats`` (medians, quartiles), ``timers`` (CUDA-event and host timers, cache flush),
``records`` (figures of a run), ``bandwidth``/``gemm``/``training``/``launch_overhead`` (the measurements),
``baselines`` (cuBLAS via PyTorch or CuPy, NumPy), ``targets``, ``results_file`` (JSON, tables), ``plots``.
"""
import argparse
import os
import sys
import time

from . import config, environment, plots, results_file, suite, targets
from .records import Run


def _parser():
    p = argparse.ArgumentParser(
        prog="gpuedu bench",
        description="Measure gpuedu's kernels against the memory roof, cuBLAS, PyTorch and NumPy "
                    "on this machine; write a JSON file of results and PNG plots.")
    p.add_argument("--quick", action="store_true",
                   help="small sizes and few repeats (CI): checks the suite runs, numbers are rough")
    p.add_argument("--out", metavar="PATH",
                   help="results file (default: benchmarks/results/<device>[-quick].json)")
    p.add_argument("--only", nargs="+", metavar="NAME", choices=list(suite.MEASUREMENTS),
                   help="run only these measurements (and the ones they are compared with): "
                        + ", ".join(suite.MEASUREMENTS))
    p.add_argument("--plots", metavar="DIR", help="folder for the PNG plots (default: beside the results file)")
    p.add_argument("--no-plots", action="store_true", help="write no plots")
    p.add_argument("--plot-only", metavar="FILE", help="measure nothing: redraw the plots of a results file")
    p.add_argument("--repeats", type=int, metavar="N", help="timed repeats per figure (default: per mode)")
    p.add_argument("--list", action="store_true", help="list the measurements and exit")
    return p


def main(argv=None):
    """Entry point of `gpuedu bench`; returns the process exit status (0 on success)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:    # --help, or a usage error argparse has already explained
        return int(exc.code or 0)
    if args.list:
        for name, (_, what) in suite.MEASUREMENTS.items():
            print(f"{name:<12} {what}")
        return 0
    if args.repeats is not None and args.repeats < 1:
        print("gpuedu bench: --repeats must be at least 1", file=sys.stderr)
        return 2
    if args.plot_only:
        try:
            results = results_file.load(args.plot_only)
        except (FileNotFoundError, ValueError) as exc:
            print(f"gpuedu bench: {exc}", file=sys.stderr)
            return 2
        folder, stem = _plot_place(args.plot_only, args.plots)
        for path in plots.draw(results, folder, stem):
            print(f"wrote {path}")
        return 0
    from .. import backend as _backend
    try:
        _backend.setup(verbose=True)
    except (_backend.BackendError, ValueError) as exc:
        print(f"gpuedu bench: {exc}", file=sys.stderr)
        return 1
    command = ["gpuedu", "bench"] + list(sys.argv[1:] if argv is None else argv)
    try:
        results, out = run(quick=args.quick, only=args.only, out=args.out, repeats=args.repeats,
                           command=command)
    except OSError as exc:   # the results file could not be written
        print(f"gpuedu bench: {exc}; choose another place with --out", file=sys.stderr)
        return 1
    print()
    print(results_file.figures_table(results))
    print()
    print(results_file.targets_table(results))
    print()
    print(_summary(results))
    print(f"wrote {out}")
    if not args.no_plots:
        folder, stem = _plot_place(out, args.plots)
        for path in plots.draw(results, folder, stem):
            print(f"wrote {path}")
    return 0


def _summary(results):
    figures = results["figures"]
    measured = sum(f["status"] == "ok" for f in figures)
    failed = [f["name"] for f in figures if f["status"] != "ok" and f["reason"].startswith("failed:")]
    line = f"{measured} of {len(figures)} figures measured in {results['duration_s']:.0f} s"
    if failed:
        line += f"; FAILED (an error in gpuedu code, see the reasons): {', '.join(failed)}"
    return line


def _plot_place(results_path, plots_dir):
    stem = os.path.splitext(os.path.basename(results_path))[0]
    return (plots_dir or os.path.dirname(os.path.abspath(results_path))), stem


def run(quick=False, only=None, out=None, repeats=None, log=print, command=None):
    """Run the suite on the active backend; write and return ``(results, path)``."""
    from .. import backend as _backend
    started = time.perf_counter()
    date = environment.now_utc()
    backend = _backend.setup(verbose=False)
    on_gpu = backend.name == "cuda"
    drv, driver_problem = _driver(on_gpu)
    machine = environment.describe(backend, drv)
    if driver_problem:
        machine["unknown"]["driver"] = driver_problem
    slug = machine["device_slug"] + ("-quick" if quick else "")
    path = out or os.path.join("benchmarks", "results", f"{slug}.json")
    # Fail now, not after minutes of measuring, when the results cannot be written there.
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    l2 = machine["l2_cache_bytes"] or 0
    notes = []
    if on_gpu and not l2:
        l2 = 50 * 1024 * 1024
        notes.append("the device did not report its L2 size: 50 MB (an H200's) was assumed for the flush")
    sizes = config.sizes_for(on_gpu, quick, l2)
    if repeats is not None:
        sizes["repeats"] = repeats
    timer = _timer(on_gpu, drv, l2)
    bench = Run(backend, drv, timer, sizes, sizes["repeats"], sizes["warmup"], on_gpu, log=log)
    bench.third_party["driver"] = driver_problem
    blas_limit, blas_threads = _blas_threads(on_gpu)
    with blas_limit:
        suite.run_all(bench, suite.selected(only))
    bench.compute_ratios()
    machine["load_average_1min_after"] = environment.load_average()
    notes.extend(_notes(machine, on_gpu))
    results = {
        "schema": results_file.SCHEMA,
        "schema_version": results_file.SCHEMA_VERSION,
        "date": date,
        "mode": "quick" if quick else "full",
        "command": command or (["gpuedu", "bench"] + (["--quick"] if quick else [])
                               + (["--only", *only] if only else [])),
        "duration_s": round(time.perf_counter() - started, 2),
        "machine": machine,
        "timing": {
            "clock": timer.clock,
            "warmup": sizes["warmup"],
            "repeats": sizes["repeats"],
            "cache_flush_bytes": timer.flush_bytes,
            "statistic": "median of the repeats; spread: quartiles (IQR) and min/max",
            "ratio": "this figure's median / its baseline's median, in the figure's unit",
            "numpy_blas_threads": blas_threads,
        },
        "figures": bench.figure_list(),
        "targets": targets.evaluate(bench.figures, on_gpu, machine.get("device_name")),
        "notes": notes,
    }
    results_file.write(results, path)
    return results, path


def _driver(on_gpu):
    """``(pycuda.driver, None)`` with a context current on a GPU, else ``(None, what went wrong)``."""
    try:
        import pycuda.driver as drv
        if on_gpu:
            import pycuda.autoprimaryctx  # noqa: F401  (device 0's primary context, shared with torch and CuPy)
        return drv, None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _blas_threads(on_gpu):
    """A context limiting NumPy's BLAS to one thread on the CPU backend, and the thread count used.

    The emulator runs a launch on one host thread, so the like-for-like yardstick is NumPy on one
    thread; it also keeps a multi-threaded BLAS from spinning against other work on a shared host
    (measured on a loaded 2-core machine: a 256^3 float32 matmul at 0.4 GFLOP/s with 2 threads,
    ~100 GFLOP/s with 1).
    """
    import contextlib
    if on_gpu:
        return contextlib.nullcontext(), "default"
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext(), "default (threadpoolctl is not installed, so it could not be limited)"
    return threadpool_limits(limits=1, user_api="blas"), 1


def _timer(on_gpu, drv, l2):
    from . import timers
    if on_gpu and drv is not None:
        return timers.CudaEventTimer(drv, l2)
    return timers.HostTimer()


def _notes(machine, on_gpu):
    notes = []
    if not on_gpu:
        notes.append("CPU emulator: every kernel runs on one host thread, one block at a time; compare each "
                     "figure with NumPy measured in the same run on one BLAS thread (its ratio), not with a GPU, "
                     "and not as bare seconds. GPU targets are not applicable here.")
    cpus = machine.get("host_cpu_count") or 1
    loads = [x for x in (machine.get("load_average_1min_before"), machine.get("load_average_1min_after"))
             if x is not None]
    if loads and max(loads) > 0.5 * cpus:
        notes.append(f"the host was shared or loaded during the run (1-minute load average up to {max(loads):.2f} "
                     f"on {cpus} CPUs): timings are noisier and slower than on an idle machine")
    return notes
