// nn_loss.cu: softmax cross-entropy, forward and backward fused, plus the row argmax for predictions.
//
//   softmax_xent  per row b of logits z (C classes) with label y:
//                   loss_b = log(sum_j exp(z_j)) - z_y, computed as m + log(sum_j exp(z_j - m)) with
//                   m = max_j z_j, so exp never overflows (the largest term is exp(0) = 1);
//                   dL/dz_j = (softmax_j - [j == y]) / B   (the loss is the mean over the batch);
//                 and it adds loss_b to *loss_sum and 1 to *correct when argmax_j z_j == y, so a whole
//                 epoch's loss and accuracy stay on the device until someone asks for them. A row whose
//                 label is not a class (y < 0 or y >= C) is counted in status[0] and left out (a zero
//                 gradient), a row whose logits are not finite in status[1]: the host reads both with
//                 the metrics, and says what was wrong.
//   argmax_rows   out[b] = argmax_j z[b, j] (the first one on ties).
// One thread per row: C is small (10 classes), and a row's three passes stay in the thread.
//
// The rows' losses meet in one float through atomicAdd, whose order on a GPU is the order the blocks run in, so
// the sum's last bits vary from run to run there. The emulator runs a module's blocks on several CPU cores at
// once; this line asks it to run these in the grid's order instead, so that a loss is the same every run (nvcc
// ignores it).
#define GPUEDU_BLOCKS_IN_ORDER

// Row b: loss m + log(sum_j exp(z_j - m)) - z_y (m the row maximum), the gradient (softmax - onehot) / B,
// and the loss and the hit (argmax == label) added to the device accumulators.
extern "C" __global__ void softmax_xent(float* dlogits, float* loss_sum, int* correct, int* status,
                                        const float* logits, const int* labels, int B, int C) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;             // the last block may run past the batch
    const float* z = logits + (size_t)b * C;
    float* dz = dlogits + (size_t)b * C;
    int y = labels[b];
    if (y < 0 || y >= C) {          // not a class: z[y] would be another row's logit
        atomicAdd(&status[0], 1);
        for (int j = 0; j < C; ++j) dz[j] = 0.0f;
        return;
    }
    float m = z[0];
    int best = 0;
    for (int j = 1; j < C; ++j)
        if (z[j] > m) { m = z[j]; best = j; }
    float s = 0.0f;
    for (int j = 0; j < C; ++j)
        s += expf(z[j] - m);
    float loss = m + logf(s) - z[y];
    if (!isfinite(loss)) atomicAdd(&status[1], 1);   // a logit was NaN or inf: the loss is NaN from here on
    atomicAdd(loss_sum, loss);
    if (best == y) atomicAdd(correct, 1);
    float inv = 1.0f / (s * (float)B);
    for (int j = 0; j < C; ++j)
        dz[j] = expf(z[j] - m) * inv - (j == y ? 1.0f / (float)B : 0.0f);
}

// out[b] = the index of the largest logit of row b (the first one on ties).
extern "C" __global__ void argmax_rows(int* out, const float* logits, int B, int C) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    const float* z = logits + (size_t)b * C;
    int best = 0;
    for (int j = 1; j < C; ++j)
        if (z[j] > z[best]) best = j;
    out[b] = best;
}
