// nn_dense.cu: a dense (fully connected) layer, Y = act(X W + b), forward and backward.
//
//   dense_forward        one launch: the tiled GEMM X[B,K] W[K,N], then the epilogue adds the bias and
//                        applies the activation while the sum is still in a register (no extra pass
//                        over Y); it also keeps the pre-activation Z for the backward pass.
//   dense_backward_bias  dZ = dY * act'(Z) and db = sum over the batch of dZ (one thread per column).
//   gemm_strided         C[M,N] = A[M,K] B[K,N] where A and B are read through strides, so the two
//                        gradient GEMMs read transposes without copying them:
//                          dW[K,N] = X^T dZ     dX[B,K] = dZ W^T
//
// Layout: row-major float32 everywhere; X is [batch, in], W is [in, out], Y and Z are [batch, out].
// Napkin math for the forward: 2*B*K*N FLOPs over 4*(B*K + K*N + 2*B*N) bytes.
#include "nn_activations.cuh"

#define TILE 16   // a block computes a TILE x TILE tile of the output; blockDim = (TILE, TILE)

// The dot product that gives this thread's output element C[row, col] = sum_k A(row,k) B(k,col), read
// one TILE-wide slab of k at a time through shared memory: each element of A and B loaded from global
// memory is used TILE times.  A(r,k) = A[r*a_rs + k*a_cs] and B(k,c) = B[k*b_rs + c*b_cs].
// Every thread of the block must call it (it has barriers), including threads outside C.
__device__ float tiled_dot(const float* A, const float* Bm, int M, int N, int K,
                          int a_rs, int a_cs, int b_rs, int b_cs, int row, int col) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // Each thread loads one element of each tile; out-of-range elements load as 0 so the
        // inner loop needs no guard (0 * anything adds nothing).
        int ka = k0 + tx, kb = k0 + ty;
        As[ty][tx] = (row < M && ka < K) ? A[row * a_rs + ka * a_cs] : 0.0f;
        Bs[ty][tx] = (kb < K && col < N) ? Bm[kb * b_rs + col * b_cs] : 0.0f;
        __syncthreads();            // the tiles are complete before anyone reads them
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();            // everyone is done reading before the next slab overwrites them
    }
    return acc;
}

// Y[b,n] = act(sum_k X[b,k] W[k,n] + bias[n]); Z gets the pre-activation (pass Z = NULL to skip it,
// e.g. at inference).  grid = (ceil(N/TILE), ceil(B/TILE)), block = (TILE, TILE).
extern "C" __global__ void dense_forward(const float* X, const float* W, const float* bias,
                                         float* Z, float* Y, int B, int K, int N, int act) {
    int row = blockIdx.y * TILE + threadIdx.y;   // sample in the batch
    int col = blockIdx.x * TILE + threadIdx.x;   // output feature
    float acc = tiled_dot(X, W, B, N, K, /*a_rs=*/K, /*a_cs=*/1, /*b_rs=*/N, /*b_cs=*/1, row, col);
    if (row < B && col < N) {       // the edge blocks hang over the output
        float z = acc + bias[col];
        if (Z) Z[row * N + col] = z;
        Y[row * N + col] = act_forward(act, z);
    }
}

// dZ = dY * act'(Z) (Y is the forward's output, used by sigmoid/tanh), and db[n] = sum_b dZ[b,n].
// One thread per output column walks down the batch: adjacent threads read adjacent columns, so each
// row's loads are coalesced, and the column sum needs no atomics or barriers.
extern "C" __global__ void dense_backward_bias(const float* dY, const float* Z, const float* Y,
                                               float* dZ, float* db, int B, int N, int act) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= N) return;           // the last block may run past the last column
    float sum = 0.0f;
    for (int b = 0; b < B; ++b) {
        int i = b * N + col;
        float g = dY[i] * act_derivative(act, Z[i], Y[i]);
        dZ[i] = g;
        sum += g;
    }
    db[col] = sum;
}

// C[M,N] = A(M,K) B(K,N) with strided reads (see tiled_dot); grid = (ceil(N/TILE), ceil(M/TILE)).
extern "C" __global__ void gemm_strided(const float* A, const float* Bm, float* C, int M, int N, int K,
                                        int a_rs, int a_cs, int b_rs, int b_cs) {
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = tiled_dot(A, Bm, M, N, K, a_rs, a_cs, b_rs, b_cs, row, col);
    if (row < M && col < N)
        C[row * N + col] = acc;
}
