// activations.cuh: the one table of activation codes. The elementwise ladder (elementwise.cu) and the
// layers' kernels (nn_activations.cuh, nn_dense.cu) read these names; Python reads the same lines
// (gpuedu.kernels.ACTIVATIONS) and passes the integer.
#pragma once

#define ACT_NONE 0          // the identity: a Dense layer without an activation
#define ACT_RELU 1
#define ACT_SIGMOID 2
#define ACT_TANH 3
#define ACT_GELU 4          // nn: x * Phi(x) with erf; elementwise.cu: the tanh approximation of it
#define ACT_LEAKY_RELU 5    // elementwise.cu only, as are the two below (alpha: the negative slope)
#define ACT_SILU 6
#define ACT_ELU 7           // alpha: the scale of the negative side
