// nn_activations.cu: activation layers on their own, one thread per element.
//
//   activation_forward   y = act(x)
//   activation_backward  dx = dy * act'(x)      (the local backward, next to its forward)
//   residual_add         y = a + b              (a transformer block's skip connections, forward and back)
//   count_nonfinite      status[0] += how many of x are NaN or inf; status[1] = max(status[1], rank) if any
//
// The dense layer fuses the same functions into its GEMM epilogue (nn_dense.cu); these kernels are for
// activation layers that stand alone.  Napkin math: forward reads 4 B and writes 4 B an element,
// backward reads 12 B and writes 4 B: both are bandwidth-bound.
#include "nn_activations.cuh"

// y = act(x), one thread per element.
extern "C" __global__ void activation_forward(float* y, const float* x, int n, int act) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)                      // the last block may run past the end
        y[i] = act_forward(act, x[i]);
}

// The local backward: dx = dy * act'(x), with y = act(x) from the forward (sigmoid and tanh use it).
extern "C" __global__ void activation_backward(float* dx, const float* dy, const float* x, const float* y,
                                               int n, int act) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dx[i] = dy[i] * act_derivative(act, x[i], y[i]);
}

// y = a + b, one thread per element: a skip connection x + f(x), and in the backward the gradient that
// reaches x both directly and through f.
extern "C" __global__ void residual_add(float* y, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a[i] + b[i];
}

// The training loop's check of a layer's activations: adds to status[0] how many of x[0..n) are NaN or infinite,
// and where there were any, raises status[1] to `rank` (the loop ranks its launches so that the largest is the
// earliest step and layer, and a zeroed status means none yet). A grid-stride loop, so a few blocks cover any
// layer; two atomics a block that found some.
extern "C" __global__ void count_nonfinite(int* status, const float* x, int n, int rank) {
    int bad = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        bad += !isfinite(x[i]);
    if (bad) {
        atomicAdd(&status[0], bad);
        atomicMax(&status[1], rank);
    }
}
