"""The course's kernel ladders in one place, counted at two sizes and carried to a GPU-sized problem.

Lesson 13 puts the forward kernels of the ladders of lessons 01-05, 07, 08 and 11 on one roofline from this list.  For
each family (activations, transposes, the reduction ladder, row softmax, convolution, the matmul ladder, the dense
layer's fused GEMM, the FP16 and tensor-core GEMMs) a ``Family`` knows how to make inputs of a size, run one
version through ``gpuedu.ops``, and count its floating-point work (a napkin count, stated with the family).
``count(family)`` profiles every version at the family's two sizes on the emulator (counted); ``at_size``
extrapolates each launch's counts and grid to the target size as powers of the size (``scaling.extrapolate``), or, for
a family whose size is a batch (convolution: the filters stay fixed), as a + b n (``scaling.extrapolate_polynomial``),
and ``rows(gpu)`` puts each through the GPU model (modelled; a version's launches on the host's timeline,
``time_model.timeline``) beside the plain emulator's time at the larger counted size (measured, this machine).
"""
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from .gpus import get_gpu
from .scaling import extrapolate, extrapolate_polynomial
from .session import profile
from .time_model import timeline


@dataclass
class Family:
    """One ladder: ``make(size, rng)`` -> inputs, ``run(inputs, version)`` launches once, ``flops(size)``.

    ``pipes``: version -> where its FLOPs run, "tensor" for the tensor-core versions (the rest "fp32").
    ``flops_kernel``: for versions of several launches, the one whose compute roof gets the FLOPs (the GEMM);
    the others are modelled without a compute roof."""
    name: str
    versions: tuple
    sizes: tuple            # two sizes the emulator counts (chosen so each count is a power of the size)
    target: int             # the size the GPU model is asked about
    make: Callable
    run: Callable
    flops: Callable
    size_label: Callable
    flops_note: str
    lesson: str = ""        # where the ladder is taught, e.g. "04"
    pipes: Mapping = field(default_factory=dict)
    flops_kernel: str = ""
    affine: bool = False    # counts grow as a + b n (the size is a batch: fixed weights), not as a power of n

    def pipe(self, version):
        return self.pipes.get(version, "fp32")


def course_families():
    """The forward ladders of lessons 01-05, 07, 08 and 11, with sizes the emulator counts in seconds."""
    from .. import backend, ops
    from ..ops import conv, dense, fp16
    ga = backend.active().gpuarray

    def vector(n, rng):
        return ga.to_gpu(rng.standard_normal(n).astype(np.float32))

    def square(n, rng, dtype=np.float32):
        return ga.to_gpu(rng.standard_normal((n, n)).astype(dtype))

    def two_squares(n, rng):
        return square(n, rng), square(n, rng)

    def two_half_squares(n, rng):
        return square(n, rng, np.float16), square(n, rng, np.float16)

    def images(n, rng):      # n images of 8 channels, 28 x 28, and 16 filters of 3 x 3
        return (ga.to_gpu(rng.standard_normal((n, 8, 28, 28)).astype(np.float32)),
                ga.to_gpu(rng.standard_normal((16, 8, 3, 3)).astype(np.float32)))

    def rows_512(n, rng):
        return ga.to_gpu(rng.standard_normal((n, 512)).astype(np.float32))

    def layer(n, rng):       # a dense layer of n -> n features on a batch of n rows, and its outputs
        x, w = two_squares(n, rng)
        return (x, w, vector(n, rng), ga.empty((n, n), np.float32), ga.empty((n, n), np.float32), dense.Scratch())

    def dense_run(inputs, version):
        x, w, b, y, z, scratch = inputs
        dense.dense_forward(y, z, x, w, b, dense.activation_code("relu"), scratch, tile=DENSE_TILE)

    def cube(n):
        return f"{n}^3"

    return [
        Family("relu", ops.ACTIVATION_VERSIONS, (1 << 20, 1 << 21), 1 << 26, vector,
               lambda x, v: ops.relu(x, version=v), lambda n: n, lambda n: f"2^{int(math.log2(n))} floats",
               "one max per element", "01"),
        Family("transpose", ops.TRANSPOSE_VERSIONS, (512, 1024), 8192, square,
               lambda x, v: ops.transpose(x, version=v), lambda n: 0, lambda n: f"{n} x {n}",
               "no arithmetic: a copy that reorders", "02"),
        Family("reduce pass", ops.REDUCE_VERSIONS[:-1], (1 << 18, 1 << 19), 1 << 26, vector,
               lambda x, v: ops.reduce_pass(x, version=v), lambda n: n, lambda n: f"2^{int(math.log2(n))} floats",
               "one add per element (the first pass, which reads every element)", "03"),
        Family("softmax rows", ops.SOFTMAX_VERSIONS, (512, 1024), 32768, rows_512,
               lambda x, v: ops.softmax_rows(x, version=v), lambda n: 5 * n * 512,
               lambda n: f"{n} x 512", "5 per element: max, subtract, exp, sum, divide (exp counted as one)", "03"),
        Family("conv2d", conv.VERSIONS, (8, 16), 256, images,
               lambda xw, v: conv.conv2d(*xw, padding=1, version=v), lambda n: 2 * n * 16 * 28 * 28 * 8 * 9,
               lambda n: f"{n} x 8 x 28 x 28, 16 3x3 filters",
               "2 per multiply-add of each output's 8 x 3 x 3 window (version 3's three launches, im2col, GEMM "
               "and rearrange, run one after another as the host issues them; its FLOPs are the GEMM's)", "11",
               flops_kernel=conv_gemm_kernel(),
               affine=True),
        Family("matmul", ops.MATMUL_VERSIONS, (128, 256), 4096, two_squares,
               lambda ab, v: ops.matmul(*ab, version=v), lambda n: 2 * n ** 3, cube,
               "2 n^3: one multiply and one add per term", "04"),
        Family("dense layer", (1,), (128, 256), 4096, layer, dense_run, lambda n: 2 * n ** 3,
               lambda n: f"{n}^3",
               f"2 n^3 for the GEMM (the fused bias and ReLU, 2 n^2, left out); the {DENSE_TILE} tile, which "
               f"gemm_plan picks at 4096", "05"),
        Family("fp16 matmul", FP16_VERSIONS, (128, 256), 4096, two_half_squares,
               lambda ab, v: fp16.matmul(*ab, version=v), lambda n: 2 * n ** 3, cube,
               "2 n^3; FP16 in and out, FP32 sums (version 1: FP16 sums); version 4 on the tensor cores",
               "07", pipes={v: "tensor" for v in FP16_VERSIONS if v in fp16.TENSOR_VERSIONS}),
        Family("wmma_matmul", (1,), (128, 256), 4096, two_half_squares,
               lambda ab, v: fp16.wmma_matmul(*ab, version=v), lambda n: 2 * n ** 3, cube,
               "2 n^3; FP16 in, FP32 out: the plain WMMA kernel, one 16 x 16 fragment per warp", "08",
               pipes={1: "tensor"}),
    ]


#: The dense layer's GEMM tile counted: the one ``gemm_plan`` picks for a 4096 x 4096 x 4096 layer.
DENSE_TILE = "128x128"
#: fp16.matmul's versions counted: 5 (a 128 x 256 tile) needs 512^3 to fill its tiles, too slow to count here;
#: 6-10 (mma_gemm.cu's inline PTX) run their mma.sync, ldmatrix and cp.async outside the emulator's counters, so
#: the time model would see no tensor-core work in them.
FP16_VERSIONS = (1, 2, 3, 4)


def conv_gemm_kernel():
    """The matmul kernel convolution version 3 multiplies with (its FLOPs are that launch's)."""
    from ..ops import conv
    return f"matmul_kernel{conv.GEMM_VERSION}"


def _grid_at(small, large, size_small, size_large, size):
    """Each grid dimension as a power of the size, from the two counted launches (constant when capped)."""
    out = []
    for g1, g2 in zip(small.grid, large.grid):
        p = math.log(g2 / g1) / math.log(size_large / size_small)
        out.append(max(1, int(round(g2 * (size / size_large) ** p))))
    return tuple(out)


def count(family, seed=0):
    """{version: (launches at sizes[0], launches at sizes[1], plain emulator seconds at sizes[1])}, each
    launches a tuple of KernelRecords (one for most versions)."""
    rng = np.random.default_rng(seed)
    small_in, large_in = (family.make(s, rng) for s in family.sizes)
    out = {}
    for v in family.versions:
        with profile() as prof_small:
            family.run(small_in, v)
        with profile() as prof_large:
            family.run(large_in, v)
        small, large = tuple(prof_small.kernels), tuple(prof_large.kernels)
        if not small or [k.name for k in small] != [k.name for k in large]:
            raise RuntimeError(f"{family.name} v{v}: the two sizes must launch the same kernels in the same order, "
                               f"got {[k.name for k in small]} and {[k.name for k in large]}")
        family.run(large_in, v)                 # warm the plain module, then time it
        t0 = time.perf_counter()
        family.run(large_in, v)
        plain = time.perf_counter() - t0
        out[v] = (small, large, plain)
    return out


def carry(small, large, size_small, size_large, size):
    """The record two counted launches of one kernel (at two sizes) imply at ``size``: every count and
    every grid dimension as a power of the size."""
    return extrapolate(small, large, size_small, size_large, size,
                       grid=_grid_at(small, large, size_small, size_large, size))


def at_size(family, small, large, size=None):
    """The record(s) the counted launches imply at ``size`` (default: the family's target): one record for one
    launch, a tuple for a tuple of launches."""
    size = family.target if size is None else size
    one = (lambda s, l: extrapolate_polynomial([s, l], family.sizes, size)) if family.affine else \
        (lambda s, l: carry(s, l, *family.sizes, size))
    if isinstance(small, (tuple, list)):
        return tuple(one(s, l) for s, l in zip(small, large))
    return one(small, large)


def _summed(metrics):
    """One launch's metrics, or the sum of several launches' counts (None where any launch's is unknown); the
    compiler's per-launch figures (``launch__*``: registers, shared memory) do not add up and are left out."""
    if len(metrics) == 1:
        return dict(metrics[0])
    total = {}
    for m in metrics:
        for key, value in m.items():
            if key.startswith("launch__"):
                continue
            if key in total and (total[key] is None or value is None):
                total[key] = None
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value
            else:
                total.setdefault(key, value)
    return total


def rows(gpu="H100", families=None, seed=0):
    """One dict per kernel version: counted, modelled (on ``gpu``) and measured (emulator) figures.

    ``counted_at_emulator_size`` holds every metric counted at the larger size (summed over the version's
    launches); the other counts are those carried to the target size. ``pipe`` says which compute roof the
    model used ("fp32" or "tensor"); ``modelled_seconds`` is the version's launches on the host's timeline
    (``time_model.timeline``: the host's 6.2 µs to issue each launch included)."""
    gpu = get_gpu(gpu)
    table = []
    for family in families or course_families():
        for v, (small, large, plain) in count(family, seed).items():
            bigs = at_size(family, small, large)
            flops = family.flops(family.target)
            pipe = family.pipe(v)
            preds = []
            for big in bigs:
                gets_flops = len(bigs) == 1 or big.name == family.flops_kernel
                preds.append(big.predict(gpu, flops=(flops or None) if gets_flops else None, pipe=pipe))
            seconds = timeline(preds)   # the host issues each launch: what CUDA events around the call measure
            m = _summed([big.metrics for big in bigs])
            dram = m["dram__bytes_read.sum"] + m["dram__bytes_write.sum"]
            table.append({
                "family": family.name, "version": v, "lesson": family.lesson,
                "kernel": " + ".join(big.name for big in bigs), "launches": len(bigs), "pipe": pipe,
                "size": family.size_label(family.target),
                "flops": flops, "dram_bytes": dram,
                "global_sectors": sum(m[f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum"]
                                      for op in ("ld", "st", "atom", "red")),
                "intensity": flops / dram if dram else math.inf,
                "modelled_seconds": seconds, "limiter": " + ".join(p.limiter for p in preds),
                "modelled_gflops": flops / seconds / 1e9, "modelled_dram_gbs": dram / seconds / 1e9,
                "emulator_seconds": plain, "emulator_size": family.size_label(family.sizes[1]),
                "counted_at_emulator_size": _summed([rec.metrics for rec in large]),
            })
    return table
