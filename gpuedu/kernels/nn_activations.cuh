// nn_activations.cuh: the activation functions of gpuedu.nn and their derivatives, as device functions.
// The dense layer's forward kernel applies them in its epilogue (fused), the elementwise kernels in
// nn_activations.cu apply them on their own; both read the same code from here.
#pragma once

// The codes (ACT_NONE ... ACT_GELU here) come from the one table, activations.cuh.
#include "activations.cuh"

// 1/sqrt(2) and 1/sqrt(2*pi): GELU(z) = z * Phi(z), Phi the standard normal CDF.
#define NN_RSQRT2 0.70710678118654752f
#define NN_RSQRT2PI 0.39894228040143268f

__device__ inline float act_forward(int act, float z) {
    switch (act) {
    case ACT_RELU:    return z > 0.0f ? z : 0.0f;
    // exp of a large positive number overflows to inf, and 1/(1+inf) = 0 is still the right limit.
    case ACT_SIGMOID: return 1.0f / (1.0f + expf(-z));
    case ACT_TANH:    return tanhf(z);
    // Exact GELU with the error function (not the tanh approximation).
    case ACT_GELU:    return 0.5f * z * (1.0f + erff(z * NN_RSQRT2));
    default:          return z;
    }
}

// d act / d z at pre-activation z, whose activation y = act_forward(act, z) is passed too:
// sigmoid and tanh have derivatives cheapest in terms of their output.
__device__ inline float act_derivative(int act, float z, float y) {
    switch (act) {
    case ACT_RELU:    return z > 0.0f ? 1.0f : 0.0f;   // the subgradient 0 at z == 0, as frameworks do
    case ACT_SIGMOID: return y * (1.0f - y);
    case ACT_TANH:    return 1.0f - y * y;
    // d/dz [z Phi(z)] = Phi(z) + z phi(z), phi the standard normal density.
    case ACT_GELU:    return 0.5f * (1.0f + erff(z * NN_RSQRT2)) + z * NN_RSQRT2PI * expf(-0.5f * z * z);
    default:          return 1.0f;
    }
}
