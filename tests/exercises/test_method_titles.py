"""Every exercise of lessons 01-06 whose title names a method checks that method: an answer with the right values,
got by the method the title forbids, is refused, through each path that applies (plain loads and stores, atomics,
an #include of the course's kernels, a __device__ module array), on the emulator and on a GPU alike (where the
method is judged on the emulator), and the course's solution still passes."""
import pytest

import gpuedu
from gpuedu import exercises
from gpuedu.exercises import _runner
from exercise_helpers import check_quietly, gpu_stand_in as _gpu_stand_in

ON_EMULATOR = gpuedu.setup(verbose=False).name == "cpu"
pytestmark = pytest.mark.skipif(not ON_EMULATOR, reason="the stand-in GPU of these tests is the emulator's")

# 03.block_sum: thread 0 adds the block's values one after another.
BLOCK_SUM_SERIAL = {
    "plain, from global memory": r"""
__global__ void block_sum(float* out, const float* x, int n) {
    if (threadIdx.x != 0) return;
    float sum = 0.0f;
    for (int j = 0; j < 256; j++) { int i = blockIdx.x * 256 + j; sum += (i < n) ? x[i] : 0.0f; }
    out[blockIdx.x] = sum;
}""",
    "atomics, from global memory": r"""
__global__ void block_sum(float* out, const float* x, int n) {
    __shared__ float partial[256];
    partial[threadIdx.x] = 0.0f;
    if (threadIdx.x != 0) return;
    float sum = 0.0f;
    for (int j = 0; j < 256; j++) { int i = blockIdx.x * 256 + j; if (i < n) sum += atomicAdd((float*)&x[i], 0.0f); }
    out[blockIdx.x] = sum;
}""",
    "plain, from shared memory": r"""
__global__ void block_sum(float* out, const float* x, int n) {
    __shared__ float partial[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = (i < n) ? x[i] : 0.0f;
    __syncthreads();
    if (threadIdx.x == 0) {
        float sum = 0.0f;
        for (int j = 0; j < 256; j++) sum += partial[j];
        out[blockIdx.x] = sum;
    }
}""",
    "atomics, from shared memory": r"""
__global__ void block_sum(float* out, const float* x, int n) {
    __shared__ float partial[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = (i < n) ? x[i] : 0.0f;
    __syncthreads();
    if (threadIdx.x == 0) {
        float sum = 0.0f;
        for (int j = 0; j < 256; j++) sum += atomicAdd(&partial[j], 0.0f);
        out[blockIdx.x] = sum;
    }
}""",
}

# ... and through a __device__ array, with partial[] stored as a decoy.
BLOCK_SUM_MODULE = r"""
__device__ float stage[1 << 16];
__global__ void block_sum(float* out, const float* x, int n) {
    __shared__ float partial[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = stage[i] = (i < n) ? x[i] : 0.0f;
    __syncthreads();
    if (threadIdx.x == 0) {
        float sum = partial[0] - stage[blockIdx.x * 256];
        for (int j = 0; j < 256; j++) sum += stage[blockIdx.x * 256 + j];
        out[blockIdx.x] = sum;
    }
}"""

# 03.warp_sum: the five shuffles are made (on a decoy), and the warp's values go through memory instead.
WARP_SUM_AROUND = {
    "plain, through shared memory": r"""
__global__ void warp_sum(float* out, const float* x, int n) {
    __shared__ float s[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32;
    float v = (i < n) ? x[i] : 0.0f, decoy = 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) decoy += __shfl_down_sync(0xffffffffu, decoy, offset);
    s[threadIdx.x] = v;
    __syncwarp();
    if (lane == 0 && i < n) {
        float sum = decoy;
        for (int l = 0; l < 32; l++) sum += s[threadIdx.x + l];
        out[i / 32] = sum;
    }
}""",
    "atomics, through shared memory": r"""
__global__ void warp_sum(float* out, const float* x, int n) {
    __shared__ float s[4];
    int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32;
    float v = (i < n) ? x[i] : 0.0f, decoy = 0.0f;
    if (lane == 0) s[threadIdx.x / 32] = 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) decoy += __shfl_down_sync(0xffffffffu, decoy, offset);
    atomicAdd(&s[threadIdx.x / 32], v);
    __syncwarp();
    if (lane == 0 && i < n) out[i / 32] = s[threadIdx.x / 32] + decoy;
}""",
    "atomics, through global memory": r"""
__global__ void warp_sum(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32;
    float v = (i < n) ? x[i] : 0.0f, decoy = 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) decoy += __shfl_down_sync(0xffffffffu, decoy, offset);
    if (lane == 0 && i < n) out[i / 32] = decoy;
    __syncwarp();
    if (i - lane < n) atomicAdd(&out[i / 32], v);
}""",
}

WARP_SUM_MODULE = r"""
__device__ float stage[1 << 15];
__global__ void warp_sum(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32;
    float decoy = 0.0f;
    stage[i] = (i < n) ? x[i] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) decoy += __shfl_down_sync(0xffffffffu, decoy, offset);
    if (lane == 0 && i < n) {
        float sum = decoy;
        for (int l = 0; l < 32; l++) sum += stage[i + l];
        out[i / 32] = sum;
    }
}"""

# 02.grid_stride_copy: each thread copies a contiguous chunk of its own (uncoalesced in every round).
GRID_STRIDE_CHUNKED = r"""
__global__ void grid_stride_copy(float* out, const float* x, int n) {
    int threads = blockDim.x * gridDim.x, t = blockIdx.x * blockDim.x + threadIdx.x;
    int chunk = (n + threads - 1) / threads;
    for (int i = t * chunk; i < n && i < (t + 1) * chunk; i++) WRITE(out[i], READ(x[i]));
}"""

# 02.transpose_naive: x over out's columns: reads strided, writes coalesced (the opposite of the text).
TRANSPOSE_READS_STRIDED = r"""
__global__ void transpose_naive(float* out, const float* a, int rows, int cols) {
    int t = (blockIdx.y * gridDim.x + blockIdx.x) * 256 + threadIdx.y * 16 + threadIdx.x;
    int r = t % rows, c = t / rows;                      // neighbouring threads: neighbouring rows of a
    if (c < cols) WRITE(out[c * rows + r], READ(a[r * cols + c]));
}"""

PLAIN = "#define READ(v) (v)\n#define WRITE(v, x) ((v) = (x))\n"
ATOMIC = "#define READ(v) atomicAdd((float*)&(v), 0.0f)\n#define WRITE(v, x) atomicExch(&(v), (x))\n"

# 03.histogram: every x[i] counted straight into the global histogram (the shared bins counted too, as a decoy).
HISTOGRAM_GLOBAL = r"""
__global__ void histogram(unsigned int* hist, const unsigned char* x, int n) {
    __shared__ unsigned int local[256];
    int tid = threadIdx.x, i = blockIdx.x * blockDim.x + tid;
    local[tid] = 0;
    __syncthreads();
    if (i < n) { atomicAdd(&local[x[i]], 1u); COUNT(&hist[x[i]]); }
}"""
COUNT_PATHS = {
    "atomicAdd": "#define COUNT(p) atomicAdd((p), 1u)\n",
    "compare-and-swap": "#define COUNT(p) do { unsigned o = atomicOr((p), 0u), s; do { s = o; o = atomicCAS((p), s, s + 1u); } "
                        "while (o != s); } while (0)\n",
}

METHOD_ANSWERS = {
    **{("03.block_sum", path): src for path, src in BLOCK_SUM_SERIAL.items()},
    **{("03.warp_sum", path): src for path, src in WARP_SUM_AROUND.items()},
    ("02.grid_stride_copy", "plain"): PLAIN + GRID_STRIDE_CHUNKED,
    ("02.grid_stride_copy", "atomics"): ATOMIC + GRID_STRIDE_CHUNKED,
    ("02.transpose_naive", "plain"): PLAIN + TRANSPOSE_READS_STRIDED,
    ("02.transpose_naive", "atomics"): ATOMIC + TRANSPOSE_READS_STRIDED,
    **{("03.histogram", path): macro + HISTOGRAM_GLOBAL for path, macro in COUNT_PATHS.items()},
}

MODULE_ANSWERS = {"03.block_sum": BLOCK_SUM_MODULE, "03.warp_sum": WARP_SUM_MODULE}


def _refused_on_both_sides(exercise_id, source, monkeypatch):
    laptop = check_quietly(exercise_id, source)
    assert not laptop and laptop.kind == "requirement", laptop.report()
    _gpu_stand_in(monkeypatch)
    gpu = check_quietly(exercise_id, source)
    assert not gpu and gpu.kind == "requirement", gpu.report()
    assert gpu.failure.message == laptop.failure.message + " (judged on the emulator)"
    return laptop


@pytest.mark.parametrize("exercise_id, path", METHOD_ANSWERS)
def test_right_values_by_the_method_the_title_forbids_are_refused(exercise_id, path, monkeypatch):
    # A "requirement" failure comes only once every case's values are right: only the method is wrong.
    _refused_on_both_sides(exercise_id, METHOD_ANSWERS[exercise_id, path], monkeypatch)


@pytest.mark.parametrize("exercise_id", MODULE_ANSWERS)
def test_right_values_through_a_device_module_array_are_refused(exercise_id, monkeypatch):
    _refused_on_both_sides(exercise_id, MODULE_ANSWERS[exercise_id], monkeypatch)


INCLUDES = {
    "03.block_sum": ['#include "reduction.cu"', '#include "../kernels/reduction.cu"'],
    "03.warp_sum": ['#include "reduction.cu"'],
    "02.grid_stride_copy": ['#include "copy_transpose.cu"'],
    "02.transpose_naive": ['#include "copy_transpose.cu"', "#include \"{dir}/../kernels/copy_transpose.cu\""],
}


@pytest.mark.parametrize("exercise_id, line", [(e, line) for e, lines in INCLUDES.items() for line in lines])
def test_an_include_of_the_course_s_kernels_is_refused_at_compile_time(exercise_id, line, monkeypatch):
    from gpuedu import kernels
    source = line.format(dir=kernels.DIR) + "\n" + exercises.get(exercise_id).solution
    for stand_in in (False, True):
        if stand_in:
            _gpu_stand_in(monkeypatch)
        result = check_quietly(exercise_id, source)
        assert not result and result.kind == "compile_error", result.report()
        assert _runner.REFUSED_INCLUDE in result.failure.message
        assert "line 1 of your source" in result.failure.message


def test_every_stub_and_solution_of_the_course_still_compiles():
    """Headers an exercise needs (cuda_fp16.h, mma.h) stay allowed: no stub or solution names a refused file."""
    exercises._load_all()
    ids = list(exercises._registry) or pytest.fail("no exercises registered")
    for exercise_id in ids:
        ex = exercises.get(exercise_id)
        for source in (getattr(ex, "stub", None), getattr(ex, "solution", None)):
            if isinstance(source, str):
                assert _runner.refused_includes(source) == [], exercise_id


@pytest.mark.parametrize("exercise_id", sorted({e for e, _ in METHOD_ANSWERS}))
def test_the_solution_passes_on_both_sides(exercise_id, monkeypatch):
    solution = exercises.get(exercise_id).solution
    assert check_quietly(exercise_id, solution)
    _gpu_stand_in(monkeypatch)
    assert check_quietly(exercise_id, solution)
