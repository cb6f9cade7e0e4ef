"""pycuda::complex (<pycuda-complex.hpp>) in kernels, checked against NumPy.

complex<float> is computed in float, so complex64 results are compared with NumPy's complex128
answers for the same inputs within float32's precision; complex128 results within double's.
"""
import numpy as np
import pytest

import gpuedu.emulator.gpuarray as gpuarray
from gpuedu.emulator._errors import CompileError
from gpuedu.emulator.compiler import SourceModule, build
from gpuedu.emulator.elementwise import ElementwiseKernel
from gpuedu.emulator.reduction import ReductionKernel

pytestmark = pytest.mark.usefixtures("context")

CTYPE = {np.complex64: "pycuda::complex<float>", np.complex128: "pycuda::complex<double>"}
REAL = {np.complex64: np.float32, np.complex128: np.float64}
REAL_CTYPE = {np.complex64: "float", np.complex128: "double"}
# a few units in the last place of the result (atol for results near zero, such as log|z| near |z| = 1)
TOLERANCE = {np.complex64: dict(rtol=4e-6, atol=1e-6), np.complex128: dict(rtol=1e-14, atol=1e-15)}
N = 1000
S = 1.75          # the real scalar argument s


def sample(dtype, n=N, seed=0):
    """Parts of magnitude 0.1 to 1.5 with either sign: away from 0, the branch cut of log and sqrt
    (the negative real axis) and the poles of tan and tanh, where float results lose their digits."""
    rng = np.random.default_rng(seed)
    parts = rng.uniform(0.1, 1.5, (2, n)) * rng.choice([-1, 1], (2, n))
    return (parts[0] + 1j * parts[1]).astype(dtype)


def inputs(dtype):
    z, w = sample(dtype, seed=1), sample(dtype, seed=2)
    w[::3] = z[::3]          # equal pairs for == and !=
    z[7] = S                 # a complex equal to the real s
    return z, w


def run(dtype, table, preamble=""):
    """One ElementwiseKernel computing every expression of `table` ((name, C expression, NumPy's
    answer from z, w, s and c)) into an array of its own; {name: (result, expected)}."""
    z, w = inputs(dtype)
    c = dtype(0.5 - 1.25j)
    z128, w128, c128 = z.astype(np.complex128), w.astype(np.complex128), complex(c)
    expected = {name: np.asarray(answer(z128, w128, S, c128)) for name, _, answer in table}
    outputs, declarations, statements = {}, [], []
    for k, (name, expression, _) in enumerate(table):
        kind = expected[name].dtype.kind
        out_dtype = dtype if kind == "c" else REAL[dtype] if kind == "f" else np.int32
        ctype = CTYPE[dtype] if kind == "c" else REAL_CTYPE[dtype] if kind == "f" else "int"
        declarations.append(f"{ctype} *out{k}")
        statements.append(f"out{k}[i] = {expression}")
        outputs[name] = gpuarray.empty(N, out_dtype)
    kernel = ElementwiseKernel(
        f"{CTYPE[dtype]} *z, {CTYPE[dtype]} *w, {REAL_CTYPE[dtype]} s, {CTYPE[dtype]} c, " + ", ".join(declarations),
        "; ".join(statements), "complex_table", preamble=preamble)
    kernel(gpuarray.to_gpu(z), gpuarray.to_gpu(w), REAL[dtype](S), c, *outputs.values())
    return {name: (outputs[name].get(), expected[name]) for name in outputs}


ARITHMETIC = [
    ("z + w", "z[i] + w[i]", lambda z, w, s, c: z + w),
    ("z - w", "z[i] - w[i]", lambda z, w, s, c: z - w),
    ("z * w", "z[i] * w[i]", lambda z, w, s, c: z * w),
    ("z / w", "z[i] / w[i]", lambda z, w, s, c: z / w),
    ("z + s", "z[i] + s", lambda z, w, s, c: z + s),
    ("s + z", "s + z[i]", lambda z, w, s, c: s + z),
    ("z - s", "z[i] - s", lambda z, w, s, c: z - s),
    ("s - z", "s - z[i]", lambda z, w, s, c: s - z),
    ("z * s", "z[i] * s", lambda z, w, s, c: z * s),
    ("s * z", "s * z[i]", lambda z, w, s, c: s * z),
    ("z / s", "z[i] / s", lambda z, w, s, c: z / s),
    ("s / z", "s / z[i]", lambda z, w, s, c: s / z),
    ("z * c (a complex scalar argument)", "z[i] * c", lambda z, w, s, c: z * c),
    ("-z", "-z[i]", lambda z, w, s, c: -z),
    ("+z", "+z[i]", lambda z, w, s, c: z),
    ("literals", "LITERAL(2.5) * z[i] + LITERAL(1.0)", lambda z, w, s, c: 2.5 * z + 1),
    ("assignment operators", "assignments(z[i], w[i], c, s)",
     lambda z, w, s, c: ((s + z - w) * c / w + s - s / 2) * s / (s + 1)),
    ("z == w", "z[i] == w[i]", lambda z, w, s, c: z == w),
    ("z != w", "z[i] != w[i]", lambda z, w, s, c: z != w),
    ("z == s", "z[i] == s", lambda z, w, s, c: z == s),
    ("s == z", "s == z[i]", lambda z, w, s, c: s == z),
    ("z != s", "z[i] != s", lambda z, w, s, c: z != s),
    ("s != z", "s != z[i]", lambda z, w, s, c: s != z),
]

ASSIGNMENTS = """
typedef {complex} cplx;
typedef {real} real_t;
#define LITERAL(x) {literal}

__device__ cplx assignments(cplx z, cplx w, cplx c, real_t s)
{{
  cplx t;                  // zero
  t = s;                   // s + 0i
  t += z; t -= w;          // complex right-hand sides
  t *= c; t /= w;
  t += s; t -= s / 2;      // real right-hand sides
  t *= s; t /= s + 1;
  return t;
}}
"""


@pytest.fixture(scope="module", params=[np.complex64, np.complex128], ids=["complex64", "complex128"])
def arithmetic(request):
    dtype = request.param
    literal = "x##f" if dtype == np.complex64 else "x"   # 2.5f beside a complex<float>, 2.5 beside a double one
    preamble = ASSIGNMENTS.format(complex=CTYPE[dtype], real=REAL_CTYPE[dtype], literal=literal)
    return dtype, run(dtype, ARITHMETIC, preamble)


@pytest.mark.parametrize("name", [name for name, _, _ in ARITHMETIC])
def test_arithmetic_matches_numpy(arithmetic, name):
    dtype, results = arithmetic
    got, expected = results[name]
    if expected.dtype == bool:
        assert expected.any() and not expected.all()      # the data has both answers
        np.testing.assert_array_equal(got, expected.astype(np.int32))
    else:
        np.testing.assert_allclose(got, expected, **TOLERANCE[dtype])


FUNCTIONS = [
    ("abs", "abs(z[i])", lambda z, w, s, c: np.abs(z)),
    ("arg", "arg(z[i])", lambda z, w, s, c: np.angle(z)),
    ("norm", "norm(z[i])", lambda z, w, s, c: np.abs(z) ** 2),
    ("real", "real(z[i])", lambda z, w, s, c: z.real),
    ("imag", "imag(z[i])", lambda z, w, s, c: z.imag),
    (".real() and .imag()", "z[i].real() - 2 * z[i].imag()", lambda z, w, s, c: z.real - 2 * z.imag),
    ("conj", "conj(z[i])", lambda z, w, s, c: np.conj(z)),
    ("polar", "pycuda::polar(s, real(z[i]))", lambda z, w, s, c: s * np.exp(1j * z.real)),
    ("polar of a magnitude", "pycuda::polar(imag(z[i]))", lambda z, w, s, c: z.imag + 0j),
    ("exp", "exp(z[i])", lambda z, w, s, c: np.exp(z)),
    ("log", "log(z[i])", lambda z, w, s, c: np.log(z)),
    ("log10", "log10(z[i])", lambda z, w, s, c: np.log10(z)),
    ("sqrt", "sqrt(z[i])", lambda z, w, s, c: np.sqrt(z)),
    ("sin", "sin(z[i])", lambda z, w, s, c: np.sin(z)),
    ("cos", "cos(z[i])", lambda z, w, s, c: np.cos(z)),
    ("tan", "tan(z[i])", lambda z, w, s, c: np.tan(z)),
    ("sinh", "sinh(z[i])", lambda z, w, s, c: np.sinh(z)),
    ("cosh", "cosh(z[i])", lambda z, w, s, c: np.cosh(z)),
    ("tanh", "tanh(z[i])", lambda z, w, s, c: np.tanh(z)),
    ("pow(complex, complex)", "pow(z[i], w[i])", lambda z, w, s, c: z ** w),
    ("pow(complex, real)", "pow(z[i], s)", lambda z, w, s, c: z ** s),
    ("pow(real, complex)", "pow(s, z[i])", lambda z, w, s, c: s ** z),
    ("pow(complex, int)", "pow(z[i], 3)", lambda z, w, s, c: z ** 3),
    ("pycuda:: qualified", "pycuda::exp(pycuda::conj(z[i]))", lambda z, w, s, c: np.exp(np.conj(z))),
]


@pytest.fixture(scope="module", params=[np.complex64, np.complex128], ids=["complex64", "complex128"])
def functions(request):
    return request.param, run(request.param, FUNCTIONS)


@pytest.mark.parametrize("name", [name for name, _, _ in FUNCTIONS])
def test_functions_match_numpy(functions, name):
    dtype, results = functions
    got, expected = results[name]
    np.testing.assert_allclose(got, expected, **TOLERANCE[dtype])


def test_edge_cases_of_the_functions():
    """Where a textbook formula fails in float: overflow in |z| and z / w, the sign of zero on the
    branch cut of sqrt, an infinite exp, tanh of a large real part."""
    z = np.array([3e30 + 4e30j, 2e30 + 4e30j, complex(-4, 0.0), complex(-4, -0.0), 100 + 0j, 100 + 1j],
                 np.complex64)
    kernel = ElementwiseKernel("pycuda::complex<float> *z, float *magnitude, pycuda::complex<float> *out",
                               "magnitude[i] = abs(z[i]); "
                               "out[i] = i == 1 ? z[i] / pycuda::complex<float>(1e30f, 1e30f) "
                               ": i < 4 ? sqrt(z[i]) : i == 4 ? exp(z[i]) : tanh(z[i])", "edges")
    magnitude, out = gpuarray.empty(6, np.float32), gpuarray.empty(6, np.complex64)
    kernel(gpuarray.to_gpu(z), magnitude, out)
    np.testing.assert_allclose(magnitude.get()[0], 5e30, rtol=1e-6)      # not inf
    got = out.get()
    np.testing.assert_allclose(got[1], 3 + 1j, rtol=1e-6)
    assert got[2] == 2j and got[3] == -2j
    assert got[4].real == np.inf and got[4].imag == 0            # not inf * sin(0) = nan
    np.testing.assert_allclose(got[5], np.tanh(complex(z[5])), rtol=1e-6)


def test_an_elementwise_kernel_needs_no_preamble_for_complex_numbers():
    """As in PyCUDA, whose template includes <pycuda-complex.hpp> itself; including it again is harmless."""
    z = sample(np.complex64)
    for preamble in ("", "#include <pycuda-complex.hpp>"):
        kernel = ElementwiseKernel("pycuda::complex<float> *z, float *r", "r[i] = abs(z[i])", "k", preamble=preamble)
        assert kernel.source.startswith("#include <pycuda-complex.hpp>")
        r = gpuarray.empty(N, np.float32)
        kernel(gpuarray.to_gpu(z), r)
        np.testing.assert_allclose(r.get(), np.abs(z.astype(np.complex128)), rtol=1e-6)


def test_precisions_convert_as_in_pycuda():
    """complex<float> widens to complex<double> by itself; the other way is written out."""
    z, w = sample(np.complex64), sample(np.complex128, seed=3)
    kernel = ElementwiseKernel(
        "pycuda::complex<float> *z, pycuda::complex<double> *w, pycuda::complex<double> *wide, "
        "pycuda::complex<float> *narrow",
        "pycuda::complex<double> d = z[i]; wide[i] = d * w[i]; "
        "narrow[i] = pycuda::complex<float>(w[i]) + z[i]; narrow[i] += w[i]", "convert")
    wide, narrow = gpuarray.empty(N, np.complex128), gpuarray.empty(N, np.complex64)
    kernel(gpuarray.to_gpu(z), gpuarray.to_gpu(w), wide, narrow)
    np.testing.assert_allclose(wide.get(), z.astype(np.complex128) * w, rtol=1e-13)
    np.testing.assert_allclose(narrow.get(), 2 * w + z, rtol=1e-6)


@pytest.mark.parametrize("operation,hint", [
    ("z[i] = z[i] * 2.0", True),                     # a double beside a complex<float>
    ("w[i] = 2 * w[i]", True),                       # an int beside a complex<double>
    ("z[i] = z[i] + w[i]", True),                    # two precisions
    ("pycuda::complex<float> f = w[i]", False),      # narrowing without saying so
])
def test_what_nvcc_refuses_is_refused(operation, hint):
    """PyCUDA's operators are templates: the operands' types must match exactly, with nvcc too."""
    with pytest.raises(CompileError) as error:
        ElementwiseKernel("pycuda::complex<float> *z, pycuda::complex<double> *w", operation, "refused")
    assert ("write 2.0f, not 2.0 or 2" in error.value.msg) == hint


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


def test_reduction_kernel_sums_complex_numbers():
    """Two stages (more than one block's worth of elements), and the complex zero as the neutral."""
    z = sample(np.complex64, n=100_000, seed=5)
    total = ReductionKernel(np.complex64, "0", "a+b", arguments="pycuda::complex<float> *z")(gpuarray.to_gpu(z))
    assert total.dtype == np.complex64
    np.testing.assert_allclose(total.get(), z.astype(np.complex128).sum(), atol=1e-7 * np.abs(z).sum())


def test_reduction_kernel_conjugated_dot_product():
    x, y = sample(np.complex128, n=5000, seed=6), sample(np.complex128, n=5000, seed=7)
    vdot = ReductionKernel(np.complex128, "pycuda::complex<double>(0)", "a+b", "conj(x[i])*y[i]",
                           "pycuda::complex<double> *x, pycuda::complex<double> *y")
    np.testing.assert_allclose(vdot(gpuarray.to_gpu(x), gpuarray.to_gpu(y)).get(), np.vdot(x, y), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=["complex64", "complex128"])
def test_gpuarray_operations_on_complex_arrays(dtype):
    a, b = sample(dtype, seed=8), sample(dtype, seed=9)
    ga, gb = gpuarray.to_gpu(a), gpuarray.to_gpu(b)
    tolerance = TOLERANCE[dtype]
    for got, expected in [(ga + gb, a + b), (ga - gb, a - b), (ga * gb, a * b), (ga / gb, a / b),
                          (ga + 2, a + 2), (3 - ga, 3 - a), (ga * 2.5, a * 2.5), (ga / 4, a / 4),
                          (ga * (1 + 2j), a * (1 + 2j)), ((1 - 1j) / ga, (1 - 1j) / a), (-ga, -a),
                          (ga.conj(), np.conj(a))]:
        assert got.dtype == dtype
        np.testing.assert_allclose(got.get(), expected, **tolerance)
    for got, expected in [(abs(ga), np.abs(a)), (ga.real, a.real), (ga.imag, a.imag)]:
        assert got.dtype == REAL[dtype]
        np.testing.assert_allclose(got.get(), expected, **tolerance)
    wide_a, wide_b = a.astype(np.complex128), b.astype(np.complex128)
    for got, expected in [(gpuarray.dot(ga, gb), np.dot(wide_a, wide_b)), (gpuarray.sum(ga), wide_a.sum())]:
        assert got.dtype == dtype
        np.testing.assert_allclose(got.get(), expected, rtol=tolerance["rtol"], atol=N * tolerance["atol"])


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=["complex64", "complex128"])
def test_parts_have_the_precision_pytools_gives_as_in_pycuda(dtype):
    # pytools is one of gpuedu's dependencies because code written for pycuda uses it beside pycuda, as PyCUDA's
    # own test_complex_bits does: the real type of a complex array is pytools.match_precision's, and the
    # emulator's parts, absolute values and random arrays of that type must agree with it.
    from pytools import match_precision

    from gpuedu.emulator import curandom
    real = match_precision(np.dtype(np.float64), np.dtype(dtype))
    assert real == REAL[dtype]
    z = curandom.rand((50,), real).astype(dtype) + 1j * curandom.rand((50,), real).astype(dtype)
    assert z.dtype == dtype
    for part, expected in [(z.real, z.get().real), (z.imag, z.get().imag), (abs(z), np.abs(z.get()))]:
        assert part.dtype == real
        np.testing.assert_allclose(part.get(), expected, **TOLERANCE[dtype])
    np.testing.assert_array_equal(z.conj().get(), np.conj(z.get()))
