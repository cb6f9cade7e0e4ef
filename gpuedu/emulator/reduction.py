"""``pycuda.reduction.ReductionKernel``: map every element, then combine them all into one value.

``ReductionKernel(np.float32, neutral="0", reduce_expr="a+b", map_expr="x[i]*y[i]",
arguments="float *x, float *y")`` is a dot product.  It generates CUDA C for a
two-stage reduction, compiled with ``SourceModule``:

1. ``BLOCK_SIZE`` threads per block; each thread folds ``seq_count`` mapped elements
   (a strided sequential loop), then the block combines its threads' values with a
   tree in shared memory, halving the active threads each step, with a
   ``__syncthreads()`` between steps.  Each block writes one partial result.
2. One block reduces the partial results the same way.

The call returns a 0-d GPUArray, as PyCUDA's does.  As in PyCUDA, the generated source includes
``<pycuda-complex.hpp>``: ``ReductionKernel(np.complex64, "0", "a+b", arguments="pycuda::complex<float> *z")``
sums complex numbers.  ``print(kernel.stage1_source)``
shows the generated code.
"""
import numpy as np

from .elementwise import ScalarArg, VectorArg, check_array_argument, check_call, parse_arguments
from .tools import context_dependent_memoize, dtype_to_ctype

__all__ = ["ReductionKernel", "VectorArg", "ScalarArg", "get_sum_kernel", "get_dot_kernel"]

BLOCK_SIZE = 512     # threads per block, a power of two (the tree halves it)
MAX_BLOCKS = 64      # stage-1 blocks; stage 2 reduces at most this many partials


def _reduction_source(name, out_ctype, arguments, neutral, reduce_expr, map_expr, preamble):
    declarations = ", ".join(a.declarator() for a in arguments)
    return f"""#include <pycuda-complex.hpp>

#define BLOCK_SIZE {BLOCK_SIZE}
#define READ_AND_MAP(i) ({map_expr})
#define REDUCE(a, b) ({reduce_expr})

{preamble}

typedef {out_ctype} out_type;

__global__ void {name}(out_type *out, {declarations}, unsigned long long seq_count, unsigned long long n)
{{
  __shared__ out_type sdata[BLOCK_SIZE];
  unsigned int tid = threadIdx.x;

  // Each block owns BLOCK_SIZE * seq_count consecutive elements; thread tid reads
  // elements tid, tid + BLOCK_SIZE, ... of them (neighbouring threads, neighbouring
  // addresses) and folds them into its own accumulator.
  // 64-bit indices: an input may have more than 2**32 elements.
  unsigned long long i = (unsigned long long)blockIdx.x * BLOCK_SIZE * seq_count + tid;
  out_type acc = {neutral};
  for (unsigned long long s = 0; s < seq_count; ++s)
  {{
    if (i >= n)  // the last block's range runs past the end of the input
      break;
    acc = REDUCE(acc, READ_AND_MAP(i));
    i += BLOCK_SIZE;
  }}
  sdata[tid] = acc;
  __syncthreads();  // every thread's value is in shared memory before any is read

  // Tree: at each step the lower half adds in the upper half, until one value is left.
  for (unsigned int half = BLOCK_SIZE / 2; half > 0; half /= 2)
  {{
    if (tid < half)
      sdata[tid] = REDUCE(sdata[tid], sdata[tid + half]);
    __syncthreads();  // this step's writes land before the next step reads them
  }}

  if (tid == 0)
    out[blockIdx.x] = sdata[0];
}}
"""


def _compile(source, name, keep, options):
    from .compiler import SourceModule
    return SourceModule(source, options=options, keep=keep).get_function(name)


class ReductionKernel:
    """``kernel(*args, stream=None, allocator=None)`` -> 0-d GPUArray of ``dtype_out``."""

    def __init__(self, dtype_out, neutral, reduce_expr, map_expr=None, arguments=None,
                 name="reduce_kernel", keep=False, options=None, preamble="", allocator=None):
        if arguments is None:
            raise ValueError("ReductionKernel needs arguments, e.g. arguments='float *x'")
        self.dtype_out = np.dtype(dtype_out)
        self.arguments = parse_arguments(arguments)
        if not any(isinstance(a, VectorArg) for a in self.arguments):
            raise ValueError("ReductionKernel needs at least one pointer argument to reduce over")
        if map_expr is None:
            vectors = [a for a in self.arguments if isinstance(a, VectorArg)]
            if len(vectors) != 1:
                raise ValueError("map_expr is required when there is more than one pointer argument")
            map_expr = f"{vectors[0].name}[i]"
        self.name = name
        self.allocator = allocator
        out_ctype = dtype_to_ctype(self.dtype_out)
        self.stage1_source = _reduction_source(name + "_stage1", out_ctype, self.arguments, neutral,
                                               reduce_expr, map_expr, preamble)
        # Stage 2 reads the partial results, which are already mapped.
        self.stage2_source = _reduction_source(name + "_stage2", out_ctype,
                                               [VectorArg(self.dtype_out, "pdata")], neutral,
                                               reduce_expr, "pdata[i]", preamble)
        self._stage1 = _compile(self.stage1_source, name + "_stage1", keep, options)
        self._stage2 = _compile(self.stage2_source, name + "_stage2", keep, options)

    def __call__(self, *args, stream=None, allocator=None, out=None, **kwargs):
        from .gpuarray import GPUArray

        check_call(self.name, self.arguments, args, kwargs, "ReductionKernel takes stream=, allocator= and out=")
        invocation, sizes = [], []
        for value, decl in zip(args, self.arguments):
            if isinstance(decl, VectorArg):
                if not isinstance(value, GPUArray):
                    raise TypeError(f"{self.name}: argument {decl.name} is a pointer; pass a GPUArray "
                                    f"(gpuarray.to_gpu(a)), got {type(value).__name__}")
                check_array_argument(self.name, "reduction", value, decl)
                sizes.append((decl.name, value.size))
                # a view's gpudata is a plain address: pass every pointer as a NumPy uintp
                invocation.append(np.uintp(0 if value.gpudata is None else int(value.gpudata)))
            else:
                if not np.isscalar(value):
                    raise TypeError(f"{self.name}: argument {decl.name} is a scalar, "
                                    f"got {type(value).__name__}")
                invocation.append(decl.dtype.type(value))
        first_name, n = sizes[0]
        for other_name, size in sizes[1:]:
            if size != n:
                raise ValueError(f"{self.name}: array arguments differ in size: {first_name} has {n} "
                                 f"elements, {other_name} has {size}")

        allocator = allocator or self.allocator or next(
            (v.allocator for v in args if isinstance(v, GPUArray)), None)
        result = out if out is not None else GPUArray((), self.dtype_out, allocator=allocator)
        if result.size != 1 or result.dtype != self.dtype_out:
            raise ValueError(f"out must be a GPUArray of one {self.dtype_out} element")
        result_ptr = np.uintp(int(result.gpudata))   # out may be a view (max_gpu[i]), whose gpudata is an int

        # Enough blocks that each thread folds a few elements, at most MAX_BLOCKS.
        per_block = BLOCK_SIZE
        blocks = min(MAX_BLOCKS, max(1, -(-n // per_block)))
        seq_count = max(1, -(-n // (blocks * BLOCK_SIZE)))
        block = (BLOCK_SIZE, 1, 1)
        if blocks == 1:
            self._stage1(result_ptr, *invocation, np.uint64(seq_count), np.uint64(n),
                         block=block, grid=(1, 1), stream=stream)
            return result
        partial = GPUArray((blocks,), self.dtype_out, allocator=allocator)
        self._stage1(partial.gpudata, *invocation, np.uint64(seq_count), np.uint64(n),
                     block=block, grid=(blocks, 1), stream=stream)
        self._stage2(result_ptr, partial.gpudata, np.uint64(1), np.uint64(blocks),
                     block=block, grid=(1, 1), stream=stream)
        return result


@context_dependent_memoize
def get_sum_kernel(dtype_out, dtype_in):
    if dtype_out is None:
        dtype_out = dtype_in
    return ReductionKernel(dtype_out, "0", "a+b", arguments=[VectorArg(dtype_in, "in")], name="sum")


@context_dependent_memoize
def get_dot_kernel(dtype_out, dtype_a=None, dtype_b=None):
    dtype_a = dtype_out if dtype_a is None else dtype_a
    dtype_b = dtype_a if dtype_b is None else dtype_b
    return ReductionKernel(dtype_out, "0", "a+b", map_expr="a[i]*b[i]",
                           arguments=[VectorArg(dtype_a, "a"), VectorArg(dtype_b, "b")], name="dot")

