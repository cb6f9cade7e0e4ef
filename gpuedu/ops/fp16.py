"""The FP16 family: launchers of the FP16 kernels (check the arrays, allocate the output, size the grid,
launch), their ladders and their NumPy references. Introduced in lessons/07_mixed_precision.ipynb
(``from gpuedu.ops import fp16``); the tensor-core GEMMs in lessons/08_tensor_cores_bf16_tf32.ipynb.

Kernels: ``gpuedu/kernels/fp16_convert.cu`` (float <-> half), ``fp16_elementwise.cu`` (half / half2
axpy, ReLU, bias add), ``fp16_gemm.cu`` (GEMMs with FP16 storage), ``wmma_gemm.cu`` (tensor cores: ``wmma_matmul`` version 1 the plain
WMMA kernel; versions 2 and 3 the pipelined ones, also ``matmul``'s versions 4 and 5), ``mma_gemm.cu`` (tensor
cores in inline PTX: ``mma.sync``, ``ldmatrix``, ``cp.async``; ``matmul``'s versions 6-10), ``wgmma_gemm.cu``
(Hopper, sm_90a: TMA, ``wgmma``, mbarriers, warp specialisation; ``matmul``'s versions 11-13).

Versions are numbers, as in every ladder of the course: ``matmul``'s are fp16_gemm.cu's versions 1-3, then
the tensor cores through WMMA (4, 5: wmma_gemm.cu's ``wmma_gemm_kernel2_*`` and ``wmma_gemm_kernel3_*``), then
through PTX (6-10: mma_gemm.cu's ``mma_gemm_kernel6`` .. ``mma_gemm_kernel9`` and ``mma_gemm_kernel10_*``), then
Hopper's (11-13: wgmma_gemm.cu's ``wgmma_gemm_kernel11`` .. ``wgmma_gemm_kernel13``).
References: ``to_half_reference``, ``axpy_reference``, ``matmul_reference``, ... at the end of this module.

Every launcher takes GPUArrays (a NumPy array is copied to the device first) and returns a GPUArray;
``out=`` reuses a buffer.  Launches are asynchronous: ``.get()`` on the result waits for it.
``stream=`` (a ``pycuda.driver.Stream``) queues the launch on that stream instead of the default one;
then synchronise the stream before reading the result back.  A NumPy input is copied on the default
stream, which a stream made by ``drv.Stream()`` (a blocking one, flags 0) waits for before its next launch.
"""
import numpy as np

from .. import backend, kernels
from .. import launch as L

THREADS = 256                 # threads per block of the elementwise kernels
# hgemm_tiled's C tile per block (rows, columns) and its block shape, from fp16_gemm.cu
GEMM_TILE = (kernels.define("fp16_gemm", "TILE_M"), kernels.define("fp16_gemm", "TILE_N"))
GEMM_THREADS = (kernels.define("fp16_gemm", "THREADS_X"), kernels.define("fp16_gemm", "THREADS_Y"), 1)
NAIVE_TILE = 16               # block side of the naive GEMMs (one thread per element of C)


def _wmma(macro):
    return kernels.define("wmma_gemm", macro)


# wmma_gemm: a (BLOCK_M, BLOCK_N) tile of C per block, 2 x 2 warps of 16 x 16
WMMA_BLOCK_TILE = (_wmma("BLOCK_M"), _wmma("BLOCK_N"))
WMMA_THREADS = (32 * _wmma("WARPS_M") * _wmma("WARPS_N"), 1, 1)


def _pipelined_shared_bytes(version):
    """wmma_gemm.cu's V2_SHARED_BYTES for a pipelined version: STAGES x (A tile + B tile) halves x 2 bytes,
    a tile of ``wide`` rows of BK + PAD halves, or BK rows of ``wide`` + PAD halves, whichever is larger
    (V2_TILE_HALVES)."""
    bk, pad = _wmma(f"V{version}_BK"), _wmma("V2_PAD")

    def tile_halves(wide):
        return max(wide * (bk + pad), bk * (wide + pad))
    return _wmma(f"V{version}_STAGES") * (tile_halves(_wmma(f"V{version}_BM")) + tile_halves(_wmma(f"V{version}_BN"))) * 2


# wmma_gemm.cu's pipelined versions (V2_*, V3_*): version -> (C tile per block (rows, columns), bytes of
# dynamic shared memory, threads per block). All need more than the default 48 KB of shared memory per
# block: the launcher raises the kernel's limit.
WMMA_PIPELINED = {v: ((_wmma(f"V{v}_BM"), _wmma(f"V{v}_BN")), _pipelined_shared_bytes(v), _wmma(f"V{v}_THREADS"))
                  for v in (2, 3)}
WMMA_PIPELINED_THREADS = (_wmma("V2_THREADS"), 1, 1)   # versions 2 and 3 alike: 8 warps


def _mma(macro):
    return kernels.define("mma_gemm", macro)


def _mma_shared_bytes(bm, bn, bk, stages):
    """mma_gemm.cu's MMA_SHARED_BYTES: stages x (A slice + B slice) halves x 2 bytes (the swizzle needs no
    padding)."""
    return stages * (bm * bk + bk * bn) * 2


# mma_gemm.cu's versions (matmul's 6-10): version -> (C tile per block (rows, columns), threads per block,
# bytes of dynamic shared memory). Versions 6-8 stage one slice in static shared memory (0 here); 9 and 10
# keep MMA_STAGES and MMA10_STAGES slices, above the default 48 KB: the launcher raises the kernel's limit.
_MMA_SMALL = (_mma("MMA_BM"), _mma("MMA_BN"))
MMA_GEMMS = {
    **{v: (_MMA_SMALL, _mma("MMA_THREADS"), 0) for v in (6, 7, 8)},
    9: (_MMA_SMALL, _mma("MMA_THREADS"), _mma_shared_bytes(*_MMA_SMALL, _mma("MMA_BK"), _mma("MMA_STAGES"))),
    10: ((_mma("MMA10_BM"), _mma("MMA10_BN")), _mma("MMA10_THREADS"),
         _mma_shared_bytes(_mma("MMA10_BM"), _mma("MMA10_BN"), _mma("MMA10_BK"), _mma("MMA10_STAGES"))),
}
#: mma_gemm.cu's version that takes every layout (transpose_a, transpose_b); 6-9 take the plain one only.
MMA_LAYOUTS_VERSION = 10


def _wg(macro):
    return kernels.define("wgmma_gemm", macro)


# wgmma_gemm.cu's versions (matmul's 11-13, Hopper, sm_90a): version -> (C tile per block (rows, columns), threads
# per block). Their stages are as many as the device's shared memory holds (hopper_stages).
HOPPER_GEMMS = {
    11: ((_wg("WG_BM"), _wg("WG11_BN")), _wg("WG11_THREADS")),
    12: ((_wg("WG_BM"), _wg("WG12_BN")), _wg("WG12_THREADS")),
    13: ((_wg("WG_BM"), _wg("WG12_BN")), _wg("WG12_THREADS")),
}
#: The most stages a Hopper version's ring has (wgmma_gemm.cu's default: what an H100 / H200 holds).
HOPPER_MAX_STAGES = {v: _wg(f"WG{v}_STAGES") for v in HOPPER_GEMMS}
_WG_BK, _WG_ALIGN = _wg("WG_BK"), _wg("WG_ALIGN")
_WG13_STAGING = 64 * _wg("WG13_CHUNK_N") * 4


def hopper_shared_bytes(version, stages):
    """wgmma_gemm.cu's WG11/12/13_SHARED_BYTES for ``stages``: the 1024-byte alignment slack, the stages (A's
    BM x 64 and B's 64 x BN halves), the mbarriers (full, and empty for 12 and 13, 8 bytes each) and version 13's
    staging tiles of C (64 x 64 floats for each consumer) with each consumer's own mbarrier."""
    (bm, bn), _ = HOPPER_GEMMS[version]
    stage = (bm + bn) * _WG_BK * 2
    if version == 11:
        return _WG_ALIGN + stages * stage + stages * 8
    consumers = _wg("WG12_CONSUMERS")
    extra = consumers * (_WG13_STAGING + 8) if version == 13 else 0
    return _WG_ALIGN + stages * stage + stages * 16 + extra

#: ``matmul``'s ladder: version -> what it is. 1 and 2 are one thread per element of C (1 sums in FP16, to show
#: why not), 3 adds shared-memory tiles, 4 and 5 are the tensor cores through WMMA (wmma_gemm.cu's pipelined
#: versions 2 and 3), 6-10 through PTX (mma_gemm.cu), one idea per rung.
GEMM_VERSIONS = {1: "FP16 running sums (hgemm_naive_half_accum)", 2: "FP32 sums (hgemm_naive)",
                 3: "shared-memory tiles, FP32 sums (hgemm_tiled)",
                 4: "tensor cores, 128x128 tiles pipelined with cp.async (wmma_gemm_kernel2)",
                 5: "tensor cores, 128x256 tiles (wmma_gemm_kernel3)",
                 6: "mma.sync m16n8k16, fragments loaded lane by lane (mma_gemm_kernel6)",
                 7: "+ ldmatrix (mma_gemm_kernel7)",
                 8: "+ XOR-swizzled shared tiles, no bank conflicts (mma_gemm_kernel8)",
                 9: f"+ a {_mma('MMA_STAGES')}-stage cp.async pipeline (mma_gemm_kernel9)",
                 10: f"{MMA_GEMMS[10][0][0]}x{MMA_GEMMS[10][0][1]} tiles, "
                     f"{MMA_GEMMS[10][0][0] // _mma('MMA10_WARPS_M')}x{MMA_GEMMS[10][0][1] // _mma('MMA10_WARPS_N')} "
                     "per warp, every layout (mma_gemm_kernel10)",
                 11: f"Hopper: TMA loads into 128-byte-swizzled tiles, wgmma.mma_async from shared memory, "
                     f"{HOPPER_GEMMS[11][0][0]}x{HOPPER_GEMMS[11][0][1]} tiles, one warpgroup (wgmma_gemm_kernel11)",
                 12: f"+ a producer warpgroup and two consumers on full/empty mbarrier rings, "
                     f"{HOPPER_GEMMS[12][0][0]}x{HOPPER_GEMMS[12][0][1]} tiles (wgmma_gemm_kernel12)",
                 13: "+ persistent blocks walking grouped tiles, C out through a TMA store (wgmma_gemm_kernel13)"}
_GEMM_KERNELS = {1: "hgemm_naive_half_accum", 2: "hgemm_naive"}
_TENSOR = {4: 2, 5: 3}        # matmul version -> wmma_gemm.cu version
#: ``matmul``'s versions that run on the tensor cores.
TENSOR_VERSIONS = tuple(_TENSOR) + tuple(MMA_GEMMS) + tuple(HOPPER_GEMMS)
#: ``matmul``'s versions that take the plain layout only (a as M x K, b as K x N).
PLAIN_LAYOUT_VERSIONS = tuple(v for v in (*MMA_GEMMS, *HOPPER_GEMMS) if v != MMA_LAYOUTS_VERSION)


#: What to do with a device array of the wrong dtype: convert it on the device.
_HINT = {np.dtype(np.float16): "convert it with ops.fp16.to_half(x) (or x.astype(np.float16) on the host)",
         np.dtype(np.float32): "convert it with ops.fp16.to_float(x) (or x.astype(np.float32) on the host)"}


def _device(x, name, dtype, ndim=None):
    return L.device_array(x, name, dtype, ndim, hint=_HINT.get(np.dtype(dtype)))


def _pairs_grid(n):
    """Blocks for the half2 kernels: one thread per pair of elements, ceil(n / 2) threads."""
    return (max(1, L.ceil_div((n + 1) // 2, THREADS)), 1)


# ---- conversions ---------------------------------------------------------------------------------
def _convert(x, out, in_dtype, out_dtype, kernel, stream):
    """Launch one of fp16_convert.cu's one-thread-per-element conversions."""
    x = _device(x, "x", in_dtype)
    out = L.output(out, x.shape, out_dtype)
    f = L.kernel("fp16_convert", kernel, "PPi")
    L.launch(f, (max(1, L.ceil_div(x.size, THREADS)), 1), (THREADS, 1, 1), (L.ptr(out), L.ptr(x), L.i32(x.size)),
             stream)
    return out


def to_half(x, out=None, stream=None):
    """float32 -> float16 on the device (``__float2half_rn``: round to nearest even)."""
    return _convert(x, out, np.float32, np.float16, "float_to_half", stream)


def to_float(x, out=None, stream=None):
    """float16 -> float32 on the device (exact)."""
    return _convert(x, out, np.float16, np.float32, "half_to_float", stream)


def to_half_bits(x, out=None, stream=None):
    """float32 -> the uint16 bit patterns of float16, computed with integer operations (version 2)."""
    return _convert(x, out, np.float32, np.uint16, "float_to_half_bits", stream)


# ---- elementwise ---------------------------------------------------------------------------------
def axpy(a, x, y, version=2, stream=None):
    """y = a*x + y in place on float16 arrays (``a`` is rounded to half); returns ``y``.

    version 1: one ``__half`` per thread; version 2: one ``__half2`` (two elements) per thread.
    """
    if version not in (1, 2):
        raise ValueError(f"axpy version must be 1 (half) or 2 (half2), got {version!r}")
    if not L.is_device_array(y):
        raise TypeError("y is updated in place, so it must be a GPUArray: y = gpuarray.to_gpu(y_host)")
    x = _device(x, "x", np.float16)
    y = _device(y, "y", np.float16)
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    a = np.float32(a)
    if version == 1:
        f = L.kernel("fp16_elementwise", "half_axpy", "PPif")
        grid = (max(1, L.ceil_div(x.size, THREADS)), 1)
    else:
        f = L.kernel("fp16_elementwise", "half2_axpy", "PPif")
        grid = _pairs_grid(x.size)
    L.launch(f, grid, (THREADS, 1, 1), (L.ptr(y), L.ptr(x), L.i32(x.size), a), stream)
    return y


def relu(x, out=None, stream=None):
    """max(x, 0) on float16, two elements per thread."""
    x = _device(x, "x", np.float16)
    out = L.output(out, x.shape, np.float16)
    f = L.kernel("fp16_elementwise", "half2_relu", "PPi")
    L.launch(f, _pairs_grid(x.size), (THREADS, 1, 1), (L.ptr(out), L.ptr(x), L.i32(x.size)), stream)
    return out


def relu_backward(dy, z, out=None, stream=None):
    """dy where z > 0 else 0, on float16 (z: ReLU's forward input)."""
    dy = _device(dy, "dy", np.float16)
    z = _device(z, "z", np.float16)
    if dy.shape != z.shape:
        raise ValueError(f"dy and z must have the same shape, got {tuple(dy.shape)} and {tuple(z.shape)}")
    out = L.output(out, dy.shape, np.float16)
    f = L.kernel("fp16_elementwise", "half2_relu_backward", "PPPi")
    L.launch(f, _pairs_grid(dy.size), (THREADS, 1, 1), (L.ptr(out), L.ptr(dy), L.ptr(z), L.i32(dy.size)),
             stream)
    return out


def bias_add(x, bias, out=None, stream=None):
    """x[r, c] + bias[c] on float16 (``out`` may be ``x``: each thread reads its pair before writing it)."""
    x = _device(x, "x", np.float16, ndim=2)
    bias = _device(bias, "bias", np.float16, ndim=1)
    rows, cols = x.shape
    if bias.shape[0] != cols:
        raise ValueError(f"bias has {bias.shape[0]} entries but x has {cols} columns")
    out = L.output(out, x.shape, np.float16)
    f = L.kernel("fp16_elementwise", "half2_bias_add", "PPPii")
    L.launch(f, _pairs_grid(x.size), (THREADS, 1, 1), (L.ptr(out), L.ptr(x), L.ptr(bias), L.i32(rows), L.i32(cols)),
             stream)
    return out


# ---- GEMMs ---------------------------------------------------------------------------------------
def _operand(x, name, transpose):
    """The logical matrix op(x) of a row-major stored x: its (rows, cols) and its (row, col) strides."""
    r, c = x.shape
    return ((c, r), (1, c)) if transpose else ((r, c), (c, 1))


def matmul(a, b, transpose_a=False, transpose_b=False, alpha=1.0, out=None, out_dtype=np.float16,
           version=3, stream=None):
    """C = alpha * op(a) @ op(b) with float16 a, b and FP32 accumulation (``version=1``: the running sum in
    FP16, to show why not); ``GEMM_VERSIONS`` lists the ladder.

    ``transpose_a=True`` multiplies by a's transpose without copying it (the kernel reads a with
    swapped strides).  ``out_dtype`` float16 (default) or float32 (versions 3 and up).  ``version=4``:
    the tensor cores (wmma_gemm.cu version 2, 128x128 tiles pipelined with cp.async); ``version=5``:
    128x256 tiles (more reuse per fragment, more work wasted on the edges of small matrices).
    Versions 6-10 (mma_gemm.cu, sm_80 and later) program the tensor cores in PTX, one idea per rung:
    ``mma.sync`` (6), ``ldmatrix`` (7), a swizzled shared layout (8), a ``cp.async`` pipeline (9), a
    64x64 warp tile (10, the top rung, which ``nn.amp`` uses; its speed against cuBLAS waits for a GPU
    measurement). 6-9 take the plain layout only; 10 takes every ``transpose_a`` / ``transpose_b``.
    Versions 11-13 (wgmma_gemm.cu, Hopper only: compiled for sm_90a, refused on any other GPU) copy tiles with
    TMA and multiply with ``wgmma``: one warpgroup (11), a producer warpgroup and two consumers (12), persistent
    blocks with a TMA store of C (13); the plain layout only. Every version takes any M, N, K, but for 11-13
    a tensor map needs rows a multiple of 16 bytes apart: K and N must be multiples of 8 (a ValueError says
    so; pad the matrices with zeros, or use version 10).
    """
    if isinstance(version, bool) or version not in GEMM_VERSIONS:
        raise ValueError(f"unknown GEMM version {version!r}; the versions are numbers: "
                         + "; ".join(f"{v}: {what}" for v, what in GEMM_VERSIONS.items()))
    out_dtype = np.dtype(out_dtype)
    if out_dtype not in (np.dtype(np.float16), np.dtype(np.float32)):
        raise ValueError(f"out_dtype must be float16 or float32, got {out_dtype}")
    if out_dtype == np.float32 and version not in (3, *TENSOR_VERSIONS):
        raise ValueError("a float32 output is available with versions 3 (tiled) and 4-13 (tensor cores) only")
    if version in PLAIN_LAYOUT_VERSIONS and (transpose_a or transpose_b):
        which = ("transpose_a and transpose_b were" if transpose_a and transpose_b
                 else "transpose_a was" if transpose_a else "transpose_b was")
        raise ValueError(f"version {version} multiplies the plain layout only (its kernel stages a as M x K and b "
                         f"as K x N), but {which} asked for: use version {MMA_LAYOUTS_VERSION}, which reads "
                         "either operand transposed without a copy")
    a = _device(a, "a", np.float16, ndim=2)
    b = _device(b, "b", np.float16, ndim=2)
    (m, k), (a_rs, a_cs) = _operand(a, "a", transpose_a)
    (k2, n), (b_rs, b_cs) = _operand(b, "b", transpose_b)
    if k != k2:
        raise ValueError(f"inner dimensions differ: op(a) is {m}x{k} and op(b) is {k2}x{n}")
    out = L.output(out, (m, n), out_dtype)
    if version in _TENSOR:
        return _wmma_pipelined(_TENSOR[version], a, b, transpose_a, transpose_b, alpha, out, m, n, k, stream)
    if version in MMA_GEMMS:
        return _mma_gemm(version, a, b, transpose_a, transpose_b, alpha, out, m, n, k, stream)
    if version in HOPPER_GEMMS:
        return _hopper_gemm(version, a, b, alpha, out, m, n, k, stream)
    if version == 3:
        name = "hgemm_tiled_f32out" if out_dtype == np.float32 else "hgemm_tiled"
        (tile_m, tile_n), block = GEMM_TILE, GEMM_THREADS
    else:
        name, tile_m, tile_n, block = _GEMM_KERNELS[version], NAIVE_TILE, NAIVE_TILE, (NAIVE_TILE, NAIVE_TILE, 1)
    f = L.kernel("fp16_gemm", name, "PPPiiiiiiif")
    grid = (max(1, L.ceil_div(n, tile_n)), max(1, L.ceil_div(m, tile_m)))
    L.launch(f, grid, block, (L.ptr(out), L.ptr(a), L.ptr(b), L.i32(m), L.i32(n), L.i32(k), L.i32(a_rs),
                              L.i32(a_cs), L.i32(b_rs), L.i32(b_cs), np.float32(alpha)), stream)
    return out


def wmma_matmul(a, b, out=None, version=1, stream=None):
    """C = a @ b on tensor cores (WMMA 16x16x16): float16 a [M, K], b [K, N]; float32 C [M, N].
    Any M, N, K: the kernel pads the edge tiles with zeros.

    version 1: the plain kernel (a 32x32 tile per block, one fragment per warp); versions 2 and 3:
    the pipelined ones (``matmul(a, b, out_dtype=np.float32, version=4)`` or ``version=5``, which also
    transpose and scale).
    """
    if version not in (1, 2, 3):
        raise ValueError(f"wmma_matmul version must be 1 (plain WMMA), 2 or 3 (pipelined), got {version!r}")
    a = _device(a, "a", np.float16, ndim=2)
    b = _device(b, "b", np.float16, ndim=2)
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: a is {m}x{k} and b is {k2}x{n}")
    out = L.output(out, (m, n), np.float32)
    if version in (2, 3):
        return _wmma_pipelined(version, a, b, False, False, 1.0, out, m, n, k, stream)
    f = L.kernel("wmma_gemm", "wmma_gemm_kernel1", "PPPiii")
    grid = (max(1, L.ceil_div(n, WMMA_BLOCK_TILE[1])), max(1, L.ceil_div(m, WMMA_BLOCK_TILE[0])))
    L.launch(f, grid, WMMA_THREADS, (L.ptr(out), L.ptr(a), L.ptr(b), L.i32(m), L.i32(n), L.i32(k)), stream)
    return out


_shared_raised = set()


def _wmma_pipelined_function(version, transpose_a, transpose_b):
    """wmma_gemm_kernel{version}_{n,t}{n,t}, prepared, with its dynamic shared memory limit raised once."""
    layout = ("t" if transpose_a else "n") + ("t" if transpose_b else "n")
    name = f"wmma_gemm_kernel{version}_{layout}"
    f = L.kernel("wmma_gemm", f"wmma_gemm_kernel{version}_{layout}", "PPPiiiiifi")
    key = (backend.active().name, name)
    if key not in _shared_raised:
        # Above 48 KB a kernel must opt in (cuFuncSetAttribute), or the launch fails.
        drv = backend.active().driver
        f.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, WMMA_PIPELINED[version][1])
        _shared_raised.add(key)
    return f


def _nothing_to_multiply(out, m, n, k, stream):
    """True (with ``out`` already final) for an empty product: an empty C, or K = 0."""
    if m == 0 or n == 0:
        return True   # nothing to write (and no grid of zero blocks to launch)
    if k == 0:
        # a sum of no products (and a and b have no device memory to point at): zeros, by a memset on the
        # caller's stream, in order with the launches around it (fill has no float16 kernel in PyCUDA)
        L.zero(out, stream)
        return True
    return False


def _tensor_args(out, a, b, m, n, k, alpha):
    """wmma_gemm.cu's and mma_gemm.cu's arguments after the kernel: (C, A, B, M, N, K, lda, ldb, alpha, c_half)."""
    c_half = out.dtype == np.float16
    # leading dimensions: the stored rows' lengths (a is stored K x M when transposed)
    return (L.ptr(out), L.ptr(a), L.ptr(b), L.i32(m), L.i32(n), L.i32(k), L.i32(a.shape[1]), L.i32(b.shape[1]),
            np.float32(alpha), L.i32(c_half))


def _wmma_pipelined(version, a, b, transpose_a, transpose_b, alpha, out, m, n, k, stream=None):
    """Launch wmma_gemm.cu version 2 or 3 on checked device arrays: out = alpha * op(a) @ op(b)."""
    if _nothing_to_multiply(out, m, n, k, stream):
        return out
    (tile_m, tile_n), shared, threads = WMMA_PIPELINED[version]
    f = _wmma_pipelined_function(version, transpose_a, transpose_b)
    grid = (L.ceil_div(n, tile_n), L.ceil_div(m, tile_m))
    L.launch(f, grid, (threads, 1, 1), _tensor_args(out, a, b, m, n, k, alpha), stream, shared_size=shared)
    return out


_capability = {}


def _require_sm80(version):
    """mma_gemm.cu's instructions (mma.sync.m16n8k16 with FP32 sums, cp.async) need compute capability 8.0:
    refuse its versions on an older GPU before nvcc does, saying what to use instead."""
    active = backend.active()
    cc = _capability.get(active.name)
    if cc is None:
        cc = _capability[active.name] = tuple(active.driver.Context.get_device().compute_capability())
    if cc < (8, 0):
        raise ValueError(f"version {version} runs mma.sync.m16n8k16 and cp.async, which need a GPU of compute "
                         f"capability 8.0 or later (sm_80: A100, RTX 30xx and newer), and this one is "
                         f"sm_{cc[0]}{cc[1]}: use version 4 or 5 (WMMA), which run from sm_70")


def tensor_gemm_version():
    """The top tensor-core rung of ``matmul`` the active device runs: 10 from sm_80 on (the emulator is an
    sm_80), 4 (WMMA) on an older GPU, which lacks mma_gemm.cu's instructions."""
    try:
        _require_sm80(MMA_LAYOUTS_VERSION)
    except ValueError:
        return 4
    return MMA_LAYOUTS_VERSION


def _mma_function(version, transpose_a, transpose_b):
    """mma_gemm.cu's kernel of ``version`` (10: of the layout), prepared, with its dynamic shared memory
    limit raised once where it needs more than the default 48 KB."""
    _require_sm80(version)
    if version == MMA_LAYOUTS_VERSION:
        layout = ("t" if transpose_a else "n") + ("t" if transpose_b else "n")
        f = L.kernel("mma_gemm", f"mma_gemm_kernel10_{layout}", "PPPiiiiifi")
        name = f"mma_gemm_kernel10_{layout}"
    else:
        f = L.kernel("mma_gemm", f"mma_gemm_kernel{version}", "PPPiiiiifi")
        name = f"mma_gemm_kernel{version}"
    shared = MMA_GEMMS[version][2]
    key = (backend.active().name, name)
    if shared and key not in _shared_raised:
        # Above 48 KB a kernel must opt in (cuFuncSetAttribute), or the launch fails.
        drv = backend.active().driver
        f.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
        _shared_raised.add(key)
    return f


def _mma_gemm(version, a, b, transpose_a, transpose_b, alpha, out, m, n, k, stream=None):
    """Launch mma_gemm.cu's version 6-10 on checked device arrays: out = alpha * op(a) @ op(b)."""
    if _nothing_to_multiply(out, m, n, k, stream):
        return out
    (tile_m, tile_n), threads, shared = MMA_GEMMS[version]
    f = _mma_function(version, transpose_a, transpose_b)
    grid = (L.ceil_div(n, tile_n), L.ceil_div(m, tile_m))
    L.launch(f, grid, (threads, 1, 1), _tensor_args(out, a, b, m, n, k, alpha), stream, shared_size=shared)
    return out


def _require_sm90a(version):
    """wgmma_gemm.cu is built for sm_90a, the architecture-specific target of compute capability 9.0 (H100, H200,
    GH200): refuse its versions on any other GPU before nvcc does. The emulator runs sm_90a modules whatever
    device it reports (it says sm_80)."""
    active = backend.active()
    if active.name == "cpu":
        return
    cc = _capability.get(active.name)
    if cc is None:
        cc = _capability[active.name] = tuple(active.driver.Context.get_device().compute_capability())
    if cc != (9, 0):
        raise ValueError(f"version {version} runs Hopper's TMA and wgmma instructions, built for sm_90a, which runs "
                         f"on a GPU of compute capability 9.0 only (H100, H200, GH200), and this one is "
                         f"sm_{cc[0]}{cc[1]}: use version {tensor_gemm_version()}")


def _device_attribute(name):
    active = backend.active()
    drv = active.driver
    return int(drv.Context.get_device().get_attribute(getattr(drv.device_attribute, name)))


def hopper_stages(version):
    """The stages of version ``version``'s ring on the active device: as many as its shared memory per block
    holds (MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), up to HOPPER_MAX_STAGES (an H200's 227 KB holds 4 of each; the
    emulator's 96 KB, 2 of version 11's and 1 of 12's and 13's)."""
    limit = _device_attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
    stages = HOPPER_MAX_STAGES[version]
    while stages > 1 and hopper_shared_bytes(version, stages) > limit:
        stages -= 1
    if hopper_shared_bytes(version, stages) > limit:
        raise ValueError(f"version {version} needs {hopper_shared_bytes(version, 1)} bytes of shared memory for one "
                         f"stage, and this device gives a block at most {limit}")
    return stages


def _pitch_problem(name, x):
    """Why a tensor map cannot describe device array ``x`` (its rows must be a multiple of 16 bytes apart, its
    address 16-byte aligned), or None."""
    rows, cols = x.shape
    if cols * x.dtype.itemsize % 16:
        return (f"{name} is {rows}x{cols} {x.dtype}: its rows are {cols * x.dtype.itemsize} bytes apart, and a TMA "
                f"tensor map needs a multiple of 16 bytes ({16 // x.dtype.itemsize} elements)")
    if int(x.gpudata) % 16:
        return f"{name} starts at 0x{int(x.gpudata):x}, and a TMA tensor map needs a 16-byte aligned address"
    return None


def _hopper_function(version, stages):
    """wgmma_gemm.cu's kernel of ``version``, built for sm_90a with its ring of ``stages``, prepared, with its
    dynamic shared memory limit raised once."""
    name = f"wgmma_gemm_kernel{version}"
    options = (f"-DWG{version}_STAGES={stages}",)
    # T: a tensor map, a 128-byte struct passed by value (the kernel is left unprepared, for launch_by_value)
    if version == 13:
        f = L.kernel("wgmma_gemm", "wgmma_gemm_kernel13", "TTTiiifi", options, arch="sm_90a")
    else:
        f = L.kernel("wgmma_gemm", f"wgmma_gemm_kernel{version}", "TTPiiifi", options, arch="sm_90a")
    key = (backend.active().name, name, stages)
    if key not in _shared_raised:
        # Above 48 KB a kernel must opt in (cuFuncSetAttribute), or the launch fails.
        drv = backend.active().driver
        f.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, hopper_shared_bytes(version, stages))
        _shared_raised.add(key)
    return f


def _hopper_gemm(version, a, b, alpha, out, m, n, k, stream=None):
    """Launch wgmma_gemm.cu's version 11-13 on checked device arrays: out = alpha * a @ b."""
    _require_sm90a(version)
    if _nothing_to_multiply(out, m, n, k, stream):
        return out
    problems = [p for p in (_pitch_problem("a", a), _pitch_problem("b", b),
                            _pitch_problem("out", out) if version == 13 else None) if p]
    if problems:
        raise ValueError(f"version {version} copies tiles with TMA, and " + "; ".join(problems) + ". Pad K and N to "
                         f"multiples of 8 with zeros (the product is unchanged where it is defined), or use version "
                         f"{MMA_LAYOUTS_VERSION}, which takes any M, N, K")
    from .. import tma
    (tile_m, tile_n), threads = HOPPER_GEMMS[version]
    stages = hopper_stages(version)
    f = _hopper_function(version, stages)
    # A's tiles: BM rows x 64 k (128 bytes: the swizzle's span); B's: 64 k x 64 columns, BN / 64 boxes a slice
    a_map = tma.tensor_map(a, box=(tile_m, _WG_BK), swizzle=128)
    b_map = tma.tensor_map(b, box=(_WG_BK, _wg("WG_BOX_N")), swizzle=128)
    tiles = L.ceil_div(m, tile_m) * L.ceil_div(n, tile_n)
    scalars = (L.i32(m), L.i32(n), L.i32(k), np.float32(alpha), L.i32(out.dtype == np.float16))
    if version == 13:
        # C's map: boxes of 64 rows x WG13_CHUNK_N columns, each consumer's staging tile
        c_map = tma.tensor_map(out, box=(64, _wg("WG13_CHUNK_N")), swizzle=0)
        grid = (min(tiles, _device_attribute("MULTIPROCESSOR_COUNT")), 1)   # persistent: about one block an SM
        args = (a_map, b_map, c_map, *scalars)
    else:
        grid = (L.ceil_div(n, tile_n), L.ceil_div(m, tile_m))
        args = (a_map, b_map, out.gpudata, *scalars)
    # the tensor maps first: a CUtensorMap is 64-byte aligned, and PyCUDA packs the arguments one after another
    L.launch_by_value(f, grid, (threads, 1, 1), args, stream, shared_size=hopper_shared_bytes(version, stages))
    return out


# ---- NumPy references ----------------------------------------------------------------------------
# ``numpy.float16`` is IEEE-754 binary16 with round-to-nearest-even, the same format and rounding as
# CUDA's ``__half``, so for the elementwise kernels the reference is bit-exact.  For the GEMMs with
# FP32 accumulation only the order of the sums differs, so they are compared with a tolerance.

#: Facts about binary16 (what ``np.finfo(np.float16)`` says, spelled out for the lesson).
HALF_MAX = float(np.finfo(np.float16).max)                  # 65504
HALF_EPS = float(np.finfo(np.float16).eps)                  # 2**-10, the gap after 1.0
HALF_MIN_NORMAL = float(np.finfo(np.float16).tiny)          # 2**-14
HALF_MIN_SUBNORMAL = float(np.float16(2.0 ** -24))          # the smallest positive half


def to_half_reference(x):
    """float32 -> float16, round to nearest even (what ``__float2half_rn`` does); too large -> Inf."""
    with np.errstate(over="ignore"):   # overflowing to Inf is the defined result, not an accident
        return np.asarray(x, dtype=np.float32).astype(np.float16)


def to_half_bits_reference(x):
    """The 16-bit patterns of ``to_half_reference(x)``, as uint16."""
    return to_half_reference(x).view(np.uint16)


def to_bfloat16_bits_reference(x):
    """float32 -> the uint16 bit patterns of the nearest bfloat16s (ties to even, as ``__float2bfloat16_rn``;
    too large -> Inf; every NaN -> 0x7FFF). NumPy has no bfloat16 type, so bfloat16 arrays are these patterns:
    a float32's upper 16 bits, rounded on the lower 16 (lesson 08)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16          # add just under half, plus the kept last bit
    return np.where(np.isnan(np.asarray(x, dtype=np.float32)), 0x7FFF, rounded & 0xFFFF).astype(np.uint16)


def bfloat16_bits_to_float(bits):
    """uint16 bfloat16 bit patterns -> float32, exactly (the pattern becomes a float32's upper half)."""
    bits = np.asarray(bits)
    if bits.dtype != np.uint16:
        raise TypeError(f"bfloat16 bit patterns are uint16, got {bits.dtype}")
    return (bits.astype(np.uint32) << 16).view(np.float32)


def axpy_reference(a, x, y):
    """a*x + y with a single rounding to float16, as ``__hfma`` does (``a`` is first rounded to half).

    Why float64 suffices: a*x has at most 22 significant bits, and whenever the exact a*x + y needs
    more than 53 bits, the smaller term is far below the result's half-ulp, so the double result
    rounds to the same half.
    """
    a16 = np.float16(a)
    exact = np.float64(a16) * np.asarray(x, np.float64) + np.asarray(y, np.float64)
    return exact.astype(np.float16)


def relu_reference(x):
    return np.maximum(np.asarray(x, np.float16), np.float16(0))


def relu_backward_reference(dy, z):
    """dy where z > 0, else 0."""
    return np.where(np.asarray(z, np.float16) > 0, np.asarray(dy, np.float16), np.float16(0))


def bias_add_reference(x, bias):
    """x + bias broadcast over rows, rounded to half (numpy adds halves with one rounding too)."""
    return (np.asarray(x, np.float16) + np.asarray(bias, np.float16)).astype(np.float16)


def matmul_reference(a, b, alpha=1.0, out_dtype=np.float16):
    """alpha * a @ b of two float16 matrices, summed exactly (float64), then rounded to ``out_dtype``."""
    exact = alpha * (np.asarray(a, np.float64) @ np.asarray(b, np.float64))
    return exact.astype(np.float32).astype(out_dtype)


def matmul_half_accum_reference(a, b, alpha=1.0):
    """What a GEMM that keeps its running sum in float16 computes: for k = 0..K-1,
    ``s = fma(a[:, k], b[k, :], s)`` rounded to half every step (bit-exact with ``__hfma``)."""
    a = np.asarray(a, np.float16)
    b = np.asarray(b, np.float16)
    s = np.zeros((a.shape[0], b.shape[1]), np.float16)
    for k in range(a.shape[1]):
        exact = a[:, k, None].astype(np.float64) * b[None, k, :].astype(np.float64) + s.astype(np.float64)
        s = exact.astype(np.float16)
    return (np.float32(alpha) * s.astype(np.float32)).astype(np.float16)


def matmul_tolerance(a, b, alpha=1.0, out_dtype=np.float16):
    """An elementwise bound on |kernel - matmul_reference(a, b)|: one rounding of the output (a full ulp, as an
    FP32 sum that differs slightly from the exact one may round the other way) plus FP32
    accumulation error, K * 2**-24 * sum_k |a_ik b_kj|."""
    exact = np.abs(alpha) * np.abs(np.asarray(a, np.float64) @ np.asarray(b, np.float64))
    magnitude = np.abs(alpha) * (np.abs(np.asarray(a, np.float64)) @ np.abs(np.asarray(b, np.float64)))
    k = np.asarray(a).shape[1]
    unit = 2.0 ** -10 if np.dtype(out_dtype) == np.float16 else 2.0 ** -23
    tiny = HALF_MIN_SUBNORMAL if np.dtype(out_dtype) == np.float16 else 0.0
    return unit * exact + (k + 1) * 2.0 ** -24 * magnitude + tiny
