"""``pycuda.curandom`` on the CPU: random GPUArrays drawn by kernels that use the device cuRAND of
``_native/curand_kernel.h``, compiled and run by the emulator like any other kernel.

- ``rand(shape, dtype=np.float32)``: uniform numbers in [0, 1) (float32 or float64), or 32 random
  bits (int32, uint32), as PyCUDA's ``rand``. Its seed comes from ``np.random``, so
  ``np.random.seed`` makes it repeat. PyCUDA draws these from an MD5 hash and the emulator from
  cuRAND's XORWOW generator: the same distribution, other numbers (and never exactly 1.0).
- ``XORWOWRandomNumberGenerator(seed_getter=None, offset=0)`` and ``MRG32k3aRandomNumberGenerator``: a state per
  generator thread (``block_count`` blocks of ``generators_per_block``), kept in device memory between calls,
  with ``fill_uniform``/``gen_uniform`` (float32, float64, int32, uint32), ``fill_normal``/``gen_normal``,
  ``fill_log_normal``/``gen_log_normal``, ``fill_poisson``/``gen_poisson`` (with no ``lambda_value``, in place:
  each element the mean of its own draw) and ``call_skip_ahead[_array]``, ``call_skip_ahead_sequence[_array]``
  (and MRG32k3a's ``call_skip_ahead_subsequence[_array]``). ``seed_getter(n)`` returns an int32 GPUArray of n
  seeds: ``seed_getter_uniform`` (one seed for all) or ``seed_getter_unique`` (a seed each); by default, a seed
  each from ``np.random``. Generator i starts at subsequence i of its seed, as in PyCUDA, so equal seeds still
  give every generator numbers of its own.
- ``Sobol32RandomNumberGenerator(dir_vector=None, offset=0)``, ``Sobol64...``, ``ScrambledSobol32...`` and
  ``ScrambledSobol64...(dir_vector=None, scramble_vector=None, offset=0)``: generator i draws dimension i of a
  Sobol sequence; normals, log-normals and Poisson counts come from one point each, by inversion, and the 64-bit
  ones also fill int64/uint64 arrays. ``generate_direction_vectors(count, direction_vector_set.VECTOR_32)`` and
  ``generate_scramble_constants32/64(count)`` make their inputs: the emulator's own (``_sobol``), not cuRAND's
  Joe-Kuo tables, so only dimension 0 has a GPU's points.
- ``get_curand_version()``: the cuRAND of the CUDA version this emulation speaks.

XORWOW's and MRG32k3a's numbers are cuRAND's for the same seeds and launch shape; the emulated device's shape (its
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
%(prepare)s
// Element idx comes from generator idx %% generators, as its (idx / generators)-th draw: the layout of PyCUDA's
// kernels, where generator thread tidx draws the elements tidx, tidx + delta, ... On the CPU one thread of these
// kernels runs GPUEDU_TILE neighbouring generators in step, row by row, so each row's stores are one contiguous
// run instead of one element per cache line, and the tiles are blocks of their own, shared among the worker
// threads (each generator still draws its elements in order: the numbers are the same).
#define GPUEDU_TILE %(tile)d
#define GPUEDU_GENERATOR(NAME, T, DRAW, ...) \
__global__ void NAME(state_t* s, T* d, const size_t n, const size_t generators, ##__VA_ARGS__) { \
  const size_t first = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * GPUEDU_TILE; \
  if (first >= generators) return; \
  const size_t tile = generators - first < GPUEDU_TILE ? generators - first : GPUEDU_TILE; \
  for (size_t start = first; start < n; start += generators) { \
    const size_t end = n - start < tile ? n - start : tile; \
    for (size_t k = 0; k < end; ++k) { \
      state_t* const state = s + first + k; \
      const size_t idx = start + k; \
      d[idx] = DRAW; \
    } \
  } \
}
GPUEDU_GENERATOR(uniform_int, unsigned, curand(state))
GPUEDU_GENERATOR(uniform_float, float, curand_uniform(state))
GPUEDU_GENERATOR(uniform_double, double, curand_uniform_double(state))
GPUEDU_GENERATOR(normal_float, float, curand_normal(state))
GPUEDU_GENERATOR(normal_double, double, curand_normal_double(state))
GPUEDU_GENERATOR(log_normal_float, float, curand_log_normal(state, mean, stddev), float mean, float stddev)
GPUEDU_GENERATOR(log_normal_double, double, curand_log_normal_double(state, mean, stddev), double mean, double stddev)
GPUEDU_GENERATOR(poisson_int, unsigned, curand_poisson(state, lambda), double lambda)
// Poisson in place: each element is the mean of its own draw.
GPUEDU_GENERATOR(poisson_inplace_float, float, (float)curand_poisson(state, (double)d[idx]))
GPUEDU_GENERATOR(poisson_inplace_double, double, (double)curand_poisson(state, d[idx]))
GPUEDU_GENERATOR(poisson_inplace_int, unsigned, curand_poisson(state, (double)d[idx]))
%(extra)s
// Each thread moves its state ahead by one count (PARAM a number) or by its own (PARAM an array, SKIP(idx)).
#define GPUEDU_SKIP(NAME, HOW, PARAM, SKIP) \
__global__ void NAME(state_t* s, const size_t n, PARAM) { \
  const size_t idx = blockIdx.x * blockDim.x + threadIdx.x; \
  if (idx < n) HOW(SKIP, &s[idx]); \
}
GPUEDU_SKIP(skip_ahead, skipahead, const unsigned long long skip, skip)
GPUEDU_SKIP(skip_ahead_array, skipahead, const unsigned long long* skip, skip[idx])
%(skips)s
}
"""

# What each kind of generator adds to _GENERATOR_SOURCE: how its states start, its Box-Muller pairs and 64-bit
# draws, and the jumps it has besides skip_ahead.
_PSEUDO_PREPARE = r"""
__global__ void prepare_with_seeds(state_t* s, const size_t n, const int* seed, const unsigned long long offset) {
  const size_t id = blockIdx.x * blockDim.x + threadIdx.x;
  if (id < n) curand_init(seed[id], id, offset, &s[id]);
}"""
_BOX_MULLER = r"""
GPUEDU_GENERATOR(normal_float2, float2, curand_normal2(state))
GPUEDU_GENERATOR(normal_double2, double2, curand_normal2_double(state))"""
_SEQUENCE_SKIPS = r"""
GPUEDU_SKIP(skip_ahead_sequence, skipahead_sequence, const unsigned long long skip, skip)
GPUEDU_SKIP(skip_ahead_sequence_array, skipahead_sequence, const unsigned long long* skip, skip[idx])"""
_SUBSEQUENCE_SKIPS = r"""
GPUEDU_SKIP(skip_ahead_subsequence, skipahead_subsequence, const unsigned long long skip, skip)
GPUEDU_SKIP(skip_ahead_subsequence_array, skipahead_subsequence, const unsigned long long* skip, skip[idx])"""
# Sobol: generator i is dimension i, its direction vectors row i of v (D words each).
_SOBOL_PREPARE = r"""
__global__ void prepare_with_vectors(state_t* s, const size_t n, %(word)s* v, const unsigned long long offset) {
  const size_t id = blockIdx.x * blockDim.x + threadIdx.x;
  if (id < n) curand_init(v + id * %(bits)d, (%(word)s)offset, &s[id]);
}"""
_SCRAMBLED_PREPARE = r"""
__global__ void prepare_with_vectors(state_t* s, const size_t n, %(word)s* v, const %(word)s* scramble,
                                     const unsigned long long offset) {
  const size_t id = blockIdx.x * blockDim.x + threadIdx.x;
  if (id < n) curand_init(v + id * %(bits)d, scramble[id], (%(word)s)offset, &s[id]);
}"""
_LONG_DRAWS = r"""
GPUEDU_GENERATOR(uniform_long, unsigned long long, curand(state))"""


#: How many neighbouring generators one thread of the generator kernels runs (GPUEDU_TILE in their source): 32
#: float32 draws are two cache lines a row. The kernels that start or move the states run a generator a thread,
#: in blocks of _STATE_BLOCK threads.
_TILE = 32
_STATE_BLOCK = 32


def _generator_source(state_type):
    """The generator kernels for one of cuRAND's state types."""
    kind = _KINDS[state_type]
    word = "unsigned long long" if kind.bits == 64 else "unsigned int"
    if kind.sobol:
        prepare = (_SCRAMBLED_PREPARE if kind.scrambled else _SOBOL_PREPARE) % {"word": word, "bits": kind.bits}
    else:
        prepare = _PSEUDO_PREPARE
    extra = (_BOX_MULLER if not kind.sobol else "") + (_LONG_DRAWS if kind.bits == 64 else "")
    skips = "" if kind.sobol else _SEQUENCE_SKIPS + (_SUBSEQUENCE_SKIPS if state_type == "curandStateMRG32k3a" else "")
    return _GENERATOR_SOURCE % {"state_type": state_type, "prepare": prepare, "extra": extra, "skips": skips,
                                "tile": _TILE}


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


class _Kind:
    """What the generator kernels need to know of a cuRAND state type."""

    def __init__(self, nbytes, bits=32, sobol=False, scrambled=False):
        self.nbytes, self.bits, self.sobol, self.scrambled = nbytes, bits, sobol, scrambled


# The states' sizes as curand_kernel.h lays them out (tests/emulator/test_curandom.py checks them with sizeof).
_KINDS = {"curandStateXORWOW": _Kind(48), "curandStateMRG32k3a": _Kind(48),
          "curandStateSobol32": _Kind(140, sobol=True), "curandStateScrambledSobol32": _Kind(140, sobol=True, scrambled=True),
          "curandStateSobol64": _Kind(536, 64, sobol=True),
          "curandStateScrambledSobol64": _Kind(536, 64, sobol=True, scrambled=True)}


class _RandomNumberGeneratorBase:
    """The generators' states, one per thread of ``block_count`` blocks of ``generators_per_block``."""

    has_box_muller = True

    def __init__(self, state_type):
        dev = drv.Context.get_device()
        self.generators_per_block = min(dev.get_attribute(drv.device_attribute.MAX_THREADS_PER_BLOCK),
                                        dev.get_attribute(drv.device_attribute.MAX_BLOCK_DIM_X))
        self.block_count = dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
        self.generator_bits = _KINDS[state_type].bits
        self.state = drv.mem_alloc(self.count * _KINDS[state_type].nbytes)
        self.module = _module(state_type, _generator_source(state_type))

    @property
    def count(self):
        """How many generators (states) there are: one per thread of the generator launches."""
        return self.block_count * self.generators_per_block

    def _launch(self, name, stream, *args):
        """A kernel that starts or moves the states, one generator a thread."""
        blocks = (self.count + _STATE_BLOCK - 1) // _STATE_BLOCK
        self.module.get_function(name)(self.state, *args, block=(_STATE_BLOCK, 1, 1), grid=(blocks, 1),
                                       stream=stream)

    def _fill(self, name, data, count, stream, *extra):
        if not isinstance(data, array.GPUArray):
            raise TypeError(f"{name} fills a GPUArray, got {type(data).__name__}")
        if data.size and not data.flags.forc:
            raise ValueError("the generators fill contiguous GPUArrays only")
        if data.size:
            # a tile of generators a block, so the tiles are shared among the worker threads
            tiles = (self.count + _TILE - 1) // _TILE
            self.module.get_function(name)(self.state, data.gpudata, np.uintp(count), np.uintp(self.count), *extra,
                                           block=(1, 1, 1), grid=(tiles, 1), stream=stream)

    # ---- uniform ----------------------------------------------------------------------------
    _UNIFORM = {np.dtype(np.float32): "uniform_float", np.dtype(np.float64): "uniform_double",
                np.dtype(np.int32): "uniform_int", np.dtype(np.uint32): "uniform_int"}
    _UNIFORM_64 = {**_UNIFORM, np.dtype(np.int64): "uniform_long", np.dtype(np.uint64): "uniform_long"}

    def _gen(self, what, fill, allowed, shape, dtype, stream, *args):
        """A new array of ``shape`` and ``dtype`` (one of ``allowed``) filled by ``fill(array, *args, stream)``."""
        dtype = np.dtype(dtype)
        if dtype not in allowed:
            raise _dtype_error(what, dtype, allowed)
        result = array.empty(shape, dtype)
        fill(result, *args, stream)
        return result

    def _uniform_kernels(self):
        return self._UNIFORM_64 if self.generator_bits == 64 else self._UNIFORM

    def fill_uniform(self, data, stream=None):
        """Uniform numbers in (0, 1] (float32, float64; cuRAND's range), or random bits (int32, uint32; and int64,
        uint64 from the 64-bit Sobol generators). A 64-bit generator's 32-bit integers are the low halves of its
        draws, as PyCUDA's kernels store them."""
        kernels = self._uniform_kernels()
        if data.dtype not in kernels:
            raise _dtype_error("fill_uniform", data.dtype, kernels)
        self._fill(kernels[data.dtype], data, data.size, stream)

    def gen_uniform(self, shape, dtype, stream=None):
        return self._gen("gen_uniform", self.fill_uniform, self._uniform_kernels(), shape, dtype, stream)

    # ---- normal and log-normal ------------------------------------------------------------------
    _FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

    def fill_normal(self, data, stream=None):
        """Standard normal numbers (float32, float64); the pseudo-random generators make them two at a time
        (Box-Muller) when the size is even, the quasi-random ones one at a time by inversion."""
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
    _IN_PLACE = {np.dtype(np.float32): "poisson_inplace_float", np.dtype(np.float64): "poisson_inplace_double",
                 np.dtype(np.uint32): "poisson_inplace_int"}

    def fill_poisson(self, data, lambda_value=None, stream=None):
        """Poisson-distributed counts with mean ``lambda_value`` (uint32, as PyCUDA's); with no ``lambda_value``,
        each element of ``data`` (float32, float64 or uint32) is replaced by a draw whose mean is its value."""
        if lambda_value is None:
            if data.dtype not in self._IN_PLACE:
                raise _dtype_error("fill_poisson with no lambda_value (each element its own mean)", data.dtype,
                                   self._IN_PLACE)
            self._fill(self._IN_PLACE[data.dtype], data, data.size, stream)
            return
        if data.dtype not in self._INTS:
            raise _dtype_error("fill_poisson", data.dtype, self._INTS)
        if not lambda_value > 0:
            raise ValueError(f"fill_poisson needs lambda_value > 0, got {lambda_value!r}")
        self._fill("poisson_int", data, data.size, stream, np.float64(lambda_value))

    def gen_poisson(self, shape, dtype, lambda_value, stream=None):
        return self._gen("gen_poisson", self.fill_poisson, self._INTS, shape, dtype, stream, lambda_value)

    # ---- skipping ahead -----------------------------------------------------------------------
    def _skip(self, name, i, stream):
        count = np.uintp(self.count)
        if isinstance(i, array.GPUArray):
            if i.dtype.kind not in "iu" or i.size != count:
                raise TypeError(f"{name} needs an integer GPUArray of {int(count)} skips, one per generator")
            skips = array.to_gpu(i.get().astype(np.uint64))
            self._launch(name + "_array", stream, count, skips.gpudata)
        else:
            self._launch(name, stream, count, np.uint64(i))

    def call_skip_ahead(self, i, stream=None):
        """Move every generator i draws (points, for Sobol) ahead."""
        self._skip("skip_ahead", i, stream)

    def call_skip_ahead_array(self, i, stream=None):
        """Move generator k i[k] draws ahead (i: an integer GPUArray, one per generator)."""
        self._skip("skip_ahead", i, stream)


class _PseudoRandomNumberGeneratorBase(_RandomNumberGeneratorBase):
    """Seeded generators: generator k starts at subsequence k of its seed."""

    def __init__(self, state_type, seed_getter, offset):
        super().__init__(state_type)
        if seed_getter is None:
            seed = array.to_gpu(np.random.randint(0, 2 ** 31 - 1, self.count).astype(np.int32))
        else:
            seed = seed_getter(self.count)
        if not (isinstance(seed, array.GPUArray) and seed.dtype == np.int32 and seed.size == self.count):
            raise TypeError(f"seed_getter({self.count}) must return an int32 GPUArray of {self.count} seeds, got "
                            f"{type(seed).__name__} {getattr(seed, 'dtype', '')} of size {getattr(seed, 'size', '?')}")
        self._launch("prepare_with_seeds", None, np.uintp(self.count), seed.gpudata, np.uint64(offset))

    def call_skip_ahead_sequence(self, i, stream=None):
        """Move every generator i sequences ahead (2^67 draws each for XORWOW, 2^127 for MRG32k3a)."""
        self._skip("skip_ahead_sequence", i, stream)

    def call_skip_ahead_sequence_array(self, i, stream=None):
        self._skip("skip_ahead_sequence", i, stream)


class XORWOWRandomNumberGenerator(_PseudoRandomNumberGeneratorBase):
    """cuRAND's XORWOW generators: ``seed_getter(n)`` gives their n int32 seeds, ``offset`` skips draws."""

    def __init__(self, seed_getter=None, offset=0):
        super().__init__("curandStateXORWOW", seed_getter, offset)


class MRG32k3aRandomNumberGenerator(_PseudoRandomNumberGeneratorBase):
    """cuRAND's MRG32k3a generators (L'Ecuyer's combined recursive generator), seeded like XORWOW's; besides
    sequences of 2^127 draws they have subsequences of 2^76 (``call_skip_ahead_subsequence``)."""

    def __init__(self, seed_getter=None, offset=0):
        super().__init__("curandStateMRG32k3a", seed_getter, offset)

    def call_skip_ahead_subsequence(self, i, stream=None):
        """Move every generator i subsequences (2^76 draws each) ahead."""
        self._skip("skip_ahead_subsequence", i, stream)

    def call_skip_ahead_subsequence_array(self, i, stream=None):
        self._skip("skip_ahead_subsequence", i, stream)


# ---- Sobol --------------------------------------------------------------------------------------------
class direction_vector_set:  # noqa: N801 (PyCUDA's name)
    """Which direction vectors ``generate_direction_vectors`` makes (the names of PyCUDA's enum)."""
    VECTOR_32 = 101
    SCRAMBLED_VECTOR_32 = 102
    VECTOR_64 = 103
    SCRAMBLED_VECTOR_64 = 104


def generate_direction_vectors(count, direction=None):
    """A GPUArray of ``count`` dimensions' direction vectors: (count, 32) uint32, or (count, 64) uint64 for the
    64-bit sets. The emulator's own (``_sobol``), not cuRAND's Joe-Kuo tables: see the module's docstring."""
    from . import _sobol
    direction = direction_vector_set.VECTOR_32 if direction is None else direction
    bits = {direction_vector_set.VECTOR_32: 32, direction_vector_set.SCRAMBLED_VECTOR_32: 32,
            direction_vector_set.VECTOR_64: 64, direction_vector_set.SCRAMBLED_VECTOR_64: 64}.get(direction)
    if bits is None:
        raise ValueError(f"generate_direction_vectors: direction must be one of direction_vector_set's values "
                         f"(VECTOR_32, SCRAMBLED_VECTOR_32, VECTOR_64, SCRAMBLED_VECTOR_64), got {direction!r}")
    scrambled = direction in (direction_vector_set.SCRAMBLED_VECTOR_32, direction_vector_set.SCRAMBLED_VECTOR_64)
    return array.to_gpu(_sobol.direction_vectors(count, bits, scrambled))


def generate_scramble_constants32(count):
    """A uint32 GPUArray of ``count`` scramble constants (fixed: the same in every run)."""
    from . import _sobol
    return array.to_gpu(_sobol.scramble_constants(count, 32))


def generate_scramble_constants64(count):
    """A uint64 GPUArray of ``count`` scramble constants (fixed: the same in every run)."""
    from . import _sobol
    return array.to_gpu(_sobol.scramble_constants(count, 64))


class _SobolRandomNumberGeneratorBase(_RandomNumberGeneratorBase):
    """Generator k draws dimension k of a Sobol sequence, from point ``offset`` on; with a scramble constant
    each, its points are XORed with it."""

    has_box_muller = False

    def __init__(self, state_type, dir_vector, vector_set, offset, scramble_vector=None, scramble_function=None):
        super().__init__(state_type)
        bits = self.generator_bits
        dtype = np.dtype(np.uint64 if bits == 64 else np.uint32)
        if dir_vector is None:
            dir_vector = generate_direction_vectors(self.count, vector_set)
        if not (isinstance(dir_vector, array.GPUArray) and dir_vector.dtype == dtype
                and dir_vector.shape == (self.count, bits)):
            raise TypeError(f"dir_vector must be a {dtype.name} GPUArray of shape ({self.count}, {bits}) (one row "
                            f"of direction vectors per generator; generate_direction_vectors({self.count}) makes "
                            f"one), got {type(dir_vector).__name__} {getattr(dir_vector, 'dtype', '')} "
                            f"{getattr(dir_vector, 'shape', '')}")
        args = [dir_vector.gpudata]
        if scramble_function is not None:
            if scramble_vector is None:
                scramble_vector = scramble_function(self.count)
            if not (isinstance(scramble_vector, array.GPUArray) and scramble_vector.dtype == dtype
                    and scramble_vector.shape == (self.count,)):
                raise TypeError(f"scramble_vector must be a {dtype.name} GPUArray of {self.count} constants (one per "
                                f"generator), got {type(scramble_vector).__name__} "
                                f"{getattr(scramble_vector, 'dtype', '')} {getattr(scramble_vector, 'shape', '')}")
            args.append(scramble_vector.gpudata)
        self._launch("prepare_with_vectors", None, np.uintp(self.count), *args, np.uint64(offset))


class Sobol32RandomNumberGenerator(_SobolRandomNumberGeneratorBase):
    """Sobol's 32-bit quasi-random sequence, one dimension per generator."""

    def __init__(self, dir_vector=None, offset=0):
        super().__init__("curandStateSobol32", dir_vector, direction_vector_set.VECTOR_32, offset)


class ScrambledSobol32RandomNumberGenerator(_SobolRandomNumberGeneratorBase):
    """Scrambled Sobol, 32-bit: scrambled direction vectors, each dimension XORed with its scramble constant."""

    def __init__(self, dir_vector=None, scramble_vector=None, offset=0):
        super().__init__("curandStateScrambledSobol32", dir_vector, direction_vector_set.SCRAMBLED_VECTOR_32, offset,
                         scramble_vector, generate_scramble_constants32)


class Sobol64RandomNumberGenerator(_SobolRandomNumberGeneratorBase):
    """Sobol's 64-bit quasi-random sequence, one dimension per generator."""

    def __init__(self, dir_vector=None, offset=0):
        super().__init__("curandStateSobol64", dir_vector, direction_vector_set.VECTOR_64, offset)


class ScrambledSobol64RandomNumberGenerator(_SobolRandomNumberGeneratorBase):
    """Scrambled Sobol, 64-bit."""

    def __init__(self, dir_vector=None, scramble_vector=None, offset=0):
        super().__init__("curandStateScrambledSobol64", dir_vector, direction_vector_set.SCRAMBLED_VECTOR_64, offset,
                         scramble_vector, generate_scramble_constants64)


# cuRAND's version as curandGetVersion gives it for the toolkit this emulation speaks (CUDA 12.0: cuRAND 10.3.1),
# split as PyCUDA splits it: (version // 1000, version % 1000 // 10, version % 10).
_CURAND_VERSION = 10301


def get_curand_version():
    """cuRAND's version, as PyCUDA reports it."""
    return (_CURAND_VERSION // 1000, _CURAND_VERSION % 1000 // 10, _CURAND_VERSION % 10)
