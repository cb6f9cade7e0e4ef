// fp16_amp.cu: the kernels mixed-precision training adds around the FP16 layers.
//
// Loss scaling multiplies the loss (so every gradient) by S before the backward pass
// so that small gradients do not underflow to zero in FP16; the optimizer then needs
// the gradients divided by S again, in FP32, and must skip the step if any of them
// overflowed to Inf or became NaN.
//
// The scaler's whole state lives on the device: S, the overflow flag, the skip flag the
// optimizer reads, the counters. A training step therefore never copies anything back:
// a host that waited for the GPU to say "overflow or not?" could not queue the next
// kernels while the current ones run.
//
// softmax_xent_half:     loss rows in FP32 from FP16 logits; dlogits = S*(p - onehot)/B in FP16
// sum_loss_rows:         the batch's mean loss, and a running total for the epoch (one block)
// bias_grad_half:        db = column sums of dz (FP16 in, FP32 sums, FP16 out)
// unscale_half_to_float: g32 = g16 / S into the FP32 master gradients, and a device flag
//                        raised on any Inf/NaN
// update_loss_scale:     the dynamic scaler's rules, in one thread: skip or apply, back off
//                        or grow S; clears the overflow flag for the next step
// refresh_half_copy:     after the optimizer has updated the FP32 master weights, re-round
//                        their FP16 copy (unless the step was skipped)
// unscale_half_to_float_multi, refresh_half_copy_multi: the same two for every tensor of the
//                        model in one launch (a table of the tensors' addresses, as nn_optim.cu's
//                        sgd_update_multi reads): a 3-layer MLP's 6 + 6 launches become 2
#include <cuda_fp16.h>

// The int32 state of a loss scaler (LossScaler in nn/amp.py reads the same indices).
#define FOUND_INF 0     // raised by unscale_half_to_float during this step's unscale
#define SKIP 1          // this step's verdict, for the optimizer's kernels: 1 = do nothing
#define GOOD_STEPS 2    // good steps since the last overflow or growth
#define STEPS 3         // steps so far
#define SKIPPED 4       // steps skipped for an overflow

// One thread per row: with ~10 classes a row is too short to be worth a block.
// The loss scale is grad_scale, or *scale when scale is not NULL (the trainer's S, kept on
// the device so that the host need not know it). A row whose label is not a class (y < 0 or
// y >= classes) is left out (loss 0, a zero gradient) and counted in *bad_labels when that is
// not NULL: the trainer reads the count with the epoch's loss and says what was wrong.
extern "C" __global__ void softmax_xent_half(__half* __restrict__ dlogits,
                                             float* __restrict__ loss_rows,
                                             int* __restrict__ bad_labels,
                                             const __half* __restrict__ logits,
                                             const int* __restrict__ labels,
                                             const float* __restrict__ scale,
                                             int batch, int classes, float grad_scale)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= batch) return;
    const __half* z = logits + r * classes;
    if (labels[r] < 0 || labels[r] >= classes) {   // z[y] would be another row's logit, or past the buffer
        if (bad_labels) atomicAdd(bad_labels, 1);
        loss_rows[r] = 0.0f;
        for (int c = 0; c < classes; ++c) dlogits[r * classes + c] = __float2half_rn(0.0f);
        return;
    }
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
    float g = (scale ? *scale : grad_scale) / (float)batch;
    for (int c = 0; c < classes; ++c) {
        float p_minus_onehot = (c == y) ? -others / sum : expf(__half2float(z[c]) - z_max) / sum;
        dlogits[r * classes + c] = __float2half_rn(g * p_minus_onehot);
    }
}

// One block of SUM_THREADS threads (launch exactly one): each sums a strided share of the rows
// in double, then a tree in shared memory adds the shares in a fixed order, so the result is
// the same on every run and every device (atomics would add in whatever order threads arrive).
#define SUM_THREADS 256
extern "C" __global__ void sum_loss_rows(float* __restrict__ step_loss, double* __restrict__ loss_total,
                                         const float* __restrict__ loss_rows, int rows)
{
    __shared__ double partial[SUM_THREADS];
    double s = 0.0;
    for (int r = threadIdx.x; r < rows; r += SUM_THREADS) s += (double)loss_rows[r];
    partial[threadIdx.x] = s;
    __syncthreads();                                   // every share is written before the tree reads it
    for (int half = SUM_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();                               // this level is done before the next one reads it
    }
    if (threadIdx.x == 0) {
        *step_loss = (float)(partial[0] / rows);       // this batch's mean loss
        *loss_total += partial[0];                     // the epoch's sum, read once per epoch
    }
}

// One thread per column walks down the rows; neighbouring threads read neighbouring
// columns, so each row's loads are coalesced.
extern "C" __global__ void bias_grad_half(__half* __restrict__ db, const __half* __restrict__ dz,
                                          int rows, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float sum = 0.0f;                                    // FP32 accumulation of FP16 values
    for (int r = 0; r < rows; ++r) sum += __half2float(dz[r * cols + c]);
    db[c] = __float2half_rn(sum);
}

// S is read from the device (the scaler's current value), not passed by the host.
extern "C" __global__ void unscale_half_to_float(float* __restrict__ g32,
                                                 int* __restrict__ found_inf,
                                                 const __half* __restrict__ g16,
                                                 const float* __restrict__ scale,
                                                 int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = __half2float(g16[i]);
    if (!isfinite(g)) {
        // Every writer stores the same value, so the race between threads is harmless.
        *found_inf = 1;
    }
    g32[i] = g * (1.0f / *scale);
}

// The loss scaler's state machine, run by one thread after every unscale (launch <<<1, 1>>>).
// It is the only implementation of the rules: LossScaler.update in nn/amp.py launches it too.
// history[steps % history_size] keeps the scale each step used, for plots.
extern "C" __global__ void update_loss_scale(float* scale, int* state, float* history, int history_size,
                                             int dynamic, float growth_factor, float backoff_factor,
                                             int growth_interval, float min_scale, float max_scale)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    float s = *scale;
    history[(unsigned)state[STEPS] % (unsigned)history_size] = s;   // the scale this step's loss was multiplied by
    state[STEPS] += 1;
    int overflow = state[FOUND_INF] != 0;
    if (overflow) {
        // Skip the step; a dynamic scaler backs off, and the run of good steps starts again.
        state[SKIPPED] += 1;
        state[GOOD_STEPS] = 0;
        if (dynamic) s = fmaxf(s * backoff_factor, min_scale);
    } else {
        // A good step: after growth_interval of them in a row, try a larger scale.
        state[GOOD_STEPS] += 1;
        if (dynamic && state[GOOD_STEPS] >= growth_interval) {
            s = fminf(s * growth_factor, max_scale);
            state[GOOD_STEPS] = 0;
        }
    }
    *scale = s;
    state[SKIP] = overflow;                            // the optimizer's kernels read this
    state[FOUND_INF] = 0;                              // cleared for the next step's unscale
}

// FP16 copy = master rounded to half, after an applied step. round_master != 0 is the
// no-master-weights ablation: the master itself is overwritten by its rounded value.
extern "C" __global__ void refresh_half_copy(__half* __restrict__ copy, float* __restrict__ master,
                                             const int* __restrict__ skip, int n, int round_master)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (skip && *skip) return;                         // the masters did not move: nothing to do
    __half h = __float2half_rn(master[i]);
    copy[i] = h;
    if (round_master) master[i] = __half2float(h);
}

// ---- every tensor in one launch ------------------------------------------------------------------
// table = offsets[count + 1] (prefix sums of the tensor sizes), then two addresses per tensor. A
// grid-stride loop walks the concatenation of the tensors, finding each element's tensor as in
// nn_optim.cu's multi-tensor updates. A launch costs the host several microseconds whatever its size,
// and on a GPU the small kernels between two big GEMMs wait for the host to issue them.

// g32 = g16 / S for every (g32, g16) pair of the table; raises *found_inf on any Inf or NaN.
extern "C" __global__ void unscale_half_to_float_multi(int* found_inf, const long long* table,
                                                       const float* scale, int count) {
    const long long* offsets = table;
    const long long* addresses = table + count + 1;     // g32, g16 of tensor t at 2t, 2t + 1
    long long total = offsets[count], start = 0, end = 0;
    int t = -1;
    float* g32 = nullptr;
    const __half* g16 = nullptr;
    float inverse = 1.0f / *scale;
    int overflow = 0;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        if (e >= end) {
            do { ++t; start = offsets[t]; end = offsets[t + 1]; } while (e >= end);
            g32 = (float*)addresses[2 * t];
            g16 = (const __half*)addresses[2 * t + 1];
        }
        float g = __half2float(g16[e - start]);
        if (!isfinite(g)) overflow = 1;
        g32[e - start] = g * inverse;
    }
    if (overflow) *found_inf = 1;   // every writer stores the same value: the race is harmless
}

// copy = master rounded to half for every (copy, master) pair of the table, unless *skip.
extern "C" __global__ void refresh_half_copy_multi(const long long* table, const int* __restrict__ skip,
                                                   int count, int round_master) {
    if (skip && *skip) return;                          // the masters did not move: nothing to do
    const long long* offsets = table;
    const long long* addresses = table + count + 1;     // copy, master of tensor t at 2t, 2t + 1
    long long total = offsets[count], start = 0, end = 0;
    int t = -1;
    __half* copy = nullptr;
    float* master = nullptr;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        if (e >= end) {
            do { ++t; start = offsets[t]; end = offsets[t + 1]; } while (e >= end);
            copy = (__half*)addresses[2 * t];
            master = (float*)addresses[2 * t + 1];
        }
        __half h = __float2half_rn(master[e - start]);
        copy[e - start] = h;
        if (round_master) master[e - start] = __half2float(h);
    }
}
