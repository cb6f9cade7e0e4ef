"""Cooperative groups (cooperative_groups.h) on the emulator's fibers, against NumPy references."""
import re

import numpy as np
import pytest

from gpuedu.emulator._args import In, Out
from gpuedu.emulator._errors import CompileError, LaunchError
from gpuedu.emulator.compiler import SourceModule

CG_SRC = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
namespace cg = cooperative_groups;

// A block sum: each warp's tile reduces with cg::reduce, then the block combines the tiles' sums.
extern "C" __global__ void block_sum(const float* x, float* out) {
  __shared__ float partial[32];
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  float v = x[block.group_index().x * block.size() + block.thread_rank()];
  float s = cg::reduce(warp, v, cg::plus<float>());
  if (warp.thread_rank() == 0) partial[warp.meta_group_rank()] = s;
  block.sync();
  if (block.thread_rank() == 0) {
    float total = 0.0f;
    for (unsigned w = 0; w < warp.meta_group_size(); ++w) total += partial[w];
    out[block.group_index().x] = total;
  }
}

// What each thread learns of its block and of its tile of 16 (and of the same tile made at run time).
extern "C" __global__ void tile_ranks(int* out) {
  cg::thread_block block = cg::this_thread_block();
  auto tile = cg::tiled_partition<16>(block);
  cg::thread_group dyn = cg::tiled_partition(block, 16);
  unsigned t = block.thread_rank();
  out[8 * t + 0] = tile.thread_rank();
  out[8 * t + 1] = tile.meta_group_rank();
  out[8 * t + 2] = tile.meta_group_size();
  out[8 * t + 3] = tile.size();
  out[8 * t + 4] = (int)dyn.thread_rank();
  out[8 * t + 5] = (int)dyn.size();
  out[8 * t + 6] = block.thread_index().x + 100 * block.thread_index().y;
  out[8 * t + 7] = block.group_dim().x * block.dim_threads().y;
  cg::sync(block);
}

// A tile's shuffles and votes, for a tile size given at compile time.
template <int N> __device__ void tile_ops(const int* x, int* out) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<N> tile = cg::tiled_partition<N>(block);
  int t = block.thread_rank();
  int v = x[t];
  out[8 * t + 0] = tile.shfl(v, 1 % N);
  out[8 * t + 1] = tile.shfl_down(v, 1);
  out[8 * t + 2] = tile.shfl_up(v, 1);
  out[8 * t + 3] = tile.shfl_xor(v, N > 1 ? 1 : 0);
  out[8 * t + 4] = tile.any(v > 90);
  out[8 * t + 5] = tile.all(v >= 5);
  out[8 * t + 6] = (int)tile.ballot(v & 1);
  out[8 * t + 7] = cg::reduce(tile, v, cg::plus<int>());
  tile.sync();
}
extern "C" __global__ void tile_ops_1(const int* x, int* out) { tile_ops<1>(x, out); }
extern "C" __global__ void tile_ops_2(const int* x, int* out) { tile_ops<2>(x, out); }
extern "C" __global__ void tile_ops_4(const int* x, int* out) { tile_ops<4>(x, out); }
extern "C" __global__ void tile_ops_8(const int* x, int* out) { tile_ops<8>(x, out); }
extern "C" __global__ void tile_ops_16(const int* x, int* out) { tile_ops<16>(x, out); }
extern "C" __global__ void tile_ops_32(const int* x, int* out) { tile_ops<32>(x, out); }

// Float sums over tiles of 32 and of 8: in a GPU's order, so in its bits.
extern "C" __global__ void float_tile_sums(const float* x, float* out) {
  cg::thread_block block = cg::this_thread_block();
  int t = block.thread_rank();
  out[2 * t] = cg::reduce(cg::tiled_partition<32>(block), x[t], cg::plus<float>());
  out[2 * t + 1] = cg::reduce(cg::tiled_partition<8>(block), x[t], cg::plus<float>());
}

// min, max and the bit operations of reduce.h, and the scans, on tiles of 8.
extern "C" __global__ void tile_reductions(const int* x, int* out) {
  auto tile = cg::tiled_partition<8>(cg::this_thread_block());
  int t = cg::this_thread_block().thread_rank();
  int v = x[t];
  out[7 * t + 0] = cg::reduce(tile, v, cg::less<int>());
  out[7 * t + 1] = cg::reduce(tile, v, cg::greater<int>());
  out[7 * t + 2] = cg::reduce(tile, v, cg::bit_and<int>());
  out[7 * t + 3] = cg::reduce(tile, v, cg::bit_or<int>());
  out[7 * t + 4] = cg::reduce(tile, v, cg::bit_xor<int>());
  out[7 * t + 5] = cg::inclusive_scan(tile, v);
  out[7 * t + 6] = cg::exclusive_scan(tile, v);
}

// The lanes that take a branch together form the coalesced group there.
extern "C" __global__ void coalesced(const int* x, int* out) {
  int t = threadIdx.x;
  for (int k = 0; k < 6; ++k) out[6 * t + k] = -1;
  if (x[t] % 3 == 0) {
    cg::coalesced_group active = cg::coalesced_threads();
    int v = x[t];
    out[6 * t + 0] = active.size();
    out[6 * t + 1] = active.thread_rank();
    out[6 * t + 2] = active.shfl(v, 0);
    out[6 * t + 3] = (int)active.ballot(v > 50);
    out[6 * t + 4] = cg::reduce(active, v, cg::plus<int>());
    out[6 * t + 5] = active.shfl_down(v, 1);
    active.sync();
  }
}

// Atomic aggregation, the coalesced groups' classic: one atomicAdd per group instead of one per thread.
extern "C" __global__ void count_positive(const int* x, int* count, int* atomics) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (x[i] > 0) {
    cg::coalesced_group g = cg::coalesced_threads();
    if (g.thread_rank() == 0) {
      atomicAdd(count, (int)g.size());
      atomicAdd(atomics, 1);
    }
  }
}

extern "C" __global__ void grid_ranks(unsigned long long* out) {
  cg::grid_group grid = cg::this_grid();
  out[grid.thread_rank()] = grid.size() * 1000 + grid.block_rank() * 10 + (grid.is_valid() ? 1 : 0);
}

// The CUDA Programming Guide's reduce_sum, on any thread_group: the block, and tiles made at run time.
__device__ int reduce_sum(cg::thread_group g, int* temp, int val) {
  int lane = g.thread_rank();
  for (int i = g.size() / 2; i > 0; i /= 2) {
    temp[lane] = val;
    g.sync();                            // every value written
    if (lane < i) val += temp[lane + i];
    g.sync();                            // every value read before the next step writes
  }
  return val;                            // the whole group's sum, in its thread of rank 0
}
extern "C" __global__ void group_sums(const int* x, int* out) {
  __shared__ int temp[128];
  cg::thread_block block = cg::this_thread_block();
  int v = x[block.thread_rank()];
  int block_sum = reduce_sum(block, temp, v);
  block.sync();
  cg::thread_group tile = cg::tiled_partition(block, 32);
  int* tile_temp = temp + 32 * (block.thread_rank() / 32);
  int tile_sum = reduce_sum(tile, tile_temp, v);
  if (block.thread_rank() == 0) out[0] = block_sum;
  if (tile.thread_rank() == 0) out[1 + block.thread_rank() / 32] = tile_sum;
}

// Tiles of tiles: a tile of 32 split into tiles of 8.
extern "C" __global__ void sub_tiles(const int* x, int* out) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  cg::thread_block_tile<8> eight = cg::tiled_partition<8>(warp);
  int t = block.thread_rank();
  out[4 * t + 0] = eight.thread_rank();
  out[4 * t + 1] = eight.meta_group_rank();
  out[4 * t + 2] = eight.meta_group_size();
  out[4 * t + 3] = cg::reduce(eight, x[t], cg::plus<int>());
}

// Two branches at once: each side's lanes form their own group.
extern "C" __global__ void two_sides(int* out) {
  int lane = threadIdx.x % 32;
  int size, rank;
  if (lane < 10) {
    cg::coalesced_group g = cg::coalesced_threads();
    size = g.size();
    rank = g.thread_rank();
  } else {
    cg::coalesced_group g = cg::coalesced_threads();
    size = 100 + g.size();
    rank = g.thread_rank();
  }
  out[2 * threadIdx.x] = size;
  out[2 * threadIdx.x + 1] = rank;
}

extern "C" __global__ void bad_tile_size(int* out, int n) {
  cg::thread_group tile = cg::tiled_partition(cg::this_thread_block(), n);
  out[threadIdx.x] = (int)tile.size();
}
"""


@pytest.fixture(scope="module")
def mod():
    return SourceModule(CG_SRC, no_extern_c=True)


def test_kernels_that_sync_or_shuffle_run_as_fibers(mod):
    assert mod.get_function("block_sum").needs_fibers
    assert mod.get_function("coalesced").needs_fibers
    assert mod.get_function("grid_ranks").needs_fibers is False


def test_block_sum_with_reduce_equals_numpy(mod):
    x = np.random.default_rng(1).random(256 * 5, dtype=np.float32)
    out = np.zeros(5, np.float32)
    mod.get_function("block_sum")(In(x), Out(out), block=(256, 1, 1), grid=(5, 1))
    np.testing.assert_allclose(out, x.reshape(5, 256).sum(axis=1), rtol=1e-5)


def test_tile_of_16_ranks_and_meta_group(mod):
    out = np.zeros((48, 8), np.int32)
    # a 24 x 2 block: 48 threads, so the last of its three tiles of 16 is whole and the warp is partial
    mod.get_function("tile_ranks")(Out(out), block=(24, 2, 1))
    t = np.arange(48)
    np.testing.assert_array_equal(out[:, 0], t % 16)
    np.testing.assert_array_equal(out[:, 1], t // 16)
    assert (out[:, 2] == 3).all() and (out[:, 3] == 16).all()
    np.testing.assert_array_equal(out[:, 4], t % 16)
    assert (out[:, 5] == 16).all()
    np.testing.assert_array_equal(out[:, 6], t % 24 + 100 * (t // 24))
    assert (out[:, 7] == 48).all()


def _tile_reference(x, n):
    t = np.arange(len(x))
    base = t - t % n
    r = t % n
    shfl = x[base + (1 % n)]
    down = np.where(r + 1 < n, x[np.minimum(t + 1, len(x) - 1)], x)
    up = np.where(r >= 1, x[np.maximum(t - 1, 0)], x)
    xor = x[base + (r ^ (1 if n > 1 else 0))]
    tiles = x.reshape(-1, n)
    anyv = np.repeat((tiles > 90).any(axis=1), n).astype(np.int32)
    allv = np.repeat((tiles >= 5).all(axis=1), n).astype(np.int32)
    bits = ((tiles & 1) << np.arange(n)).sum(axis=1)
    ballot = np.repeat(bits, n).astype(np.int64).astype(np.uint32).view(np.int32)
    total = np.repeat(tiles.sum(axis=1), n)
    return np.stack([shfl, down, up, xor, anyv, allv, ballot, total], axis=1)


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32])
def test_tile_shuffles_votes_and_reduce(mod, n):
    x = np.random.default_rng(n).integers(0, 100, 64).astype(np.int32)
    x[:8] = [95, 3, 7, 1, 4, 9, 11, 2]     # tiles with and without a value above 90 or below 5
    out = np.zeros((64, 8), np.int32)
    mod.get_function(f"tile_ops_{n}")(In(x), Out(out), block=(64, 1, 1))
    np.testing.assert_array_equal(out, _tile_reference(x, n))


def _butterfly(x, n):
    v = x.reshape(-1, n).copy()
    lanes = np.arange(n)
    m = n // 2
    while m:
        v = (v + v[:, lanes ^ m]).astype(np.float32)    # each lane adds its partner's, as shfl_xor gives it
        m //= 2
    return v.reshape(-1)


def test_float_reduce_has_a_gpus_bits(mod):
    x = (np.random.default_rng(12).standard_normal(64) * 10 ** np.random.default_rng(13).uniform(-3, 3, 64))
    x = x.astype(np.float32)
    out = np.zeros((64, 2), np.float32)
    mod.get_function("float_tile_sums")(In(x), Out(out), block=(64, 1, 1))
    np.testing.assert_array_equal(out[:, 0], _butterfly(x, 32))
    np.testing.assert_array_equal(out[:, 1], _butterfly(x, 8))


def test_reduce_operators_and_scans(mod):
    x = np.random.default_rng(7).integers(0, 1 << 20, 64).astype(np.int32)
    out = np.zeros((64, 7), np.int32)
    mod.get_function("tile_reductions")(In(x), Out(out), block=(64, 1, 1))
    tiles = x.reshape(8, 8)
    np.testing.assert_array_equal(out[:, 0], np.repeat(tiles.min(axis=1), 8))
    np.testing.assert_array_equal(out[:, 1], np.repeat(tiles.max(axis=1), 8))
    np.testing.assert_array_equal(out[:, 2], np.repeat(np.bitwise_and.reduce(tiles, axis=1), 8))
    np.testing.assert_array_equal(out[:, 3], np.repeat(np.bitwise_or.reduce(tiles, axis=1), 8))
    np.testing.assert_array_equal(out[:, 4], np.repeat(np.bitwise_xor.reduce(tiles, axis=1), 8))
    np.testing.assert_array_equal(out[:, 5], np.cumsum(tiles, axis=1).reshape(-1))
    np.testing.assert_array_equal(out[:, 6], (np.cumsum(tiles, axis=1) - tiles).reshape(-1))


def test_coalesced_threads_in_a_divergent_branch(mod):
    x = np.random.default_rng(3).integers(0, 100, 64).astype(np.int32)
    out = np.zeros((64, 6), np.int32)
    mod.get_function("coalesced")(In(x), Out(out), block=(64, 1, 1))
    for w in range(2):
        xs = x[32 * w:32 * w + 32]
        lanes = np.flatnonzero(xs % 3 == 0)
        o = out[32 * w:32 * w + 32]
        others = np.setdiff1d(np.arange(32), lanes)
        assert (o[others] == -1).all()
        vals = xs[lanes]
        ballot = int(sum(1 << i for i, v in enumerate(vals) if v > 50))
        down = np.append(vals[1:], vals[-1])
        expected = np.stack([np.full(len(lanes), len(lanes)), np.arange(len(lanes)), np.full(len(lanes), vals[0]),
                             np.full(len(lanes), ballot), np.full(len(lanes), vals.sum()), down], axis=1)
        np.testing.assert_array_equal(o[lanes], expected)
        assert 0 < len(lanes) < 32


def test_coalesced_groups_aggregate_atomics(mod):
    x = np.random.default_rng(4).integers(-5, 5, 256).astype(np.int32)
    count = np.zeros(1, np.int32)
    atomics = np.zeros(1, np.int32)
    mod.get_function("count_positive")(In(x), Out(count), Out(atomics), block=(128, 1, 1), grid=(2, 1))
    assert count[0] == (x > 0).sum()
    warps_with_positive = sum(bool((x[w * 32:(w + 1) * 32] > 0).any()) for w in range(8))
    assert atomics[0] == warps_with_positive


def test_grid_ranks(mod):
    out = np.zeros(3 * 40, np.uint64)
    mod.get_function("grid_ranks")(Out(out), block=(40, 1, 1), grid=(3, 1))
    r = np.arange(120)
    np.testing.assert_array_equal(out, 120 * 1000 + (r // 40) * 10)


def test_programming_guide_reduce_sum_on_block_and_tiles(mod):
    x = np.random.default_rng(8).integers(-1000, 1000, 128).astype(np.int32)
    out = np.zeros(5, np.int32)
    mod.get_function("group_sums")(In(x), Out(out), block=(128, 1, 1))
    assert out[0] == x.sum()
    np.testing.assert_array_equal(out[1:], x.reshape(4, 32).sum(axis=1))


def test_tiles_of_a_tile(mod):
    x = np.arange(64, dtype=np.int32) * 3
    out = np.zeros((64, 4), np.int32)
    mod.get_function("sub_tiles")(In(x), Out(out), block=(64, 1, 1))
    t = np.arange(64)
    np.testing.assert_array_equal(out[:, 0], t % 8)
    np.testing.assert_array_equal(out[:, 1], (t % 32) // 8)
    assert (out[:, 2] == 4).all()
    np.testing.assert_array_equal(out[:, 3], np.repeat(x.reshape(8, 8).sum(axis=1), 8))


def test_both_sides_of_a_branch_coalesce_apart(mod):
    out = np.zeros((48, 2), np.int32)
    mod.get_function("two_sides")(Out(out), block=(48, 1, 1))    # a whole warp and one of 16 lanes
    lane = np.arange(48) % 32
    warp_size = np.where(np.arange(48) < 32, 32, 16)
    np.testing.assert_array_equal(out[:, 0], np.where(lane < 10, 10, 100 + warp_size - 10))
    np.testing.assert_array_equal(out[:, 1], np.where(lane < 10, lane, lane - 10))


@pytest.mark.parametrize("order", ["reverse", "random"])
def test_groups_give_the_same_answers_in_any_thread_order(mod, order):
    from gpuedu.emulator.compiler import set_schedule
    x = np.random.default_rng(9).integers(0, 100, 64).astype(np.int32)
    try:
        set_schedule(order, seed=4)
        out = np.zeros((64, 6), np.int32)
        mod.get_function("coalesced")(In(x), Out(out), block=(64, 1, 1))
        lanes = np.flatnonzero(x[:32] % 3 == 0)
        np.testing.assert_array_equal(out[lanes, 0], len(lanes))
        np.testing.assert_array_equal(out[lanes, 1], np.arange(len(lanes)))
        np.testing.assert_array_equal(out[lanes, 4], x[lanes].sum())
        sums = np.zeros(5, np.int32)
        mod.get_function("group_sums")(In(x.repeat(2)), Out(sums), block=(128, 1, 1))
        assert sums[0] == 2 * x.sum()
        tiles = np.zeros((64, 8), np.int32)
        mod.get_function("tile_ops_16")(In(x), Out(tiles), block=(64, 1, 1))
        np.testing.assert_array_equal(tiles, _tile_reference(x, 16))
    finally:
        set_schedule("forward")


def test_runtime_tile_size_must_be_a_power_of_two_up_to_32(mod):
    out = np.zeros(32, np.int32)
    mod.get_function("bad_tile_size")(Out(out), np.int32(8), block=(32, 1, 1))
    assert (out == 8).all()
    with pytest.raises(LaunchError, match=r"tiled_partition\(group, 3\): the tile size must be a power of two"):
        mod.get_function("bad_tile_size")(Out(out), np.int32(3), block=(32, 1, 1))


@pytest.mark.parametrize("body,message", [
    ("auto t = cg::tiled_partition<3>(cg::this_thread_block()); out[0] = t.thread_rank();",
     r"tile size N must be a power of two from 1 to 32"),
    ("auto t = cg::tiled_partition<64>(cg::this_thread_block()); out[0] = t.thread_rank();",
     r"tile size N must be a power of two from 1 to 32"),
    ("cg::grid_group g = cg::this_grid(); g.sync(); out[0] = 1;", r"grid\.sync\(\).*cooperative launch"),
    ("cg::sync(cg::this_grid()); out[0] = 1;", r"cooperative launch"),
])
def test_misuse_is_a_compile_error_that_says_why(body, message):
    src = ("#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
           f'extern "C" __global__ void k(int* out) {{ {body} }}\n')
    with pytest.raises(CompileError) as info:
        SourceModule(src, no_extern_c=True)
    assert re.search(message, str(info.value))


def test_inside_extern_c_the_error_says_to_pass_no_extern_c():
    src = "#include <cooperative_groups.h>\n__global__ void k(int* out) { out[0] = 1; }\n"
    with pytest.raises(CompileError, match=r"no_extern_c=True"):
        SourceModule(src)
