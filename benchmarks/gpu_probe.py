"""Questions a lent GPU answers in a few seconds each, beside `gpuedu bench`: which tile shape feeds the
tensor cores best, where a training step's time goes launch by launch, and how the tiled attention kernel
compares with PyTorch's.

    python benchmarks/gpu_probe.py tiles [--size 4096] [--cubin wmma_tiles.cubin]
    python benchmarks/gpu_probe.py steps [--widths 784 4096 4096 10] [--batch 512]
    python benchmarks/gpu_probe.py attention [--seq 512 1024 2048 4096] [--kernels v3-fp16 v4-fp16 ...]
                                             [--sdpa-backends flash efficient cudnn math]
    python benchmarks/gpu_probe.py all --out DIR          (each writes DIR/probe-<name>.json too)

tiles: every shape of ``benchmarks/wmma_tiles.cu`` (the pipelined WMMA GEMM of ``wmma_gemm.cu`` at other
block tiles, K slices, stages and warp layouts) on an M = N = K = size FP16 GEMM with FP32 output, checked
against a float64 product of the same inputs, then timed with CUDA events (median of the repeats, an L2
flush before each), beside cuBLAS's FP16 GEMM through PyTorch when PyTorch is there. ``--cubin`` loads
the kernels compiled ahead (``nvcc -arch=sm_90 -cubin -I gpuedu/kernels benchmarks/wmma_tiles.cu``), so
the GPU machine spends no time compiling.

steps: one FP32 step (``gpuedu.nn.mlp``) and one mixed-precision step (``gpuedu.nn.amp``) at the bench's
widths and batch, each launch timed with CUDA events (``gpuedu.profile()`` on a GPU), summed by kernel.
Each launch is synchronised, so the sum is the GPU's busy time without the host's share.

attention: ``ops.attention`` versions 1-3 (FP32), version 3's FP16 twin and version 4 (tensor cores, FP16 and
BF16), causal, batch 4, 8 heads of 64, each checked against a float64 reference first, against
``torch.nn.functional.scaled_dot_product_attention`` in FP16 and FP32: the dispatcher's choice, and in FP16
each backend PyTorch has (``torch.nn.attention.sdpa_kernel``: flash, efficient, cudnn, math; one this GPU or
this PyTorch lacks is recorded with its error). Every call is timed as the tiles are (CUDA events, an L2
flush before each). ``comparisons`` in the record names, for each length, the fastest SDPA backend in FP16
and version 4's FP16 time over it (the target: at most 2). ``--kernels`` and ``--sdpa-backends`` choose
what is timed.

Run on the CPU emulator with small sizes (``--size 128``, ``--seq 64``) it checks itself: the same
kernels, the same checks; its timings are the emulator's and say nothing about a GPU.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import gpuedu  # noqa: E402
from gpuedu import backend  # noqa: E402

# (BM, BN, BK, stages, warps along M, warps along N, blocks per SM asked): wmma_tiles.cu's list.
# A seventh number: the blocks per SM __launch_bounds__ asks for (0: none asked).
TILE_SHAPES = [(128, 128, 32, 3, 2, 4, 0), (128, 128, 64, 3, 2, 4, 0), (128, 128, 32, 4, 2, 4, 0),
               (128, 128, 64, 4, 2, 4, 0), (128, 256, 32, 3, 2, 4, 0), (128, 256, 64, 3, 2, 4, 0),
               (256, 128, 32, 3, 4, 2, 0), (256, 128, 64, 3, 4, 2, 0), (128, 128, 32, 3, 2, 2, 0),
               (128, 128, 64, 3, 2, 2, 0), (128, 128, 32, 4, 2, 2, 0), (128, 128, 64, 4, 2, 2, 0),
               (128, 128, 32, 3, 2, 4, 3), (128, 128, 32, 2, 2, 4, 4)]
PAD = 8   # wmma_gemm.cu's V2_PAD


def tile_name(shape, layout="nn"):
    bm, bn, bk, st, wm, wn, blocks = shape
    return f"tile_{bm}x{bn}x{bk}_s{st}_w{wm}x{wn}" + (f"_b{blocks}" if blocks else "") + f"_{layout}"


def tile_shared_bytes(shape):
    """V2_SHARED_BYTES(bm, bn, bk, stages): stages x (A tile + B tile) halves x 2 bytes."""
    bm, bn, bk, st = shape[:4]

    def halves(wide):
        return max(wide * (bk + PAD), bk * (wide + PAD))
    return st * (halves(bm) + halves(bn)) * 2


class Timer:
    """The bench's timer for this backend (``gpuedu.bench.timers``: CUDA events around each call after an L2
    flush on a GPU, the host's clock on the emulator) with this run's repeats and warm-up;
    ``median(run)`` gives (the median in seconds, every repeat's)."""

    def __init__(self, drv, repeats, warmup):
        from gpuedu.bench import timers
        if backend.active().is_emulator:
            self._timer = timers.HostTimer()
        else:
            l2 = drv.Context.get_device().get_attribute(drv.device_attribute.L2_CACHE_SIZE)
            self._timer = timers.CudaEventTimer(drv, l2)
        self.flush_bytes = self._timer.flush_bytes
        self.repeats, self.warmup = repeats, warmup

    def median(self, run):
        times = self._timer.time(run, self.repeats, self.warmup)
        return statistics.median(times), times


def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _torch_median(torch, call, repeats, warmup, flush_bytes):
    """(median seconds, every repeat's) of a PyTorch call timed with CUDA events, an L2 flush before each,
    as the bench's CudaEventTimer times gpuedu's launches."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    flush = torch.empty(max(flush_bytes // 4, 1), dtype=torch.int32, device="cuda")
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for start, end in events:
        flush.zero_()
        start.record()
        call()
        end.record()
    torch.cuda.synchronize()
    times = [start.elapsed_time(end) / 1e3 for start, end in events]
    return statistics.median(times), times


def probe_tiles(args, drv, timer):
    from gpuedu.ops import fp16
    gpuarray = backend.active().gpuarray
    n = args.size
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float16)
    b = rng.standard_normal((n, n)).astype(np.float16)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    # op(A) @ op(B) of each layout, from the same stored square matrices (t: the stored matrix transposed)
    exact = {"nn": a64 @ b64, "tn": a64.T @ b64, "nt": a64 @ b64.T}
    del a64, b64
    a_d, b_d = gpuarray.to_gpu(a), gpuarray.to_gpu(b)
    c_d = gpuarray.empty((n, n), np.float32)
    if args.cubin:
        module = drv.module_from_file(args.cubin)
    else:
        with open(os.path.join(REPO, "benchmarks", "wmma_tiles.cu")) as f:
            source = f.read()
        # wmma_gemm.cu inline, not #included: the emulator rewrites the source it is given (its
        # extern __shared__ array, for one), not the files that source includes.
        with open(os.path.join(REPO, "gpuedu", "kernels", "wmma_gemm.cu")) as f:
            source = source.replace('#include "wmma_gemm.cu"', f.read())
        module = backend.active().compiler.SourceModule(
            source, no_extern_c=True, include_dirs=[os.path.join(REPO, "gpuedu", "kernels"),
                                                    os.path.join(REPO, "benchmarks")],
            options=[] if backend.active().is_emulator else ["-arch=sm_90"])
    flops = 2.0 * n ** 3
    rows = []
    shapes = TILE_SHAPES if not args.shapes else [TILE_SHAPES[i] for i in args.shapes]
    for shape, layout in [(shape, layout) for shape in shapes for layout in args.layouts]:
        bm, bn, bk, st, wm, wn, _ = shape
        row = {"kernel": tile_name(shape, layout), "shape": list(shape), "layout": layout, "threads": 32 * wm * wn,
               "shared_bytes": tile_shared_bytes(shape)}
        try:
            f = module.get_function(tile_name(shape, layout))
            f.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, row["shared_bytes"])
            row["registers"] = f.get_attribute(drv.function_attribute.NUM_REGS)
            grid = (-(-n // bn), -(-n // bm))

            def run(f=f, grid=grid, row=row):
                f(c_d.gpudata, a_d.gpudata, b_d.gpudata, np.int32(n), np.int32(n), np.int32(n), np.int32(n),
                  np.int32(n), np.float32(1.0), np.int32(0), block=(row["threads"], 1, 1), grid=grid,
                  shared=row["shared_bytes"])
            c_d.fill(np.float32(np.nan))
            run()
            got = c_d.get().astype(np.float64)
            row["rel_error"] = float(np.linalg.norm(got - exact[layout]) / np.linalg.norm(exact[layout]))
            if not np.isfinite(got).all() or row["rel_error"] > 1e-3:
                raise RuntimeError(f"wrong result (relative error {row['rel_error']:.3g}); not timed")
            seconds, times = timer.median(run)
            row.update(seconds=seconds, tflops=flops / seconds / 1e12, spread=[min(times), max(times)])
        except Exception as e:   # one shape that does not fit (shared memory, registers) must not end the sweep
            row["error"] = f"{type(e).__name__}: {e}"
        rows.append(row)
        print(f"  {row['kernel']:<32} " + (f"{row['tflops']:8.1f} TFLOP/s  regs {row['registers']}  "
                                           f"err {row['rel_error']:.1e}" if "tflops" in row else row["error"]),
              flush=True)
    torch = _torch_cuda()
    if torch is not None and not backend.active().is_emulator:
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        seconds, _ = _torch_median(torch, lambda: torch.matmul(ta, tb), args.repeats, 3, timer.flush_bytes)
        rows.append({"kernel": "cublas_hgemm (torch.matmul, FP16 in and out)", "seconds": seconds,
                     "tflops": flops / seconds / 1e12})
        print(f"  {'cuBLAS FP16 (torch)':<32} {flops / seconds / 1e12:8.1f} TFLOP/s", flush=True)
    return {"size": n, "rows": rows}


def probe_steps(args, drv, timer):
    from gpuedu.bench.training import gpuedu_amp_step, gpuedu_mlp_step
    widths, batch = args.widths, args.batch

    class Run:   # what the bench's step builders read
        pass
    run = Run()
    run.backend, run.drv = backend.active(), drv
    steps = {"fp32_step": gpuedu_mlp_step(run, widths, batch), "amp_step": gpuedu_amp_step(run, widths, batch)}
    out = {"widths": widths, "batch": batch}
    for name, step in steps.items():
        seconds, _ = timer.median(step)
        step()
        drv.Context.synchronize()
        with gpuedu.profile() as prof:
            step()
        by_kernel = {}
        for k in prof.kernels:
            entry = by_kernel.setdefault(k.name, {"launches": 0, "seconds": 0.0, "grid": list(k.grid),
                                                  "block": list(k.block)})
            entry["launches"] += 1
            entry["seconds"] += k.seconds or 0.0
        busy = sum(e["seconds"] for e in by_kernel.values())
        out[name] = {"seconds": seconds, "samples_per_s": batch / seconds, "launches": len(prof.kernels),
                     "busy_seconds": busy, "kernels": by_kernel}
        print(f"  {name}: {seconds * 1e3:.3f} ms a step (events, median), {len(prof.kernels)} launches, "
              f"{busy * 1e3:.3f} ms of kernels one by one", flush=True)
        for kname, e in sorted(by_kernel.items(), key=lambda kv: -kv[1]["seconds"])[:12]:
            print(f"      {kname:<40} x{e['launches']:<3} {e['seconds'] * 1e6:9.1f} us", flush=True)
    out["amp_over_fp32"] = out["fp32_step"]["seconds"] / out["amp_step"]["seconds"]
    print(f"  AMP step / FP32 step speed: {out['amp_over_fp32']:.2f}x", flush=True)
    return out


# The attention probe's kernels: name on the command line -> (label in the record, element type, version).
ATTENTION_KERNELS = {"v1": ("v1 naive fp32", "float32", 1), "v2": ("v2 fused fp32", "float32", 2),
                     "v3": ("v3 tiled fp32", "float32", 3), "v3-fp16": ("v3 tiled fp16", "float16", 3),
                     "v4-fp16": ("v4 tensor cores fp16", "float16", 4),
                     "v4-bf16": ("v4 tensor cores bf16", "bfloat16", 4)}
# PyTorch's SDPA backends (torch.nn.attention.SDPBackend's names), each timed alone in FP16.
SDPA_BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
                 "math": "MATH"}
TARGET_RATIO = 2.0          # version 4 in FP16 within 2x of the fastest SDPA backend in FP16
COMPARED = "v4 tensor cores fp16"


def sdpa_comparisons(rows, compared=COMPARED, target=TARGET_RATIO):
    """For each length with a timed ``compared`` row: the fastest SDPA backend timed alone in FP16 there (a row
    "torch sdpa float16 <backend>"), its time, and ``compared``'s over it, against ``target``."""
    out = []
    for seq in sorted({r["seq"] for r in rows}):
        ours = [r for r in rows if r["seq"] == seq and r["kernel"] == compared and "seconds" in r]
        theirs = [r for r in rows if r["seq"] == seq and r["kernel"].startswith("torch sdpa float16 ")
                  and "seconds" in r]
        if not ours or not theirs:
            continue
        best = min(theirs, key=lambda r: r["seconds"])
        ratio = ours[0]["seconds"] / best["seconds"]
        out.append({"seq": seq, "ours": compared, "sdpa": best["kernel"], "ours_seconds": ours[0]["seconds"],
                    "sdpa_seconds": best["seconds"], "ratio": ratio, "target": target, "met": ratio <= target})
    return out


def _attention_torch():
    """PyTorch with CUDA for the SDPA rows: on a GPU only (on the emulator there is no GPU to time it on)."""
    return None if backend.active().is_emulator else _torch_cuda()


def probe_attention(args, drv, timer):
    from gpuedu.ops import attention as ops   # the attention family: attention(), its reference and FLOPs
    from gpuedu.ops import fp16
    gpuarray = backend.active().gpuarray
    batch, heads, head_dim = 4, 8, 64
    width = heads * head_dim
    rows = []
    torch = _attention_torch()
    for seq in args.seq:
        rng = np.random.default_rng(seq)
        q, k, v = (rng.standard_normal((batch, seq, width)).astype(np.float32) for _ in range(3))
        ref = ops.attention_reference(q, k, v, heads=heads, causal=True)
        flops = ops.attention_flops(batch, seq, heads, head_dim, causal=True)
        inputs = {}                                       # element type -> q, k, v on the device

        def on_device(element):
            if element not in inputs:
                convert = {"float32": lambda x: x, "float16": lambda x: x.astype(np.float16),
                           "bfloat16": fp16.to_bfloat16_bits_reference}[element]
                inputs[element] = tuple(gpuarray.to_gpu(convert(t)) for t in (q, k, v))
            return inputs[element]

        def widened(out, element):
            host = out.get()
            return (fp16.bfloat16_bits_to_float(host) if element == "bfloat16" else host).astype(np.float64)

        for name in args.kernels:
            label, element, version = ATTENTION_KERNELS[name]
            row = {"seq": seq, "kernel": label}
            try:
                run = (lambda version=version, element=element:
                       ops.attention(*on_device(element), heads=heads, causal=True, version=version,
                                     dtype="bfloat16" if element == "bfloat16" else None))
                got = widened(run(), element)
                row["rel_error"] = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
                seconds, _ = timer.median(run)
                row.update(seconds=seconds, tflops=flops / seconds / 1e12)
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {e}"
            rows.append(row)
        if torch is not None:
            import torch.nn.functional as F
            from torch.nn.attention import SDPBackend, sdpa_kernel
            runs = [(dtype, None) for dtype in (torch.float16, torch.float32)]
            runs += [(torch.float16, name) for name in args.sdpa_backends]
            for dtype, name in runs:
                label = f"torch sdpa {str(dtype)[6:]}" + (f" {name}" if name else "")
                row = {"seq": seq, "kernel": label}
                try:
                    tq, tk, tv = (torch.from_numpy(t).cuda().to(dtype).view(batch, seq, heads, head_dim)
                                  .transpose(1, 2).contiguous() for t in (q, k, v))
                    chosen = getattr(SDPBackend, SDPA_BACKENDS[name]) if name else None

                    def call(tq=tq, tk=tk, tv=tv, chosen=chosen):
                        if chosen is None:
                            return F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
                        with sdpa_kernel(chosen):
                            return F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
                    got = call().transpose(1, 2).reshape(batch, seq, width).double().cpu().numpy()
                    row["rel_error"] = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
                    seconds, _ = _torch_median(torch, call, args.repeats, args.warmup, timer.flush_bytes)
                    row.update(seconds=seconds, tflops=flops / seconds / 1e12)
                except Exception as e:        # a backend this GPU or this PyTorch lacks: recorded, not fatal
                    row["error"] = f"{type(e).__name__}: {e}".splitlines()[0]
                rows.append(row)
        for row in rows:
            if row["seq"] == seq:
                print(f"  N={seq:<5} {row['kernel']:<30} " + (f"{row['seconds'] * 1e6:10.1f} us {row['tflops']:7.2f} "
                      f"TFLOP/s" if "seconds" in row else row["error"]), flush=True)
    comparisons = sdpa_comparisons(rows)
    for c in comparisons:
        print(f"  N={c['seq']:<5} {c['ours']} / {c['sdpa']} (the fastest SDPA backend in FP16): {c['ratio']:.2f}x, "
              f"target {c['target']:.0f}x: {'met' if c['met'] else 'not met'}", flush=True)
    return {"batch": batch, "heads": heads, "head_dim": head_dim, "causal": True, "rows": rows,
            "comparisons": comparisons, "torch": getattr(torch, "__version__", None)}


PROBES = {"tiles": probe_tiles, "steps": probe_steps, "attention": probe_attention}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("probe", choices=sorted(PROBES) + ["all"])
    parser.add_argument("--out", help="folder for probe-<name>.json")
    parser.add_argument("--size", type=int, default=4096, help="tiles: M = N = K (default 4096)")
    parser.add_argument("--shapes", type=int, nargs="+", help="tiles: indices into TILE_SHAPES (default: all)")
    parser.add_argument("--cubin", help="tiles: wmma_tiles.cu compiled ahead for this GPU")
    parser.add_argument("--layouts", nargs="+", default=["nn", "tn", "nt"], choices=["nn", "tn", "nt"],
                        help="tiles: which of A, B plain (n) or transposed (t) to time (default: all three)")
    parser.add_argument("--widths", type=int, nargs="+", default=[784, 4096, 4096, 10])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--seq", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument("--kernels", nargs="+", default=list(ATTENTION_KERNELS), choices=list(ATTENTION_KERNELS),
                        help="attention: gpuedu's kernels to time (default: all)")
    parser.add_argument("--sdpa-backends", nargs="+", default=list(SDPA_BACKENDS), choices=list(SDPA_BACKENDS),
                        help="attention: PyTorch's SDPA backends to time one by one in FP16 (default: all)")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    backend.setup(verbose=False)
    drv = backend.active().driver
    timer = Timer(drv, args.repeats, args.warmup)
    names = sorted(PROBES) if args.probe == "all" else [args.probe]
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    failed = 0
    for name in names:
        print(f"{name}:", flush=True)
        started = time.time()
        try:
            result = PROBES[name](args, drv, timer)
        except Exception as e:
            failed += 1
            result = {"error": f"{type(e).__name__}: {e}"}
            print(f"  failed: {result['error']}", flush=True)
        record = {"probe": name, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "backend": backend.active().name,
                  "device": drv.Device(0).name() if not backend.active().is_emulator else "CPU emulator",
                  "host": platform.node(), "seconds": time.time() - started, "result": result}
        if args.out:
            with open(os.path.join(args.out, f"probe-{name}.json"), "w") as f:
                json.dump(record, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
