"""GEMM against the vendor library: the FP32 matmul ladder vs cuBLAS SGEMM, FP16 GEMMs vs cuBLAS FP16.

A GEMM of m x k by k x n does 2 m n k FLOPs; GFLOP/s = 2 m n k / seconds / 1e9. cuBLAS is reached
through PyTorch or CuPy in this same process (same device, same run, the same timer protocol with
that library's own events); where neither is importable it is recorded as unavailable. On the CPU
backend the ladder is also compared with NumPy's matmul (BLAS on the host) in the same run.
"""
import numpy as np

from . import baselines as _baselines
from . import stats
from .records import Skipped


def _operands(m, n, k, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype))


def _check_product(got, expected, k, what):
    # Entries are sums of k products of N(0,1) values (size ~ sqrt(k)); float32 accumulation in any
    # order stays within ~1e-5 k of the float64 result, while a wrong index is off by O(sqrt(k)).
    err = float(np.max(np.abs(got.astype(np.float64) - expected))) if got.size else 0.0
    if not err <= 1e-5 * k + 1e-3:
        raise RuntimeError(f"{what} is wrong: max |error| {err:.3g} against NumPy; fix it before timing it")


def _vendor_gemm(run, figure_name, group, sizes, dtype, what):
    """The cuBLAS GEMM of the same size through PyTorch or CuPy, measured at the end of the run."""
    m, n, k = sizes["m"], sizes["n"], sizes["k"]

    def measure():
        with run.figure(figure_name, group, "GFLOP/s", sizes, note=f"{what} through the vendor library") as fig:
            name, module = _baselines.vendor_gpu_library(run)
            if name is None:
                raise Skipped(module)
            gemm = _baselines.vendor_matmul(name, module, m, n, k, dtype)
            seconds = run.time(gemm, timer=_baselines.vendor_timer(run, name, module))
            fig.record(stats.rates(seconds, 2.0 * m * n * k / 1e9), seconds, note=f"{what} through {name}")

    if run.on_gpu:
        run.later(measure)
    else:
        measure()    # records why it is unavailable; nothing is imported


def measure_matmul(run):
    """Every version of matmul.cu at the mode's size, against cuBLAS SGEMM (GPU) or NumPy (CPU)."""
    size = run.sizes["matmul"]
    m = n = k = size
    sizes = {"m": m, "n": n, "k": k}
    flops = 2.0 * m * n * k
    baselines = ["cublas_sgemm"] if run.on_gpu else ["numpy_matmul", "cublas_sgemm"]
    try:
        from gpuedu import ops
        versions = ops.MATMUL_VERSIONS
    except (ImportError, AttributeError) as exc:
        run.skip("matmul_v1", "matmul", "GFLOP/s", f"the matmul launchers are missing: {exc}", sizes, baselines)
        versions = ()
    a_host, b_host = _operands(m, n, k)
    expected = a_host.astype(np.float64) @ b_host.astype(np.float64)
    device = None
    for version in versions:
        with run.figure(f"matmul_v{version}", "matmul", "GFLOP/s", sizes, baselines,
                        note="ops.matmul(a, b, version, out=c); 2 m n k FLOPs") as fig:
            if run.drv is None:
                raise Skipped("pycuda.driver is not available on this backend")
            if device is None:
                gpuarray = run.backend.gpuarray
                device = (gpuarray.to_gpu(a_host), gpuarray.to_gpu(b_host),
                          gpuarray.empty((m, n), np.float32))
            a, b, c = device
            ops.matmul(a, b, version=version, out=c)
            _check_product(c.get(), expected, k, f"matmul version {version}")
            seconds = run.time(lambda: ops.matmul(a, b, version=version, out=c))
            fig.record(stats.rates(seconds, flops / 1e9), seconds)

    _vendor_gemm(run, "cublas_sgemm", "matmul", sizes, "float32", "cuBLAS SGEMM")

    if not run.on_gpu:
        with run.figure("numpy_matmul", "matmul", "GFLOP/s", sizes,
                        note="np.matmul(a, b, out=c) in float32 on the host (BLAS)") as fig:
            c_host = np.empty((m, n), np.float32)
            seconds = run.time(lambda: np.matmul(a_host, b_host, out=c_host))
            fig.record(stats.rates(seconds, flops / 1e9), seconds)


# FP16 GEMMs: name -> (how to call gpuedu.ops.fp16, output dtype). The naive and tiled GEMMs
# store FP16 and accumulate in FP32 on CUDA cores; wmma_gemm (version 1, the plain WMMA kernel) and
# wmma_gemm_v2 / _v3 (the pipelined ones, 128x128 and 128x256 tiles, FP16 output like cuBLAS's here)
# feed the tensor cores through WMMA; the WMMA target (targets.py) takes the best of the three.
# mma_gemm_v6 .. _v10 are ops.fp16.matmul's versions 6-10 (mma_gemm.cu: the tensor cores in PTX, FP16
# output); the FP16 GEMM target takes the best of them. wgmma_gemm_v11 .. _v13 are versions 11-13
# (wgmma_gemm.cu: Hopper's TMA and wgmma, sm_90a: measured on an H100 / H200 only, skipped on another GPU),
# also measured at HOPPER_LARGE^3 on a GPU (fp16_gemm_large), beside cuBLAS at that size.
FP16_GEMMS = {
    "hgemm_naive": (lambda f, a, b, c: f.matmul(a, b, out=c, version=2), np.float16),
    "hgemm_tiled": (lambda f, a, b, c: f.matmul(a, b, out=c, version=3), np.float16),
    "wmma_gemm": (lambda f, a, b, c: f.wmma_matmul(a, b, out=c), np.float32),
    "wmma_gemm_v2": (lambda f, a, b, c: f.matmul(a, b, out=c, out_dtype=np.float16, version=4), np.float16),
    "wmma_gemm_v3": (lambda f, a, b, c: f.matmul(a, b, out=c, out_dtype=np.float16, version=5),
                     np.float16),
    **{f"mma_gemm_v{v}": (lambda f, a, b, c, v=v: f.matmul(a, b, out=c, out_dtype=np.float16, version=v), np.float16)
       for v in (6, 7, 8, 9, 10)},
    **{f"wgmma_gemm_v{v}": (lambda f, a, b, c, v=v: f.matmul(a, b, out=c, out_dtype=np.float16, version=v),
                            np.float16) for v in (11, 12, 13)},
}
#: The figures of the PTX rungs, which the FP16 GEMM target (targets.py) takes the best of.
MMA_FIGURES = tuple(name for name in FP16_GEMMS if name.startswith("mma_gemm_v"))
#: The figures of the Hopper rungs (each with a target of its own).
HOPPER_FIGURES = tuple(name for name in FP16_GEMMS if name.startswith("wgmma_gemm_v"))


def large_figure(name):
    """The name of a figure measured at fp16_gemm_large (the Hopper rungs and cuBLAS): ``name`` + its size."""
    return f"{name}_large"


def _require_hopper(run, name):
    """Versions 11-13 are built for sm_90a, which only a GPU of compute capability 9.0 runs."""
    if run.on_gpu and name in HOPPER_FIGURES:
        cc = tuple(run.drv.Context.get_device().compute_capability())
        if cc != (9, 0):
            raise Skipped(f"{name} is built for sm_90a (compute capability 9.0: H100, H200); this GPU is "
                          f"sm_{cc[0]}{cc[1]}")


def measure_fp16_gemm(run):
    """gpuedu's FP16 GEMMs (FP16 storage, FP32 accumulation; WMMA tensor cores) vs cuBLAS FP16 or NumPy."""
    size = run.sizes["fp16_gemm"]
    m = n = k = size
    sizes = {"m": m, "n": n, "k": k, "inputs": "float16"}
    flops = 2.0 * m * n * k
    baselines = ["cublas_hgemm"] if run.on_gpu else ["numpy_hgemm", "cublas_hgemm"]
    a_host, b_host = _operands(m, n, k, np.float16, seed=2)
    expected = a_host.astype(np.float64) @ b_host.astype(np.float64)
    fp16, device = None, {}
    for name, (call, out_dtype) in FP16_GEMMS.items():
        with run.figure(name, "fp16_gemm", "GFLOP/s", dict(sizes, output=np.dtype(out_dtype).name), baselines,
                        note="gpuedu.ops.fp16; 2 m n k FLOPs") as fig:
            if run.drv is None:
                raise Skipped("pycuda.driver is not available on this backend")
            _require_hopper(run, name)
            if fp16 is None:
                try:
                    from gpuedu.ops import fp16
                except ImportError as exc:
                    raise Skipped(f"gpuedu.ops.fp16 is not available: {exc}") from None
            if not device:
                gpuarray = run.backend.gpuarray
                device["a"], device["b"] = gpuarray.to_gpu(a_host), gpuarray.to_gpu(b_host)
            a, b = device["a"], device["b"]
            c = device.get(out_dtype)
            if c is None:
                c = device[out_dtype] = run.backend.gpuarray.empty((m, n), out_dtype)
            call(fp16, a, b, c)
            _check_fp16_product(c.get().astype(np.float64), expected, k, f"{name} is wrong")
            seconds = run.time(lambda: call(fp16, a, b, c))
            fig.record(stats.rates(seconds, flops / 1e9), seconds)

    _vendor_gemm(run, "cublas_hgemm", "fp16_gemm", dict(sizes, output="float16"), "float16",
                 "cuBLAS FP16 GEMM (tensor cores)")
    if run.sizes.get("fp16_gemm_large"):
        _measure_hopper_large(run, run.sizes["fp16_gemm_large"])

    if not run.on_gpu:
        with run.figure("numpy_hgemm", "fp16_gemm", "GFLOP/s", dict(sizes, output="float32"),
                        note="np.matmul of the float16 inputs widened to float32 once, outside the timing "
                             "(NumPy has no fast FP16 GEMM; a CPU computes it in FP32)") as fig:
            a32, b32 = a_host.astype(np.float32), b_host.astype(np.float32)
            c32 = np.empty((m, n), np.float32)
            seconds = run.time(lambda: np.matmul(a32, b32, out=c32))
            fig.record(stats.rates(seconds, flops / 1e9), seconds)


def _check_fp16_product(got, expected, k, wrong):
    """A GEMM's product against float64: FP32 accumulation, then (for FP16 outputs) one rounding to half, ~2^-11 of
    |C|; a product off by more is not timed (``wrong`` says which and where)."""
    err = float(np.max(np.abs(got - expected)))
    allowed = 1e-5 * k + 2e-3 * float(np.max(np.abs(expected)))
    if not err <= allowed:
        raise RuntimeError(f"{wrong}: max |error| {err:.3g} > {allowed:.3g}; fix it before timing it")


def _measure_hopper_large(run, size):
    """The Hopper rungs and cuBLAS at size^3 (GPU only): the size where a persistent kernel's tile walk and the
    L2 matter. Checked on 64 rows of C against float64 (a whole float64 product of 8192^3 would take the host
    longer than every GEMM here)."""
    m = n = k = size
    sizes = {"m": m, "n": n, "k": k, "inputs": "float16"}
    flops = 2.0 * m * n * k
    baseline = large_figure("cublas_hgemm")
    a_host, b_host = _operands(m, n, k, np.float16, seed=3)
    rows = np.random.default_rng(3).choice(m, 64, replace=False)
    expected = a_host[rows].astype(np.float64) @ b_host.astype(np.float64)
    device = {}
    for name in HOPPER_FIGURES:
        call, out_dtype = FP16_GEMMS[name]
        with run.figure(large_figure(name), "fp16_gemm", "GFLOP/s", dict(sizes, output="float16"), [baseline],
                        note="gpuedu.ops.fp16; 2 m n k FLOPs") as fig:
            _require_hopper(run, name)
            from gpuedu.ops import fp16
            if not device:
                gpuarray = run.backend.gpuarray
                device["a"], device["b"] = gpuarray.to_gpu(a_host), gpuarray.to_gpu(b_host)
                device["c"] = gpuarray.empty((m, n), np.float16)
            a, b, c = device["a"], device["b"], device["c"]
            call(fp16, a, b, c)
            _check_fp16_product(c.get()[rows].astype(np.float64), expected, k, f"{name} is wrong at {size}^3")
            seconds = run.time(lambda: call(fp16, a, b, c))
            fig.record(stats.rates(seconds, flops / 1e9), seconds)
    device.clear()   # the device's memory back before cuBLAS allocates its own operands
    _vendor_gemm(run, baseline, "fp16_gemm", dict(sizes, output="float16"), "float16",
                 f"cuBLAS FP16 GEMM (tensor cores) at {size}^3")
