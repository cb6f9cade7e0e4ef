"""An exercise that bounds how a kernel moves its data bounds every way of moving it. Each answer here computes
the right values by the method its exercise forbids, through a path around plain loads and stores (atomics and
reductions, ...): each is refused, on the emulator and on a GPU alike (where the method is judged on the
emulator), and the course's solution still passes."""
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


@pytest.mark.parametrize("exercise_id", ANSWERS)
def test_the_solution_passes_on_both_sides(exercise_id, monkeypatch):
    solution = exercises.get(exercise_id).solution
    assert check_quietly(exercise_id, solution)
    _gpu_stand_in(monkeypatch)
    assert check_quietly(exercise_id, solution)
