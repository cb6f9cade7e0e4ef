"""The yardsticks: cuBLAS through CuPy or PyTorch on a GPU, NumPy on the CPU.

A ratio means something only when both sides ran on the same machine in the same run, so the
baselines are measured here, next to the gpuedu figures, never read from a table.
"""
import importlib


def vendor_gpu_library(run):
    """``(name, module)`` of PyTorch or CuPy with a working CUDA device, else ``(None, reason)``.

    Tried in that order; the answer is cached on ``run`` so each is imported once.
    """
    if "vendor" in run.third_party:
        return run.third_party["vendor"]
    if not run.on_gpu:
        answer = (None, "no GPU: cuBLAS needs a CUDA device (the CPU backend compares with NumPy)")
    else:
        reasons = []
        answer = None
        for name, usable in (("torch", _torch_cuda_usable), ("cupy", _cupy_cuda_usable)):
            try:
                module = importlib.import_module(name)
            except Exception as exc:
                reasons.append(f"{name} not importable ({type(exc).__name__}: {exc})")
                continue
            why_not = usable(module)
            if why_not:
                reasons.append(f"{name}: {why_not}")
                continue
            answer = (name, module)
            break
        if answer is None:
            answer = (None, "cuBLAS unavailable: " + "; ".join(reasons)
                      + " — install PyTorch or CuPy for the cuBLAS comparison")
    run.third_party["vendor"] = answer
    return answer


def torch_module(run):
    """``(torch, None)`` when PyTorch with CUDA is usable, else ``(None, reason)``."""
    if "torch" in run.third_party:
        return run.third_party["torch"]
    try:
        torch = importlib.import_module("torch")
    except Exception as exc:
        answer = (None, f"PyTorch not importable ({type(exc).__name__}: {exc})")
    else:
        if run.on_gpu:
            why_not = _torch_cuda_usable(torch)
            answer = (None, f"PyTorch: {why_not}") if why_not else (torch, None)
        else:
            answer = (torch, None)
    run.third_party["torch"] = answer
    return answer


def _torch_cuda_usable(torch):
    try:
        if not torch.cuda.is_available():
            return "torch.cuda.is_available() is False"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _cupy_cuda_usable(cupy):
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device visible to CuPy"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def vendor_timer(run, name, module):
    """A timer that brackets work queued by the vendor library with that library's own events."""
    from . import timers
    key = f"timer:{name}"
    if key not in run.third_party:    # one flush buffer per library for the whole run
        l2 = run.sizes.get("l2_bytes", 0)
        make = timers.TorchEventTimer if name == "torch" else timers.CupyEventTimer
        run.third_party[key] = make(module, l2)
    return run.third_party[key]


def vendor_matmul(name, module, m, n, k, dtype, seed=0):
    """A closure computing C = A @ B on the device with the vendor library (cuBLAS underneath).

    ``dtype`` is "float32" or "float16". The output buffer is allocated once and reused, so the
    timed call is the GEMM alone.
    """
    import numpy as np
    rng = np.random.default_rng(seed)
    a_host = rng.standard_normal((m, k)).astype(dtype)
    b_host = rng.standard_normal((k, n)).astype(dtype)
    if name == "torch":
        torch = module
        if dtype == "float32":
            # PyTorch may use TF32 tensor cores for float32 by default on Ampere+; SGEMM means FP32.
            torch.backends.cuda.matmul.allow_tf32 = False
        a = torch.from_numpy(a_host).cuda()
        b = torch.from_numpy(b_host).cuda()
        c = torch.empty((m, n), dtype=a.dtype, device="cuda")
        return lambda: torch.matmul(a, b, out=c)
    cp = module
    a = cp.asarray(a_host)
    b = cp.asarray(b_host)
    c = cp.empty((m, n), dtype=dtype)
    return lambda: cp.matmul(a, b, out=c)
