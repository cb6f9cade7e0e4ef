// softmax.cu: softmax of each row of a row-major rows x cols matrix,
// out[r][c] = exp(in[r][c] - m_r) / sum_j exp(in[r][j] - m_r), with m_r the row's maximum
// (subtracting it keeps exp from overflowing and does not change the result).
//
// version 1: one thread per row, three passes over the row: the maximum, the sum of exponentials,
//            the write. Reads the row three times; neighbouring threads read `cols` apart.
// version 2: one thread per row, online softmax: one pass keeps a running maximum m and a running
//            sum d, rescaling d by exp(m_old - m_new) when the maximum grows; a second pass writes.
// version 3: one warp per row: each lane runs the online pass over a strided slice of the row
//            (coalesced), then the 32 (m, d) pairs are merged with __shfl_xor_sync.
// version 4: one block per row: each warp merges its lanes with shuffles, the warps merge through
//            shared memory; for long rows (thousands of columns).
//
// Launch: versions 1-2 one thread per row (grid = ceil_div(rows, block)); version 3 blockDim.x a
// multiple of 32, one warp per row (grid = ceil_div(rows, blockDim.x / 32)); version 4 one block
// per row (grid = rows), blockDim.x a multiple of 32.
#include "common.cuh"

extern "C" __global__ void softmax_kernel1(float* out, const float* in, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;  // the last block may have more threads than rows left
    const float* x = in + (size_t)row * cols;
    float* y = out + (size_t)row * cols;
    float m = -INFINITY;
    for (int c = 0; c < cols; c++) m = fmaxf(m, x[c]);
    float d = 0.0f;
    for (int c = 0; c < cols; c++) d += expf(x[c] - m);
    for (int c = 0; c < cols; c++) y[c] = expf(x[c] - m) / d;
}

extern "C" __global__ void softmax_kernel2(float* out, const float* in, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* x = in + (size_t)row * cols;
    float* y = out + (size_t)row * cols;
    float m = -INFINITY, d = 0.0f;
    for (int c = 0; c < cols; c++) {
        float m_new = fmaxf(m, x[c]);
        if (m_new == -INFINITY) continue;  // only -inf so far: exp(-inf) = 0 adds nothing
        // The sum so far was taken relative to the old maximum: rescale it to the new one.
        d = d * expf(m - m_new) + expf(x[c] - m_new);
        m = m_new;
    }
    for (int c = 0; c < cols; c++) y[c] = expf(x[c] - m) / d;
}

// Merge two online-softmax states (m1, d1) and (m2, d2) into (m, d) for the union of their elements.
// A state that has seen nothing is (-inf, 0); it must not produce exp(-inf - -inf) = NaN.
__device__ inline void merge_state(float& m, float& d, float m2, float d2) {
    float m_new = fmaxf(m, m2);
    if (m_new == -INFINITY) return;  // both empty
    d = d * expf(m - m_new) + d2 * expf(m2 - m_new);
    m = m_new;
}

extern "C" __global__ void softmax_kernel3(float* out, const float* in, int rows, int cols) {
    int warps_per_block = blockDim.x / WARP_SIZE;
    int row = blockIdx.x * warps_per_block + threadIdx.x / WARP_SIZE;
    int lane = threadIdx.x % WARP_SIZE;
    // The whole warp leaves together (row is the same for its 32 lanes), so the full-mask
    // shuffles below always have all 32 lanes present.
    if (row >= rows) return;
    const float* x = in + (size_t)row * cols;
    float* y = out + (size_t)row * cols;
    float m = -INFINITY, d = 0.0f;
    for (int c = lane; c < cols; c += WARP_SIZE)  // lane l takes columns l, l+32, ...
        merge_state(m, d, x[c], 1.0f);
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2) {
        float m_other = __shfl_xor_sync(FULL_MASK, m, offset);
        float d_other = __shfl_xor_sync(FULL_MASK, d, offset);
        merge_state(m, d, m_other, d_other);
    }
    // After the xor butterfly every lane holds the row's (m, d).
    for (int c = lane; c < cols; c += WARP_SIZE)
        y[c] = expf(x[c] - m) / d;
}

extern "C" __global__ void softmax_kernel4(float* out, const float* in, int rows, int cols) {
    __shared__ float warp_m[WARP_SIZE], warp_d[WARP_SIZE];  // one state per warp (<= 32 warps)
    int row = blockIdx.x;
    if (row >= rows) return;  // the whole block leaves together
    int lane = threadIdx.x % WARP_SIZE;
    int warp = threadIdx.x / WARP_SIZE;
    int num_warps = blockDim.x / WARP_SIZE;
    const float* x = in + (size_t)row * cols;
    float* y = out + (size_t)row * cols;
    float m = -INFINITY, d = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        merge_state(m, d, x[c], 1.0f);
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2) {
        float m_other = __shfl_xor_sync(FULL_MASK, m, offset);
        float d_other = __shfl_xor_sync(FULL_MASK, d, offset);
        merge_state(m, d, m_other, d_other);
    }
    if (lane == 0) { warp_m[warp] = m; warp_d[warp] = d; }
    __syncthreads();  // all warps' states are written before any thread merges them
    // Every thread merges the warps' states itself (at most 32 of them): no second barrier needed.
    m = -INFINITY; d = 0.0f;
    for (int w = 0; w < num_warps; w++)
        merge_state(m, d, warp_m[w], warp_d[w]);
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        y[c] = expf(x[c] - m) / d;
}
