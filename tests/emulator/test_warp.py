"""Block barriers and warp intrinsics (run with fibers), against NumPy references."""
import numpy as np
import pytest

from gpuedu.emulator._args import In, InOut, Out
from gpuedu.emulator.compiler import SourceModule

WARP_SRC = r"""
// Tree reduction in shared memory: a barrier after every step.
__global__ void block_sum(const float* x, float* out) {
  // s lives in __shared__ memory; one copy per block (the comment must not confuse the emulator)
  __shared__ float s[256];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();                       // every value loaded before anyone reads a neighbour's
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (t < k) s[t] += s[t + k];
    __syncthreads();                     // this step finished before the next reads its results
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
// Dynamic shared memory, sized by the launch's shared= argument.
__global__ void reverse_block(int* x) {
  extern __shared__ int buf[];
  int t = threadIdx.x, n = blockDim.x;
  buf[t] = x[blockIdx.x * n + t];
  __syncthreads();                       // the whole block is in shared memory
  x[blockIdx.x * n + t] = buf[n - 1 - t];
}
__global__ void barrier_votes(const int* pred, int* out) {
  int t = threadIdx.x;
  int p = pred[t];
  int c = __syncthreads_count(p);
  int a = __syncthreads_and(p);
  int o = __syncthreads_or(p);
  if (t == 0) { out[0] = c; out[1] = a; out[2] = o; }
}
// Each lane records what the shuffles give it.
__global__ void shuffles(const int* x, int* out, int width) {
  int t = threadIdx.x;
  int v = x[t];
  unsigned full = 0xffffffffu;
  out[6 * t + 0] = __shfl_sync(full, v, 3, width);
  out[6 * t + 1] = __shfl_up_sync(full, v, 2, width);
  out[6 * t + 2] = __shfl_down_sync(full, v, 5, width);
  out[6 * t + 3] = __shfl_xor_sync(full, v, 1, width);
  out[6 * t + 4] = (int)__ballot_sync(full, v & 1);
  out[6 * t + 5] = __any_sync(full, v > 90) * 2 + __all_sync(full, v >= 0);
}
// Warp-level sum with shuffles (the classic pattern), float values.
__device__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}
__global__ void warp_sums(const float* x, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = warp_sum(x[i]);
  if (threadIdx.x % 32 == 0) out[i / 32] = s;
}
// A partial mask: only the even lanes take part.
__global__ void even_lanes(const int* x, int* out) {
  int lane = threadIdx.x % 32;
  if (lane % 2 == 0) {
    int v = __shfl_down_sync(0x55555555u, x[threadIdx.x], 2);
    out[threadIdx.x] = v;
    __syncwarp(0x55555555u);
  }
}
__global__ void lane_mask(unsigned* out) {
  if (threadIdx.x < 20) out[threadIdx.x] = __activemask();
}
__global__ void reductions(const unsigned* x, unsigned* out) {
#if __CUDA_ARCH__ >= 800                 // __reduce_*_sync need sm_80 (the emulator is sm_80)
  unsigned v = x[threadIdx.x];
  unsigned s = __reduce_add_sync(0xffffffffu, v);
  unsigned m = __reduce_max_sync(0xffffffffu, v);
  if (threadIdx.x == 0) { out[0] = s; out[1] = m; }
#endif
}
"""


@pytest.fixture(scope="module")
def mod():
    return SourceModule(WARP_SRC)


def test_kernels_with_barriers_use_fibers_and_others_do_not(mod):
    assert mod.get_function("block_sum").needs_fibers
    assert mod.get_function("warp_sums").needs_fibers      # through the __device__ warp_sum
    assert mod.get_function("lane_mask").needs_fibers is False


def test_shared_memory_tree_reduction(mod):
    x = np.random.default_rng(1).random(256 * 6, dtype=np.float32)
    out = np.zeros(6, np.float32)
    mod.get_function("block_sum")(In(x), Out(out), block=(256, 1, 1), grid=(6, 1))
    np.testing.assert_allclose(out, x.reshape(6, 256).sum(axis=1), rtol=1e-5)


def test_dynamic_shared_memory(mod):
    x = np.arange(3 * 128, dtype=np.int32)
    mod.get_function("reverse_block")(InOut(x), block=(128, 1, 1), grid=(3, 1), shared=128 * 4)
    np.testing.assert_array_equal(x, np.arange(3 * 128).reshape(3, 128)[:, ::-1].reshape(-1))


def test_syncthreads_count_and_or(mod):
    out = np.zeros(3, np.int32)
    f = mod.get_function("barrier_votes")
    pred = (np.arange(100) % 3 == 0).astype(np.int32)
    f(In(pred), Out(out), block=(100, 1, 1))
    assert out.tolist() == [34, 0, 1]
    f(In(np.ones(100, np.int32)), Out(out), block=(100, 1, 1))
    assert out.tolist() == [100, 1, 1]
    f(In(np.zeros(100, np.int32)), Out(out), block=(100, 1, 1))
    assert out.tolist() == [0, 0, 0]


def _shuffle_reference(x, width):
    lanes = np.arange(32)
    base = lanes & ~(width - 1)
    seg = lanes & (width - 1)
    idx = x[base + (3 % width)]
    up = np.where(seg < 2, x, x[np.maximum(lanes - 2, 0)])
    down = np.where(seg + 5 >= width, x, x[np.minimum(lanes + 5, 31)])
    src = lanes ^ 1
    xor = np.where(src >= base + width, x, x[src])
    ballot = np.int64(sum(1 << i for i in range(32) if x[i] & 1))
    ballot = np.full(32, np.int32(np.uint32(ballot).view(np.int32)))
    vote = np.full(32, int((x > 90).any()) * 2 + int((x >= 0).all()))
    return np.stack([idx, up, down, xor, ballot, vote], axis=1).reshape(-1)


@pytest.mark.parametrize("width", [32, 16, 8])
def test_shuffles_ballot_any_all(mod, width):
    x = np.random.default_rng(width).integers(0, 100, 32).astype(np.int32)
    out = np.zeros(32 * 6, np.int32)
    mod.get_function("shuffles")(In(x), Out(out), np.int32(width), block=(32, 1, 1))
    np.testing.assert_array_equal(out, _shuffle_reference(x, width))


def test_warp_shuffle_sum(mod):
    x = np.random.default_rng(2).random(512, dtype=np.float32)
    out = np.zeros(16, np.float32)
    mod.get_function("warp_sums")(In(x), Out(out), block=(128, 1, 1), grid=(4, 1))
    np.testing.assert_allclose(out, x.reshape(16, 32).sum(axis=1), rtol=1e-5)


def test_partial_mask_waits_only_for_its_lanes(mod):
    x = np.arange(64, dtype=np.int32) * 10
    out = np.full(64, -1, np.int32)
    mod.get_function("even_lanes")(In(x), InOut(out), block=(64, 1, 1))
    lanes = np.arange(64) % 32
    expected = np.where(lanes % 2 == 0, np.where(lanes + 2 < 32, x + 20, x), -1)
    np.testing.assert_array_equal(out, expected)


def test_activemask_of_a_partial_last_warp(mod):
    out = np.zeros(20, np.uint32)
    mod.get_function("lane_mask")(Out(out), block=(20, 1, 1))
    assert (out == (1 << 20) - 1).all()


def test_warp_reduce_intrinsics(mod):
    x = np.random.default_rng(3).integers(0, 1000, 32).astype(np.uint32)
    out = np.zeros(2, np.uint32)
    mod.get_function("reductions")(In(x), Out(out), block=(32, 1, 1))
    assert out.tolist() == [int(x.sum()), int(x.max())]


@pytest.mark.parametrize("order", ["reverse", "random"])
def test_correct_kernels_give_the_same_answer_in_any_thread_order(mod, order):
    from gpuedu.emulator.compiler import set_schedule
    rng = np.random.default_rng(5)
    x = rng.random(256 * 3, dtype=np.float32)
    ints = rng.integers(0, 100, 32).astype(np.int32)
    try:
        set_schedule(order, seed=3)
        out = np.zeros(3, np.float32)
        mod.get_function("block_sum")(In(x), Out(out), block=(256, 1, 1), grid=(3, 1))
        np.testing.assert_allclose(out, x.reshape(3, 256).sum(axis=1), rtol=1e-5)
        sums = np.zeros(24, np.float32)
        mod.get_function("warp_sums")(In(x), Out(sums), block=(128, 1, 1), grid=(6, 1))
        np.testing.assert_allclose(sums, x.reshape(24, 32).sum(axis=1), rtol=1e-5)
        shuffled = np.zeros(32 * 6, np.int32)
        mod.get_function("shuffles")(In(ints), Out(shuffled), np.int32(16), block=(32, 1, 1))
        np.testing.assert_array_equal(shuffled, _shuffle_reference(ints, 16))
    finally:
        set_schedule("forward")
