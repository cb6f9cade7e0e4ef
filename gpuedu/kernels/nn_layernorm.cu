// nn_layernorm.cu: layer normalisation over the last axis of a row-major [rows, F] matrix (gpuedu.nn.LayerNorm).
//
//     mean_r = sum_f x_rf / F,   var_r = sum_f (x_rf - mean_r)^2 / F,   rstd_r = 1 / sqrt(var_r + eps)
//     xhat_rf = (x_rf - mean_r) rstd_r,   y_rf = gamma_f xhat_rf + beta_f
//
// Backward, with g_rf = dy_rf gamma_f (the gradient reaching xhat):
//     dx_rf = rstd_r (g_rf - mean_f(g_r) - xhat_rf mean_f(g_r xhat_r))
// (xhat depends on x_rf directly and through mean_r and rstd_r; the two means are those paths), and
//     dgamma_f = sum_r dy_rf xhat_rf,   dbeta_f = sum_r dy_rf
// summed in a fixed order: chunks of LN_CHUNK_ROWS rows each (layernorm_param_grad_partial), then the chunks
// in ascending order (nn_dense.cu's dense_bias_grad), so the same bits every run.
//
// layernorm_forward, layernorm_backward_input: one warp a row, LN_WARPS warps a block,
//     grid ceil(rows / LN_WARPS); lanes stride along the row (coalesced).
// layernorm_param_grad_partial: a thread a column, LN_COLS threads a block, grid (ceil(F / LN_COLS), chunks).
#include "common.cuh"

#define LN_WARPS 4
#define LN_COLS 128
#define LN_CHUNK_ROWS 32

extern "C" __global__ void layernorm_forward(float* Y, float* mean, float* rstd, const float* X, const float* gamma,
                                             const float* beta, int rows, int F, float eps) {
    int row = blockIdx.x * LN_WARPS + threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    if (row >= rows) return;                       // the whole warp leaves together
    const float* x = X + (size_t)row * F;
    float s = 0.0f;
    for (int f = lane; f < F; f += WARP_SIZE) s += x[f];
    float mu = warp_allreduce_sum(s) / F;
    // The variance from the centred values (a second pass over the row), not E[x^2] - mean^2, which
    // cancels catastrophically when the mean is large against the spread.
    float v = 0.0f;
    for (int f = lane; f < F; f += WARP_SIZE) { float d = x[f] - mu; v += d * d; }
    float r = 1.0f / sqrtf(warp_allreduce_sum(v) / F + eps);
    float* y = Y + (size_t)row * F;
    for (int f = lane; f < F; f += WARP_SIZE) y[f] = (x[f] - mu) * r * gamma[f] + beta[f];
    if (lane == 0) { mean[row] = mu; rstd[row] = r; }
}

extern "C" __global__ void layernorm_backward_input(float* dX, const float* dY, const float* X, const float* mean,
                                                    const float* rstd, const float* gamma, int rows, int F) {
    int row = blockIdx.x * LN_WARPS + threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    if (row >= rows) return;
    const float* x = X + (size_t)row * F;
    const float* dy = dY + (size_t)row * F;
    float mu = mean[row], r = rstd[row];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int f = lane; f < F; f += WARP_SIZE) {
        float g = dy[f] * gamma[f];
        sum_g += g;
        sum_gx += g * (x[f] - mu) * r;
    }
    float mean_g = warp_allreduce_sum(sum_g) / F, mean_gx = warp_allreduce_sum(sum_gx) / F;
    float* dx = dX + (size_t)row * F;
    for (int f = lane; f < F; f += WARP_SIZE)
        dx[f] = r * (dy[f] * gamma[f] - mean_g - (x[f] - mu) * r * mean_gx);
}

// dgamma_partial[c][f] = sum of dy_rf xhat_rf and dbeta_partial[c][f] = sum of dy_rf over chunk c's rows,
// ascending r.
extern "C" __global__ void layernorm_param_grad_partial(float* dgamma_partial, float* dbeta_partial,
                                                        const float* dY, const float* X, const float* mean,
                                                        const float* rstd, int rows, int F) {
    int f = blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= F) return;
    int first = blockIdx.y * LN_CHUNK_ROWS, last = min(rows, first + LN_CHUNK_ROWS);
    float dg = 0.0f, db = 0.0f;
    for (int r = first; r < last; r++) {           // adjacent threads, adjacent columns: coalesced
        float dy = dY[(size_t)r * F + f];
        dg += dy * (X[(size_t)r * F + f] - mean[r]) * rstd[r];
        db += dy;
    }
    dgamma_partial[(size_t)blockIdx.y * F + f] = dg;
    dbeta_partial[(size_t)blockIdx.y * F + f] = db;
}
