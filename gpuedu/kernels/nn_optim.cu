// nn_optim.cu: parameter updates, one thread per parameter, in place on the device.
//
//   sgd_update       v = mu v + (g + wd w);  w -= lr v      (mu = 0: plain SGD, the update dW = -lr dL/dW)
//   adam_begin_step  t += 1 and the bias corrections c1 = 1/(1-b1^t), c2 = 1/(1-b2^t), in one thread
//   adam_update      m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  w -= lr * (m c1) / (sqrt(v c2) + eps)
// Version 1 (above) launches once per parameter tensor; version 2 (sgd_update_multi, adam_update_multi)
// updates every tensor of the model in one launch. A launch costs the host several microseconds
// whatever its size, and at small batches a training step is mostly launches: PyTorch's optimizers
// do the same ("foreach" / multi-tensor apply).
// Napkin math: SGD moves 20 B an element (read w, g, v; write w, v), Adam 28 B: bandwidth-bound.
//
// skip: a device flag (mixed precision raises it when a gradient overflowed, nn/amp.py). When it is
// nonzero every kernel returns without touching anything; NULL means "never skip". The flag is read
// on the device, so the host never waits for the GPU to learn whether the step was applied.

// SGD with momentum and weight decay; momentum = 0 and weight_decay = 0 give w -= lr * g.
extern "C" __global__ void sgd_update(float* w, float* v, const float* g, const int* skip, int n,
                                      float lr, float momentum, float weight_decay) {
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
extern "C" __global__ void adam_begin_step(int* t, float* corrections, const int* skip,
                                           double beta1, double beta2) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (skip && *skip) return;
    int step = *t + 1;
    *t = step;
    corrections[0] = (float)(1.0 / (1.0 - pow(beta1, (double)step)));
    corrections[1] = (float)(1.0 / (1.0 - pow(beta2, (double)step)));
}

// Adam's rule for element i: moving averages of the gradient and its square, bias-corrected by
// c1, c2. One definition for both versions, so they give the same bits.
__device__ __forceinline__ void adam_element(float* w, const float* g, float* m, float* v, long long i,
                                             float lr, float beta1, float beta2, float eps,
                                             float c1, float c2, float weight_decay) {
    float grad = g[i] + weight_decay * w[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * grad;
    float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * (mi * c1) / (sqrtf(vi * c2) + eps);
}

// Adam, one tensor: corrections = (c1, c2) from adam_begin_step.
extern "C" __global__ void adam_update(float* w, float* m, float* v, const float* g,
                                       const float* corrections, const int* skip, int n,
                                       float lr, float beta1, float beta2, float eps, float weight_decay) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (skip && *skip) return;      // an overflowed step: w, m and v stay as they were
    adam_element(w, g, m, v, i, lr, beta1, beta2, eps, corrections[0], corrections[1], weight_decay);
}

// ---- version 2: all tensors in one launch -----------------------------------------------------------
// table = offsets[count + 1] (prefix sums of the tensor sizes), then `per_tensor` addresses for each
// tensor. Element e of the concatenation of all tensors is element e - offsets[t] of the tensor t with
// offsets[t] <= e < offsets[t + 1]. A grid-stride loop walks e upwards, so each thread's t only moves
// forward, and the table is read only when a thread crosses into a later tensor; neighbouring threads
// take neighbouring elements of one tensor, so the loads stay coalesced.

extern "C" __global__ void sgd_update_multi(const long long* table, const int* skip, int count,
                                            float lr, float momentum, float weight_decay) {
    if (skip && *skip) return;                          // an overflowed step: nothing moves
    const long long* offsets = table;
    const long long* addresses = table + count + 1;     // w, g, v of tensor t at 3t, 3t + 1, 3t + 2
    long long total = offsets[count], start = 0, end = 0;
    int t = -1;
    float* w = nullptr;
    const float* g = nullptr;
    float* v = nullptr;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        if (e >= end) {                                 // past tensor t: find e's tensor, fetch its addresses
            do { ++t; start = offsets[t]; end = offsets[t + 1]; } while (e >= end);
            w = (float*)addresses[3 * t];
            g = (const float*)addresses[3 * t + 1];
            v = (float*)addresses[3 * t + 2];
        }
        long long i = e - start;
        float grad = g[i] + weight_decay * w[i];
        float vel = momentum * v[i] + grad;
        v[i] = vel;
        w[i] -= lr * vel;
    }
}

extern "C" __global__ void adam_update_multi(const long long* table, const float* corrections,
                                             const int* skip, int count, float lr, float beta1,
                                             float beta2, float eps, float weight_decay) {
    if (skip && *skip) return;
    const long long* offsets = table;
    const long long* addresses = table + count + 1;     // w, g, m, v of tensor t at 4t .. 4t + 3
    long long total = offsets[count], start = 0, end = 0;
    float c1 = corrections[0], c2 = corrections[1];
    int t = -1;
    float* w = nullptr;
    const float* g = nullptr;
    float* m = nullptr;
    float* v = nullptr;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        if (e >= end) {
            do { ++t; start = offsets[t]; end = offsets[t + 1]; } while (e >= end);
            w = (float*)addresses[4 * t];
            g = (const float*)addresses[4 * t + 1];
            m = (float*)addresses[4 * t + 2];
            v = (float*)addresses[4 * t + 3];
        }
        adam_element(w, g, m, v, e - start, lr, beta1, beta2, eps, c1, c2, weight_decay);
    }
}
