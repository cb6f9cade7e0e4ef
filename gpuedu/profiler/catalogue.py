"""The course's kernel ladders in one place, counted at two sizes and carried to a GPU-sized problem.

Lesson 13 puts every kernel ladder of lessons 01-04 and 11 on one roofline from this list.  For each family
(activations, transposes, the reduction ladder, row softmax, convolution, the matmul ladder) a ``Family`` knows how to
make inputs of a size, launch one version through ``gpuedu.ops``, and count its floating-point work (a
napkin count, stated with the family).  ``count(family)`` profiles every version at the family's two sizes
on the emulator (counted); ``at_size`` extrapolates each version's counts and grid to the target size as
powers of the size (``scaling.extrapolate``), and ``rows(gpu)`` puts each through the GPU model (modelled)
beside the plain emulator's time at the larger counted size (measured, this machine).
"""
import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .gpus import get_gpu
from .scaling import extrapolate
from .session import profile


@dataclass
class Family:
    """One ladder: ``make(size, rng)`` -> inputs, ``run(inputs, version)`` launches once, ``flops(size)``."""
    name: str
    versions: tuple
    sizes: tuple            # two sizes the emulator counts (chosen so each count is a power of the size)
    target: int             # the size the GPU model is asked about
    make: Callable
    run: Callable
    flops: Callable
    size_label: Callable
    flops_note: str


def course_families():
    """The ladders of lessons 01-04 and 11, with sizes the emulator counts in seconds."""
    from .. import backend, ops
    from ..ops import conv
    ga = backend.active().gpuarray

    def vector(n, rng):
        return ga.to_gpu(rng.standard_normal(n).astype(np.float32))

    def square(n, rng):
        return ga.to_gpu(rng.standard_normal((n, n)).astype(np.float32))

    def two_squares(n, rng):
        return square(n, rng), square(n, rng)

    def images(n, rng):      # n images of 8 channels, 28 x 28, and 16 filters of 3 x 3
        return (ga.to_gpu(rng.standard_normal((n, 8, 28, 28)).astype(np.float32)),
                ga.to_gpu(rng.standard_normal((16, 8, 3, 3)).astype(np.float32)))

    def rows_512(n, rng):
        return ga.to_gpu(rng.standard_normal((n, 512)).astype(np.float32))

    return [
        Family("relu", ops.ACTIVATION_VERSIONS, (1 << 20, 1 << 21), 1 << 26, vector,
               lambda x, v: ops.relu(x, version=v), lambda n: n, lambda n: f"2^{int(math.log2(n))} floats",
               "one max per element"),
        Family("transpose", ops.TRANSPOSE_VERSIONS, (512, 1024), 8192, square,
               lambda x, v: ops.transpose(x, version=v), lambda n: 0, lambda n: f"{n} x {n}",
               "no arithmetic: a copy that reorders"),
        Family("reduce pass", ops.REDUCE_VERSIONS[:-1], (1 << 18, 1 << 19), 1 << 26, vector,
               lambda x, v: ops.reduce_pass(x, version=v), lambda n: n, lambda n: f"2^{int(math.log2(n))} floats",
               "one add per element (the first pass, which reads every element)"),
        Family("softmax rows", ops.SOFTMAX_VERSIONS, (512, 1024), 32768, rows_512,
               lambda x, v: ops.softmax_rows(x, version=v), lambda n: 5 * n * 512,
               lambda n: f"{n} x 512", "5 per element: max, subtract, exp, sum, divide (exp counted as one)"),
        Family("conv2d", tuple(v for v in conv.VERSIONS if v != 3), (2, 4), 256, images,
               lambda xw, v: conv.conv2d(*xw, padding=1, version=v), lambda n: 2 * n * 16 * 28 * 28 * 8 * 9,
               lambda n: f"{n} x 8 x 28 x 28, 16 3x3 filters",
               "2 per multiply-add of each output's 8 x 3 x 3 window (version 3 is three launches: im2col, "
               "GEMM, rearrange, left out)"),
        Family("matmul", ops.MATMUL_VERSIONS, (128, 256), 4096, two_squares,
               lambda ab, v: ops.matmul(*ab, version=v), lambda n: 2 * n ** 3, lambda n: f"{n}^3",
               "2 n^3: one multiply and one add per term"),
    ]


def _grid_at(small, large, size_small, size_large, size):
    """Each grid dimension as a power of the size, from the two counted launches (constant when capped)."""
    out = []
    for g1, g2 in zip(small.grid, large.grid):
        p = math.log(g2 / g1) / math.log(size_large / size_small)
        out.append(max(1, int(round(g2 * (size / size_large) ** p))))
    return tuple(out)


def count(family, seed=0):
    """{version: (record at sizes[0], record at sizes[1], plain emulator seconds at sizes[1])}."""
    rng = np.random.default_rng(seed)
    small_in, large_in = (family.make(s, rng) for s in family.sizes)
    out = {}
    for v in family.versions:
        with profile() as prof_small:
            family.run(small_in, v)
        with profile() as prof_large:
            family.run(large_in, v)
        if len(prof_small.kernels) != 1 or len(prof_large.kernels) != 1:
            raise RuntimeError(f"{family.name} v{v}: expected one launch per run, got "
                               f"{len(prof_small.kernels)} and {len(prof_large.kernels)}")
        family.run(large_in, v)                 # warm the plain module, then time it
        t0 = time.perf_counter()
        family.run(large_in, v)
        plain = time.perf_counter() - t0
        out[v] = (prof_small.kernels[0], prof_large.kernels[0], plain)
    return out


def carry(small, large, size_small, size_large, size):
    """The record two counted launches of one kernel (at two sizes) imply at ``size``: every count and
    every grid dimension as a power of the size."""
    return extrapolate(small, large, size_small, size_large, size,
                       grid=_grid_at(small, large, size_small, size_large, size))


def at_size(family, small, large, size=None):
    """The record the two counted launches imply at ``size`` (default: the family's target)."""
    return carry(small, large, *family.sizes, family.target if size is None else size)


def rows(gpu="H100", families=None, seed=0):
    """One dict per kernel version: counted, modelled (on ``gpu``) and measured (emulator) figures.

    ``counted_at_emulator_size`` holds every metric of the launch counted at the larger size, as counted;
    the other counts are those carried to the target size."""
    gpu = get_gpu(gpu)
    table = []
    for family in families or course_families():
        for v, (small, large, plain) in count(family, seed).items():
            big = at_size(family, small, large)
            flops = family.flops(family.target)
            p = big.predict(gpu, flops=flops or None)
            m = big.metrics
            dram = m["dram__bytes_read.sum"] + m["dram__bytes_write.sum"]
            table.append({
                "family": family.name, "version": v, "kernel": big.name, "size": family.size_label(family.target),
                "flops": flops, "dram_bytes": dram,
                "global_sectors": sum(m[f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum"]
                                      for op in ("ld", "st", "atom", "red")),
                "intensity": flops / dram if dram else math.inf,
                "modelled_seconds": p.seconds, "limiter": p.limiter,
                "modelled_gflops": flops / p.seconds / 1e9, "modelled_dram_gbs": dram / p.seconds / 1e9,
                "emulator_seconds": plain, "emulator_size": family.size_label(family.sizes[1]),
                "counted_at_emulator_size": large.metrics,
            })
    return table
