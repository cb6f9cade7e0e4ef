"""An exercise that bounds how a kernel moves its data bounds every way of moving it. Each answer here computes
the right values by the method its exercise forbids, through a path around plain loads and stores of device
allocations (atomics and reductions, a `__device__` array of the module, a thread's own array indexed at run time,
which nvcc keeps in local memory): each is refused, on the emulator and on a GPU alike (where the method is judged on
the emulator), and the course's solution still passes."""
import re

import pytest

import gpuedu
from gpuedu import exercises
from exercise_helpers import check_quietly, gpu_stand_in as _gpu_stand_in

ON_EMULATOR = gpuedu.setup(verbose=False).name == "cpu"
pytestmark = pytest.mark.skipif(not ON_EMULATOR, reason="the stand-in GPU of these tests is the emulator's")

# 13.bias_relu: a warp's 32 threads read 32 different rows (uncoalesced), each read done as an atomic add of 0.
BIAS_RELU_TRANSPOSED = r"""
__global__ void bias_relu(float* out, const float* x, const float* b, int rows, int cols) {
    int t = (blockIdx.y * gridDim.x + blockIdx.x) * (blockDim.x * blockDim.y) + threadIdx.y * blockDim.x + threadIdx.x;
    int r = t % rows, c = t / rows;
    if (c < cols)
        out[r * cols + c] = fmaxf(READ(x[r * cols + c]) + b[c], 0.0f);
}
"""

# 14.fused_attention: version 1 in one launch, the N x N scores kept in scratch, written and read through atomics.
ATTENTION_SCORES_IN_SCRATCH = r"""
#include <cuda_fp16.h>
#define D 16

extern "C" __global__ void fused_attention(__half* O, float* scratch, const __half* Q, const __half* K,
                                           const __half* V, int N, float scale, int causal) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float* s = scratch + (size_t)i * N;
    int keys = causal ? i + 1 : N;
    float m = -INFINITY;
    for (int j = 0; j < keys; j++) {
        float dot = 0.0f;
        for (int c = 0; c < D; c++) dot += __half2float(Q[i * D + c]) * __half2float(K[j * D + c]);
        WRITE(s[j], dot * scale);
        m = fmaxf(m, dot * scale);
    }
    float l = 0.0f;
    for (int j = 0; j < keys; j++) { float p = expf(READ(s[j]) - m); WRITE(s[j], p); l += p; }
    for (int c = 0; c < D; c++) {
        float acc = 0.0f;
        for (int j = 0; j < keys; j++) acc += READ(s[j]) * __half2float(V[j * D + c]);
        O[i * D + c] = __float2half_rn(acc / l);
    }
}
"""

# 04.matmul_tiled: the naive product, its reads of A and B done as atomics (and a zero read from shared memory for
# each k, so that only the global reads give it away).
MATMUL_NAIVE = r"""
__global__ void matmul_tiled(float* C, const float* A, const float* B, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    __shared__ float zero[16];
    if (threadIdx.y == 0) zero[threadIdx.x] = 0.0f;
    __syncthreads();
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += READ(A[row * K + k]) * READ(B[k * N + col]) + zero[k % 16];
        C[row * N + col] = acc;
    }
}
"""

# The ways around a plain load or store: (READ(lvalue), WRITE(lvalue, value)) as macros.
PATHS = {
    "atomic add of zero": ("#define READ(v) atomicAdd((float*)&(v), 0.0f)\n#define WRITE(v, x) ((v) = (x))\n"),
    "atomic exchange": ("#define READ(v) atomicAdd((float*)&(v), 0.0f)\n#define WRITE(v, x) atomicExch(&(v), (x))\n"),
    "compare-and-swap": ("#define READ(v) __int_as_float(atomicCAS((int*)&(v), 0x7fc00001, 0x7fc00001))\n"
                         "#define WRITE(v, x) atomicExch(&(v), (x))\n"),
}

ANSWERS = {
    "13.bias_relu": BIAS_RELU_TRANSPOSED,
    "14.fused_attention": ATTENTION_SCORES_IN_SCRATCH,
    "04.matmul_tiled": MATMUL_NAIVE,
}


def with_path(source, path):
    """``source`` with its READ/WRITE macros defined by ``path``, after any #include."""
    macros = PATHS[path]
    includes = re.match(r"(\s*#include[^\n]*\n)*", source).group(0)
    return includes + macros + source[len(includes):]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("exercise_id", ANSWERS)
def test_right_values_by_the_forbidden_method_through_atomics_are_refused(exercise_id, path, monkeypatch):
    source = with_path(ANSWERS[exercise_id], path)
    if exercise_id == "14.fused_attention" and path == "atomic add of zero":
        source = source.replace("#define WRITE(v, x) ((v) = (x))", "#define WRITE(v, x) atomicExch(&(v), (x))")
    laptop = check_quietly(exercise_id, source)
    assert not laptop and laptop.kind == "requirement", laptop.report()
    assert "atom" in laptop.failure.message, laptop.failure.message   # the atomics are in the bounded sum
    _gpu_stand_in(monkeypatch)
    gpu = check_quietly(exercise_id, source)
    assert not gpu and gpu.kind == "requirement", gpu.report()
    assert gpu.failure.message == laptop.failure.message + " (judged on the emulator)"


# ---- the data parked where no device allocation is: a __device__ array of the module, a thread's own array ----

# 13.bias_relu: x read coalesced into a __device__ array, then read back from there the way the exercise forbids
# (a warp at 8 rows of 4 columns each: 8 sectors where 4 would do). Only x's coalesced loads are device
# allocations: with the array's loads not counted, a warp took 5 sectors, under the bound of 10.
BIAS_RELU_PARKED = r"""
__device__ float staged[1 << 20];
__global__ void bias_relu(float* out, const float* x, const float* b, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) staged[r * cols + c] = x[r * cols + c];
    __syncthreads();
    int t = threadIdx.y * blockDim.x + threadIdx.x;
    int rr = blockIdx.y * blockDim.y + t % blockDim.y, cc = blockIdx.x * blockDim.x + t / blockDim.y;
    if (rr < rows && cc < cols) out[rr * cols + cc] = fmaxf(staged[rr * cols + cc] + b[cc], 0.0f);
}
"""

# 04.matmul_tiled: each block copies its 16 rows of A (16 K neighbouring floats) and its 16 columns of B into a
# __device__ array with coalesced loads, K requests a block, within the tiled bound; then the naive product, every
# operand read from that array: 2 K requests a warp.
MATMUL_PARKED = r"""
#define TILE 16
#define KMAX 96
__device__ float staged_a[64][TILE * KMAX];
__device__ float staged_b[64][KMAX * TILE];
__global__ void matmul_tiled(float* C, const float* A, const float* B, int M, int N, int K) {
    int tx = threadIdx.x, ty = threadIdx.y, t = ty * TILE + tx;
    int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE, b = blockIdx.y * gridDim.x + blockIdx.x;
    for (int e = t; e < TILE * K; e += TILE * TILE)
        if (row0 * K + e < M * K) staged_a[b][e] = A[row0 * K + e];
    for (int e = t; e < K * TILE; e += TILE * TILE)
        if (col0 + e % TILE < N) staged_b[b][e] = B[(e / TILE) * N + col0 + e % TILE];
    __shared__ float zero[TILE];                  // a zero read from shared memory each k: the tiles' reads
    if (ty == 0) zero[tx] = 0.0f;
    __syncthreads();
    int row = row0 + ty, col = col0 + tx;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += staged_a[b][ty * K + k] * staged_b[b][k * TILE + tx] + zero[k % TILE];
        C[row * N + col] = acc;
    }
}
"""

# 14.fused_attention, version 1 in one launch: a row's scores written, then read twice (softmax, then P V), with no
# online softmax. SCORES is where they go; O is stored as the solution stores it.
ATTENTION_WHOLE_ROW = r"""
#include <cuda_fp16.h>
#define D 16
PARK
extern "C" __global__ void fused_attention(__half* O, float* scratch, const __half* Q, const __half* K,
                                           const __half* V, int N, float scale, int causal) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    SCORES
    int keys = causal ? i + 1 : N;
    float m = -INFINITY;
    for (int j = 0; j < keys; j++) {
        float dot = 0.0f;
        for (int c = 0; c < D; c++) dot += __half2float(Q[i * D + c]) * __half2float(K[j * D + c]);
        s[j] = dot * scale;
        m = fmaxf(m, s[j]);
    }
    float l = 0.0f;
    for (int j = 0; j < keys; j++) { s[j] = expf(s[j] - m); l += s[j]; }
    for (int c = 0; c < D; c++) {
        float acc = 0.0f;
        for (int j = 0; j < keys; j++) acc += s[j] * __half2float(V[j * D + c]);
        O[i * D + c] = __float2half_rn(acc / l);
    }
}
"""

# (exercise, path) -> the answer, and the counter that its parked data reaches
PARKED = {
    ("13.bias_relu", "a __device__ module array"): (BIAS_RELU_PARKED, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"),
    ("04.matmul_tiled", "a __device__ module array"):
        (MATMUL_PARKED, "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"),
    ("14.fused_attention", "a __device__ module array"):
        (ATTENTION_WHOLE_ROW.replace("PARK", "__device__ float scores[300 * 300];")
         .replace("SCORES", "float* s = scores + (size_t)i * N;"), "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
    ("14.fused_attention", "a local per-thread array"):
        (ATTENTION_WHOLE_ROW.replace("PARK", "").replace("SCORES", "float s[300];   // N <= 300 in every case"),
         "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"),
}


@pytest.mark.parametrize("exercise_id, path", PARKED)
def test_right_values_by_the_forbidden_method_with_the_data_parked_off_the_allocations_are_refused(
        exercise_id, path, monkeypatch):
    source, counter = PARKED[(exercise_id, path)]
    laptop = check_quietly(exercise_id, source)
    assert not laptop and laptop.kind == "requirement", laptop.report()
    assert counter in laptop.failure.message, laptop.failure.message   # the counter the parked data reaches is bounded
    _gpu_stand_in(monkeypatch)
    gpu = check_quietly(exercise_id, source)
    assert not gpu and gpu.kind == "requirement", gpu.report()
    assert gpu.failure.message == laptop.failure.message + " (judged on the emulator)"


@pytest.mark.parametrize("exercise_id", ANSWERS)
def test_the_solution_passes_on_both_sides(exercise_id, monkeypatch):
    solution = exercises.get(exercise_id).solution
    assert check_quietly(exercise_id, solution)
    _gpu_stand_in(monkeypatch)
    assert check_quietly(exercise_id, solution)
