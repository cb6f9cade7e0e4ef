// fp16_convert.cu: float <-> half conversion, the first thing mixed precision does.
//
// version 1 (float_to_half, half_to_float): one element per thread with the
//   cuda_fp16.h intrinsics __float2half_rn / __half2float.  Round-to-nearest-even,
//   bit-for-bit what numpy's astype(np.float16) does for every finite and infinite
//   input (NaN payloads may differ: a GPU returns its canonical NaN).
// version 2 (float_to_half_bits): the same conversion done by hand with integer
//   operations on the IEEE-754 bit patterns, to show where the rounding happens
//   (bit-exact with numpy, NaN payloads included):
//   23 fraction bits become 10, the 13 dropped bits decide the rounding, and values
//   below 2^-14 become subnormals (fewer significant bits) or zero.
#include <cuda_fp16.h>

extern "C" __global__ void float_to_half(__half* __restrict__ dst,
                                         const float* __restrict__ src, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {                      // the last block may run past the end
        dst[i] = __float2half_rn(src[i]);
    }
}

extern "C" __global__ void half_to_float(float* __restrict__ dst,
                                         const __half* __restrict__ src, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = __half2float(src[i]);  // exact: every half is a float
    }
}

// Round the bits `kept` (with `dropped_bits` more bits below them in `value`) to
// nearest, ties to even.  Returns the rounded kept part (may carry one bit up).
__device__ unsigned int round_nearest_even(unsigned int value, int dropped_bits)
{
    unsigned int kept = value >> dropped_bits;
    unsigned int rest = value & ((1u << dropped_bits) - 1u);
    unsigned int half_way = 1u << (dropped_bits - 1);
    if (rest > half_way || (rest == half_way && (kept & 1u))) {
        kept += 1u;                   // a carry out of the fraction bumps the exponent: correct
    }
    return kept;
}

extern "C" __global__ void float_to_half_bits(unsigned short* __restrict__ dst,
                                              const float* __restrict__ src, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;

    unsigned int f = __float_as_uint(src[i]);
    unsigned int sign = (f >> 16) & 0x8000u;           // float bit 31 -> half bit 15
    int exponent = (int)((f >> 23) & 0xffu);           // biased by 127
    unsigned int fraction = f & 0x7fffffu;             // 23 bits
    unsigned int h;

    if (exponent == 0xff) {
        // Inf stays Inf.  NaN keeps the top 10 payload bits, as numpy does; if
        // those are all zero the result would read as Inf, so set the lowest bit.
        h = 0x7c00u | (fraction >> 13);
        if (fraction != 0u && h == 0x7c00u) h = 0x7c01u;
    } else {
        int e = exponent - 127 + 15;                   // rebias: half's bias is 15
        if (e >= 31) {
            h = 0x7c00u;                               // too big for any half: Inf
        } else if (e >= 1) {
            // Normal half: keep 10 of the 23 fraction bits, round on the other 13.
            // A carry from fraction 0x3ff rolls into the exponent; from e = 30 that
            // gives 0x7c00 = Inf, which is the right answer for x >= 65520.
            h = ((unsigned int)e << 10) + round_nearest_even(fraction, 13);
        } else {
            // Subnormal half (value < 2^-14): value = m * 2^-24.  With the implicit
            // leading 1 restored, m = significand >> (14 - e); past 24 bits of
            // shift even the leading 1 is below the rounding bit, so it is zero.
            int shift = 14 - e;
            h = (shift > 24) ? 0u : round_nearest_even(fraction | 0x800000u, shift);
        }
    }
    dst[i] = (unsigned short)(sign | h);
}
