// fp16_amp.cu: the kernels mixed-precision training adds around the FP16 layers.
//
// Loss scaling multiplies the loss (so every gradient) by S before the backward pass
// so that small gradients do not underflow to zero in FP16; the optimizer then needs
// the gradients divided by S again, in FP32, and must skip the step if any of them
// overflowed to Inf or became NaN.
//
// softmax_xent_half:    loss rows in FP32 from FP16 logits; dlogits = S*(p - onehot)/B in FP16
// bias_grad_half:       db = column sums of dz (FP16 in, FP32 sums, FP16 out)
// unscale_half_to_float: g32 = g16 / S into the FP32 master gradients, and a device flag
//                       raised on any Inf/NaN (the optimizer then updates the FP32 master
//                       weights, and fp16_convert's float_to_half refreshes the FP16 copy)
#include <cuda_fp16.h>

// One thread per row: with ~10 classes a row is too short to be worth a block.
extern "C" __global__ void softmax_xent_half(int batch, int classes,
                                             const __half* __restrict__ logits,
                                             const int* __restrict__ labels,
                                             float grad_scale,
                                             float* __restrict__ loss_rows,
                                             __half* __restrict__ dlogits)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= batch) return;
    const __half* z = logits + r * classes;
    // Softmax in FP32: exp of FP16 logits overflows FP16 for z > 11.
    float z_max = __half2float(z[0]);
    for (int c = 1; c < classes; ++c) z_max = fmaxf(z_max, __half2float(z[c]));
    // sum of exp over all classes, and over the wrong classes alone: for the label's class,
    // p - 1 = -others / sum, which keeps its digits when p is within a few ulps of 1 (a
    // confident model), where computing p first and then p - 1 would cancel them away.
    int y = labels[r];
    float sum = 0.0f, others = 0.0f;
    for (int c = 0; c < classes; ++c) {
        float e = expf(__half2float(z[c]) - z_max);
        sum += e;
        if (c != y) others += e;
    }
    loss_rows[r] = logf(sum) - (__half2float(z[y]) - z_max);
    // d(mean loss)/dz = (softmax - onehot) / batch, times the loss scale S
    float g = grad_scale / (float)batch;
    for (int c = 0; c < classes; ++c) {
        float p_minus_onehot = (c == y) ? -others / sum : expf(__half2float(z[c]) - z_max) / sum;
        dlogits[r * classes + c] = __float2half_rn(g * p_minus_onehot);
    }
}

// One thread per column walks down the rows; neighbouring threads read neighbouring
// columns, so each row's loads are coalesced.
extern "C" __global__ void bias_grad_half(int rows, int cols, const __half* __restrict__ dz,
                                          __half* __restrict__ db)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float sum = 0.0f;                                    // FP32 accumulation of FP16 values
    for (int r = 0; r < rows; ++r) sum += __half2float(dz[r * cols + c]);
    db[c] = __float2half_rn(sum);
}

extern "C" __global__ void unscale_half_to_float(int n, const __half* __restrict__ g16,
                                                 float inv_scale, float* __restrict__ g32,
                                                 int* __restrict__ found_inf)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = __half2float(g16[i]);
    if (!isfinite(g)) {
        // Every writer stores the same value, so the race between threads is harmless.
        *found_inf = 1;
    }
    g32[i] = g * inv_scale;
}
