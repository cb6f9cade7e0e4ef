"""pycuda::complex (<pycuda-complex.hpp>) in kernels, checked against NumPy.

complex<float> is computed in float, so complex64 results are compared with NumPy's complex128
answers for the same inputs within float32's precision; complex128 results within double's.
"""
import numpy as np
import pytest

import gpuedu.emulator.gpuarray as gpuarray
from gpuedu.emulator.compiler import SourceModule, build

pytestmark = pytest.mark.usefixtures("context")

N = 1000


def sample(dtype, n=N, seed=0):
    """Parts of magnitude 0.1 to 1.5 with either sign: away from 0, the branch cut of log and sqrt
    (the negative real axis) and the poles of tan and tanh, where float results lose their digits."""
    rng = np.random.default_rng(seed)
    parts = rng.uniform(0.1, 1.5, (2, n)) * rng.choice([-1, 1], (2, n))
    return (parts[0] + 1j * parts[1]).astype(dtype)


# Kernels as PyCUDA code writes them: the header included inside the extern "C" { } SourceModule adds.
COMPLEX_SRC = r"""
#include <pycuda-complex.hpp>
typedef pycuda::complex<float> cfloat;

// z[i] <- gain * z[i] * e^(i theta); |result| into magnitude
__global__ void rotate(cfloat *z, float *magnitude, cfloat gain, float theta, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    cfloat r = gain * z[i] * pycuda::polar(1.0f, theta);
    z[i] = r;
    magnitude[i] = abs(r);
  }
}

// out[i] = |w[i]|^2 twice over: norm(w) and w times its conjugate
__global__ void power(const pycuda::complex<double> *w, double *out, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = norm(w[i]) + (conj(w[i]) * w[i]).real();
}

// volatile complex numbers, as a warp-synchronous reduction step reads them: z[i] <- (2 z[i])^2
__global__ void through_volatile(cfloat *z, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    volatile cfloat *v = z;
    v[i] = v[i] + v[i];
    v[i] = v[i] * v[i];
  }
}
"""


def test_source_module_with_pycuda_complex():
    module = SourceModule(COMPLEX_SRC)
    z, w = sample(np.complex64), sample(np.complex128, seed=4)
    gain, theta = np.complex64(0.5 + 2j), np.float32(0.3)
    gz, magnitude, out = gpuarray.to_gpu(z), gpuarray.empty(N, np.float32), gpuarray.empty(N, np.float64)
    launch = dict(block=(128, 1, 1), grid=(-(-N // 128), 1))
    module.get_function("rotate")(gz, magnitude, gain, theta, np.int32(N), **launch)
    expected = complex(gain) * z.astype(np.complex128) * np.exp(1j * float(theta))
    np.testing.assert_allclose(gz.get(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(magnitude.get(), np.abs(expected), rtol=1e-5)
    module.get_function("power")(gpuarray.to_gpu(w), out, np.int32(N), **launch)
    np.testing.assert_allclose(out.get(), 2 * np.abs(w) ** 2, rtol=1e-13)
    gz = gpuarray.to_gpu(z)
    module.get_function("through_volatile")(gz, np.int32(N), **launch)
    np.testing.assert_allclose(gz.get(), (2 * z.astype(np.complex128)) ** 2, rtol=1e-5, atol=1e-6)


def test_the_instrumented_build_compiles_it_too():
    """gpuedu.profile() and memcheck() run the same source built with instrumentation."""
    assert build(COMPLEX_SRC, profile=True).endswith(".so")
