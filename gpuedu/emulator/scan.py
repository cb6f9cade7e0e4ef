"""``pycuda.scan``: prefix scans (``InclusiveScanKernel``, ``ExclusiveScanKernel``) with any associative C operator.

``InclusiveScanKernel(np.int32, "a+b")(x)`` replaces ``x`` with its running sums (``np.cumsum``);
``ExclusiveScanKernel(np.int32, "a+b", "0")`` with the sums of the elements before each one. The generated
CUDA C (``print(kernel.source)``) scans in three launches, a classic chunked scan:

1. the input is cut into ``chunks`` consecutive pieces, one per thread; each thread scans its piece in order
   and writes its piece's total;
2. one thread scans those totals (inclusively), so total ``t`` combines pieces ``0..t``;
3. every thread but the first combines the total of the pieces before its own into each of its results.

Indices are 64-bit, so an array may have more than 2**32 elements. ``scan_expr`` must be associative (the
pieces are combined in a different grouping than a sequential loop would use), as in PyCUDA.
"""
import numpy as np

from .tools import dtype_to_ctype

__all__ = ["InclusiveScanKernel", "ExclusiveScanKernel"]

THREADS_PER_BLOCK = 256
MAX_CHUNKS = 64 * THREADS_PER_BLOCK    # pieces scanned side by side; step 2 scans this many totals
MIN_CHUNK = 1024                       # elements a piece holds at least, where the input allows


def _scan_source(prefix, ctype, scan_expr, neutral, preamble, exclusive):
    if exclusive:
        first_pass = f"""  scan_type acc = {neutral};
  for (unsigned long long i = start; i < end; ++i)
  {{
    scan_type value = in[i];
    out[i] = acc;            // what the elements before i combine to
    acc = {prefix}_op(acc, value);
  }}"""
    else:
        first_pass = """  scan_type acc = in[start];
  out[start] = acc;
  for (unsigned long long i = start + 1; i < end; ++i)
  {
    acc = """ + prefix + """_op(acc, in[i]);
    out[i] = acc;            // what the elements up to i combine to
  }"""
    return f"""{preamble}
typedef {ctype} scan_type;

__device__ scan_type {prefix}_op(scan_type a, scan_type b)
{{
  return ({scan_expr});
}}

// 1. each thread scans its own piece [start, end) and writes the piece's total
extern "C" __global__ void {prefix}_pieces(const scan_type *in, scan_type *out, scan_type *totals,
                                          unsigned long long n, unsigned long long chunk,
                                          unsigned long long chunks)
{{
  unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= chunks)
    return;
  unsigned long long start = t * chunk;
  unsigned long long end = start + chunk < n ? start + chunk : n;
{first_pass}
  totals[t] = acc;
}}

// 2. one thread: totals[t] becomes the combination of pieces 0..t
extern "C" __global__ void {prefix}_totals(scan_type *totals, unsigned long long chunks)
{{
  if (threadIdx.x != 0 || blockIdx.x != 0)
    return;
  for (unsigned long long t = 1; t < chunks; ++t)
    totals[t] = {prefix}_op(totals[t - 1], totals[t]);
}}

// 3. each piece but the first takes in what the pieces before it combine to
extern "C" __global__ void {prefix}_carry(scan_type *out, const scan_type *totals, unsigned long long n,
                                         unsigned long long chunk, unsigned long long chunks)
{{
  unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t == 0 || t >= chunks)
    return;
  scan_type carry = totals[t - 1];
  unsigned long long start = t * chunk;
  unsigned long long end = start + chunk < n ? start + chunk : n;
  for (unsigned long long i = start; i < end; ++i)
    out[i] = {prefix}_op(carry, out[i]);
}}
"""


class _ScanKernelBase:
    _exclusive = False

    def __init__(self, dtype, scan_expr, neutral=None, name_prefix="scan", options=None, preamble="",
                 devices=None):
        from .compiler import SourceModule
        if self._exclusive and neutral is None:
            raise ValueError("neutral element is required for exclusive scan")
        self.dtype = np.dtype(dtype)
        self.neutral = neutral
        self.name_prefix = name_prefix
        self.source = _scan_source(name_prefix, dtype_to_ctype(self.dtype), scan_expr, neutral, preamble,
                                   self._exclusive)
        module = SourceModule(self.source, options=options, no_extern_c=True)
        self._pieces = module.get_function(name_prefix + "_pieces")
        self._totals = module.get_function(name_prefix + "_totals")
        self._carry = module.get_function(name_prefix + "_carry")

    def __call__(self, input_ary, output_ary=None, allocator=None, stream=None):
        """Scan ``input_ary`` into ``output_ary`` (default: in place; ``"new"``: a new array); returns it."""
        from .gpuarray import GPUArray, empty_like
        if not isinstance(input_ary, GPUArray):
            raise TypeError(f"a scan kernel takes a GPUArray, got {type(input_ary).__name__}")
        allocator = allocator or input_ary.allocator
        if output_ary is None:
            output_ary = input_ary
        elif isinstance(output_ary, str) and output_ary == "new":
            output_ary = empty_like(input_ary)
        if input_ary.shape != output_ary.shape:
            raise ValueError("input and output must have the same shape")
        if input_ary.dtype != self.dtype or output_ary.dtype != self.dtype:
            raise TypeError(f"this scan kernel works on {self.dtype}; got {input_ary.dtype} and {output_ary.dtype}")
        if not (input_ary.flags.forc and output_ary.flags.forc):
            raise RuntimeError("ScanKernel cannot deal with non-contiguous arrays")
        if len(input_ary.shape) != 1:
            raise ValueError(f"a scan runs over a 1-d array, got shape {input_ary.shape}")
        n = input_ary.size
        if not n:
            return output_ary
        chunks = max(1, min(MAX_CHUNKS, n // MIN_CHUNK))
        chunk = -(-n // chunks)
        chunks = -(-n // chunk)
        totals = GPUArray((chunks,), self.dtype, allocator=allocator)
        grid, block = (-(-chunks // THREADS_PER_BLOCK), 1), (THREADS_PER_BLOCK, 1, 1)
        src, dst = np.uintp(int(input_ary.gpudata)), np.uintp(int(output_ary.gpudata))
        n, chunk, chunks = np.uint64(n), np.uint64(chunk), np.uint64(chunks)
        self._pieces(src, dst, totals.gpudata, n, chunk, chunks, grid=grid, block=block, stream=stream)
        if chunks > 1:
            self._totals(totals.gpudata, chunks, grid=(1, 1), block=(1, 1, 1), stream=stream)
            self._carry(dst, totals.gpudata, n, chunk, chunks, grid=grid, block=block, stream=stream)
        return output_ary


class InclusiveScanKernel(_ScanKernelBase):
    """``out[i] = in[0] op in[1] op ... op in[i]``."""


class ExclusiveScanKernel(_ScanKernelBase):
    """``out[i] = neutral op in[0] op ... op in[i-1]`` (``out[0] = neutral``)."""
    _exclusive = True
