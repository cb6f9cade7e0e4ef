// nn_optim.cu: parameter updates, one thread per parameter, in place on the device.
//
//   sgd_update   v = mu v + (g + wd w);  w -= lr v      (mu = 0: plain SGD, the update dW = -lr dL/dW)
//   adam_update  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//                w -= lr * (m c1) / (sqrt(v c2) + eps),  c1 = 1/(1-b1^t), c2 = 1/(1-b2^t) (bias correction,
//                computed on the host in double because b^t needs the step count t)
// Napkin math: SGD moves 16 B an element (read w, g, v; write w, v: 20 B), Adam 28 B: bandwidth-bound.

// SGD with momentum and weight decay; momentum = 0 and weight_decay = 0 give w -= lr * g.
extern "C" __global__ void sgd_update(float* w, const float* g, float* v, int n,
                                      float lr, float momentum, float weight_decay) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;             // the last block may run past the end
    float grad = g[i] + weight_decay * w[i];
    float vel = momentum * v[i] + grad;
    v[i] = vel;
    w[i] -= lr * vel;
}

// Adam: moving averages of the gradient and its square, bias-corrected by c1 and c2.
extern "C" __global__ void adam_update(float* w, const float* g, float* m, float* v, int n,
                                       float lr, float beta1, float beta2, float eps,
                                       float c1, float c2, float weight_decay) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float grad = g[i] + weight_decay * w[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * grad;
    float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * (mi * c1) / (sqrtf(vi * c2) + eps);
}
