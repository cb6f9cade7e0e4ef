// nn_optim.cu: parameter updates, one thread per parameter, in place on the device.
//
//   sgd_update       v = mu v + (g + wd w);  w -= lr v      (mu = 0: plain SGD, the update dW = -lr dL/dW)
//   adam_begin_step  t += 1 and the bias corrections c1 = 1/(1-b1^t), c2 = 1/(1-b2^t), in one thread
//   adam_update      m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  w -= lr * (m c1) / (sqrt(v c2) + eps)
// Napkin math: SGD moves 20 B an element (read w, g, v; write w, v), Adam 28 B: bandwidth-bound.
//
// skip: a device flag (mixed precision raises it when a gradient overflowed, nn/amp.py). When it is
// nonzero every kernel returns without touching anything; NULL means "never skip". The flag is read
// on the device, so the host never waits for the GPU to learn whether the step was applied.

// SGD with momentum and weight decay; momentum = 0 and weight_decay = 0 give w -= lr * g.
extern "C" __global__ void sgd_update(float* w, const float* g, float* v, int n,
                                      float lr, float momentum, float weight_decay, const int* skip) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;             // the last block may run past the end
    if (skip && *skip) return;      // an overflowed step: leave w and v as they were
    float grad = g[i] + weight_decay * w[i];
    float vel = momentum * v[i] + grad;
    v[i] = vel;
    w[i] -= lr * vel;
}

// Adam's step count t lives on the device, beside the skip flag: a skipped step must not advance
// it (the bias corrections would run ahead of the moments), and only the device knows whether the
// step is skipped. One thread counts and computes c1, c2 once for every parameter tensor, in double
// (b2^t is close to 1 for b2 = 0.999, so 1 - b2^t would lose digits in float).
extern "C" __global__ void adam_begin_step(int* t, float* corrections, double beta1, double beta2,
                                           const int* skip) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (skip && *skip) return;
    int step = *t + 1;
    *t = step;
    corrections[0] = (float)(1.0 / (1.0 - pow(beta1, (double)step)));
    corrections[1] = (float)(1.0 / (1.0 - pow(beta2, (double)step)));
}

// Adam: moving averages of the gradient and its square, bias-corrected by corrections = (c1, c2).
extern "C" __global__ void adam_update(float* w, const float* g, float* m, float* v, int n,
                                       float lr, float beta1, float beta2, float eps,
                                       const float* corrections, float weight_decay, const int* skip) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (skip && *skip) return;      // an overflowed step: w, m and v stay as they were
    float c1 = corrections[0], c2 = corrections[1];
    float grad = g[i] + weight_decay * w[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * grad;
    float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * (mi * c1) / (sqrtf(vi * c2) + eps);
}
