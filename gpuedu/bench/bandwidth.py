"""Memory-bound work against the memory roof: device copy, elementwise kernels, the reduction ladder.

The roof is what the device can do with memory alone: a device-to-device copy (``memcpy_dtod``)
reads and writes every byte once, so its bytes-moved-per-second is the bandwidth a kernel that
reads n and writes n bytes can at best reach. Napkin math per figure:

    copy_dtod        2 * bytes          (read + write)
    relu_vN          2 * 4 * n bytes    (read x, write y, float32)
    reduce_sum_vN    4 * n bytes        (read x; the partial sums are a rounding error; the output and
                                        the partial sums' workspace are allocated before timing)

On a GPU the working sets are at least 4x the L2 (a copy that fits in L2 measures L2); on the
CPU emulator the same kernels are also compared with NumPy doing the same job in the same run.
"""
import numpy as np

from . import stats
from .records import Skipped


def _ops():
    try:
        from gpuedu import ops
    except ImportError as exc:
        raise Skipped(f"gpuedu.ops is not importable ({exc})") from None
    return ops


def _ladder(run, versions, first, what, params, baselines):
    """``(ops, the ladder's versions)``; where the launchers are missing, ``(None, ())`` with the first rung
    recorded as skipped and why."""
    try:
        ops = _ops()
        return ops, getattr(ops, versions)
    except (Skipped, AttributeError) as exc:
        run.skip(first, "bandwidth", "GB/s", f"the {what} launchers are missing: {exc}", params, baselines)
        return None, ()


def _require_driver(run):
    if run.drv is None:
        raise Skipped(f"pycuda.driver is not available on this backend ({run.third_party.get('driver')})")


def _input(run, n, seed=0):
    """n float32 standard-normal values on the device (half of them negative, so ReLU branches)."""
    _require_driver(run)
    host = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    return host, run.backend.gpuarray.to_gpu(host)


def measure_copy(run):
    """The memory roof: device-to-device copy, and on the CPU NumPy's copy of the same bytes."""
    nbytes = run.sizes["copy_bytes"]
    baselines = [] if run.on_gpu else ["numpy_copy"]
    with run.figure("copy_dtod", "bandwidth", "GB/s", {"bytes": nbytes}, baselines,
                    note="memcpy_dtod; bytes moved = 2 x bytes copied (read + write)") as fig:
        _require_driver(run)
        drv = run.drv
        src, dst = drv.mem_alloc(nbytes), drv.mem_alloc(nbytes)
        drv.memset_d32(src, 0x3F800000, nbytes // 4)   # 1.0f everywhere: the pages are touched, not lazily zero
        drv.memset_d32(dst, 0, nbytes // 4)
        seconds = run.time(lambda: drv.memcpy_dtod(dst, src, nbytes))
        fig.record(stats.rates(seconds, 2 * nbytes / 1e9), seconds)
        src.free()
        dst.free()
    if not run.on_gpu:
        with run.figure("numpy_copy", "bandwidth", "GB/s", {"bytes": nbytes},
                        note="np.copyto between two float32 arrays on the host") as fig:
            a = np.ones(nbytes // 4, dtype=np.float32)
            b = np.zeros_like(a)
            seconds = run.time(lambda: np.copyto(b, a))
            fig.record(stats.rates(seconds, 2 * nbytes / 1e9), seconds)


def measure_elementwise(run):
    """Every version of the ReLU kernel (elementwise.cu) in GB/s, against the copy roof (and NumPy)."""
    n = run.sizes["elementwise_n"]
    baselines = ["copy_dtod"] if run.on_gpu else ["numpy_relu", "copy_dtod"]
    ops, versions = _ladder(run, "ACTIVATION_VERSIONS", "relu_v1", "elementwise", {"n": n}, baselines)
    prepared = None
    for version in versions:
        with run.figure(f"relu_v{version}", "bandwidth", "GB/s", {"n": n}, baselines,
                        note="ops.relu(x, version, out=y); bytes moved = 8 n") as fig:
            if prepared is None:
                host, x = _input(run, n)
                y = run.backend.gpuarray.empty_like(x)
                prepared = (host, x, y)
            host, x, y = prepared
            ops.relu(x, version=version, out=y)
            # A wrong kernel must not be timed as a fast one.
            if not np.array_equal(y.get(), np.maximum(host, 0)):
                raise RuntimeError(f"relu version {version} gave a wrong result; fix the kernel before timing it")
            seconds = run.time(lambda: ops.relu(x, version=version, out=y))
            fig.record(stats.rates(seconds, 8 * n / 1e9), seconds)
    if not run.on_gpu:
        with run.figure("numpy_relu", "bandwidth", "GB/s", {"n": n},
                        note="np.maximum(x, 0, out=y) on the host") as fig:
            x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
            y = np.empty_like(x)
            seconds = run.time(lambda: np.maximum(x, 0, out=y))
            fig.record(stats.rates(seconds, 8 * n / 1e9), seconds)


def measure_reduction(run):
    """Every version of the sum reduction (reduction.cu) in GB/s read, against the copy roof (and NumPy)."""
    n = run.sizes["reduce_n"]
    baselines = ["copy_dtod"] if run.on_gpu else ["numpy_sum", "copy_dtod"]
    ops, versions = _ladder(run, "REDUCE_VERSIONS", "reduce_sum_v1", "reduction", {"n": n}, baselines)
    prepared = None
    for version in versions:
        with run.figure(f"reduce_sum_v{version}", "bandwidth", "GB/s", {"n": n}, baselines,
                        note="ops.reduce_sum(x, version, out=, workspace=): every pass (and version 7's "
                             "zeroing of out), with the output and partial sums allocated once before "
                             "timing; bytes moved = 4 n") as fig:
            if prepared is None:
                prepared = _input(run, n, seed=1)
            host, x = prepared
            # Allocated once: a repeated reduction then allocates nothing (cuMemFree would synchronise).
            out = run.backend.gpuarray.empty((1,), np.float32)
            workspace = ops.reduce_workspace(n, version)
            got = float(ops.reduce_sum(x, version=version, out=out, workspace=workspace).get()[0])
            expected = float(np.sum(host, dtype=np.float64))
            # float32 sums in another order differ by rounding: allow a few ulps of the sum of |x|.
            tolerance = 1e-5 * float(np.sum(np.abs(host), dtype=np.float64)) + 1e-3
            if abs(got - expected) > tolerance:
                raise RuntimeError(f"reduce_sum version {version} gave {got}, expected {expected} "
                                   f"(within {tolerance:.3g}); fix the kernel before timing it")
            seconds = run.time(lambda: ops.reduce_sum(x, version=version, out=out, workspace=workspace))
            fig.record(stats.rates(seconds, 4 * n / 1e9), seconds)
    if not run.on_gpu:
        with run.figure("numpy_sum", "bandwidth", "GB/s", {"n": n}, note="np.sum of float32 on the host") as fig:
            x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
            seconds = run.time(lambda: np.sum(x))
            fig.record(stats.rates(seconds, 4 * n / 1e9), seconds)
