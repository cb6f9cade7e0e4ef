// conv2d.cu: 2-D convolution (cross-correlation, as deep-learning frameworks define it) in float32, NCHW.
// Introduced in lessons/11_convolution.ipynb.
//
//   x [N, C, H, W]  *  w [K, C, R, S]  (+ b [K])  ->  y [N, K, P, Q]
//   P = (H + 2 * pad - R) / stride + 1,   Q = (W + 2 * pad - S) / stride + 1
//   y[n, k, p, q] = b[k] + sum over c, r, s of w[k, c, r, s] * x[n, c, p * stride - pad + r, q * stride - pad + s]
//
// (x reads outside [0, H) x [0, W) are the zero padding.) 2 * N * K * P * Q * C * R * S FLOPs. Each input
// element is used by up to R * S / stride^2 outputs and each filter weight by N * P * Q of them, so, like a
// GEMM, a convolution is all about reuse. Seen as a GEMM, M = K (filters), the "N" of the GEMM = N * P * Q
// (output pixels) and its depth = C * R * S (one filter's weights): y = W [K, CRS] @ cols [CRS, NPQ].
//
// version 1: direct: one thread per output element, the C * R * S loop reading x and w from global
//            memory (each x element is read by every filter and every overlapping window).
// version 2: tiled: a block computes a TILE_H x TILE_W patch of one output plane (n, k). For each input
//            channel the block stages the input patch it needs, the tile and its halo of
//            ((TILE - 1) * stride + R) rows and columns, in shared memory, read once from global memory
//            instead of up to R * S times; the filter bank sits in __constant__ memory, whose cache
//            broadcasts one address to a whole warp (every thread of a block reads the same weight at
//            the same time). Constant memory holds CONV_CONST_FLOATS floats, so this version takes
//            K * C * R * S <= CONV_CONST_FLOATS, R, S <= CONV_MAX_KSIZE and stride <= CONV_MAX_STRIDE.
// version 3: im2col + GEMM: conv_im2col writes the lowered matrix cols [C * R * S, N * P * Q] (each
//            input element copied up to R * S times), the course's matmul (matmul.cu) computes
//            W @ cols -> [K, N * P * Q], and conv_bias_act_nkpq rearranges that to NCHW, adding bias and
//            ReLU on the way. Fast GEMMs for free, at the price of R * S times the input's memory.
// version 4: implicit GEMM: the shared-memory GEMM of matmul.cu's version 3, with the im2col index
//            math moved into the loads of the B tile: the lowered matrix is never written. Bias and
//            ReLU are applied in the epilogue, and the result is stored straight into NCHW.
//
// Training needs the gradients (dy = dL/dy, after the ReLU's mask, conv_relu_grad):
//   dx[n, c, h, w]    = sum over k and the (r, s) with (h + pad - r) divisible by stride ... of dy * w
//                       (conv_backward_input: one thread per input element, a gather: no atomics)
//   dw[k, c, r, s]    = sum over n, p, q of dy[n, k, p, q] * x[n, c, p * stride - pad + r, ...]
//                       (conv_backward_filter: one block per weight, a tree sum over N * P * Q)
//   db[k]             = sum over n, p, q of dy[n, k, p, q]    (conv_backward_bias: one block per filter)
// and max pooling (window `ksize`, step `stride`, no padding):
//   maxpool_forward: one thread per output, keeping the flat index (h * W + w) of the winner in argmax;
//   maxpool_backward: one thread per input element, adding the dy of every window it won (a gather).
//
// Every load is guarded, so no size needs to be a multiple of a tile. Launch shapes (gpuedu/ops/conv.py):
//   1: block (256), grid (ceil_div(N * K * P * Q, 256))
//   2: block (TILE_W, TILE_H), grid (ceil_div(Q, TILE_W), ceil_div(P, TILE_H), N * K)
//   3: conv_im2col block (256), grid (ceil_div(C * R * S * N * P * Q, 256)); then matmul; then
//      conv_bias_act_nkpq block (256), grid (ceil_div(N * K * P * Q, 256))
//   4: block (GT, GT), grid (ceil_div(N * P * Q, GT), ceil_div(K, GT))
#include "common.cuh"

#ifndef TILE_H
#define TILE_H 16
#endif
#ifndef TILE_W
#define TILE_W 16
#endif
#define CONV_MAX_KSIZE 7
#define CONV_MAX_STRIDE 2
#define HALO_H ((TILE_H - 1) * CONV_MAX_STRIDE + CONV_MAX_KSIZE)
#define HALO_W ((TILE_W - 1) * CONV_MAX_STRIDE + CONV_MAX_KSIZE)
#define CONV_CONST_FLOATS 8192   // 32 KB of the 64 KB of constant memory
#ifndef GT
#define GT 16                    // version 4's GEMM tile side
#endif
#define REDUCE_THREADS 128       // the backward sums' blocks

// The filter bank of version 2, copied in by the launcher (module.get_global("conv_filter")).
__constant__ float conv_filter[CONV_CONST_FLOATS];

// The shared epilogue: bias (bias may be NULL) and an optional ReLU.
__device__ __forceinline__ float bias_act(float acc, const float* bias, int k, int relu) {
    if (bias) acc += bias[k];
    return (relu && acc < 0.0f) ? 0.0f : acc;
}

extern "C" __global__ void conv_kernel1(float* y, const float* x, const float* w, const float* bias,
                                        int N, int C, int H, int W, int K, int R, int S,
                                        int stride, int pad, int P, int Q, int relu) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= N * K * P * Q) return;
    int q = idx % Q, p = (idx / Q) % P, k = (idx / (P * Q)) % K, n = idx / (K * P * Q);
    float acc = 0.0f;
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++) {
            int h = p * stride - pad + r;
            if (h < 0 || h >= H) continue;          // a row of the zero padding
            for (int s = 0; s < S; s++) {
                int wc = q * stride - pad + s;
                if (wc < 0 || wc >= W) continue;
                acc += x[((n * C + c) * H + h) * W + wc] * w[((k * C + c) * R + r) * S + s];
            }
        }
    y[idx] = bias_act(acc, bias, k, relu);
}

extern "C" __global__ void conv_kernel2(float* y, const float* x, const float* bias,
                                        int N, int C, int H, int W, int K, int R, int S,
                                        int stride, int pad, int P, int Q, int relu) {
    __shared__ float tile[HALO_H][HALO_W];
    int nk = blockIdx.z, n = nk / K, k = nk % K;
    int p0 = blockIdx.y * TILE_H, q0 = blockIdx.x * TILE_W;
    int tx = threadIdx.x, ty = threadIdx.y;
    int p = p0 + ty, q = q0 + tx;
    // The input rows and columns this block's outputs need, padding included.
    int h0 = p0 * stride - pad, w0 = q0 * stride - pad;
    int th = (TILE_H - 1) * stride + R, tw = (TILE_W - 1) * stride + S;
    float acc = 0.0f;
    for (int c = 0; c < C; c++) {
        const float* plane = x + (n * C + c) * H * W;
        // Cooperative load of the tile and its halo; zeros stand for the padding and the edges.
        for (int i = ty; i < th; i += TILE_H)
            for (int j = tx; j < tw; j += TILE_W) {
                int h = h0 + i, wc = w0 + j;
                tile[i][j] = (h >= 0 && h < H && wc >= 0 && wc < W) ? plane[h * W + wc] : 0.0f;
            }
        __syncthreads();   // the whole tile is in before anyone reads it
        const float* f = conv_filter + (k * C + c) * R * S;
        for (int r = 0; r < R; r++)
            for (int s = 0; s < S; s++)
                acc += tile[ty * stride + r][tx * stride + s] * f[r * S + s];
        __syncthreads();   // everyone is done before the next channel overwrites the tile
    }
    if (p < P && q < Q)
        y[((n * K + k) * P + p) * Q + q] = bias_act(acc, bias, k, relu);
}

// cols[(c * R + r) * S + s][(n * P + p) * Q + q] = x[n, c, p * stride - pad + r, q * stride - pad + s]
extern "C" __global__ void conv_im2col(float* cols, const float* x, int N, int C, int H, int W, int R, int S,
                                       int stride, int pad, int P, int Q) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int npq = N * P * Q;
    if (idx >= C * R * S * npq) return;
    int col = idx % npq, row = idx / npq;
    int q = col % Q, p = (col / Q) % P, n = col / (P * Q);
    int s = row % S, r = (row / S) % R, c = row / (R * S);
    int h = p * stride - pad + r, wc = q * stride - pad + s;
    cols[idx] = (h >= 0 && h < H && wc >= 0 && wc < W) ? x[((n * C + c) * H + h) * W + wc] : 0.0f;
}

// y[n, k, p, q] = act(g[k, (n * P + p) * Q + q] + b[k]): the GEMM's [K, N * P * Q] result to NCHW.
extern "C" __global__ void conv_bias_act_nkpq(float* y, const float* g, const float* bias,
                                              int N, int K, int PQ, int relu) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= N * K * PQ) return;
    int pq = idx % PQ, k = (idx / PQ) % K, n = idx / (K * PQ);
    y[idx] = bias_act(g[k * (N * PQ) + n * PQ + pq], bias, k, relu);
}

extern "C" __global__ void conv_kernel4(float* y, const float* x, const float* w, const float* bias,
                                        int N, int C, int H, int W, int K, int R, int S,
                                        int stride, int pad, int P, int Q, int relu) {
    // GEMM view: A = w as [K, CRS] (row-major already), B = the virtual cols [CRS, NPQ].
    __shared__ float As[GT][GT];
    __shared__ float Bs[GT][GT];
    int tx = threadIdx.x, ty = threadIdx.y;
    int m = blockIdx.y * GT + ty;        // this thread's filter k
    int col = blockIdx.x * GT + tx;      // this thread's output pixel (n, p, q)
    int depth = C * R * S, npq = N * P * Q;
    // The column's (n, p, q) do not change along the depth loop: work them out once.
    int q = col % Q, p = (col / Q) % P, n = col / (P * Q);
    int hb = p * stride - pad, wb = q * stride - pad;
    float acc = 0.0f;
    for (int d0 = 0; d0 < depth; d0 += GT) {
        As[ty][tx] = (m < K && d0 + tx < depth) ? w[m * depth + d0 + tx] : 0.0f;
        // B tile, row d0 + ty: im2col's index math, read straight from x.
        int d = d0 + ty;
        float v = 0.0f;
        if (d < depth && col < npq) {
            int s = d % S, r = (d / S) % R, c = d / (R * S);
            int h = hb + r, wc = wb + s;
            if (h >= 0 && h < H && wc >= 0 && wc < W) v = x[((n * C + c) * H + h) * W + wc];
        }
        Bs[ty][tx] = v;
        __syncthreads();
        for (int kk = 0; kk < GT; kk++)
            acc += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }
    if (m < K && col < npq)
        y[((n * K + m) * P + p) * Q + q] = bias_act(acc, bias, m, relu);
}

// ---- backward -------------------------------------------------------------------------------

// dz = dy where the ReLU let the value through (y > 0), else 0.
extern "C" __global__ void conv_relu_grad(float* dz, const float* dy, const float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dz[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

extern "C" __global__ void conv_backward_input(float* dx, const float* dy, const float* w,
                                               int N, int C, int H, int W, int K, int R, int S,
                                               int stride, int pad, int P, int Q) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= N * C * H * W) return;
    int wc = idx % W, h = (idx / W) % H, c = (idx / (H * W)) % C, n = idx / (C * H * W);
    float acc = 0.0f;
    for (int r = 0; r < R; r++) {
        int ph = h + pad - r;                  // = p * stride if output row p read this input row
        if (ph < 0 || ph % stride) continue;
        int p = ph / stride;
        if (p >= P) continue;
        for (int s = 0; s < S; s++) {
            int qw = wc + pad - s;
            if (qw < 0 || qw % stride) continue;
            int q = qw / stride;
            if (q >= Q) continue;
            for (int k = 0; k < K; k++)
                acc += dy[((n * K + k) * P + p) * Q + q] * w[((k * C + c) * R + r) * S + s];
        }
    }
    dx[idx] = acc;
}

// A block's tree sum of its threads' partial sums (REDUCE_THREADS threads, a power of two).
__device__ float block_sum(float v) {
    __shared__ float part[REDUCE_THREADS];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int half = REDUCE_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    return part[0];
}

extern "C" __global__ void conv_backward_filter(float* dw, const float* dy, const float* x,
                                                int N, int C, int H, int W, int K, int R, int S,
                                                int stride, int pad, int P, int Q) {
    int widx = blockIdx.x;                      // one block per weight (k, c, r, s)
    int s = widx % S, r = (widx / S) % R, c = (widx / (R * S)) % C, k = widx / (C * R * S);
    float acc = 0.0f;
    for (int i = threadIdx.x; i < N * P * Q; i += REDUCE_THREADS) {
        int q = i % Q, p = (i / Q) % P, n = i / (P * Q);
        int h = p * stride - pad + r, wc = q * stride - pad + s;
        if (h >= 0 && h < H && wc >= 0 && wc < W)
            acc += dy[((n * K + k) * P + p) * Q + q] * x[((n * C + c) * H + h) * W + wc];
    }
    float total = block_sum(acc);
    if (threadIdx.x == 0) dw[widx] = total;
}

extern "C" __global__ void conv_backward_bias(float* db, const float* dy, int N, int K, int PQ) {
    int k = blockIdx.x;
    float acc = 0.0f;
    for (int i = threadIdx.x; i < N * PQ; i += REDUCE_THREADS)
        acc += dy[((i / PQ) * K + k) * PQ + i % PQ];
    float total = block_sum(acc);
    if (threadIdx.x == 0) db[k] = total;
}

// ---- max pooling ----------------------------------------------------------------------------

extern "C" __global__ void maxpool_forward(float* y, int* argmax, const float* x, int NC, int H, int W,
                                           int ksize, int stride, int P, int Q) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= NC * P * Q) return;
    int q = idx % Q, p = (idx / Q) % P, nc = idx / (P * Q);
    const float* plane = x + nc * H * W;
    int best = (p * stride) * W + q * stride;   // the window's first element (always inside)
    float m = plane[best];
    for (int i = 0; i < ksize; i++)
        for (int j = 0; j < ksize; j++) {
            int at = (p * stride + i) * W + q * stride + j;
            if (plane[at] > m) { m = plane[at]; best = at; }   // ties: the first in row-major order
        }
    y[idx] = m;
    argmax[idx] = best;
}

extern "C" __global__ void maxpool_backward(float* dx, const float* dy, const int* argmax, int NC, int H, int W,
                                            int ksize, int stride, int P, int Q) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= NC * H * W) return;
    int wc = idx % W, h = (idx / W) % H, nc = idx / (H * W);
    // The windows that contain (h, wc): p * stride <= h < p * stride + ksize.
    int p_lo = h >= ksize ? (h - ksize) / stride + 1 : 0, p_hi = min(h / stride, P - 1);
    int q_lo = wc >= ksize ? (wc - ksize) / stride + 1 : 0, q_hi = min(wc / stride, Q - 1);
    float acc = 0.0f;
    for (int p = p_lo; p <= p_hi; p++)
        for (int q = q_lo; q <= q_hi; q++) {
            int o = (nc * P + p) * Q + q;
            if (argmax[o] == h * W + wc) acc += dy[o];
        }
    dx[idx] = acc;
}
