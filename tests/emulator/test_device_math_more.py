"""More of CUDA's device math: inverse error functions, exact sinpi/cospi, norms, byte and halfword SIMD."""
import numpy as np
import pytest
from scipy import special

from gpuedu.emulator._args import In, Out
from gpuedu.emulator.compiler import SourceModule

SRC = r"""
__global__ void inverse(const float* p, float* erfinv_out, float* erfcinv_out, float* ncdfinv_out,
                        double* erfinv_d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  erfinv_out[i] = erfinvf(2.0f * p[i] - 1.0f);
  erfcinv_out[i] = erfcinvf(2.0f * p[i]);
  ncdfinv_out[i] = normcdfinvf(p[i]);
  erfinv_d[i] = erfinv(2.0 * (double)p[i] - 1.0);
}
__global__ void pis(const float* x, float* s, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { s[i] = sinpif(x[i]); c[i] = (float)cospi((double)x[i]); }
}
__global__ void norms(const float* v, float* out) {
  out[0] = rhypotf(v[0], v[1]); out[1] = norm3df(v[0], v[1], v[2]); out[2] = rnorm3df(v[0], v[1], v[2]);
  out[3] = norm4df(v[0], v[1], v[2], v[3]); out[4] = normf(4, v); out[5] = rnormf(4, v);
}
__global__ void simd(const unsigned* a, const unsigned* b, unsigned* out) {
  out[0] = (unsigned)__dp4a((int)a[0], (int)b[0], 5);
  out[1] = __dp4a(a[0], b[0], 5u);
  out[2] = __vadd2(a[0], b[0]); out[3] = __vsub2(a[0], b[0]);
  out[4] = __vadd4(a[0], b[0]); out[5] = __vsub4(a[0], b[0]);
  out[6] = __usad(a[1], b[1], 7u);
}
"""


@pytest.fixture(scope="module")
def mod():
    return SourceModule(SRC)


def test_inverse_error_functions_match_scipy(mod):
    p = np.concatenate([np.linspace(1e-6, 1 - 1e-6, 997), [1e-30, 1e-12, 0.5]]).astype(np.float32)
    n = len(p)
    e, ec, nc = (np.empty(n, np.float32) for _ in range(3))
    ed = np.empty(n, np.float64)
    mod.get_function("inverse")(In(p), Out(e), Out(ec), Out(nc), Out(ed), np.int32(n), block=(128, 1, 1),
                                grid=((n + 127) // 128, 1))
    p64 = p.astype(np.float64)
    y32 = (np.float32(2) * p - np.float32(1)).astype(np.float64)        # the kernel's float argument
    np.testing.assert_allclose(e, special.erfinv(y32).astype(np.float32), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(ec, special.erfcinv(2 * p64).astype(np.float32), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(nc, special.ndtri(p64).astype(np.float32), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(ed, special.erfinv(2 * p64 - 1), rtol=1e-12, atol=1e-14)


def test_sinpi_and_cospi_are_exact_at_integers_and_halves(mod):
    x = np.array([0, 1, -1, 2, 0.5, -0.5, 1.5, 1e6 + 1, 0.25, 3.3], np.float32)
    s, c = np.empty_like(x), np.empty_like(x)
    mod.get_function("pis")(In(x), Out(s), Out(c), np.int32(len(x)), block=(32, 1, 1), grid=(1, 1))
    assert list(s[:4]) == [0, 0, 0, 0] and list(c[:4]) == [1, -1, -1, 1]
    assert (s[4], s[5], s[6], c[4]) == (1, -1, -1, 0)
    assert s[7] == 0 and c[7] == -1                          # a large odd integer: still exact
    np.testing.assert_allclose(s[8:], np.sin(np.pi * x[8:].astype(np.float64)), rtol=1e-6)


def test_norms(mod):
    v = np.array([3, 4, 12, 84], np.float32)
    out = np.empty(6, np.float32)
    mod.get_function("norms")(In(v), Out(out), block=(1, 1, 1), grid=(1, 1))
    np.testing.assert_allclose(out, [1 / 5, 13, 1 / 13, 85, 85, 1 / 85], rtol=1e-6)


def test_byte_and_halfword_simd(mod):
    a = np.array([0x80FF0102, 10], np.uint32)
    b = np.array([0x7F02FF03, 25], np.uint32)
    out = np.empty(7, np.uint32)
    mod.get_function("simd")(In(a), In(b), Out(out), block=(1, 1, 1), grid=(1, 1))
    sa, sb = a[0:1].view(np.int8).astype(int), b[0:1].view(np.int8).astype(int)
    ua, ub = a[0:1].view(np.uint8).astype(int), b[0:1].view(np.uint8).astype(int)
    assert out[0] == np.uint32((int(sa @ sb) + 5) % 2**32)
    assert out[1] == int(ua @ ub) + 5
    ha, hb = a[0:1].view(np.uint16).astype(int), b[0:1].view(np.uint16).astype(int)
    assert out[2] == int(np.array((ha + hb) % 65536, np.uint16).view(np.uint32)[0])
    assert out[3] == int(np.array((ha - hb) % 65536, np.uint16).view(np.uint32)[0])
    assert out[4] == int(np.array((ua + ub) % 256, np.uint8).view(np.uint32)[0])
    assert out[5] == int(np.array((ua - ub) % 256, np.uint8).view(np.uint32)[0])
    assert out[6] == 15 + 7


MATCH_SRC = r"""
__global__ void match(const int* keys, unsigned* any_out, unsigned* all_out, int* pred_out) {
  int t = threadIdx.x;
  any_out[t] = __match_any_sync(0xffffffffu, keys[t]);
  int pred;
  all_out[t] = __match_all_sync(0xffffffffu, keys[t] / 100, &pred);
  pred_out[t] = pred;
}
"""


def test_match_any_and_all_group_the_lanes_by_value():
    keys = np.array([i % 3 for i in range(32)], np.int32)
    any_out, all_out = np.empty(32, np.uint32), np.empty(32, np.uint32)
    pred = np.empty(32, np.int32)
    SourceModule(MATCH_SRC).get_function("match")(In(keys), Out(any_out), Out(all_out), Out(pred),
                                                  block=(32, 1, 1), grid=(1, 1))
    for lane in range(32):
        expect = sum(1 << l for l in range(32) if keys[l] == keys[lane])
        assert any_out[lane] == expect
    assert list(all_out) == [0xFFFFFFFF] * 32 and list(pred) == [1] * 32     # keys // 100 are all 0


DIVERGENT_BARRIERS = r"""
__global__ void two_barriers(float* x) {
  __shared__ float tile[64];
  int t = threadIdx.x;
  tile[t] = x[t];
  if (t < 32) {
    __syncthreads();
    x[t] = tile[63 - t];
  } else {
    __syncthreads();
    x[t] = tile[t - 32];
  }
}
__global__ void one_barrier_in_a_uniform_branch(float* x, int flag) {
  __shared__ float tile[64];
  int t = threadIdx.x;
  tile[t] = x[t];
  if (flag) { __syncthreads(); x[t] = tile[63 - t]; }
  else { __syncthreads(); x[t] = tile[t]; }
}
"""


def test_two_different_syncthreads_in_if_else_are_refused_with_both_lines():
    from gpuedu.emulator._args import InOut
    from gpuedu.emulator._errors import LaunchError
    mod = SourceModule(DIVERGENT_BARRIERS)
    x = np.arange(64, dtype=np.float32)
    with pytest.raises(LaunchError, match=r"different __syncthreads\(\).*line 7.*line 10|different __syncthreads\(\).*line 10.*line 7"):
        mod.get_function("two_barriers")(InOut(x), block=(64, 1, 1), grid=(1, 1))
    # a branch every thread takes the same way is fine, whichever barrier it holds
    y = np.arange(64, dtype=np.float32)
    mod.get_function("one_barrier_in_a_uniform_branch")(InOut(y), np.int32(1), block=(64, 1, 1), grid=(1, 1))
    assert list(y) == list(range(63, -1, -1))
