"""The profiler's GPU time model against two measured yardsticks: the course's ladders on an H200, and a
published SGEMM ladder on an RTX A6000.

    .venv/bin/python benchmarks/model_vs_measured.py [--out benchmarks/results/model-vs-measured.json]

Every rung is counted on the emulator (exact) at sizes it can afford, carried to the measured size (each count
as a power, or a polynomial, of the size: ``gpuedu.profiler.scaling``), and put through the model
(each launch's roofs and waits, ``time_model.predict``, on the host's timeline, ``time_model.timeline``; modelled). The
modelled time is set beside the measured one:

- H200 (``benchmarks/results/nvidia-h200.json``, 2026-11-26: CUDA events after an L2 flush, median of 20):
  ReLU versions 1-3 and the whole reduction, every pass, at 2^26 floats (GB/s = the bytes the bench counts over
  the time); the SGEMM ladder (matmul versions 1-7) and the FP16 GEMMs (hgemm_naive, hgemm_tiled, wmma_gemm,
  wmma_gemm_v2, wmma_gemm_v3) at 4096^3 (GFLOP/s). Two rungs were rewritten after that run, and their figures
  are later runs' (``LATER``): reduction version 7 (``nvidia-h200-second.json``, same machine, same day) and the
  plain WMMA GEMM, whose ladder was measured again whole (``nvidia-h200-fp16.json``, an H200, the same day).
- RTX A6000: Simon Boehm's published SGEMM ladder, as in ``benchmarks/model_vs_published.py``.

A ladder is ranked right when the modelled order of its rungs is the measured order. The goal: every ladder
ranked right, every H200 rung within 1.5x of its measurement, every A6000 rung within 2x. The device-to-device
copy the H200 measured (4,127 GB/s) is the bandwidth the model's DRAM efficiency is checked against.
"""
import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import numpy as np  # noqa: E402

import gpuedu  # noqa: E402  (the benchmark measures the checkout it sits in)

RESULTS = os.path.join(HERE, "results")
H200_RECORD = os.path.join(RESULTS, "nvidia-h200.json")
H200_SECOND = os.path.join(RESULTS, "nvidia-h200-second.json")
H200_FP16 = os.path.join(RESULTS, "nvidia-h200-fp16.json")
_FP16_WHY = ("wmma_gemm's staging loops were rewritten (a fixed count nvcc unrolls) after the first H200 run; the "
             "whole FP16 ladder is the later run's (benchmarks/results/nvidia-h200-fp16.json), which measured the "
             "new kernel and its neighbours together")
#: Figures taken from a later H200 record than the first: {figure: (the record, why)}.
LATER = {"reduce_sum_v7": (H200_SECOND, "reduction version 7 was rewritten (one launch) after the first H200 run; "
                                        "its measurement is the second run's (benchmarks/results/nvidia-h200-second.json)"),
         **{f: (H200_FP16, _FP16_WHY) for f in ("hgemm_naive", "hgemm_tiled", "wmma_gemm", "wmma_gemm_v2",
                                                "wmma_gemm_v3")}}
#: Each H200 ladder, its rungs in the order the course teaches them.
LADDERS = {
    "relu": ("relu_v1", "relu_v2", "relu_v3"),
    "reduction": tuple(f"reduce_sum_v{v}" for v in range(1, 8)),
    "sgemm": tuple(f"matmul_v{v}" for v in range(1, 8)),
    "fp16 gemm": ("hgemm_naive", "hgemm_tiled", "wmma_gemm", "wmma_gemm_v2", "wmma_gemm_v3"),
}
#: Rungs the model misses by more than the tolerance, and why: misses left standing rather than fitted away. The
#: record's test checks that each is still a miss (and that nothing else is), so the list stays true.
KNOWN_MISSES = {}
#: Ladders the model does not rank as measured, and why (as KNOWN_MISSES).
KNOWN_UNRANKED = {}
H200_TOLERANCE = 1.5
A6000_TOLERANCE = 2.0
VECTOR_N = 1 << 26
GEMM_N = 4096
COPY_FIGURE = "copy_dtod"


def measured_h200():
    """{figure: (its measured median, unit, which record, its median time in seconds)} for every rung of LADDERS
    and the copy."""
    records = {}
    for path in (H200_RECORD, *sorted({path for path, _ in LATER.values()})):
        with open(path) as f:
            records[path] = {fig["name"]: fig for fig in json.load(f)["figures"]}
    out = {}
    for name in (COPY_FIGURE, *(r for rungs in LADDERS.values() for r in rungs)):
        where = LATER[name][0] if name in LATER else H200_RECORD
        fig = records[where][name]
        if fig.get("status") != "ok":
            raise RuntimeError(f"{name} in {where} was not measured ({fig.get('status')})")
        out[name] = (float(fig["median"]), fig["unit"], os.path.basename(where), float(fig["seconds_median"]))
    return out


# ---- counting each rung on the emulator, carried to the measured size ---------------------------------------

def _counted(run, inputs):
    """The KernelRecords of one call of ``run(*inputs)``, profiled on one worker thread. A kernel whose blocks
    take tickets (reduction v7: the block that finishes last adds the others' partial sums) has that work done by
    whichever block finishes last, which on several workers depends on their timing, as on a GPU; the L2 model
    takes the blocks' requests in the grid's order, so where that block's fall moved the modelled DRAM bytes by
    about 1 % from run to run (7.43 to 7.57 µs for reduction v7). On one worker the grid's last block does it,
    every run, and the record is reproduced exactly."""
    from gpuedu import backend
    compiler = backend.active().compiler
    previous = compiler.get_threads() if hasattr(compiler, "set_threads") else None   # (the emulator's knob)
    if previous is not None:
        compiler.set_threads(1)
    try:
        with gpuedu.profile() as prof:
            run(*inputs)
    finally:
        if previous is not None:
            compiler.set_threads(previous)
    return tuple(prof.kernels)


def _carried(run, make, sizes, size, polynomial=False):
    """The launches of ``run(*make(n))`` counted at each of ``sizes`` and carried to ``size``: a tuple of
    KernelRecords, one per launch (the launches must be the same kernels at every size)."""
    from gpuedu.profiler.scaling import extrapolate_polynomial
    from gpuedu.profiler.catalogue import carry
    counted = [_counted(run, make(n)) for n in sizes]
    names = [[k.name for k in launches] for launches in counted]
    if any(n != names[0] for n in names):
        raise RuntimeError(f"the sizes {sizes} launch different kernels: {names}")
    if polynomial:
        return tuple(extrapolate_polynomial(list(ks), sizes, size) for ks in zip(*counted))
    (small, large) = counted
    return tuple(carry(s, l, sizes[0], sizes[1], size) for s, l in zip(small, large))


def _vector(n, rng=np.random.default_rng(0)):
    from gpuedu import backend
    return backend.active().gpuarray.to_gpu(rng.standard_normal(n).astype(np.float32))


def _squares(n, dtype, rng=np.random.default_rng(0)):
    from gpuedu import backend
    ga = backend.active().gpuarray
    return tuple(ga.to_gpu(rng.standard_normal((n, n)).astype(dtype)) for _ in range(2))


def relu_launches(version, n=VECTOR_N, sizes=(1 << 20, 1 << 21)):
    from gpuedu import ops
    return _carried(lambda x: ops.relu(x, version=version), lambda m: (_vector(m),), sizes, n)


def reduction_launches(version, n=VECTOR_N, sizes=(1 << 18, 1 << 19, 1 << 20)):
    """Every launch of ``ops.reduce_sum(x, version)`` on n floats: the first pass (or version 7's one launch)
    carried from ``sizes`` as a polynomial in n (version 7's last block adds a fixed number of partial sums),
    the later passes counted at their own, small, sizes."""
    from gpuedu import ops
    from gpuedu.ops import reduction
    if version == 7:
        return _carried(lambda x: ops.reduce_sum(x, version=7), lambda m: (_vector(m),), sizes, n, polynomial=True)
    first = _carried(lambda x: ops.reduce_pass(x, version), lambda m: (_vector(m),), sizes, n, polynomial=True)
    later = []
    for count in reduction._reduce_levels(n, version, 256)[:-1]:
        later += _counted(lambda x: ops.reduce_pass(x, version), (_vector(count),))
    return first + tuple(later)


def matmul_launches(version, n=GEMM_N, sizes=(128, 256)):
    from gpuedu import ops
    return _carried(lambda a, b: ops.matmul(a, b, version=version), lambda m: _squares(m, np.float32), sizes, n)


#: The bench's FP16 figures (gpuedu/bench/gemm.py): how each calls gpuedu.ops.fp16, and the sizes it is counted
#: at (version 5's 128 x 256 tile needs 256 to fill a tile).
FP16_RUNS = {
    "hgemm_naive": (lambda f, a, b: f.matmul(a, b, version=2), (128, 256)),
    "hgemm_tiled": (lambda f, a, b: f.matmul(a, b, version=3), (128, 256)),
    "wmma_gemm": (lambda f, a, b: f.wmma_matmul(a, b), (128, 256)),
    "wmma_gemm_v2": (lambda f, a, b: f.matmul(a, b, out_dtype=np.float16, version=4), (128, 256)),
    "wmma_gemm_v3": (lambda f, a, b: f.matmul(a, b, out_dtype=np.float16, version=5), (256, 512)),
}
TENSOR_FIGURES = ("wmma_gemm", "wmma_gemm_v2", "wmma_gemm_v3")


def fp16_launches(figure, n=GEMM_N):
    from gpuedu.ops import fp16
    run, sizes = FP16_RUNS[figure]
    return _carried(lambda a, b: run(fp16, a, b), lambda m: _squares(m, np.float16), sizes, n)


def rung_launches(figure):
    """The counted launches of one H200 figure, carried to its measured size."""
    family, _, version = figure.rpartition("_v")
    if figure.startswith("relu_v"):
        return relu_launches(int(version))
    if figure.startswith("reduce_sum_v"):
        return reduction_launches(int(version))
    if figure.startswith("matmul_v"):
        return matmul_launches(int(version))
    return fp16_launches(figure)


# ---- the model against the measurements ---------------------------------------------------------------------

def model_rung(figure, launches, measured, gpu="H200"):
    """One row: the rung's launches modelled on ``gpu`` (each launch's roofs, the host's launches in between:
    ``time_model.timeline``) beside its measurement."""
    from gpuedu.profiler.time_model import timeline
    value, unit, record, seconds = measured
    flops = 2 * GEMM_N ** 3 if unit == "GFLOP/s" else None
    pipe = "tensor" if figure in TENSOR_FIGURES else "fp32"
    # A GEMM's FLOPs are its one launch's; the passes of a reduction have none counted (bandwidth figures).
    predictions = [rec.predict(gpu, flops=flops, pipe=pipe) for rec in launches]
    modelled = timeline(predictions)
    first = launches[0].metrics
    return {
        "figure": figure, "unit": unit, "measured": value, "measured_seconds": seconds, "measured_in": record,
        "modelled_seconds": modelled, "modelled": value * seconds / modelled,
        "modelled_over_measured": seconds / modelled,
        "launches": len(launches), "limiter": " + ".join(p.limiter for p in predictions),
        "terms_s": {k: v for k, v in predictions[0].terms.items()},
        "counted": {"grid": list(launches[0].grid), "block": list(launches[0].block),
                    "dram_bytes": sum(int(rec.dram_bytes(gpu)[0] + rec.dram_bytes(gpu)[1]) for rec in launches),
                    "global_load_requests": first["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"],
                    "shared_wavefronts": first["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]
                    + first["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"],
                    "barriers": launches[0]._counts.get("barriers"),
                    "mma_sync": launches[0]._counts.get("mma_sync")},
    }


def rank_check(rows, key):
    """Whether ``rows`` (one ladder) come out in the same order by ``key`` as by their measurement, and for each
    row whether it sits at its measured place."""
    by_measured = sorted(range(len(rows)), key=lambda i: rows[i]["measured"])
    by_key = sorted(range(len(rows)), key=lambda i: rows[i][key])
    place = {i: p for p, i in enumerate(by_measured)}
    modelled_place = {i: p for p, i in enumerate(by_key)}
    for i, row in enumerate(rows):
        row["rank_right"] = place[i] == modelled_place[i]
    return by_measured == by_key


def h200_ladders(figures=None):
    """{ladder: {"rows": [...], "ranked_right": bool, "measured_order": [...]}} against the H200's measurements."""
    measured = measured_h200()
    out = {}
    for ladder, rungs in LADDERS.items():
        rows = [model_rung(r, rung_launches(r), measured[r]) for r in rungs if figures is None or r in figures]
        if not rows:
            continue
        ranked = rank_check(rows, "modelled")
        out[ladder] = {"rows": rows, "ranked_right": ranked,
                       "measured_order": [r["figure"] for r in sorted(rows, key=lambda r: r["measured"])],
                       "modelled_order": [r["figure"] for r in sorted(rows, key=lambda r: r["modelled"])]}
    return out


def a6000_ladder():
    """The published A6000 SGEMM ladder against the model (``model_vs_published``'s rows), ranked."""
    sys.path.insert(0, HERE)
    import model_vs_published as mvp
    rows = mvp.compare(mvp.at_size(mvp.count_ladder(), mvp.TARGET))
    for r in rows:
        r["measured"], r["modelled"] = r["published_gflops"], r["modelled_gflops"]
        r["modelled_over_measured"] = r["modelled_over_published"]
    ranked = rank_check(rows, "modelled")
    return {"rows": rows, "ranked_right": ranked, "source": mvp.SOURCE}


def within(row, tolerance):
    ratio = row["modelled_over_measured"]
    return 1 / tolerance <= ratio <= tolerance


def print_table(h200, a6000, copy):
    print(f"H200 (measured 2026-11-26; modelled on the H200 SXM). Bandwidth yardstick: copy_dtod {copy:,.0f} GB/s "
          f"measured")
    print(f"{'rung':<15}{'launches':>9}{'measured':>13}{'modelled':>13}{'ratio':>7}  rank  limiter")
    for ladder, result in h200.items():
        for r in result["rows"]:
            flag = "" if within(r, H200_TOLERANCE) else f"  (outside {H200_TOLERANCE}x)"
            print(f"{r['figure']:<15}{r['launches']:>9}{r['measured']:>13,.0f}{r['modelled']:>13,.0f}"
                  f"{r['modelled_over_measured']:>7.2f}  {'ok' if r['rank_right'] else 'NO':<4}  {r['limiter']}"
                  f"{flag}  [{r['unit']}]")
        print(f"  {ladder}: {'ranked as measured' if result['ranked_right'] else 'NOT ranked as measured'} "
              f"(measured order {', '.join(result['measured_order'])})")
    print("RTX A6000 (published, GFLOP/s; modelled on the RTX A6000)")
    for r in a6000["rows"]:
        flag = "" if within(r, A6000_TOLERANCE) else f"  (outside {A6000_TOLERANCE}x)"
        print(f"matmul_v{r['version']:<7}{1:>9}{r['measured']:>13,.0f}{r['modelled']:>13,.0f}"
              f"{r['modelled_over_measured']:>7.2f}  {'ok' if r['rank_right'] else 'NO':<4}  {r['limiter']}{flag}")
    print(f"  sgemm (A6000): {'ranked as published' if a6000['ranked_right'] else 'NOT ranked as published'}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(RESULTS, "model-vs-measured.json"))
    parser.add_argument("--figures", nargs="*", help="only these H200 figures (a quick run; the A6000 ladder is "
                                                      "left out)")
    args = parser.parse_args(argv)
    gpuedu.setup("cpu", verbose=False)
    if args.figures:
        unknown = sorted(set(args.figures) - {r for rungs in LADDERS.values() for r in rungs})
        if unknown:
            parser.error(f"unknown figure(s) {unknown}; the rungs are: "
                         f"{', '.join(r for rungs in LADDERS.values() for r in rungs)}")
    h200 = h200_ladders(args.figures)
    a6000 = None if args.figures else a6000_ladder()
    copy = measured_h200()[COPY_FIGURE][0]
    if a6000 is not None:
        print_table(h200, a6000, copy)
        for figure, why in KNOWN_MISSES.items():
            print(f"miss left standing: {figure}: {why}")
    misses = [r["figure"] for res in h200.values() for r in res["rows"] if not within(r, H200_TOLERANCE)]
    result = {
        "what": "the profiler's modelled GPU times (emulator counts carried to the measured sizes) against measured "
                "ones: the course's ladders on an NVIDIA H200 and a published SGEMM ladder on an RTX A6000",
        "h200_records": [os.path.basename(p) for p in (H200_RECORD, H200_SECOND, H200_FP16)],
        "from_later_records": {figure: {"record": os.path.basename(path), "why": why}
                               for figure, (path, why) in LATER.items()},
        "copy_dtod_gbs_measured": copy,
        "tolerance": {"h200": H200_TOLERANCE, "a6000": A6000_TOLERANCE},
        "h200": h200, "a6000": a6000,
        "h200_outside_tolerance": misses,
        "known_misses": KNOWN_MISSES, "known_unranked": KNOWN_UNRANKED,
        "notes": [
            "measured: CUDA events after an L2 flush, median of 20 (H200, 2026-11-26); the A6000 figures are "
            "published measurements (model_vs_published.py); every modelled figure is a model, never a measurement",
            "ratio = modelled throughput / measured (above 1: the model is faster than the GPU)",
            "a rung of several launches (the reduction's passes) is modelled with the host's launch cost between "
            "them (time_model.timeline, 6.2 µs a launch as the H200 measured)",
            "tensor-core kernels: a WMMA fragment load or store is counted as the GPU's lanes make it, each lane two "
            "neighbours in each 8x8 block of the tile (mma.sync's fragment layout); ncu on the H200 counted the same "
            "shared-memory wavefronts for the pipelined WMMA GEMMs (16,388 against 16,384 and 12,289 against "
            "12,288) and the same global requests and sectors for the plain one (wmma_gemm, which stages its tiles "
            "element by element through shared memory)",
            "tensor-core kernels: the emulator counts each warp's WMMA mma_sync (gpuedu__mma_sync.sum, (n/16)^3 for "
            "these GEMMs), and the model puts a warp's mma_syncs one after another on its block's chain at 59 clocks "
            "each on Hopper (gpus.H200.mma_sync_cycles: measured in the H200's tile sweep, "
            "nvidia-h200-probe-tiles.json, as the difference between two shapes that differ only in the mma_syncs "
            "a warp issues per K step); the compute roof stays the dense FP16 peak",
            "the model assumes a warp's loads between barriers are in flight together "
            "(time_model.LOADS_IN_FLIGHT_PER_WARP); the counts cannot tell loads that wait one after another. "
            "wmma_gemm as first measured (nvidia-h200.json, 18.8 TFLOP/s) staged its tiles in a loop stepping by "
            "blockDim.x, which nvcc did not unroll, and was modelled 2.2x too fast; staged with a fixed count "
            "(each thread's 8 loads issued together) it measured 36.9 TFLOP/s (nvidia-h200-fp16.json; before and "
            "after in one process: nvidia-h200-wmma-staging.json, 1.92x)",
        ],
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
