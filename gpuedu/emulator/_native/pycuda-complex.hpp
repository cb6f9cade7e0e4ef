// pycuda-complex.hpp: PyCUDA's complex numbers in device code, for the CPU emulator.
//
// PyCUDA ships a header of this name (in pycuda/cuda/, which its SourceModule puts on nvcc's include
// path) and its ElementwiseKernel and ReductionKernel include it in every kernel they generate. It
// defines pycuda::complex<float> and pycuda::complex<double>, the C types of NumPy's complex64 and
// complex128: two numbers, the real part then the imaginary part, aligned as one of them.
//
// This is the emulator's own implementation of that interface. It accepts and refuses what PyCUDA's
// header does under nvcc, so that a kernel which compiles here compiles on a GPU:
//   - construction from nothing (zero), a real, or a real and an imaginary part; complex<float>
//     converts to complex<double> implicitly, complex<double> to complex<float> only explicitly;
//   - z.real(), z.imag(); =, +=, -=, *=, /= with a complex or a real right-hand side;
//   - +, -, *, /, == and != between two complex<T>, or between a complex<T> and a T in either order.
//     These are templates, so T must match exactly: complex<float> * 2.0f compiles, complex<float> * 2.0
//     (a double) and complex<double> * 2 (an int) do not, with nvcc either;
//   - real, imag, abs, arg, norm, conj, polar; and, for float and double, exp, log, log10, sqrt, sin,
//     cos, tan, sinh, cosh, tanh and pow (complex and complex, complex and real, real and complex; an
//     int exponent is taken as a real one). Unqualified calls find them by argument-dependent lookup:
//     in a kernel, abs(z[i]) of a pycuda::complex is pycuda::abs. polar takes no complex argument, so
//     it is called as pycuda::polar;
//   - a volatile complex may be assigned to, and added or multiplied (the warp-synchronous step of a
//     reduction in shared memory, as PyCUDA's older reduction template wrote it).
// complex<float> is computed in float with the C library's float functions, as a GPU computes it, so
// complex64 results agree with NumPy's to float precision, not bit for bit.
//
// It is plain CUDA C++ that nvcc compiles too. It opens an extern "C++" block, so it may be included
// inside the extern "C" { } that SourceModule wraps a source in, as PyCUDA's may.
#pragma once

extern "C++" {
namespace pycuda {

namespace detail {

// Only true conditions have a ::type: the switch between implicit and explicit conversions below.
template <bool Condition> struct only_if {};
template <> struct only_if<true> { typedef int type; };

// The real functions the complex ones are built on, in the precision of their argument: expf for a
// float, exp for a double, as the CUDA math library has them.
#define PYCUDA_COMPLEX_REAL_FUNCTION(name)                                              \
  __host__ __device__ inline float name(float x) { return ::name##f(x); }               \
  __host__ __device__ inline double name(double x) { return ::name(x); }
PYCUDA_COMPLEX_REAL_FUNCTION(fabs)
PYCUDA_COMPLEX_REAL_FUNCTION(sqrt)
PYCUDA_COMPLEX_REAL_FUNCTION(exp)
PYCUDA_COMPLEX_REAL_FUNCTION(log)
PYCUDA_COMPLEX_REAL_FUNCTION(sin)
PYCUDA_COMPLEX_REAL_FUNCTION(cos)
PYCUDA_COMPLEX_REAL_FUNCTION(sinh)
PYCUDA_COMPLEX_REAL_FUNCTION(cosh)
#undef PYCUDA_COMPLEX_REAL_FUNCTION
#define PYCUDA_COMPLEX_REAL_FUNCTION2(name)                                             \
  __host__ __device__ inline float name(float x, float y) { return ::name##f(x, y); }   \
  __host__ __device__ inline double name(double x, double y) { return ::name(x, y); }
PYCUDA_COMPLEX_REAL_FUNCTION2(hypot)
PYCUDA_COMPLEX_REAL_FUNCTION2(atan2)
PYCUDA_COMPLEX_REAL_FUNCTION2(pow)
PYCUDA_COMPLEX_REAL_FUNCTION2(copysign)
#undef PYCUDA_COMPLEX_REAL_FUNCTION2

}  // namespace detail

template <class T>
struct complex {
  typedef T value_type;

  // Zero by default, like PyCUDA's: `complex<float> acc;` starts a sum at 0.
  __host__ __device__ constexpr complex(const T& re = T(), const T& im = T()) : _M_re(re), _M_im(im) {}

  // Between precisions: widening (float to double) is implicit, narrowing needs complex<float>(w).
  template <class U, typename detail::only_if<(sizeof(U) <= sizeof(T))>::type = 0>
  __host__ __device__ constexpr complex(const complex<U>& z) : _M_re(z._M_re), _M_im(z._M_im) {}
  template <class U, typename detail::only_if<(sizeof(U) > sizeof(T))>::type = 0>
  __host__ __device__ constexpr explicit complex(const complex<U>& z) : _M_re(T(z._M_re)), _M_im(T(z._M_im)) {}

  __host__ __device__ constexpr T real() const { return _M_re; }
  __host__ __device__ constexpr T imag() const { return _M_im; }

  // Assignment from a real sets the imaginary part to zero; from a complex of any precision, both.
  // (Copying a complex<T> is the compiler's own trivial copy: complex<T> stays trivially copyable.)
  __host__ __device__ complex& operator=(const T& x) { _M_re = x; _M_im = T(); return *this; }
  template <class U> __host__ __device__ complex& operator=(const complex<U>& z) {
    _M_re = z._M_re;
    _M_im = z._M_im;
    return *this;
  }
  __host__ __device__ volatile complex& operator=(const T& x) volatile { _M_re = x; _M_im = T(); return *this; }
  template <class U> __host__ __device__ volatile complex& operator=(const complex<U>& z) volatile {
    _M_re = z._M_re;
    _M_im = z._M_im;
    return *this;
  }

  __host__ __device__ complex& operator+=(const T& x) { _M_re += x; return *this; }
  __host__ __device__ complex& operator-=(const T& x) { _M_re -= x; return *this; }
  __host__ __device__ complex& operator*=(const T& x) { _M_re *= x; _M_im *= x; return *this; }
  __host__ __device__ complex& operator/=(const T& x) { _M_re /= x; _M_im /= x; return *this; }

  template <class U> __host__ __device__ complex& operator+=(const complex<U>& z) {
    _M_re += z._M_re;
    _M_im += z._M_im;
    return *this;
  }
  template <class U> __host__ __device__ complex& operator-=(const complex<U>& z) {
    _M_re -= z._M_re;
    _M_im -= z._M_im;
    return *this;
  }
  template <class U> __host__ __device__ complex& operator*=(const complex<U>& z) {
    return *this = *this * complex(T(z._M_re), T(z._M_im));
  }
  template <class U> __host__ __device__ complex& operator/=(const complex<U>& z) {
    return *this = *this / complex(T(z._M_re), T(z._M_im));
  }

  // The names PyCUDA's header gives the parts; kernels written for it sometimes read them directly.
  T _M_re;
  T _M_im;
};

// ---- arithmetic ---------------------------------------------------------------------------------

template <class T> __host__ __device__ inline complex<T> operator+(const complex<T>& z) { return z; }
template <class T> __host__ __device__ inline complex<T> operator-(const complex<T>& z) {
  return complex<T>(-z._M_re, -z._M_im);
}

template <class T> __host__ __device__ inline complex<T> operator+(const complex<T>& a, const complex<T>& b) {
  return complex<T>(a._M_re + b._M_re, a._M_im + b._M_im);
}
template <class T> __host__ __device__ inline complex<T> operator+(const complex<T>& z, const T& x) {
  return complex<T>(z._M_re + x, z._M_im);
}
template <class T> __host__ __device__ inline complex<T> operator+(const T& x, const complex<T>& z) {
  return complex<T>(x + z._M_re, z._M_im);
}

template <class T> __host__ __device__ inline complex<T> operator-(const complex<T>& a, const complex<T>& b) {
  return complex<T>(a._M_re - b._M_re, a._M_im - b._M_im);
}
template <class T> __host__ __device__ inline complex<T> operator-(const complex<T>& z, const T& x) {
  return complex<T>(z._M_re - x, z._M_im);
}
template <class T> __host__ __device__ inline complex<T> operator-(const T& x, const complex<T>& z) {
  return complex<T>(x - z._M_re, -z._M_im);
}

// (a + bi)(c + di) = (ac - bd) + (ad + bc)i, computed as written (as on a GPU, and as NumPy does).
template <class T> __host__ __device__ inline complex<T> operator*(const complex<T>& a, const complex<T>& b) {
  return complex<T>(a._M_re * b._M_re - a._M_im * b._M_im, a._M_re * b._M_im + a._M_im * b._M_re);
}
template <class T> __host__ __device__ inline complex<T> operator*(const complex<T>& z, const T& x) {
  return complex<T>(z._M_re * x, z._M_im * x);
}
template <class T> __host__ __device__ inline complex<T> operator*(const T& x, const complex<T>& z) {
  return complex<T>(x * z._M_re, x * z._M_im);
}

namespace detail {
// (a + bi) / (c + di) by Smith's method: dividing through by the larger of |c| and |d| first keeps
// c*c + d*d, which the schoolbook formula needs, from overflowing or underflowing.
template <class T> __host__ __device__ inline complex<T> divide(T a, T b, T c, T d) {
  if (fabs(c) >= fabs(d)) {
    T ratio = d / c, denominator = c + d * ratio;
    return complex<T>((a + b * ratio) / denominator, (b - a * ratio) / denominator);
  }
  T ratio = c / d, denominator = c * ratio + d;
  return complex<T>((a * ratio + b) / denominator, (b * ratio - a) / denominator);
}
}  // namespace detail

template <class T> __host__ __device__ inline complex<T> operator/(const complex<T>& a, const complex<T>& b) {
  return detail::divide(a._M_re, a._M_im, b._M_re, b._M_im);
}
template <class T> __host__ __device__ inline complex<T> operator/(const complex<T>& z, const T& x) {
  return complex<T>(z._M_re / x, z._M_im / x);
}
template <class T> __host__ __device__ inline complex<T> operator/(const T& x, const complex<T>& z) {
  return detail::divide(x, T(), z._M_re, z._M_im);
}

// A volatile operand (shared memory read without a barrier): + and *, as PyCUDA's header has them.
template <class T>
__host__ __device__ inline complex<T> operator+(const volatile complex<T>& a, const volatile complex<T>& b) {
  return complex<T>(a._M_re + b._M_re, a._M_im + b._M_im);
}
template <class T>
__host__ __device__ inline complex<T> operator*(const volatile complex<T>& a, const volatile complex<T>& b) {
  return complex<T>(a._M_re * b._M_re - a._M_im * b._M_im, a._M_re * b._M_im + a._M_im * b._M_re);
}

// ---- comparisons --------------------------------------------------------------------------------

template <class T> __host__ __device__ inline bool operator==(const complex<T>& a, const complex<T>& b) {
  return a._M_re == b._M_re && a._M_im == b._M_im;
}
template <class T> __host__ __device__ inline bool operator==(const complex<T>& z, const T& x) {
  return z._M_re == x && z._M_im == T();
}
template <class T> __host__ __device__ inline bool operator==(const T& x, const complex<T>& z) { return z == x; }
template <class T> __host__ __device__ inline bool operator!=(const complex<T>& a, const complex<T>& b) {
  return !(a == b);
}
template <class T> __host__ __device__ inline bool operator!=(const complex<T>& z, const T& x) { return !(z == x); }
template <class T> __host__ __device__ inline bool operator!=(const T& x, const complex<T>& z) { return !(z == x); }

// ---- parts, magnitude, angle --------------------------------------------------------------------

template <class T> __host__ __device__ inline T real(const complex<T>& z) { return z._M_re; }
template <class T> __host__ __device__ inline T imag(const complex<T>& z) { return z._M_im; }
// |z| by hypot: no overflow in re*re + im*im for large parts.
template <class T> __host__ __device__ inline T abs(const complex<T>& z) { return detail::hypot(z._M_re, z._M_im); }
// The angle in (-pi, pi]; the sign of a zero imaginary part picks the side of the negative real axis.
template <class T> __host__ __device__ inline T arg(const complex<T>& z) { return detail::atan2(z._M_im, z._M_re); }
// |z|^2 (std::norm's meaning, not a vector norm).
template <class T> __host__ __device__ inline T norm(const complex<T>& z) {
  return z._M_re * z._M_re + z._M_im * z._M_im;
}
template <class T> __host__ __device__ inline complex<T> conj(const complex<T>& z) {
  return complex<T>(z._M_re, -z._M_im);
}
// rho * e^(i phi)
template <class T> __host__ __device__ inline complex<T> polar(const T& rho) { return complex<T>(rho, T()); }
template <class T> __host__ __device__ inline complex<T> polar(const T& rho, const T& phi) {
  return complex<T>(rho * detail::cos(phi), rho * detail::sin(phi));
}

// ---- transcendental functions -------------------------------------------------------------------
// Written once for any precision in detail, then declared for float and double only. They are not
// templates, so that an argument converts as in PyCUDA: pow(z, 2) takes the int as a real exponent.

namespace detail {

// The principal root (real part >= 0), from t = sqrt((|x| + |z|) / 2), which loses no digits to
// cancellation; the other part is y / 2t. On the negative real axis the sign of a zero imaginary
// part chooses the root: sqrt(-4 + 0i) = 2i, sqrt(-4 - 0i) = -2i.
template <class T> __host__ __device__ inline complex<T> sqrt_of(const complex<T>& z) {
  T x = z._M_re, y = z._M_im;
  if (x == T() && y == T()) return complex<T>(T(), y);
  T t = sqrt(T(0.5) * (fabs(x) + hypot(x, y)));
  if (x >= T()) return complex<T>(t, y / (T(2) * t));
  return complex<T>(fabs(y) / (T(2) * t), copysign(t, y));
}

// e^(x + iy) = e^x (cos y + i sin y); a real argument stays real (e^x may be infinite, and inf * sin 0
// would be NaN).
template <class T> __host__ __device__ inline complex<T> exp_of(const complex<T>& z) {
  T magnitude = exp(z._M_re);
  if (z._M_im == T()) return complex<T>(magnitude, z._M_im);
  return complex<T>(magnitude * cos(z._M_im), magnitude * sin(z._M_im));
}

// The principal logarithm: log|z| + i arg z.
template <class T> __host__ __device__ inline complex<T> log_of(const complex<T>& z) {
  return complex<T>(log(hypot(z._M_re, z._M_im)), atan2(z._M_im, z._M_re));
}

template <class T> __host__ __device__ inline complex<T> log10_of(const complex<T>& z) {
  const T one_over_ln10 = T(0.434294481903251827651128918916605082);
  return log_of(z) * one_over_ln10;
}

// a^b = e^(b log a) for complex a and b; 0^b is 1 for b = 0 and 0 when b's real part is positive.
template <class T> __host__ __device__ inline complex<T> pow_of(const complex<T>& a, const complex<T>& b) {
  if (b._M_re == T() && b._M_im == T()) return complex<T>(T(1));
  if (a._M_re == T() && a._M_im == T() && b._M_re > T()) return complex<T>();
  return exp_of(b * log_of(a));
}

// z^y for a real y: |z|^y e^(i y arg z), with a positive real z kept on the real axis (4^0.5 is 2
// exactly, not 2 + a rounding error times i).
template <class T> __host__ __device__ inline complex<T> pow_of(const complex<T>& z, const T& y) {
  if (z._M_im == T() && z._M_re > T()) return complex<T>(pow(z._M_re, y));
  return polar(pow(hypot(z._M_re, z._M_im), y), y * atan2(z._M_im, z._M_re));
}

// x^w for a real x: for x > 0, x^w = x^Re(w) e^(i Im(w) log x); otherwise as a complex base.
template <class T> __host__ __device__ inline complex<T> pow_of(const T& x, const complex<T>& w) {
  if (x > T()) return polar(pow(x, w._M_re), w._M_im * log(x));
  return pow_of(complex<T>(x), w);
}

template <class T> __host__ __device__ inline complex<T> sin_of(const complex<T>& z) {
  return complex<T>(sin(z._M_re) * cosh(z._M_im), cos(z._M_re) * sinh(z._M_im));
}
template <class T> __host__ __device__ inline complex<T> cos_of(const complex<T>& z) {
  return complex<T>(cos(z._M_re) * cosh(z._M_im), -sin(z._M_re) * sinh(z._M_im));
}
template <class T> __host__ __device__ inline complex<T> sinh_of(const complex<T>& z) {
  return complex<T>(sinh(z._M_re) * cos(z._M_im), cosh(z._M_re) * sin(z._M_im));
}
template <class T> __host__ __device__ inline complex<T> cosh_of(const complex<T>& z) {
  return complex<T>(cosh(z._M_re) * cos(z._M_im), sinh(z._M_re) * sin(z._M_im));
}

// tanh(x + iy) = (sinh x cosh x + i sin y cos y) / (sinh^2 x + cos^2 y): the usual
// (sinh 2x + i sin 2y) / (cosh 2x + cos 2y) with its denominator written without cancellation.
// For |x| > 20, tanh x is +-1 in double precision and cosh x would soon overflow: the imaginary part
// is then sin 2y / cosh 2x ~ 2 sin 2y e^(-2|x|), which underflows gracefully instead.
template <class T> __host__ __device__ inline complex<T> tanh_of(const complex<T>& z) {
  T x = z._M_re, y = z._M_im;
  if (fabs(x) > T(20)) return complex<T>(copysign(T(1), x), T(4) * sin(y) * cos(y) * exp(T(-2) * fabs(x)));
  T sh = sinh(x), ch = cosh(x), s = sin(y), c = cos(y);
  T denominator = sh * sh + c * c;
  return complex<T>(sh * ch / denominator, s * c / denominator);
}

// tan z = -i tanh(iz)
template <class T> __host__ __device__ inline complex<T> tan_of(const complex<T>& z) {
  complex<T> t = tanh_of(complex<T>(-z._M_im, z._M_re));
  return complex<T>(t._M_im, -t._M_re);
}

}  // namespace detail

#define PYCUDA_COMPLEX_FUNCTION(name)                                                                    \
  __host__ __device__ inline complex<float> name(const complex<float>& z) { return detail::name##_of(z); } \
  __host__ __device__ inline complex<double> name(const complex<double>& z) { return detail::name##_of(z); }
PYCUDA_COMPLEX_FUNCTION(sqrt)
PYCUDA_COMPLEX_FUNCTION(exp)
PYCUDA_COMPLEX_FUNCTION(log)
PYCUDA_COMPLEX_FUNCTION(log10)
PYCUDA_COMPLEX_FUNCTION(sin)
PYCUDA_COMPLEX_FUNCTION(cos)
PYCUDA_COMPLEX_FUNCTION(tan)
PYCUDA_COMPLEX_FUNCTION(sinh)
PYCUDA_COMPLEX_FUNCTION(cosh)
PYCUDA_COMPLEX_FUNCTION(tanh)
#undef PYCUDA_COMPLEX_FUNCTION

__host__ __device__ inline complex<float> pow(const complex<float>& a, const complex<float>& b) {
  return detail::pow_of(a, b);
}
__host__ __device__ inline complex<float> pow(const complex<float>& z, const float& y) { return detail::pow_of(z, y); }
__host__ __device__ inline complex<float> pow(const float& x, const complex<float>& w) { return detail::pow_of(x, w); }
__host__ __device__ inline complex<double> pow(const complex<double>& a, const complex<double>& b) {
  return detail::pow_of(a, b);
}
__host__ __device__ inline complex<double> pow(const complex<double>& z, const double& y) {
  return detail::pow_of(z, y);
}
__host__ __device__ inline complex<double> pow(const double& x, const complex<double>& w) {
  return detail::pow_of(x, w);
}

}  // namespace pycuda
}  // extern "C++"
