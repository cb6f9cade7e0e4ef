"""``pycuda.curandom`` on the CPU: random GPUArrays drawn by kernels that use the device cuRAND of
``_native/curand_kernel.h``, compiled and run by the emulator like any other kernel.

- ``rand(shape, dtype=np.float32)``: uniform numbers in [0, 1) (float32 or float64), or 32 random
  bits (int32, uint32), as PyCUDA's ``rand``. Its seed comes from ``np.random``, so
  ``np.random.seed`` makes it repeat. PyCUDA draws these from an MD5 hash and the emulator from
  cuRAND's XORWOW generator: the same distribution, other numbers (and never exactly 1.0).
- ``XORWOWRandomNumberGenerator(seed_getter=None, offset=0)``: a state per generator thread
  (``block_count`` blocks of ``generators_per_block``), kept in device memory between calls, with
  ``fill_uniform``/``gen_uniform`` (float32, float64, int32, uint32), ``fill_normal``/``gen_normal``,
  ``fill_log_normal``/``gen_log_normal``, ``fill_poisson``/``gen_poisson`` and
  ``call_skip_ahead[_array]``, ``call_skip_ahead_sequence[_array]``.
  ``seed_getter(n)`` returns an int32 GPUArray of n seeds: ``seed_getter_uniform`` (one seed
  for all) or ``seed_getter_unique`` (a seed each); by default, a seed each from ``np.random``.
  Generator i starts at subsequence i of its seed, as in PyCUDA, so equal seeds still give every
  generator numbers of its own.

The numbers are cuRAND's for the same seeds and launch shape; the emulated device's shape (its
multiprocessor count) is not a real GPU's, so an array matches a GPU's in distribution, not draw by draw.
"""
import numpy as np

from . import driver as drv
from . import gpuarray as array

_RAND_SOURCE = r"""
#include <curand_kernel.h>
extern "C" {
// uniform in [0, 1): 24 (float) or 53 (double) random bits, never 1.0
__global__ void rand_float(float* d, const int n, const unsigned seed) {
  const int id = blockIdx.x * blockDim.x + threadIdx.x;
  curandState_t s;
  curand_init(seed, id, 0, &s);
  for (int i = id; i < n; i += blockDim.x * gridDim.x) d[i] = (curand(&s) >> 8) * (1.0f / 16777216.0f);
}
__global__ void rand_double(double* d, const int n, const unsigned seed) {
  const int id = blockIdx.x * blockDim.x + threadIdx.x;
  curandState_t s;
  curand_init(seed, id, 0, &s);
  for (int i = id; i < n; i += blockDim.x * gridDim.x) {
    unsigned hi = curand(&s) >> 5, lo = curand(&s) >> 6;
    d[i] = (hi * 67108864.0 + lo) * (1.0 / 9007199254740992.0);
  }
}
__global__ void rand_bits(unsigned* d, const int n, const unsigned seed) {
  const int id = blockIdx.x * blockDim.x + threadIdx.x;
  curandState_t s;
  curand_init(seed, id, 0, &s);
  for (int i = id; i < n; i += blockDim.x * gridDim.x) d[i] = curand(&s);
}
}
"""

_GENERATOR_SOURCE = r"""
#include <curand_kernel.h>
typedef %(state_type)s state_t;
extern "C" {
__global__ void prepare_with_seeds(state_t* s, const int n, const int* seed, const int offset) {
  const int id = blockIdx.x * blockDim.x + threadIdx.x;
  if (id < n) curand_init(seed[id], id, offset, &s[id]);
}
// Each generator thread draws the elements tidx, tidx + delta, ... with its own state.
#define GPUEDU_GENERATOR(NAME, T, DRAW, ...) \
__global__ void NAME(state_t* s, T* d, const int n, ##__VA_ARGS__) { \
  const int tidx = blockIdx.x * blockDim.x + threadIdx.x, delta = blockDim.x * gridDim.x; \
  state_t local = s[tidx]; \
  for (int idx = tidx; idx < n; idx += delta) d[idx] = DRAW; \
  s[tidx] = local; \
}
GPUEDU_GENERATOR(uniform_int, unsigned, curand(&local))
GPUEDU_GENERATOR(uniform_float, float, curand_uniform(&local))
GPUEDU_GENERATOR(uniform_double, double, curand_uniform_double(&local))
GPUEDU_GENERATOR(normal_float, float, curand_normal(&local))
GPUEDU_GENERATOR(normal_double, double, curand_normal_double(&local))
GPUEDU_GENERATOR(normal_float2, float2, curand_normal2(&local))
GPUEDU_GENERATOR(normal_double2, double2, curand_normal2_double(&local))
GPUEDU_GENERATOR(log_normal_float, float, curand_log_normal(&local, mean, stddev), float mean, float stddev)
GPUEDU_GENERATOR(log_normal_double, double, curand_log_normal_double(&local, mean, stddev), double mean, double stddev)
GPUEDU_GENERATOR(poisson_int, unsigned, curand_poisson(&local, lambda), double lambda)

// Each thread moves its state ahead by one count (PARAM a number) or by its own (PARAM an array, SKIP(idx)).
#define GPUEDU_SKIP(NAME, HOW, PARAM, SKIP) \
__global__ void NAME(state_t* s, const int n, PARAM) { \
  const int idx = blockIdx.x * blockDim.x + threadIdx.x; \
  if (idx < n) HOW(SKIP, &s[idx]); \
}
GPUEDU_SKIP(skip_ahead, skipahead, const unsigned long long skip, skip)
GPUEDU_SKIP(skip_ahead_array, skipahead, const unsigned long long* skip, skip[idx])
GPUEDU_SKIP(skip_ahead_sequence, skipahead_sequence, const unsigned long long skip, skip)
GPUEDU_SKIP(skip_ahead_sequence_array, skipahead_sequence, const unsigned long long* skip, skip[idx])
}
"""

_modules = {}


def _module(key, source):
    if key not in _modules:
        from .compiler import SourceModule
        _modules[key] = SourceModule(source, no_extern_c=True)
    return _modules[key]


def _dtype_error(what, dtype, allowed):
    names = ", ".join(np.dtype(d).name for d in allowed)
    return NotImplementedError(f"{what} makes arrays of {names}, not {np.dtype(dtype).name}")


_RAND_KERNELS = {np.dtype(np.float32): "rand_float", np.dtype(np.float64): "rand_double",
                 np.dtype(np.int32): "rand_bits", np.dtype(np.uint32): "rand_bits"}


def rand(shape, dtype=np.float32, stream=None):
    """A GPUArray of ``shape`` with uniform numbers in [0, 1) (float32, float64) or random 32-bit integers."""
    dtype = np.dtype(dtype)
    if dtype not in _RAND_KERNELS:
        raise _dtype_error("pycuda.curandom.rand", dtype, _RAND_KERNELS)
    result = array.GPUArray(shape, dtype)
    if result.size:
        func = _module("rand", _RAND_SOURCE).get_function(_RAND_KERNELS[dtype])
        block = 128
        grid = min((result.size + block - 1) // block, 32)
        seed = np.uint32(np.random.randint(2 ** 31 - 1))
        func(result.gpudata, np.int32(result.size), seed, block=(block, 1, 1), grid=(grid, 1), stream=stream)
    return result


def seed_getter_uniform(N):
    """An int32 GPUArray of N copies of one random seed (from ``np.random``)."""
    return array.to_gpu(np.full(N, np.random.randint(0, 2 ** 31 - 1), dtype=np.int32))


def seed_getter_unique(N):
    """An int32 GPUArray of N random seeds (from ``np.random``)."""
    return array.to_gpu(np.random.randint(0, 2 ** 31 - 1, N).astype(np.int32))


_STATE_BYTES = {"curandStateXORWOW": 48}


class _RandomNumberGeneratorBase:
    """The generators' states, one per thread of ``block_count`` blocks of ``generators_per_block``."""

    has_box_muller = True

    def __init__(self, state_type, seed_getter, offset):
        dev = drv.Context.get_device()
        self.generators_per_block = min(dev.get_attribute(drv.device_attribute.MAX_THREADS_PER_BLOCK),
                                        dev.get_attribute(drv.device_attribute.MAX_BLOCK_DIM_X))
        self.block_count = dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
        count = self.block_count * self.generators_per_block
        self.state = drv.mem_alloc(count * _STATE_BYTES[state_type])
        self.module = _module(state_type, _GENERATOR_SOURCE % {"state_type": state_type})
        if seed_getter is None:
            seed = array.to_gpu(np.random.randint(0, 2 ** 31 - 1, count).astype(np.int32))
        else:
            seed = seed_getter(count)
        if not (isinstance(seed, array.GPUArray) and seed.dtype == np.int32 and seed.size == count):
            raise TypeError(f"seed_getter({count}) must return an int32 GPUArray of {count} seeds, got "
                            f"{type(seed).__name__} {getattr(seed, 'dtype', '')} of size {getattr(seed, 'size', '?')}")
        self._launch("prepare_with_seeds", None, np.int32(count), seed.gpudata, np.int32(offset))

    def _launch(self, name, stream, *args):
        self.module.get_function(name)(self.state, *args, block=(self.generators_per_block, 1, 1),
                                       grid=(self.block_count, 1), stream=stream)

    def _fill(self, name, data, count, stream, *extra):
        if not isinstance(data, array.GPUArray):
            raise TypeError(f"{name} fills a GPUArray, got {type(data).__name__}")
        if data.size and not data.flags.forc:
            raise ValueError("the generators fill contiguous GPUArrays only")
        if data.size:
            self._launch(name, stream, data.gpudata, np.int32(count), *extra)

    # ---- uniform ----------------------------------------------------------------------------
    _UNIFORM = {np.dtype(np.float32): "uniform_float", np.dtype(np.float64): "uniform_double",
                np.dtype(np.int32): "uniform_int", np.dtype(np.uint32): "uniform_int"}

    def _gen(self, what, fill, allowed, shape, dtype, stream, *args):
        """A new array of ``shape`` and ``dtype`` (one of ``allowed``) filled by ``fill(array, *args, stream)``."""
        dtype = np.dtype(dtype)
        if dtype not in allowed:
            raise _dtype_error(what, dtype, allowed)
        result = array.empty(shape, dtype)
        fill(result, *args, stream)
        return result

    def fill_uniform(self, data, stream=None):
        """Uniform numbers in (0, 1] (float32, float64; cuRAND's range), or 32 random bits (int32, uint32)."""
        if data.dtype not in self._UNIFORM:
            raise _dtype_error("fill_uniform", data.dtype, self._UNIFORM)
        self._fill(self._UNIFORM[data.dtype], data, data.size, stream)

    def gen_uniform(self, shape, dtype, stream=None):
        return self._gen("gen_uniform", self.fill_uniform, self._UNIFORM, shape, dtype, stream)

    # ---- normal and log-normal ------------------------------------------------------------------
    _FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

    def fill_normal(self, data, stream=None):
        """Standard normal numbers (float32, float64), two at a time when the size is even."""
        if data.dtype not in self._FLOATS:
            raise _dtype_error("fill_normal", data.dtype, self._FLOATS)
        name = "normal_float" if data.dtype == np.float32 else "normal_double"
        count = data.size
        if self.has_box_muller and count % 2 == 0:
            name += "2"
            count //= 2
        self._fill(name, data, count, stream)

    def gen_normal(self, shape, dtype, stream=None):
        return self._gen("gen_normal", self.fill_normal, self._FLOATS, shape, dtype, stream)

    def fill_log_normal(self, data, mean, stddev, stream=None):
        """exp(mean + stddev * a standard normal) (float32, float64)."""
        if data.dtype not in self._FLOATS:
            raise _dtype_error("fill_log_normal", data.dtype, self._FLOATS)
        if data.dtype == np.float32:
            self._fill("log_normal_float", data, data.size, stream, np.float32(mean), np.float32(stddev))
        else:
            self._fill("log_normal_double", data, data.size, stream, np.float64(mean), np.float64(stddev))

    def gen_log_normal(self, shape, dtype, mean, stddev, stream=None):
        return self._gen("gen_log_normal", self.fill_log_normal, self._FLOATS, shape, dtype, stream, mean, stddev)

    # ---- Poisson ------------------------------------------------------------------------------
    _INTS = (np.dtype(np.uint32),)

    def fill_poisson(self, data, lambda_value=None, stream=None):
        """Poisson-distributed counts with mean ``lambda_value`` (uint32, as PyCUDA's)."""
        if data.dtype not in self._INTS:
            raise _dtype_error("fill_poisson", data.dtype, self._INTS)
        if lambda_value is None or not lambda_value > 0:
            raise ValueError(f"fill_poisson needs lambda_value > 0, got {lambda_value!r}")
        self._fill("poisson_int", data, data.size, stream, np.float64(lambda_value))

    def gen_poisson(self, shape, dtype, lambda_value, stream=None):
        return self._gen("gen_poisson", self.fill_poisson, self._INTS, shape, dtype, stream, lambda_value)

    # ---- skipping ahead -----------------------------------------------------------------------
    def _skip(self, name, i, stream):
        count = np.int32(self.block_count * self.generators_per_block)
        if isinstance(i, array.GPUArray):
            if i.dtype.kind not in "iu" or i.size != count:
                raise TypeError(f"{name} needs an integer GPUArray of {int(count)} skips, one per generator")
            skips = array.to_gpu(i.get().astype(np.uint64))
            self._launch(name + "_array", stream, count, skips.gpudata)
        else:
            self._launch(name, stream, count, np.uint64(i))

    def call_skip_ahead(self, i, stream=None):
        """Move every generator i draws ahead."""
        self._skip("skip_ahead", i, stream)

    def call_skip_ahead_array(self, i, stream=None):
        """Move generator k i[k] draws ahead (i: an integer GPUArray, one per generator)."""
        self._skip("skip_ahead", i, stream)

    def call_skip_ahead_sequence(self, i, stream=None):
        """Move every generator i subsequences (of 2^67 draws) ahead."""
        self._skip("skip_ahead_sequence", i, stream)

    def call_skip_ahead_sequence_array(self, i, stream=None):
        self._skip("skip_ahead_sequence", i, stream)


class XORWOWRandomNumberGenerator(_RandomNumberGeneratorBase):
    """cuRAND's XORWOW generators: ``seed_getter(n)`` gives their n int32 seeds, ``offset`` skips draws."""

    def __init__(self, seed_getter=None, offset=0):
        super().__init__("curandStateXORWOW", seed_getter, offset)


_NOT_EMULATED = ("MRG32k3aRandomNumberGenerator", "Sobol32RandomNumberGenerator",
                 "ScrambledSobol32RandomNumberGenerator", "Sobol64RandomNumberGenerator",
                 "ScrambledSobol64RandomNumberGenerator", "generate_direction_vectors",
                 "generate_scramble_constants32", "generate_scramble_constants64")


def __getattr__(name):
    if name in _NOT_EMULATED:
        raise AttributeError(f"pycuda.curandom.{name} is not part of the gpuedu CPU emulator, which has rand, "
                             "XORWOWRandomNumberGenerator, seed_getter_uniform and seed_getter_unique")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
