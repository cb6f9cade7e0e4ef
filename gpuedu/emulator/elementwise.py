"""``pycuda.elementwise.ElementwiseKernel``: one C expression applied at every index ``i``.

``ElementwiseKernel("float a, float *x, float *y, float *z", "z[i] = a*x[i] + y[i]")``
generates CUDA C with a grid-stride loop over ``i`` in ``[0, n)``, compiles it with
``SourceModule`` (so in the emulator it runs as compiled C++) and calls it with
GPUArrays and scalars.  ``print(kernel.source)`` shows the generated code.

As in PyCUDA, the generated source includes ``<pycuda-complex.hpp>``, so arguments and
expressions may use ``pycuda::complex<float>`` and ``pycuda::complex<double>`` (complex64 and
complex128) without a preamble: ``"r[i] = abs(z[i])"``.

Checks that PyCUDA leaves to the GPU's memory system are made here, with a clear
message: the argument count, each array's dtype against its C declaration, and that
all GPUArray arguments have the same size (pass ``ary.gpudata`` for an array that is
indexed some other way, e.g. a lookup table).
"""
import builtins

import numpy as np

from .tools import ScalarArg, VectorArg, context_dependent_memoize, dtype_to_ctype, parse_c_arg

__all__ = ["ElementwiseKernel", "VectorArg", "ScalarArg", "parse_c_arg", "get_elwise_module",
           "get_elwise_range_module", "get_elwise_kernel", "get_elwise_kernel_and_types"]


def check_call(name, arguments, args, kwargs, keywords):
    """A generated kernel's call: no keyword but its own (``keywords`` says which), one value per argument."""
    if kwargs:
        raise TypeError(f"unknown keyword argument(s) {', '.join(kwargs)}; {keywords}")
    if len(args) != len(arguments):
        declared = ", ".join(a.declarator() for a in arguments)
        raise TypeError(f"{name} takes {len(arguments)} arguments ({declared}), got {len(args)}")


def check_array_argument(name, kind, value, decl):
    """A GPUArray given for a generated kernel's pointer argument: of its declared dtype, and contiguous."""
    if value.dtype != decl.dtype:
        raise TypeError(f"{name}: argument {decl.name} is declared {dtype_to_ctype(decl.dtype)}* ({decl.dtype}) but "
                        f"got an array of {value.dtype}; convert it with .astype(np.{decl.dtype.name})")
    if not value.flags.forc:
        raise RuntimeError(f"{name}: {kind} kernels cannot deal with non-contiguous arrays (argument {decl.name}); "
                           f"pass a contiguous copy")


def parse_arguments(arguments):
    """A declaration string (comma-separated) or a list of Vector/ScalarArgs -> list of args."""
    if isinstance(arguments, str):
        parts = [p for p in arguments.split(",") if p.strip()]
        if not parts:
            raise ValueError("the argument list is empty: declare at least one argument, e.g. 'float *x'")
        return [parse_c_arg(p) for p in parts]
    args = list(arguments)
    for a in args:
        if not isinstance(a, (VectorArg, ScalarArg)):
            raise TypeError(f"arguments must be a C declaration string or VectorArg/ScalarArg objects, "
                            f"got {type(a).__name__}")
    return args


# --------------------------------------------------------------------------- code generation

def _elementwise_source(arguments, operation, name, preamble, loop_prep, after_loop, with_range):
    declarations = ", ".join(a.declarator() for a in arguments)
    if with_range:
        # i runs start, start+step, ... towards stop; a negative step counts down.
        tail = "long start, long stop, long step"
        index_decl = "long i;"
        loop = ("for (i = start + (long)(cta_start + tid) * step;\n"
                "       (step < 0) ? (i > stop) : (i < stop);\n"
                "       i += (long)total_threads * step)")
    else:
        tail = "unsigned long n"
        index_decl = "unsigned long i;"
        loop = "for (i = cta_start + tid; i < n; i += total_threads)"
    loop_prep = f"  {loop_prep};\n" if loop_prep.strip() else ""
    after_loop = f"\n  {after_loop};\n" if after_loop.strip() else ""
    return f"""#include <pycuda-complex.hpp>

{preamble}

__global__ void {name}({declarations}, {tail})
{{
  // Grid-stride loop: each thread starts at its global index and jumps by the
  // number of threads in the grid, so any grid size covers all n elements.
  unsigned tid = threadIdx.x;
  unsigned total_threads = gridDim.x * blockDim.x;
  unsigned cta_start = blockDim.x * blockIdx.x;
  {index_decl}
{loop_prep}
  {loop}
  {{
    {operation};
  }}
{after_loop}}}
"""


def _compile(source, name, keep, options):
    from .compiler import SourceModule
    return SourceModule(source, options=options, keep=keep).get_function(name)


def get_elwise_module(arguments, operation, name="kernel", keep=False, options=None,
                      preamble="", loop_prep="", after_loop=""):
    from .compiler import SourceModule
    source = _elementwise_source(parse_arguments(arguments), operation, name, preamble, loop_prep,
                                 after_loop, with_range=False)
    return SourceModule(source, options=options, keep=keep)


def get_elwise_range_module(arguments, operation, name="kernel", keep=False, options=None,
                            preamble="", loop_prep="", after_loop=""):
    from .compiler import SourceModule
    source = _elementwise_source(parse_arguments(arguments), operation, name, preamble, loop_prep,
                                 after_loop, with_range=True)
    return SourceModule(source, options=options, keep=keep)


def get_elwise_kernel_and_types(arguments, operation, name="kernel", keep=False, options=None,
                                use_range=False, **kwargs):
    arguments = parse_arguments(arguments)
    make = get_elwise_range_module if use_range else get_elwise_module
    func = make(arguments, operation, name, keep, options, **kwargs).get_function(name)
    return func, arguments


def get_elwise_kernel(arguments, operation, name="kernel", keep=False, options=None, **kwargs):
    """The compiled kernel (a ``Function``) whose last argument is ``n``."""
    return get_elwise_kernel_and_types(arguments, operation, name, keep, options, **kwargs)[0]


# --------------------------------------------------------------------------- the kernel object

class ElementwiseKernel:
    """``kernel(*args, range=None, slice=None, stream=None)`` runs ``operation`` for every ``i``."""

    def __init__(self, arguments, operation, name="kernel", keep=False, options=None,
                 preamble="", loop_prep="", after_loop=""):
        self.arguments = parse_arguments(arguments)
        # Without an array argument there is no n: only range= calls can run it.
        self._needs_range = not any(isinstance(a, VectorArg) for a in self.arguments)
        names = [a.name for a in self.arguments]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"argument names must be unique; repeated: {', '.join(duplicates)}")
        reserved = {"i", "n", "tid", "total_threads", "cta_start", "start", "stop", "step"} & set(names)
        if reserved:
            raise ValueError(f"argument name(s) {', '.join(sorted(reserved))} clash with the generated "
                             "loop's variables; rename them")
        self.name = name
        self.operation = operation
        self._parts = dict(preamble=preamble, loop_prep=loop_prep, after_loop=after_loop)
        self._keep, self._options = keep, options
        self.source = _elementwise_source(self.arguments, operation, name, with_range=False, **self._parts)
        self.range_source = _elementwise_source(self.arguments, operation, name + "_range",
                                                with_range=True, **self._parts)
        self._func = None if self._needs_range else _compile(self.source, name, keep, options)
        self._range_func = None

    def get_texref(self, name, use_range=False):
        raise NotImplementedError("texture references are not supported by the CPU emulator")

    def __call__(self, *args, range=None, slice=None, stream=None, **kwargs):  # noqa: A002
        from .gpuarray import GPUArray

        check_call(self.name, self.arguments, args, kwargs, "ElementwiseKernel takes range=, slice= and stream=")
        if range is not None and slice is not None:
            raise TypeError("give range= or slice=, not both")

        invocation, sized = [], []
        for value, decl in zip(args, self.arguments):
            if isinstance(decl, VectorArg):
                invocation.append(self._pointer(value, decl, GPUArray))
                if isinstance(value, GPUArray):
                    sized.append((decl.name, value))
            else:
                invocation.append(self._scalar(value, decl, GPUArray))

        if sized:
            first_name, first = sized[0]
            for other_name, other in sized[1:]:
                if other.size != first.size:
                    raise ValueError(
                        f"{self.name}: array arguments differ in size: {first_name} has {first.size} "
                        f"elements, {other_name} has {other.size}.  i runs over 0..n-1 of every array; "
                        f"pass {other_name}.gpudata to index an array of another size yourself")
            n = first.size
        elif range is None and slice is None:
            raise ValueError(f"{self.name} has no GPUArray argument to take n from: pass range=")

        if slice is not None:
            if not sized:
                raise ValueError("slice= needs a GPUArray argument to take the size from; use range=")
            range = builtins.slice(*slice.indices(n))   # `slice` and `range` are parameters here
        if range is not None:
            start, stop, step = _range_triple(range)
            count = builtins.max(0, -(-(stop - start) // step))
            if count == 0:
                return
            if self._range_func is None:
                self._range_func = _compile(self.range_source, self.name + "_range", self._keep,
                                            self._options)
            grid, block = _launch_shape(count)
            self._range_func(*invocation, np.int64(start), np.int64(stop), np.int64(step),
                             grid=grid, block=block, stream=stream)
            return
        if n == 0:
            return
        grid, block = _launch_shape(n)
        self._func(*invocation, np.uint64(n), grid=grid, block=block, stream=stream)

    def _pointer(self, value, decl, gpuarray_type):
        if isinstance(value, gpuarray_type):
            check_array_argument(self.name, "elementwise", value, decl)
            # a view's gpudata is a plain address: pass every pointer as a NumPy uintp
            return np.uintp(0 if value.gpudata is None else int(value.gpudata))
        if isinstance(value, np.ndarray):
            raise TypeError(f"{self.name}: argument {decl.name} is a pointer; pass a GPUArray "
                            "(gpuarray.to_gpu(a)), not a host numpy array")
        try:
            int(value)
        except (TypeError, ValueError):
            raise TypeError(f"{self.name}: argument {decl.name} is a pointer; pass a GPUArray or a "
                            f"device pointer, got {type(value).__name__}") from None
        return value

    def _scalar(self, value, decl, gpuarray_type):
        if isinstance(value, (gpuarray_type, np.ndarray)) and getattr(value, "ndim", 0) > 0:
            raise TypeError(f"{self.name}: argument {decl.name} is a scalar "
                            f"({dtype_to_ctype(decl.dtype)}), got an array")
        if not np.isscalar(value) and not (isinstance(value, np.ndarray) and value.ndim == 0):
            raise TypeError(f"{self.name}: argument {decl.name} is a scalar, got {type(value).__name__}")
        return decl.dtype.type(value)


THREADS_PER_BLOCK = 256


MAX_THREADS = 1 << 31   # threads of one elementwise launch (see _launch_shape)


def _launch_shape(count):
    """``(grid, block)`` giving each element its own thread.

    The generated grid-stride loop is correct for any grid.  PyCUDA picks a few
    blocks and lets each thread stride through memory, which suits a GPU; the
    emulator runs a block's threads one after another, so there striding threads
    revisit every cache line (about 8x slower on 2**22 floats), while one element
    per thread walks memory in order.
    """
    # At most 2**31 threads: the loop's 32-bit `total_threads` (as PyCUDA generates it) must not wrap
    # to 0, which would leave every thread on its first element forever; past that, threads stride.
    blocks = min(-(-count // THREADS_PER_BLOCK), MAX_THREADS // THREADS_PER_BLOCK)
    return (blocks, 1), (THREADS_PER_BLOCK, 1, 1)


def _range_triple(r):
    if isinstance(r, slice):
        start, stop, step = r.start or 0, r.stop, 1 if r.step is None else r.step
    elif isinstance(r, tuple) and len(r) == 3:
        start, stop, step = r
    elif isinstance(r, range):
        start, stop, step = r.start, r.stop, r.step
    else:
        raise TypeError(f"range= takes a slice, a range or a (start, stop, step) tuple, got {r!r}")
    if stop is None:
        raise ValueError("range= needs a stop")
    if step == 0:
        raise ValueError("range= step must not be zero")
    return int(start), int(stop), int(step)


# --------------------------------------------------------------------------- ready-made kernels

@context_dependent_memoize
def get_linear_combination_kernel(summand_descriptors, dtype_z):
    """``z = a0*x0 + a1*x1 + ...`` for ``summand_descriptors`` = ((scalar_dtype, vector_dtype), ...)."""
    args, terms = [], []
    for k, (scalar_dtype, vector_dtype) in enumerate(summand_descriptors):
        args += [ScalarArg(scalar_dtype, f"a{k}"), VectorArg(vector_dtype, f"x{k}")]
        terms.append(f"a{k}*x{k}[i]")
    args.append(VectorArg(dtype_z, "z"))
    return ElementwiseKernel(args, "z[i] = " + " + ".join(terms), "linear_combination")


@context_dependent_memoize
def get_axpbyz_kernel(dtype_x, dtype_y, dtype_z):
    return ElementwiseKernel(
        f"{dtype_to_ctype(dtype_z)} a, {dtype_to_ctype(dtype_x)} *x, {dtype_to_ctype(dtype_z)} b, "
        f"{dtype_to_ctype(dtype_y)} *y, {dtype_to_ctype(dtype_z)} *z",
        "z[i] = a*x[i] + b*y[i]", "axpbyz")


@context_dependent_memoize
def get_copy_kernel(dtype_dest, dtype_src):
    return ElementwiseKernel(f"{dtype_to_ctype(dtype_dest)} *dest, {dtype_to_ctype(dtype_src)} *src",
                             "dest[i] = src[i]", "copy")


@context_dependent_memoize
def get_fill_kernel(dtype):
    return ElementwiseKernel(f"{dtype_to_ctype(dtype)} a, {dtype_to_ctype(dtype)} *z", "z[i] = a", "fill")

