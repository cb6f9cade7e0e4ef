"""pycuda.curandom on the emulator: rand and the XORWOW generators, by their distributions."""
import math

import numpy as np
import pytest

from gpuedu.emulator import curandom
from gpuedu.emulator import gpuarray

# the library's kernels, for the nvcc check (test_compile_nvcc.py)
CURANDOM_SRC = curandom._RAND_SOURCE + curandom._generator_source("curandStateXORWOW")
CURANDOM_MRG_SRC = curandom._generator_source("curandStateMRG32k3a")
CURANDOM_SOBOL32_SRC = curandom._generator_source("curandStateSobol32")
CURANDOM_SCRAMBLED_SOBOL32_SRC = curandom._generator_source("curandStateScrambledSobol32")
CURANDOM_SOBOL64_SRC = curandom._generator_source("curandStateSobol64")
CURANDOM_SCRAMBLED_SOBOL64_SRC = curandom._generator_source("curandStateScrambledSobol64")


@pytest.fixture(scope="module")
def gen(context):
    np.random.seed(11)
    return curandom.XORWOWRandomNumberGenerator()


def _uniform_moments(x, low_open):
    n = x.size
    assert abs(x.mean() - 0.5) < 5 * math.sqrt(1 / 12 / n)
    assert abs(x.var() - 1 / 12) < 5 * math.sqrt((1 / 80 - 1 / 144) / n)
    if low_open:
        assert x.min() > 0 and x.max() <= 1
    else:
        assert x.min() >= 0 and x.max() < 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rand_is_uniform_in_zero_one(context, dtype):
    a = curandom.rand((1000, 1000), dtype)
    assert isinstance(a, gpuarray.GPUArray) and a.shape == (1000, 1000) and a.dtype == dtype
    x = a.get().astype(np.float64).ravel()
    _uniform_moments(x, low_open=False)
    values = 2.0 ** (24 if dtype == np.float32 else 53)       # as many as the type's random bits
    expected = values * -math.expm1(-x.size / values)          # distinct among n draws of that many
    assert abs(len(np.unique(x)) - expected) < 0.002 * expected


def test_rand_repeats_with_numpy_seed_and_makes_bits(context):
    np.random.seed(3)
    a = curandom.rand(1000).get()
    np.random.seed(3)
    b = curandom.rand(1000).get()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, curandom.rand(1000).get())
    bits = curandom.rand(200000, np.uint32).get()
    ones = np.unpackbits(bits.view(np.uint8)).mean()
    assert abs(ones - 0.5) < 5 * math.sqrt(0.25 / (32 * bits.size))


def test_rand_rejects_other_dtypes(context):
    with pytest.raises(NotImplementedError, match=r"float32, float64, int32, uint32, not complex64"):
        curandom.rand(10, np.complex64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gen_uniform(gen, dtype):
    x = gen.gen_uniform((10 ** 6,), dtype).get()
    assert x.dtype == dtype
    _uniform_moments(x.astype(np.float64), low_open=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [10 ** 6, 10 ** 6 - 1])     # even sizes go two at a time
def test_gen_normal(gen, dtype, size):
    x = gen.gen_normal(size, dtype).get().astype(np.float64)
    assert x.shape == (size,)
    assert abs(x.mean()) < 5 / math.sqrt(size)
    assert abs(x.std() - 1) < 5 * math.sqrt(0.5 / size)
    assert abs((np.abs(x) < 1).mean() - 0.6826894921370859) < 5 * math.sqrt(0.25 / size)


def test_fill_in_place_and_the_streams_go_on(gen):
    a = gpuarray.zeros(50000, np.float32)
    gen.fill_uniform(a)
    first = a.get().copy()
    gen.fill_uniform(a)
    assert (first > 0).all() and not np.array_equal(first, a.get())
    b = gpuarray.zeros((100, 100), np.float64)
    gen.fill_normal(b)
    assert abs(b.get().mean()) < 5 / 100


def test_log_normal_and_poisson(gen):
    x = gen.gen_log_normal(400000, np.float32, 1.0, 0.5).get()
    assert abs(np.log(x).mean() - 1.0) < 5 * 0.5 / math.sqrt(x.size)
    assert abs(np.log(x).std() - 0.5) < 5 * 0.5 * math.sqrt(0.5 / x.size)
    k = gen.gen_poisson(400000, np.uint32, 6.0).get()
    assert k.dtype == np.uint32
    assert abs(k.mean() - 6.0) < 5 * math.sqrt(6.0 / k.size)
    assert abs(k.var() - 6.0) < 5 * math.sqrt((6.0 + 2 * 36.0) / k.size)


def test_uniform_ints_are_32_random_bits(gen):
    bits = gen.gen_uniform(100000, np.uint32).get()
    ones = np.unpackbits(bits.view(np.uint8)).mean()
    assert abs(ones - 0.5) < 5 * math.sqrt(0.25 / (32 * bits.size))


def test_same_seeds_same_numbers_and_skip_ahead(context):
    one = curandom.XORWOWRandomNumberGenerator(lambda n: gpuarray.to_gpu(np.arange(n, dtype=np.int32)))
    two = curandom.XORWOWRandomNumberGenerator(lambda n: gpuarray.to_gpu(np.arange(n, dtype=np.int32)))
    count = one.block_count * one.generators_per_block
    a = one.gen_uniform(2 * count, np.uint32).get()
    b = two.gen_uniform(count, np.uint32).get()
    np.testing.assert_array_equal(a[:count], b)
    # each generator drew one number; skipping one more on the first leaves it where the second's next is
    one.call_skip_ahead(1)
    two.call_skip_ahead_array(gpuarray.to_gpu(np.full(count, 2, np.int32)))
    np.testing.assert_array_equal(one.gen_uniform(count, np.uint32).get(), two.gen_uniform(count, np.uint32).get())
    offset = curandom.XORWOWRandomNumberGenerator(lambda n: gpuarray.to_gpu(np.arange(n, dtype=np.int32)), offset=4)
    three = curandom.XORWOWRandomNumberGenerator(lambda n: gpuarray.to_gpu(np.arange(n, dtype=np.int32)))
    three.call_skip_ahead(4)
    np.testing.assert_array_equal(offset.gen_uniform(count, np.uint32).get(), three.gen_uniform(count, np.uint32).get())


# One generator a thread, each drawing its numbers one after another: what element k * count + g of a
# generator's array must hold (its generator g's k-th draw), however the generator kernels share out the work.
_SEQUENTIAL_DRAWS = r"""
#include <curand_kernel.h>
extern "C" __global__ void sequential(unsigned* out, float* normals, const int* seed, int count, int rows) {
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= count) return;
  curandState_t s;
  curand_init(seed[g], g, 0, &s);
  for (int k = 0; k < rows; ++k) out[g * rows + k] = curand(&s);
  for (int k = 0; k < rows; ++k) normals[g * rows + k] = curand_normal(&s);
}
"""


def test_element_k_count_plus_g_is_generator_g_s_kth_draw(context):
    from gpuedu.emulator.compiler import SourceModule
    seeds = lambda n: gpuarray.to_gpu(np.arange(100, 100 + n, dtype=np.int32))  # noqa: E731
    gen = curandom.XORWOWRandomNumberGenerator(seeds)
    count, rows = gen.count, 5
    n = (rows - 1) * count + count // 2 + 3        # the last row only partly filled
    bits = gen.gen_uniform(n, np.uint32).get()
    normals = gen.gen_normal(n, np.float32).get()    # n odd: one at a time, each pair's second kept in the state
    out = gpuarray.empty(count * rows, np.uint32)
    ref_normals = gpuarray.empty(count * rows, np.float32)
    SourceModule(_SEQUENTIAL_DRAWS, no_extern_c=True).get_function("sequential")(
        out, ref_normals, seeds(count), np.int32(count), np.int32(rows), block=(64, 1, 1),
        grid=((count + 63) // 64, 1))
    draws = out.get().reshape(count, rows)
    expected = np.empty(n, np.uint32)
    for k in range(rows):
        row = expected[k * count:(k + 1) * count]
        row[...] = draws[:row.size, k]
    np.testing.assert_array_equal(bits, expected)
    # the generators that drew all `rows` numbers above go on with the reference's normals
    tail = n - (rows - 1) * count
    ref = ref_normals.get().reshape(count, rows)
    for k in range(rows - 1):
        np.testing.assert_array_equal(normals[k * count:k * count + tail], ref[:tail, k])


def test_uniform_seeds_still_give_every_generator_its_own_numbers(context):
    np.random.seed(5)
    g = curandom.XORWOWRandomNumberGenerator(curandom.seed_getter_uniform)
    count = g.block_count * g.generators_per_block
    x = g.gen_uniform(count, np.uint32).get()
    assert len(np.unique(x)) > 0.999 * count      # equal seeds, different subsequences
    seeds = curandom.seed_getter_uniform(8).get()
    assert seeds.dtype == np.int32 and (seeds == seeds[0]).all()
    unique = curandom.seed_getter_unique(1000).get()
    assert unique.dtype == np.int32 and len(np.unique(unique)) > 990


def test_clear_errors(gen, context):
    with pytest.raises(NotImplementedError, match=r"gen_normal makes arrays of float32, float64, not int32"):
        gen.gen_normal(10, np.int32)
    with pytest.raises(NotImplementedError, match=r"fill_uniform makes arrays of .*not float16"):
        gen.fill_uniform(gpuarray.zeros(4, np.float16))
    with pytest.raises(NotImplementedError, match=r"gen_poisson makes arrays of uint32, not int32"):
        gen.gen_poisson(10, np.int32, 3.0)
    with pytest.raises(TypeError, match=r"must return an int32 GPUArray"):
        curandom.XORWOWRandomNumberGenerator(lambda n: np.zeros(n, np.int32))


def test_reachable_as_pycuda_curandom():
    import gpuedu.backend as backend
    assert "curandom" in backend.emulated_modules()




# ---- MRG32k3a and Sobol, the generators PyCUDA's own tests run -----------------------------------------
ALL_GENERATORS = ["XORWOWRandomNumberGenerator", "MRG32k3aRandomNumberGenerator", "Sobol32RandomNumberGenerator",
                  "ScrambledSobol32RandomNumberGenerator", "Sobol64RandomNumberGenerator",
                  "ScrambledSobol64RandomNumberGenerator"]


@pytest.fixture(scope="module", params=ALL_GENERATORS)
def any_gen(request, context):
    np.random.seed(7)
    return getattr(curandom, request.param)()


def test_curand_version_is_the_cuda_12_0_one_as_pycuda_splits_it():
    assert curandom.get_curand_version() == (10, 30, 1)      # cuRAND 10.3.1 is 10301: (10301 // 1000, 301 // 10, 1)
    assert curandom.get_curand_version() >= (5, 0, 0)        # so PyCUDA's tests try every generator and Poisson


def test_every_generator_draws_each_distribution(any_gen):
    size = 200001                                            # odd: no Box-Muller pairs
    x = any_gen.gen_uniform(size, np.float64).get()
    _uniform_moments(x, low_open=True)
    for n in (size, size - 1):
        z = any_gen.gen_normal(n, np.float32).get().astype(np.float64)
        assert abs(z.mean()) < 5 / math.sqrt(n) and abs(z.std() - 1) < 5 * math.sqrt(0.5 / n)
    y = any_gen.gen_log_normal(size, np.float64, 1.0, 0.5).get()
    assert abs(np.log(y).mean() - 1.0) < 5 * 0.5 / math.sqrt(size)
    k = any_gen.gen_poisson(size, np.uint32, 6.0).get()
    assert abs(k.mean() - 6.0) < 5 * math.sqrt(6.0 / size)
    ints = any_gen.gen_uniform(size, np.uint32).get()
    if type(any_gen).__name__ == "Sobol64RandomNumberGenerator":
        # PyCUDA stores a 64-bit draw in a 32-bit integer: its low half, all 0 for a Sobol point before 2^32 points
        assert (ints == 0).all()
    else:
        # the top byte is uniform (a Sobol point's low bits stay 0 until enough points are drawn)
        assert abs((ints >> 24).mean() - 127.5) < 5 * math.sqrt((256 ** 2 - 1) / 12 / size)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint32])
def test_poisson_in_place_takes_each_elements_value_as_its_mean(any_gen, dtype):
    a = gpuarray.to_gpu(np.tile(np.array([0, 2, 30], dtype), 20000))
    any_gen.fill_poisson(a)
    k = a.get().reshape(-1, 3)
    assert k.dtype == dtype
    assert (k[:, 0] == 0).all()
    for col, lam in ((1, 2.0), (2, 30.0)):
        assert abs(k[:, col].mean() - lam) < 5 * math.sqrt(lam / k.shape[0])
    with pytest.raises(NotImplementedError, match=r"fill_poisson with no lambda_value .* not int64"):
        any_gen.fill_poisson(gpuarray.zeros(4, np.int64))


def test_sobol_generators_stratify_and_the_64_bit_ones_fill_64_bit_integers(context):
    g = curandom.Sobol32RandomNumberGenerator()
    n = g.count * 64                                           # 64 points of each dimension
    u = g.gen_uniform(n, np.float64).get().reshape(64, g.count)   # element tidx + k * count is point k of dim tidx
    for dim in (0, 1, 2, 100, g.count - 1):
        assert np.array_equal(np.sort(np.floor(u[:, dim] * 64)), np.arange(64))
    g64 = curandom.ScrambledSobol64RandomNumberGenerator()
    big = g64.gen_uniform(g64.count * 8, np.uint64).get()
    assert big.dtype == np.uint64 and (big >> np.uint64(40)).max() > 2 ** 23   # the high bits are drawn too
    with pytest.raises(NotImplementedError, match=r"not uint64"):
        g.gen_uniform(4, np.uint64)                            # a 32-bit sequence has no 64-bit draws


def test_direction_vectors_are_sobols_construction_and_fixed(context):
    from gpuedu.emulator import _sobol
    v = curandom.generate_direction_vectors(64).get()
    assert v.shape == (64, 32) and v.dtype == np.uint32
    assert v[0].tolist() == [1 << (31 - k) for k in range(32)]        # van der Corput: cuRAND's first dimension
    assert np.array_equal(v, curandom.generate_direction_vectors(64).get())
    assert (v[:, 0] == 1 << 31).all()                                  # m_1 = 1 in every dimension
    # each dimension's k-th vector is an odd m_k < 2^(k+1) shifted to the top: its lowest set bit is bit 31 - k
    for k in range(32):
        low = v[:, k] & (~v[:, k] + np.uint32(1))
        assert (low == np.uint32(1 << (31 - k))).all()
    assert _sobol._polynomials(6) == ((1, 0b11), (2, 0b111), (3, 0b1011), (3, 0b1101), (4, 0b10011), (4, 0b11001))
    s64 = curandom.generate_direction_vectors(8, curandom.direction_vector_set.SCRAMBLED_VECTOR_64).get()
    assert s64.shape == (8, 64) and s64.dtype == np.uint64
    plain64 = curandom.generate_direction_vectors(8, curandom.direction_vector_set.VECTOR_64).get()
    assert not np.array_equal(s64, plain64) and (s64[:, 0] >> np.uint64(63) == 1).all()
    c = curandom.generate_scramble_constants32(5).get()
    assert c.dtype == np.uint32 and np.array_equal(c, curandom.generate_scramble_constants32(5).get())
    assert curandom.generate_scramble_constants64(5).get().dtype == np.uint64


def test_mrg32k3a_subsequences_and_sequences_skip(context):
    seeds = lambda n: gpuarray.to_gpu(np.arange(n, dtype=np.int32))   # noqa: E731
    one, two = curandom.MRG32k3aRandomNumberGenerator(seeds), curandom.MRG32k3aRandomNumberGenerator(seeds)
    count = one.count
    one.call_skip_ahead_subsequence(3)
    two.call_skip_ahead_subsequence_array(gpuarray.to_gpu(np.full(count, 3, np.uint64)))
    np.testing.assert_array_equal(one.gen_uniform(count, np.uint32).get(), two.gen_uniform(count, np.uint32).get())
    one.call_skip_ahead_sequence(1)
    assert not np.array_equal(one.gen_uniform(count, np.uint32).get(), two.gen_uniform(count, np.uint32).get())


def test_sobol_inputs_are_checked(context):
    with pytest.raises(TypeError, match=r"dir_vector must be a uint32 GPUArray of shape \(1024, 32\)"):
        curandom.Sobol32RandomNumberGenerator(gpuarray.zeros((4, 32), np.uint32))
    with pytest.raises(TypeError, match=r"scramble_vector must be a uint64 GPUArray of 1024 constants"):
        curandom.ScrambledSobol64RandomNumberGenerator(scramble_vector=gpuarray.zeros(4, np.uint64))
    with pytest.raises(ValueError, match=r"direction must be one of direction_vector_set's values"):
        curandom.generate_direction_vectors(4, direction=7)
    with pytest.raises(ValueError, match=r"from 1 to 20000 \(cuRAND's limit\), got 20001"):
        curandom.generate_direction_vectors(20001)
    # the offset skips points: generator k's point 5 is where a fresh one lands after 5 skips
    a, b = curandom.Sobol32RandomNumberGenerator(offset=5), curandom.Sobol32RandomNumberGenerator()
    b.call_skip_ahead(5)
    np.testing.assert_array_equal(a.gen_uniform(a.count, np.uint32).get(), b.gen_uniform(b.count, np.uint32).get())
