// elementwise.cu: activation functions phi(x) applied to every element, out[i] = phi(in[i]).
//
// The work is embarrassingly parallel: each output depends on one input, so the only questions
// are how threads map to elements and how wide each memory access is.
//
// version 1: one thread per element, a bounds guard for the partial last block
// version 2: a grid-stride loop, so a fixed-size grid covers any n (and each thread does several)
// version 3: float4 loads and stores (16 bytes per access, a quarter of the memory instructions),
//            with a scalar loop for the n % 4 elements left at the end
//
// The activation is chosen by an int (the ACT_* codes of activations.cuh, which Python reads as
// gpuedu.kernels.ACTIVATIONS), so the three versions serve every activation. The bandwidth of all three is bound by memory: 8 bytes
// per element (4 read, 4 written) and at most a few FLOPs.
#include "common.cuh"
#include "activations.cuh"

// phi(x) for the chosen activation; alpha is the slope of leaky ReLU and the scale of ELU.
__device__ inline float activate(int act, float x, float alpha) {
    switch (act) {
    case ACT_RELU:       return fmaxf(x, 0.0f);
    case ACT_LEAKY_RELU: return x > 0.0f ? x : alpha * x;
    case ACT_SIGMOID:    return 1.0f / (1.0f + expf(-x));
    case ACT_TANH:       return tanhf(x);
    case ACT_GELU: {
        // The tanh approximation of x * Phi(x) used by GPT-2 and friends.
        const float k = 0.7978845608028654f;  // sqrt(2 / pi)
        return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
    }
    case ACT_SILU:       return x / (1.0f + expf(-x));
    case ACT_ELU:        return x > 0.0f ? x : alpha * (expf(x) - 1.0f);
    default:             return x;  // ACT_NONE (the launcher refuses unknown codes)
    }
}

extern "C" __global__ void activation_kernel1(float* out, const float* in, int n, int act, float alpha) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)  // the last block may run past the end of the array
        out[i] = activate(act, in[i], alpha);
}

extern "C" __global__ void activation_kernel2(float* out, const float* in, int n, int act, float alpha) {
    // Thread t handles elements t, t + stride, t + 2*stride, ... where stride is the whole grid:
    // neighbouring threads still touch neighbouring elements in each step (coalesced).
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = activate(act, in[i], alpha);
}

extern "C" __global__ void activation_kernel3(float* out, const float* in, int n, int act, float alpha) {
    // Each thread moves one float4 (four consecutive floats). The arrays must be 16-byte aligned,
    // which cudaMalloc/mem_alloc guarantees for the start of an allocation.
    int n4 = n / 4;
    int stride = gridDim.x * blockDim.x;
    const float4* in4 = reinterpret_cast<const float4*>(in);
    float4* out4 = reinterpret_cast<float4*>(out);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = in4[i];
        v.x = activate(act, v.x, alpha);
        v.y = activate(act, v.y, alpha);
        v.z = activate(act, v.z, alpha);
        v.w = activate(act, v.w, alpha);
        out4[i] = v;
    }
    // The tail: the last n % 4 elements do not fill a float4, so the first threads of the grid
    // handle them one by one.
    int tail = 4 * n4 + blockIdx.x * blockDim.x + threadIdx.x;
    if (tail < n)
        out[tail] = activate(act, in[tail], alpha);
}
