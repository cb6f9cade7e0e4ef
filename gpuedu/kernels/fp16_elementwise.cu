// fp16_elementwise.cu: elementwise kernels on half-precision data.
//
// A __half is 2 bytes; a __half2 packs two of them in one 32-bit register, and
// one __hfma2 / __hadd2 instruction works on both lanes.  Elementwise kernels are
// bound by memory traffic, so the win of half over float is that every byte moved
// carries twice as many values; half2 also halves the number of load/store
// instructions and of arithmetic instructions.
//
// version 1 (half_axpy):  y = a*x + y, one __half per thread.
// version 2 (half2_axpy): the same, two halves per thread as one __half2; when n
//   is odd the thread owning the last pair handles the lone tail element.
// half2_relu, half2_relu_backward, half2_bias_add: the layer pieces mixed-precision
//   training needs, written the version-2 way.
//
// Pointers into a __half array are reinterpreted as __half2 only at even element
// indices, so every __half2 access is 4-byte aligned (allocations are aligned).
#include <cuda_fp16.h>

extern "C" __global__ void half_axpy(__half* __restrict__ y, const __half* __restrict__ x,
                                     int n, float a)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        // one rounding: a*x + y is computed exactly, then rounded to half
        y[i] = __hfma(__float2half_rn(a), x[i], y[i]);
    }
}

extern "C" __global__ void half2_axpy(__half* __restrict__ y, const __half* __restrict__ x,
                                      int n, float a)
{
    int pair = blockIdx.x * blockDim.x + threadIdx.x;   // this thread owns elements 2*pair, 2*pair+1
    int i = 2 * pair;
    if (i + 1 < n) {
        __half2 a2 = __float2half2_rn(a);                // a in both lanes
        __half2 x2 = reinterpret_cast<const __half2*>(x)[pair];
        __half2 y2 = reinterpret_cast<const __half2*>(y)[pair];
        reinterpret_cast<__half2*>(y)[pair] = __hfma2(a2, x2, y2);
    } else if (i < n) {
        // n is odd and this is the last element: no partner lane to pair it with
        y[i] = __hfma(__float2half_rn(a), x[i], y[i]);
    }
}

extern "C" __global__ void half2_relu(__half* __restrict__ y, const __half* __restrict__ x,
                                      int n)
{
    int pair = blockIdx.x * blockDim.x + threadIdx.x;
    int i = 2 * pair;
    const __half zero = __float2half_rn(0.0f);
    if (i + 1 < n) {
        __half2 x2 = reinterpret_cast<const __half2*>(x)[pair];
        reinterpret_cast<__half2*>(y)[pair] = __hmax2(x2, __half2half2(zero));
    } else if (i < n) {
        y[i] = __hmax(x[i], zero);
    }
}

// dx = dy where the forward input z was > 0, else 0 (ReLU's local derivative).
extern "C" __global__ void half2_relu_backward(__half* __restrict__ dx,
                                               const __half* __restrict__ dy,
                                               const __half* __restrict__ z, int n)
{
    int pair = blockIdx.x * blockDim.x + threadIdx.x;
    int i = 2 * pair;
    const __half zero = __float2half_rn(0.0f);
    if (i + 1 < n) {
        __half2 dy2 = reinterpret_cast<const __half2*>(dy)[pair];
        __half2 z2 = reinterpret_cast<const __half2*>(z)[pair];
        // a select per lane, not dy*mask: 0*Inf would be NaN and 0*(-g) would be -0
        __half lo = __hgt(__low2half(z2), zero) ? __low2half(dy2) : zero;
        __half hi = __hgt(__high2half(z2), zero) ? __high2half(dy2) : zero;
        reinterpret_cast<__half2*>(dx)[pair] = __halves2half2(lo, hi);
    } else if (i < n) {
        dx[i] = __hgt(z[i], zero) ? dy[i] : zero;
    }
}

// y[r, c] = x[r, c] + bias[c] for a row-major rows x cols matrix.
extern "C" __global__ void half2_bias_add(__half* __restrict__ y, const __half* __restrict__ x,
                                          const __half* __restrict__ bias, int rows, int cols)
{
    int n = rows * cols;
    int pair = blockIdx.x * blockDim.x + threadIdx.x;
    int i = 2 * pair;                                    // flat index of the pair's first element
    if (i + 1 < n) {
        // With cols odd a pair can straddle two rows, so each lane finds its own
        // column; the x and y accesses stay vectorised.
        __half2 b2 = __halves2half2(bias[i % cols], bias[(i + 1) % cols]);
        __half2 x2 = reinterpret_cast<const __half2*>(x)[pair];
        reinterpret_cast<__half2*>(y)[pair] = __hadd2(x2, b2);
    } else if (i < n) {
        y[i] = __hadd(x[i], bias[i % cols]);
    }
}
