"""The performance targets: what each gpuedu figure should reach against its yardstick on a GPU.

Each target names a figure (or a rule that picks one, e.g. the best version of a ladder), the
quantity compared (the figure's headline ratio, or its median) and the goal. Its status is

    "met" / "missed"       measured here and compared with the goal
    "not applicable"       the goal is about GPU hardware and this run is on the CPU emulator, or on
                           another GPU than the ones the goal is stated for (``DEVICES``)
    "unavailable"          the figure or its baseline could not be measured (reason given)

A rule ``("count_above", figures, others)`` counts how many of ``figures`` are faster (a larger median) than the
fastest of ``others``: its metric is "count".
"""

from .gemm import HOPPER_FIGURES, MMA_FIGURES, large_figure

NOT_APPLICABLE_CPU = "no GPU: the CPU emulator's speed says nothing about a GPU's"


MLP_WIDTHS = [784, 1024, 1024, 10]

# name, description, how to pick the figure, metric, comparison, goal, needs a GPU,
# sizes the figure must have been measured at for the goal to apply (None: any)
TARGETS = [
    ("sgemm_vs_cublas", "best SGEMM version >= 70% of cuBLAS SGEMM at 4096^3",
     ("best_ratio", "matmul_v", "cublas_sgemm"), "ratio", ">=", 0.70, True, {"m": 4096, "n": 4096, "k": 4096}),
    ("elementwise_vs_copy", "best elementwise (ReLU) version >= 85% of the device-to-device copy bandwidth",
     ("best_ratio", "relu_v", "copy_dtod"), "ratio", ">=", 0.85, True, None),
    ("reduction_vs_copy", "final reduction version >= 85% of the device-to-device copy bandwidth",
     ("last_version", "reduce_sum_v", "copy_dtod"), "ratio", ">=", 0.85, True, None),
    ("fp16_wmma_vs_cublas", "best FP16 tensor-core (WMMA) GEMM >= 30% of cuBLAS FP16",
     ("best_of", ("wmma_gemm", "wmma_gemm_v2", "wmma_gemm_v3"), "cublas_hgemm"), "ratio", ">=", 0.30, True, None),
    ("fp16_gemm_vs_cublas", "best FP16 GEMM (tensor cores in PTX, mma_gemm v6-v10) >= 60% of cuBLAS FP16 at "
     "4096^3 on an H100 or H200",
     ("best_of", MMA_FIGURES, "cublas_hgemm"), "ratio", ">=", 0.60, True, {"m": 4096, "n": 4096, "k": 4096}),
    # The Hopper rungs (ops.fp16.matmul 11-13, sm_90a), each against cuBLAS FP16 at 4096^3 and 8192^3 on an H200
    *[(f"fp16_wgmma_v{v}_vs_cublas{tag}", f"FP16 GEMM version {v} (wgmma_gemm.cu) >= {goal:.0%} of cuBLAS FP16 at "
       f"{size}^3 on an H200", ("figure", figure, base), "ratio", ">=", goal, True, {"m": size, "n": size, "k": size})
      for v, goal in ((11, 0.60), (12, 0.80), (13, 0.90))
      for tag, size, figure, base in (("", 4096, f"wgmma_gemm_v{v}", "cublas_hgemm"),
                                      ("_8192", 8192, large_figure(f"wgmma_gemm_v{v}"), large_figure("cublas_hgemm")))],
    ("fp16_wgmma_vs_mma", "at least 2 of the 3 Hopper FP16 GEMMs (versions 11-13) faster than the best mma.sync "
     "version (6-10) at 4096^3 on an H200",
     ("count_above", HOPPER_FIGURES, MMA_FIGURES), "count", ">=", 2, True, {"m": 4096, "n": 4096, "k": 4096}),
    ("mlp_step_b128_vs_torch", "MLP training step (784-1024-1024-10, FP32) >= 1.0x PyTorch eager samples/s at batch 128",
     ("figure", "mlp_step_b128", "torch_mlp_step_b128"), "ratio", ">=", 1.0, True, {"widths": MLP_WIDTHS}),
    ("mlp_step_b4096_vs_torch", "MLP training step (784-1024-1024-10, FP32) >= 0.8x PyTorch eager samples/s at batch 4096",
     ("figure", "mlp_step_b4096", "torch_mlp_step_b4096"), "ratio", ">=", 0.8, True, {"widths": MLP_WIDTHS}),
    ("amp_step_vs_fp32", "mixed-precision step >= 2x gpuedu's FP32 step (width 4096, batch 512)",
     ("figure", "amp_step", "fp32_step"), "ratio", ">=", 2.0, True, {"widths": [784, 4096, 4096, 10], "batch": 512}),
    ("prepared_call_overhead", "prepared_call <= 10 us a launch",
     ("figure", "launch_prepared_call", None), "median", "<=", 10.0, False, None),
]


#: Targets stated for some GPUs only: name -> the words one of which the device's name must contain. Elsewhere the
#: target is "not applicable" (another GPU's balance of tensor cores, memory and cuBLAS's kernels differs).
DEVICES = {"fp16_gemm_vs_cublas": ("H100", "H200"),
           **{name: ("H200",) for name, *_ in TARGETS if name.startswith("fp16_wgmma_")}}


def _version_number(name, prefix):
    tail = name[len(prefix):]
    return int(tail) if tail.isdigit() else None


def _pick(figures, rule):
    """The figure a target looks at, or ``(None, reason)``.

    Rules: ("figure", name), ("best_ratio", prefix) over the figures prefixN, ("last_version", prefix),
    ("best_of", (name, ...)) over the figures named.
    """
    kind, key, baseline = rule
    if kind == "count_above":
        return _count_above(figures, key, baseline)
    if kind == "figure":
        figure = figures.get(key)
        if figure is None:
            return None, f"{key} was not run (see --only)"
        return figure, None
    if kind == "best_of":
        ladder = [figures[name] for name in key if name in figures]
        if not ladder:
            return None, f"none of {', '.join(key)} was run (see --only)"
    else:
        ladder = [f for f in figures.values()
                  if f["name"].startswith(key) and _version_number(f["name"], key) is not None]
        if not ladder:
            return None, f"no {key}N figures in this run (see --only)"
    measured = [f for f in ladder if f["status"] == "ok"]
    if kind == "last_version":
        last = max(ladder, key=lambda f: _version_number(f["name"], key))
        return last, None
    if not measured:
        return ladder[0], None
    with_ratio = [f for f in measured if f.get("ratios", {}).get(baseline) is not None]
    if not with_ratio:
        return measured[0], None
    return max(with_ratio, key=lambda f: f["ratios"][baseline]), None


def _count_above(figures, names, others):
    """For ("count_above", names, others): the fastest of ``names`` (the figure the target names), with
    ``count`` set to how many of ``names`` have a larger median than the fastest of ``others``; or (None, reason)
    when any of them was not measured."""
    missing = [n for n in (*names, *others) if n not in figures]
    measured = [figures[n] for n in names if n in figures and figures[n]["status"] == "ok"]
    best_other = max((figures[n] for n in others if n in figures and figures[n]["status"] == "ok"),
                     key=lambda f: f["median"], default=None)
    if len(measured) < len(names) or best_other is None:
        failed = [f"{n}: {figures[n].get('reason')}" for n in (*names, *others)
                  if n in figures and figures[n]["status"] != "ok"]
        why = "; ".join(([f"not run: {', '.join(missing)} (see --only)"] if missing else []) + failed)
        return None, why or "none of the figures compared was measured"
    fastest = dict(max(measured, key=lambda f: f["median"]))
    fastest["count"] = sum(f["median"] > best_other["median"] for f in measured)
    fastest["compared_with"] = best_other["name"]
    return fastest, None


def evaluate(figures, on_gpu, device=None):
    """The status of every target for this run's ``figures`` (a dict name -> figure with ratios) on ``device``
    (the GPU's name, as the machine record gives it; None: unknown)."""
    out = []
    for name, description, rule, metric, comparison, goal, gpu_only, required in TARGETS:
        baseline = rule[2] if metric != "count" else None   # (a count names the figure it beat, below)
        entry = {"name": name, "description": description, "metric": metric,
                 "comparison": comparison, "goal": goal, "figure": None, "baseline": baseline,
                 "value": None, "status": None, "reason": None}
        figure, why = _pick(figures, rule)
        if figure is not None:
            entry["figure"] = figure["name"]
            if figure["status"] == "ok":
                entry["value"] = (figure["ratios"].get(baseline) if metric == "ratio" else figure["count"]
                                  if metric == "count" else figure["median"])
            if metric == "count":
                entry["baseline"] = figure.get("compared_with")
        devices = DEVICES.get(name)
        if gpu_only and not on_gpu:
            entry["status"], entry["reason"] = "not applicable", NOT_APPLICABLE_CPU
        elif devices and not any(d in (device or "") for d in devices):
            entry["status"], entry["reason"] = "not applicable", (
                f"the goal is stated for the {' and '.join(devices)}; this run's GPU is {device or 'unknown'}")
        elif figure is None:
            entry["status"], entry["reason"] = "unavailable", why
        elif figure["status"] != "ok":
            entry["status"], entry["reason"] = "unavailable", f"{figure['name']}: {figure['reason']}"
        elif required and any(figure["sizes"].get(k) != v for k, v in required.items()):
            measured = {k: figure["sizes"].get(k) for k in required}
            entry["status"], entry["reason"] = "unavailable", (
                f"{figure['name']} was measured at {measured}; the goal is stated at {required} "
                "(run without --quick)")
        elif entry["value"] is None:
            base = figures.get(baseline)
            why = base["reason"] if base is not None and base["status"] != "ok" else "not measured in this run"
            entry["status"], entry["reason"] = "unavailable", f"baseline {baseline}: {why}"
        else:
            ok = entry["value"] >= goal if comparison == ">=" else entry["value"] <= goal
            entry["status"] = "met" if ok else "missed"
        out.append(entry)
    return out
