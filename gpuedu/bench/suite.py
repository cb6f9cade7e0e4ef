"""The measurements of `gpuedu bench`, in the order they run, and what each needs before it."""
from . import bandwidth, gemm, launch_overhead, training

# name -> (function(run), what it measures)
MEASUREMENTS = {
    "copy": (bandwidth.measure_copy, "device-to-device copy: the memory roof (and NumPy's copy on the CPU)"),
    "elementwise": (bandwidth.measure_elementwise, "ReLU kernel versions in GB/s against the roof"),
    "reduction": (bandwidth.measure_reduction, "sum reduction ladder in GB/s against the roof"),
    "matmul": (gemm.measure_matmul, "SGEMM ladder against cuBLAS (GPU) or NumPy (CPU)"),
    "fp16_gemm": (gemm.measure_fp16_gemm, "FP16 and WMMA GEMMs against cuBLAS FP16 (GPU) or NumPy (CPU)"),
    "mlp": (training.measure_mlp, "MLP training step against PyTorch eager (GPU) or NumPy (CPU)"),
    "amp": (training.measure_amp, "mixed-precision training step against gpuedu's FP32 step"),
    "launch": (launch_overhead.measure_launch, "launch overhead: __call__ vs prepared_call"),
}

# A measurement compared with another's figure runs that one first (e.g. the roof for bandwidth).
NEEDS = {"elementwise": ["copy"], "reduction": ["copy"]}


def selected(only):
    """The measurement names to run for ``--only`` (all when empty), with what they need, in order."""
    if not only:
        return list(MEASUREMENTS)
    unknown = [name for name in only if name not in MEASUREMENTS]
    if unknown:
        raise ValueError(f"unknown measurement(s) {', '.join(unknown)}; choose from {', '.join(MEASUREMENTS)}")
    wanted = set(only)
    for name in only:
        wanted.update(NEEDS.get(name, ()))
    return [name for name in MEASUREMENTS if name in wanted]


def run_all(run, names):
    for name in names:
        function, what = MEASUREMENTS[name]
        run.log(f"{name}: {what}")
        function(run)
    if run.deferred:
        run.log("yardsticks from PyTorch / CuPy (run last: they may switch the thread's CUDA context)")
        run.run_deferred()
