"""Device cuRAND's MRG32k3a and Sobol generators (curand_kernel.h).

The known answers come from NVIDIA's cuRAND 10.3 (its curand_kernel.h, whose MRG32k3a and Sobol code is
integer arithmetic that runs the same on the host): the draws for three (seed, subsequence, offset) triples,
the uniforms, and the jumps by sequences and subsequences; Sobol's points for given direction vectors,
scrambled or not, after offsets and skips. Sobol's statistics are checked against what the construction
guarantees (every 2^k consecutive points stratify [0, 1) into 2^k equal intervals).
"""
import math

import numpy as np
import pytest

from gpuedu.emulator._args import Out
from gpuedu.emulator.compiler import SourceModule

SRC = r"""
#include <curand_kernel.h>

extern "C" __global__ void sizes(int* out) {
  out[0] = sizeof(curandStateMRG32k3a_t);
  out[1] = sizeof(curandStateSobol32_t);
  out[2] = sizeof(curandStateScrambledSobol32_t);
  out[3] = sizeof(curandStateSobol64_t);
  out[4] = sizeof(curandStateScrambledSobol64_t);
}

// Six draws for each of three (seed, subsequence, offset); then, from seed 42, a double and a float uniform,
// a draw after 3 sequences and one after 2 more subsequences; a Poisson count and the draw after it.
extern "C" __global__ void mrg(unsigned* o, double* d, float* f) {
  const unsigned long long seed[3] = {0ull, 1234ull, 0x123456789abcdefull}, sub[3] = {0, 1, 5},
                           offset[3] = {0, 7, 1000003};
  for (int c = 0; c < 3; ++c) {
    curandStateMRG32k3a_t s;
    curand_init(seed[c], sub[c], offset[c], &s);
    for (int i = 0; i < 6; ++i) o[6 * c + i] = curand(&s);
  }
  curandStateMRG32k3a_t s;
  curand_init(42, 0, 0, &s);
  d[0] = curand_uniform_double(&s);
  f[0] = curand_uniform(&s);
  skipahead_sequence(3ull, &s);
  o[18] = curand(&s);
  skipahead_subsequence(2ull, &s);
  o[19] = curand(&s);
  curand_init(7, 0, 0, &s);
  o[20] = curand_poisson(&s, 5.5);
  o[21] = curand(&s);
}

// Direction vectors made up for the check (any odd words are valid input to the generator).
extern "C" __global__ void sobol(unsigned* o32, unsigned long long* o64, double* d, float* f) {
  unsigned v32[32];
  unsigned long long v64[64];
  for (int k = 0; k < 32; ++k) v32[k] = (0x9E3779B9u * (k + 1)) | 1u;
  for (int k = 0; k < 64; ++k) v64[k] = (0x9E3779B97F4A7C15ull * (k + 1)) | 1ull;
  curandStateScrambledSobol32_t a;
  curand_init(v32, 0xdeadbeefu, 1000u, &a);
  for (int i = 0; i < 6; ++i) o32[i] = curand(&a);
  curandStateScrambledSobol64_t b;
  curand_init(v64, 0x0123456789abcdefull, (1ull << 40) + 3, &b);
  for (int i = 0; i < 4; ++i) o64[i] = curand(&b);
  curandStateSobol64_t c;
  curand_init(v64, 7ull, &c);
  skipahead(100ull, &c);
  for (int i = 0; i < 3; ++i) o64[4 + i] = curand(&c);
  d[0] = curand_uniform_double(&c);
  f[0] = curand_uniform(&c);
}

// The first n points of the van der Corput dimension (direction number k = 2^(31-k)), drawn as each distribution.
extern "C" __global__ void van_der_corput(float* u, float* z, double* zd, unsigned* k, const int n, const double lambda) {
  unsigned v[32];
  for (int j = 0; j < 32; ++j) v[j] = 1u << (31 - j);
  curandStateSobol32_t s[4];
  for (int j = 0; j < 4; ++j) curand_init(v, 0u, &s[j]);
  for (int i = 0; i < n; ++i) {
    u[i] = curand_uniform(&s[0]);
    z[i] = curand_normal(&s[1]);
    zd[i] = curand_normal_double(&s[2]);
    k[i] = curand_poisson(&s[3], lambda);
  }
}

// MRG32k3a's distributions, one thread per stream.
extern "C" __global__ void mrg_draws(float* u, float* z, double* zd, unsigned* k, const int per_thread) {
  curandStateMRG32k3a_t s;
  curand_init(2024, threadIdx.x, 0, &s);
  for (int i = 0; i < per_thread; ++i) {
    int at = threadIdx.x * per_thread + i;
    u[at] = curand_uniform(&s);
    z[at] = curand_normal(&s);
    zd[at] = curand_normal_double(&s);
    k[at] = curand_poisson(&s, i % 2 ? 0.0 : 3.0);
  }
}
"""


@pytest.fixture(scope="module")
def mod():
    return SourceModule(SRC, no_extern_c=True)


def test_states_have_curands_sizes(mod):
    out = np.zeros(5, np.int32)
    mod.get_function("sizes")(Out(out), block=(1, 1, 1))
    assert out.tolist() == [48, 140, 140, 536, 536]


def test_mrg32k3a_draws_uniforms_and_jumps_are_curands(mod):
    o, d, f = np.zeros(22, np.uint32), np.zeros(1), np.zeros(1, np.float32)
    mod.get_function("mrg")(Out(o), Out(d), Out(f), block=(1, 1, 1))
    assert o[:18].reshape(3, 6).tolist() == [
        [545508615, 1368065476, 1327943825, 3546985268, 951893240, 2290915747],
        [420608390, 491297866, 159488216, 1069799721, 1325864147, 2404078218],
        [709508555, 4149787937, 687431137, 3029474092, 2328168808, 3960816896]]
    assert d[0] == 0.23143686665461985 and f[0] == np.float32(0.967246354)
    assert o[18:20].tolist() == [1838107813, 3759223596]       # 3 sequences of 2^127, 2 subsequences of 2^76
    assert o[20:22].tolist() == [5, 4286542058]                 # Knuth's Poisson, then where the stream is


def test_sobol_points_scrambled_or_not_after_offsets_and_skips_are_curands(mod):
    o32, o64, d, f = np.zeros(6, np.uint32), np.zeros(7, np.uint64), np.zeros(1), np.zeros(1, np.float32)
    mod.get_function("sobol")(Out(o32), Out(o64), Out(d), Out(f), block=(1, 1, 1))
    assert o32.tolist() == [1172935815, 3688820030, 3887078989, 2038917108, 2736851679, 1024881510]
    assert o64.tolist() == [15205502937258363344, 694294827385159151, 10922874854640484858, 12392546886269041105,
                            15745793994038146235, 9606544840720516, 11391108291679124625]
    assert d[0] == 0.63469957223161977 and f[0] == np.float32(0.235547215)


def _phi(x):
    return 0.5 * math.erfc(-x / math.sqrt(2))


def test_sobol_distributions_come_from_one_point_each_by_inversion(mod):
    n, lam = 1024, 4.5
    u, z, k = np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.uint32)
    zd = np.zeros(n)
    mod.get_function("van_der_corput")(Out(u), Out(z), Out(zd), Out(k), np.int32(n), np.float64(lam),
                                       block=(1, 1, 1))
    # the first 1024 points of van der Corput are j / 1024, one in each interval: as uniforms, j/1024 + 2^-33
    assert np.array_equal(np.sort(u), (np.arange(n) / n + 2.0 ** -33).astype(np.float32))
    # normals are the normal quantiles at those points (cuRAND's at 1 - p, mirrored): Phi(-z) = j/1024 + 2^-33
    for normals, tol in ((z.astype(np.float64), 1e-6), (zd, 1e-12)):
        cdf = np.array([_phi(-x) for x in normals]) * n
        assert np.array_equal(np.sort(np.rint(cdf)), np.arange(n))
        assert np.abs(cdf - np.rint(cdf) - n * 2.0 ** -33).max() < tol * n
    # Poisson counts by inversion: the count for point p is the smallest k with CDF(k) >= p
    cdf = np.cumsum([math.exp(-lam) * lam ** j / math.factorial(j) for j in range(40)])
    expected = np.sort([int(np.searchsorted(cdf, j / n + 2.0 ** -33)) for j in range(n)])
    assert np.array_equal(np.sort(k), expected)


def test_mrg32k3a_distributions(mod):
    threads, per = 64, 2000
    size = threads * per
    u, z, k = np.zeros(size, np.float32), np.zeros(size, np.float32), np.zeros(size, np.uint32)
    zd = np.zeros(size)
    mod.get_function("mrg_draws")(Out(u), Out(z), Out(zd), Out(k), np.int32(per), block=(threads, 1, 1))
    assert u.min() > 0 and u.max() <= 1
    assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / size)
    for x in (z.astype(np.float64), zd):
        assert abs(x.mean()) < 5 / math.sqrt(size) and abs(x.std() - 1) < 5 * math.sqrt(0.5 / size)
    counts = k.reshape(threads, per)
    assert (counts[:, 1::2] == 0).all()                            # a mean of 0 draws 0
    three = counts[:, 0::2].astype(np.float64)
    assert abs(three.mean() - 3.0) < 5 * math.sqrt(3.0 / three.size)
