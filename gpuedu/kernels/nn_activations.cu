// nn_activations.cu: activation layers on their own, one thread per element.
//
//   activation_forward   y = act(x)
//   activation_backward  dx = dy * act'(x)      (the local backward, next to its forward)
//   residual_add         y = a + b              (a transformer block's skip connections, forward and back)
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
