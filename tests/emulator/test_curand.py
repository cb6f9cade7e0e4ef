"""Device cuRAND (curand_kernel.h): cuRAND's own numbers where they are known, statistics elsewhere.

The known answers for XORWOW and Philox come from NVIDIA's cuRAND (its curand_kernel.h, whose
generators are integer code that runs the same on the host), and the Philox4x32-10 block
function's from Random123's published known-answer vectors.
"""
import math

import numpy as np
import pytest

from gpuedu.emulator._args import In, InOut, Out
from gpuedu.emulator.compiler import SourceModule

CURAND_SRC = r"""
#include <curand_kernel.h>

// The integers of each case's stream: XORWOW's, Philox's, then two curand4 of Philox (the second
// after one more curand, so that it starts in the middle of a block of four).
extern "C" __global__ void streams(const unsigned long long* seed, const unsigned long long* sub,
                                   const unsigned long long* offset, unsigned* out) {
  int c = threadIdx.x;
  curandState_t x;
  curandStatePhilox4_32_10_t p;
  curand_init(seed[c], sub[c], offset[c], &x);
  curand_init(seed[c], sub[c], offset[c], &p);
  unsigned* o = out + 24 * c;
  for (int i = 0; i < 8; ++i) o[i] = curand(&x);
  for (int i = 0; i < 8; ++i) o[8 + i] = curand(&p);
  uint4 a = curand4(&p);
  (void)curand(&p);
  uint4 b = curand4(&p);
  o[16] = a.x; o[17] = a.y; o[18] = a.z; o[19] = a.w;
  o[20] = b.x; o[21] = b.y; o[22] = b.z; o[23] = b.w;
}

// Philox's first block at any 128-bit counter: the upper half is the subsequence, the lower half
// the offset over 4 (skipped in steps of at most 4 * (2^62 - 1) draws).
extern "C" __global__ void philox_block(unsigned long long key, unsigned long long upper, unsigned long long big_steps,
                                        unsigned long long rest, unsigned* out) {
  curandStatePhilox4_32_10_t p;
  curand_init(key, upper, 0, &p);
  for (unsigned long long i = 0; i < big_steps; ++i) skipahead(4ULL * 0x3fffffffffffffffULL, &p);
  skipahead(4ULL * rest, &p);
  for (int i = 0; i < 4; ++i) out[i] = curand(&p);
}

// Skips in the middle of a stream, curand4 from each position within Philox's block of four, and
// the draws each distribution consumes (its values are checked elsewhere; here, where it leaves the stream).
extern "C" __global__ void mid_stream(unsigned* o) {
  int u = 0;
  curandStatePhilox4_32_10_t p;
  curand_init(99, 0, 1, &p);
  for (int k = 0; k < 4; ++k) {
    for (int j = 0; j < k; ++j) (void)curand(&p);
    uint4 q = curand4(&p);
    o[u++] = q.x; o[u++] = q.y; o[u++] = q.z; o[u++] = q.w;
  }
  skipahead(1000003ULL, &p);
  o[u++] = curand(&p); o[u++] = curand(&p);
  skipahead_sequence(12345ULL, &p);
  o[u++] = curand(&p); o[u++] = curand(&p);
  (void)curand(&p);
  skipahead(7ULL, &p);
  o[u++] = curand(&p);
  (void)curand_uniform2_double(&p);
  (void)curand_normal2_double(&p);
  for (int i = 0; i < 3; ++i) (void)curand_log_normal_double(&p, 0.1, 0.3);
  for (int i = 0; i < 3; ++i) o[u++] = curand_poisson(&p, 63.5);
  curandState_t x;
  curand_init(99, 1ULL << 50, 0, &x);
  for (int i = 0; i < 5; ++i) (void)curand(&x);
  skipahead(1ULL << 63, &x);
  o[u++] = curand(&x); o[u++] = curand(&x);
  skipahead_sequence(3ULL, &x);
  o[u++] = curand(&x);
  (void)curand_normal2_double(&x);
  for (int i = 0; i < 3; ++i) (void)curand_log_normal_double(&x, 0.1, 0.3);
  for (int i = 0; i < 3; ++i) o[u++] = curand_poisson(&x, 0.5);
  o[u++] = curand(&x);
}

// The two- and four-at-a-time variants: their values, and the draws they consume.
extern "C" __global__ void variants(float* f, double* d) {
  curandStatePhilox4_32_10_t p;
  curandState_t x;
  curand_init(31, 2, 3, &p);
  curand_init(31, 2, 3, &x);
  float2 a = curand_log_normal2(&x, 0.2f, 0.5f), b = curand_log_normal2(&p, 0.2f, 0.5f);
  (void)curand(&p);
  float4 c = curand_log_normal4(&p, 0.2f, 0.5f);
  f[0] = a.x; f[1] = a.y; f[2] = b.x; f[3] = b.y; f[4] = c.x; f[5] = c.y; f[6] = c.z; f[7] = c.w;
  double2 e = curand_log_normal2_double(&x, 0.2, 0.5), g = curand_log_normal2_double(&p, 0.2, 0.5);
  double4 h = curand_log_normal4_double(&p, 0.2, 0.5);
  double4 n = curand_normal4_double(&p);
  double4 u = curand_uniform4_double(&p);
  double all[18] = {e.x, e.y, g.x, g.y, h.x, h.y, h.z, h.w, n.x, n.y, n.z, n.w, u.x, u.y, u.z, u.w,
                    (double)curand(&p), (double)curand(&x)};
  for (int i = 0; i < 18; ++i) d[i] = all[i];
}

// n draws per thread of one distribution, each thread on its own subsequence (the samples' pattern).
template <typename S> __device__ void draw(unsigned long long seed, int n, int which, double* out) {
  int id = blockIdx.x * blockDim.x + threadIdx.x;
  S s;
  curand_init(seed, id, 0, &s);
  double* o = out + (size_t)id * n;
  for (int i = 0; i < n; ++i) {
    switch (which) {
      case 0: o[i] = curand(&s); break;
      case 1: o[i] = curand_uniform(&s); break;
      case 2: o[i] = curand_normal(&s); break;
      case 3: o[i] = curand_uniform_double(&s); break;
      case 4: o[i] = curand_normal_double(&s); break;
      case 5: o[i] = curand_log_normal(&s, 0.5f, 0.25f); break;
      case 6: o[i] = curand_poisson(&s, 4.5); break;
      case 7: o[i] = curand_poisson(&s, 200.0); break;
      case 8: o[i] = curand_poisson(&s, 5000.0); break;
      case 9: { float2 v = curand_normal2(&s); o[i] = v.x; o[++i] = v.y; break; }
      case 10: o[i] = curand_log_normal_double(&s, -1.0, 0.5); break;
    }
  }
}
extern "C" __global__ void draw_xorwow(unsigned long long seed, int n, int which, double* out) {
  draw<curandState_t>(seed, n, which, out);
}
extern "C" __global__ void draw_philox(unsigned long long seed, int n, int which, double* out) {
  draw<curandStatePhilox4_32_10_t>(seed, n, which, out);
}
extern "C" __global__ void draw_philox4(unsigned long long seed, int n, int normal, float* out) {
  int id = blockIdx.x * blockDim.x + threadIdx.x;
  curandStatePhilox4_32_10_t s;
  curand_init(seed, id, 0, &s);
  for (int i = 0; i < n; i += 4) {
    float4 v = normal ? curand_normal4(&s) : curand_uniform4(&s);
    float* o = out + (size_t)id * n + i;
    o[0] = v.x; o[1] = v.y; o[2] = v.z; o[3] = v.w;
  }
}

// States kept in global memory between launches, as the samples keep them.
extern "C" __global__ void setup(curandState_t* states, unsigned long long seed) {
  int id = blockIdx.x * blockDim.x + threadIdx.x;
  curand_init(seed, id, 0, &states[id]);
}
extern "C" __global__ void next_ints(curandState_t* states, unsigned* out, int n) {
  int id = blockIdx.x * blockDim.x + threadIdx.x;
  curandState_t local = states[id];
  for (int i = 0; i < n; ++i) out[id * n + i] = curand(&local);
  states[id] = local;
}
// Monte Carlo pi as the samples write it: a state per thread, a warp's hits summed with cooperative
// groups, one atomicAdd per warp.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
extern "C" __global__ void monte_carlo_pi(unsigned long long seed, int per_thread, unsigned long long* hits) {
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
  curandStatePhilox4_32_10_t s;
  curand_init(seed, blockIdx.x * blockDim.x + threadIdx.x, 0, &s);
  unsigned inside = 0;
  for (int i = 0; i < per_thread; ++i) {
    float x = curand_uniform(&s), y = curand_uniform(&s);
    inside += x * x + y * y <= 1.0f;
  }
  unsigned total = cg::reduce(warp, inside, cg::plus<unsigned>());
  if (warp.thread_rank() == 0) atomicAdd(hits, (unsigned long long)total);
}

extern "C" __global__ void sizes(int* out) {
  out[0] = sizeof(curandState_t);
  out[1] = sizeof(curandStatePhilox4_32_10_t);
  out[2] = sizeof(curandStateXORWOW_t);
}
"""

# (seed, subsequence, offset) -> the first 8 of XORWOW, the first 8 of Philox, two curand4 of Philox
KNOWN = [
    ((1234, 0, 0),
     "253d5e15 6f558604 dee6daf2 7485b394 db6a6a85 95195c6b 338f343f c9682545",
     "2090b348 da7cf0ab 4401906f cbca470e 9eeede35 1cbe137c fa277093 147edd50",
     "3fc9c8d8 fc06fa38 cc170b27 891d3b11 23b73d6b 72cd7b67 e87c375e 14a762d7"),
    ((0, 1, 5),
     "9138aaf0 1474b4f4 3bbe040b 8266964d 16c74c1d 01b7bb1c f4483a76 8bf545f8",
     "d9c77ded 7e66d954 6d658f40 c5fa1393 be4bbd74 357557cc a9b66da0 22686e8f",
     "a003a1da 50f1eac8 33c36e5e d21af330 57745dc0 ec2555c3 d7ee54c3 50dc3fb4"),
    ((0xdeadbeefcafef00d, 3, 1 << 33),
     "06cddc05 312878b0 a36070bb 3a492f75 9a1accd2 2488fc79 e1cabde3 a5d4aa4b",
     "f80fa76c b1d7e54d 0d3c9173 b2689ab6 cf4a9758 ddbba928 b65fb82e 346bdad4",
     "77232110 391d4e4a 07f08e2c 27cf8ffc 6ffd5a74 901a18d5 5f2dbade 83c4fdf3"),
    ((7, (1 << 40) + 7, 123456789),
     "b5e4dc32 2408ef8b 4b39b0dc 4da95f77 8e1207be a3d3846c 86b7852d a6690d21",
     "b9d24d1f 4838ac1e 3b44c542 9bdafe52 1298e1ee bb229f82 ba2ebf16 feb8b8c6",
     "aa56d87a fa64746b d58d6f8c 312361bb a21e8e6c bc7cd556 32182be1 e8b51a1c"),
    ((1 << 40, (1 << 64) - 1, 2),
     "d55dfa5b d910b01f c3f47bc7 75a1b80c d6f66466 7e89fe7d 62b4480f 7107e4c3",
     "53025c01 96ada4ee 0cab9c4d 5bc42666 525c3cee 1eb6927d abf90e06 9040e3d7",
     "4958b3c3 dd1f426b 10f84590 e736efdc f10e6ae2 f316d5fe b4379869 b687fd98"),
]


@pytest.fixture(scope="module")
def mod():
    return SourceModule(CURAND_SRC, no_extern_c=True)


def _hex(text):
    return [int(v, 16) for v in text.split()]


def test_states_have_curands_sizes(mod):
    out = np.zeros(3, np.int32)
    mod.get_function("sizes")(Out(out), block=(1, 1, 1))
    assert out.tolist() == [48, 64, 48]     # hosts allocate n * sizeof(curandState) for a state per thread


def test_xorwow_and_philox_streams_are_curands(mod):
    seeds = np.array([k[0][0] for k in KNOWN], np.uint64)
    subs = np.array([k[0][1] for k in KNOWN], np.uint64)
    offsets = np.array([k[0][2] for k in KNOWN], np.uint64)
    out = np.zeros((len(KNOWN), 24), np.uint32)
    mod.get_function("streams")(In(seeds), In(subs), In(offsets), Out(out), block=(len(KNOWN), 1, 1))
    for row, (_, xorwow, philox, four) in zip(out, KNOWN):
        assert row[:8].tolist() == _hex(xorwow)
        assert row[8:16].tolist() == _hex(philox)
        assert row[16:].tolist() == _hex(four)


@pytest.mark.parametrize("counter,key,expected", [
    ((0, 0, 0, 0), (0, 0), "6627e8d5 e169c58d bc57ac4c 9b00dbd8"),
    ((0xffffffff,) * 4, (0xffffffff, 0xffffffff), "408f276d 41c83b0e a20bc7c6 6d5451fd"),
    ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0), "d16cfe09 94fdcceb 5001e420 24126ea1"),
])
def test_philox_block_function_known_answers(mod, counter, key, expected):
    lower = counter[1] << 32 | counter[0]
    step = (1 << 62) - 1
    out = np.zeros(4, np.uint32)
    mod.get_function("philox_block")(np.uint64(key[1] << 32 | key[0]), np.uint64(counter[3] << 32 | counter[2]),
                                     np.uint64(lower // step), np.uint64(lower % step), Out(out), block=(1, 1, 1))
    assert out.tolist() == _hex(expected)


def test_skips_mid_stream_curand4_positions_and_draws_consumed_are_curands(mod):
    out = np.zeros(31, np.uint32)
    mod.get_function("mid_stream")(Out(out), block=(1, 1, 1))
    assert out.tolist() == _hex(
        "ce226d6c 635989a1 f57b32fb b9f0711c c3a52238 e167b3e0 7296d7f0 a7b3ec8b c4818b6e b6bfd45d b8e7afd2 8928f08b "
        "d7c00b9d c6e77ce6 75945255 c3bd6ba3 f0a3e44a afcc0231 4e16c548 ff033080 400d6f98 0000003e 00000033 0000003b "
        "6ffb88f6 0113b44d 87da15f8 00000000 00000000 00000000 eeb3d385")


def test_two_and_four_at_a_time_variants_are_curands(mod):
    f = np.zeros(8, np.float32)
    d = np.zeros(18, np.float64)
    mod.get_function("variants")(Out(f), Out(d), block=(1, 1, 1))
    np.testing.assert_allclose(f, [1.1584023237228394, 2.117748975753784, 1.4369522333145142, 0.5199196338653564,
                                   1.296720266342163, 0.4269052743911743, 1.7473723888397217, 0.4414025843143463],
                               rtol=1e-5)
    np.testing.assert_allclose(d[:12], [0.8779910254814068, 0.47648612278476815, 1.0251728515455476,
                                        0.678558115074599, 1.0096018051777573, 2.511627787083428, 0.978572355702939,
                                        0.42066622742169, -0.6807139202151594, -0.4736475406602244,
                                        -1.8690123083364478, -0.42336206019575556], rtol=1e-12)
    np.testing.assert_array_equal(d[12:], [0.7638320145710238, 0.9668752100458768, 0.26647282448098925,
                                           0.09370622860019645, 4126132244.0, 3649326317.0])


def _draw(mod, gen, which, n=1000, threads=1000, seed=1234):
    out = np.zeros(threads * n, np.float64)
    mod.get_function(f"draw_{gen}")(np.uint64(seed), np.int32(n), np.int32(which), Out(out),
                                    block=(threads // 4, 1, 1), grid=(4, 1))
    return out.reshape(threads, n)


@pytest.mark.parametrize("gen", ["xorwow", "philox"])
def test_uniforms_are_curands_mapping_of_its_integers(mod, gen):
    ints = _draw(mod, gen, 0, n=200, threads=200).astype(np.uint32)
    floats = _draw(mod, gen, 1, n=200, threads=200).astype(np.float32)
    expected = ints.astype(np.float32) * np.float32(2.0 ** -32) + np.float32(2.0 ** -33)
    np.testing.assert_array_equal(floats, expected)
    doubles = _draw(mod, gen, 3, n=200, threads=200)
    if gen == "xorwow":     # 53 bits from two draws
        z = ints[:, 0::2].astype(np.uint64) ^ (ints[:, 1::2].astype(np.uint64) << np.uint64(21))
        np.testing.assert_array_equal(doubles[:, :100], z * 2.0 ** -53 + 2.0 ** -54)
    else:                   # 32 bits from one, (x + 1) / 2^32
        np.testing.assert_array_equal(doubles, (ints.astype(np.float64) + 1) * 2.0 ** -32)
    # the largest integer maps to 1: the range is (0, 1]
    assert np.float32(np.float32(2 ** 32 - 1) * np.float32(2.0 ** -32) + np.float32(2.0 ** -33)) == 1.0


def _within_sigmas(value, expected, sigma, k=5):
    assert abs(value - expected) < k * sigma, (value, expected, sigma)


@pytest.mark.parametrize("gen", ["xorwow", "philox"])
@pytest.mark.parametrize("which", [1, 3])
def test_uniform_statistics(mod, gen, which):
    x = _draw(mod, gen, which).ravel()
    n = x.size
    assert n == 10 ** 6 and x.min() > 0.0 and x.max() <= 1.0
    _within_sigmas(x.mean(), 0.5, math.sqrt(1 / 12 / n))
    _within_sigmas(x.var(), 1 / 12, math.sqrt((1 / 80 - 1 / 144) / n))
    counts = np.histogram(x, bins=100, range=(0, 1))[0]
    chi2 = ((counts - n / 100) ** 2 / (n / 100)).sum()
    assert chi2 < 99 + 5 * math.sqrt(2 * 99)


def _ks_normal(x):
    x = np.sort(x)
    n = x.size
    cdf = 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    d = max((np.arange(1, n + 1) / n - cdf).max(), (cdf - np.arange(n) / n).max())
    return d * math.sqrt(n)       # about 1.95 at a p-value of 0.001


@pytest.mark.parametrize("gen", ["xorwow", "philox"])
@pytest.mark.parametrize("which", [2, 4, 9])
def test_normal_statistics(mod, gen, which):
    x = _draw(mod, gen, which).ravel()
    n = x.size
    _within_sigmas(x.mean(), 0.0, 1 / math.sqrt(n))
    _within_sigmas(x.std(), 1.0, math.sqrt(0.5 / n))
    _within_sigmas((x ** 4).mean(), 3.0, math.sqrt(96 / n))
    assert _ks_normal(x[::10]) < 1.95


def test_normals_are_curands_box_muller(mod):
    # cuRAND's values for seed 1234, subsequence 0: its curand_normal after 4 uniforms and 4 uniform doubles
    out = np.zeros(16, np.float64)
    src = CURAND_SRC + r"""
extern "C" __global__ void after_uniforms(double* out) {
  curandState_t s;
  curand_init(1234, 0, 0, &s);
  for (int i = 0; i < 4; ++i) out[i] = curand_uniform(&s);
  for (int i = 0; i < 4; ++i) out[4 + i] = curand_uniform_double(&s);
  for (int i = 0; i < 3; ++i) out[8 + i] = curand_normal(&s);
  for (int i = 0; i < 3; ++i) out[11 + i] = curand_normal_double(&s);
}
"""
    SourceModule(src, no_extern_c=True).get_function("after_uniforms")(Out(out), block=(1, 1, 1))
    np.testing.assert_array_equal(out[:4].astype(np.float32),
                                  np.float32([0.1454676389694214, 0.4348987340927124, 0.8707100749015808,
                                              0.4551651179790497]))
    np.testing.assert_array_equal(out[4:8], [0.5824181251985727, 0.786745360464586, 0.36678716167372255,
                                             0.6884766547959285])
    # a GPU's fast sine and logarithm may change the last bits of a float normal
    np.testing.assert_allclose(out[8:11], [-1.156859278678894, -0.18675823509693146, -0.34218287467956543],
                               rtol=1e-5)
    np.testing.assert_allclose(out[11:14], [-1.1400423286895986, -0.7379813928369772, -0.6853875559695567],
                               rtol=1e-12)


@pytest.mark.parametrize("normal", [0, 1])
def test_philox_four_at_a_time(mod, normal):
    out = np.zeros(1000 * 1000, np.float32)
    mod.get_function("draw_philox4")(np.uint64(99), np.int32(1000), np.int32(normal), Out(out),
                                     block=(250, 1, 1), grid=(4, 1))
    n = out.size
    if normal:
        _within_sigmas(out.mean(), 0.0, 1 / math.sqrt(n))
        _within_sigmas(out.std(), 1.0, math.sqrt(0.5 / n))
        assert _ks_normal(out[::10].astype(np.float64)) < 1.95
    else:
        assert out.min() > 0 and out.max() <= 1
        _within_sigmas(out.mean(), 0.5, math.sqrt(1 / 12 / n))


@pytest.mark.parametrize("gen", ["xorwow", "philox"])
def test_log_normal_and_poisson(mod, gen):
    x = _draw(mod, gen, 5, n=250).ravel()      # exp(N(0.5, 0.25^2)), float
    logs = np.log(x)
    _within_sigmas(logs.mean(), 0.5, 0.25 / math.sqrt(x.size))
    _within_sigmas(logs.std(), 0.25, 0.25 * math.sqrt(0.5 / x.size))
    x = _draw(mod, gen, 10, n=250).ravel()     # exp(N(-1, 0.5^2)), double
    _within_sigmas(np.log(x).mean(), -1.0, 0.5 / math.sqrt(x.size))
    for which, lam, n in [(6, 4.5, 250), (7, 200.0, 100), (8, 5000.0, 50)]:
        k = _draw(mod, gen, which, n=n).ravel()
        assert (k == np.round(k)).all() and k.min() >= 0
        _within_sigmas(k.mean(), lam, math.sqrt(lam / k.size))
        _within_sigmas(k.var(), lam, math.sqrt((lam + 2 * lam * lam) / k.size))
    small = _draw(mod, gen, 6, n=250).ravel()
    freq = np.bincount(small.astype(np.int64), minlength=20)[:8] / small.size
    pmf = [math.exp(-4.5) * 4.5 ** k / math.factorial(k) for k in range(8)]
    np.testing.assert_allclose(freq, pmf, atol=5 * math.sqrt(0.25 / small.size))


@pytest.mark.parametrize("gen", ["xorwow", "philox"])
def test_subsequences_are_uncorrelated(mod, gen):
    x = _draw(mod, gen, 1)                    # thread t's stream is subsequence t
    a, b = x[:-1].ravel() - 0.5, x[1:].ravel() - 0.5
    r = (a * b).mean() / math.sqrt((a * a).mean() * (b * b).mean())
    assert abs(r) < 5 / math.sqrt(a.size)
    lag = (x[:, :-1] - 0.5).ravel() @ (x[:, 1:] - 0.5).ravel() / (x[:, 1:].size / 12)
    assert abs(lag) < 5 / math.sqrt(x[:, 1:].size)
    assert not np.array_equal(x[0], x[1])


@pytest.mark.parametrize("gen", ["xorwow", "philox"])
def test_same_seed_same_numbers_other_seed_others(mod, gen):
    a = _draw(mod, gen, 2, n=100, threads=64, seed=5)
    b = _draw(mod, gen, 2, n=100, threads=64, seed=5)
    c = _draw(mod, gen, 2, n=100, threads=64, seed=6)
    np.testing.assert_array_equal(a, b)
    assert (a != c).mean() > 0.99


def test_states_in_global_memory_carry_on_between_launches(mod):
    states = np.zeros(64 * 48, np.uint8)
    mod.get_function("setup")(InOut(states), np.uint64(1234), block=(32, 1, 1), grid=(2, 1))
    first = np.zeros(64 * 3, np.uint32)
    second = np.zeros(64 * 5, np.uint32)
    mod.get_function("next_ints")(InOut(states), Out(first), np.int32(3), block=(32, 1, 1), grid=(2, 1))
    mod.get_function("next_ints")(InOut(states), Out(second), np.int32(5), block=(32, 1, 1), grid=(2, 1))
    whole = _draw(mod, "xorwow", 0, n=8, threads=64).astype(np.uint32)
    np.testing.assert_array_equal(np.hstack([first.reshape(64, 3), second.reshape(64, 5)]), whole)
    assert whole[0, :8].tolist() == _hex(KNOWN[0][1])


def test_monte_carlo_pi_with_cooperative_groups(mod):
    hits = np.zeros(1, np.uint64)
    per_thread, threads = 1000, 1024
    mod.get_function("monte_carlo_pi")(np.uint64(2024), np.int32(per_thread), InOut(hits),
                                       block=(256, 1, 1), grid=(4, 1))
    n = per_thread * threads
    p = math.pi / 4
    assert abs(hits[0] / n - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_inside_extern_c_the_error_says_to_pass_no_extern_c():
    from gpuedu.emulator._errors import CompileError
    src = "#include <curand_kernel.h>\n__global__ void k(float* o) { curandState_t s; curand_init(1, 0, 0, &s); }\n"
    with pytest.raises(CompileError, match=r"no_extern_c=True"):
        SourceModule(src)
