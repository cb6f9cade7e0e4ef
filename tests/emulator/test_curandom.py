"""pycuda.curandom on the emulator: rand and the XORWOW generators, by their distributions."""
import math

import numpy as np
import pytest

from gpuedu.emulator import curandom
from gpuedu.emulator import gpuarray

# the library's kernels, for the nvcc check (test_compile_nvcc.py)
CURANDOM_SRC = curandom._RAND_SOURCE + curandom._GENERATOR_SOURCE % {"state_type": "curandStateXORWOW"}


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


def test_generators_the_emulator_lacks_say_what_it_has():
    with pytest.raises(AttributeError, match=r"MRG32k3aRandomNumberGenerator is not part of the gpuedu CPU emulator, "
                                             r"which has rand, XORWOWRandomNumberGenerator"):
        curandom.MRG32k3aRandomNumberGenerator
    with pytest.raises(AttributeError, match=r"has no attribute 'no_such_thing'"):
        curandom.no_such_thing
