"""mma.h: WMMA fragments, loads/stores in both layouts, mma_sync, elementwise access, vs NumPy; mma_sync
is computed once per warp where the lanes meet, in any schedule, and a lane that never arrives is reported."""
import numpy as np
import pytest

from gpuedu.emulator._args import In, Out
from gpuedu.emulator._errors import LaunchError
from gpuedu.emulator.compiler import SourceModule, set_schedule

WMMA_SRC = r"""
#include <mma.h>
using namespace nvcuda;
// One warp per 16x16 tile of C = alpha * A @ B + C0, A (M x K) row-major, B (K x N) col-major.
extern "C" __global__ void wmma_gemm(const half* A, const half* B, const float* C0, float* C,
                                     int M, int N, int K, float alpha) {
  int tile_row = blockIdx.y * 16, tile_col = blockIdx.x * 16;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, A + tile_row * K + k, K);
    wmma::load_matrix_sync(b, B + tile_col * K + k, K);   // column j of B starts at j*K
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c0;
  wmma::load_matrix_sync(c0, C0 + tile_row * N + tile_col, N, wmma::mem_row_major);
  for (int i = 0; i < acc.num_elements; ++i) acc.x[i] = alpha * acc.x[i] + c0.x[i];
  wmma::store_matrix_sync(C + tile_row * N + tile_col, acc, N, wmma::mem_row_major);
}
// A half accumulator, stored column-major.
extern "C" __global__ void wmma_half_acc(const half* A, const half* B, half* C) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::col_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, half> c;
  wmma::fill_fragment(c, __float2half(1.0f));
  wmma::load_matrix_sync(a, A, 16);
  wmma::load_matrix_sync(b, B, 16);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(C, c, 16, wmma::mem_col_major);
}
// Two warps, each with its own tile of A (rows 16w..16w+15), accumulating twice into one
// fragment (d aliases c); lane 5 of warp 1 leaves early when bail is set.
extern "C" __global__ void wmma_two_warps(const half* A, const half* B, float* C, int bail) {
  int warp = threadIdx.x / 32;
  if (bail && warp == 1 && threadIdx.x % 32 == 5) return;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(a, A + warp * 16 * 16, 16);
  wmma::load_matrix_sync(b, B, 16);
  wmma::mma_sync(acc, a, b, acc);
  wmma::mma_sync(acc, a, b, acc);
  wmma::store_matrix_sync(C + warp * 16 * 16, acc, 16, wmma::mem_row_major);
}
"""


@pytest.fixture(scope="module")
def mod():
    return SourceModule(WMMA_SRC, no_extern_c=True)


def test_wmma_gemm_against_numpy(mod):
    rng = np.random.default_rng(0)
    M, N, K = 32, 48, 64
    A = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    C0 = rng.uniform(-1, 1, (M, N)).astype(np.float32)
    C = np.zeros((M, N), np.float32)
    B_colmajor = np.ascontiguousarray(B.T)
    mod.get_function("wmma_gemm")(In(A), In(B_colmajor), In(C0), Out(C), np.int32(M), np.int32(N), np.int32(K),
                                  np.float32(0.5), block=(32, 1, 1), grid=(N // 16, M // 16))
    want = 0.5 * (A.astype(np.float32) @ B.astype(np.float32)) + C0
    np.testing.assert_allclose(C, want, rtol=1e-5, atol=1e-5)


def test_wmma_half_accumulator_col_major(mod):
    rng = np.random.default_rng(1)
    A = rng.uniform(-1, 1, (16, 16)).astype(np.float16)
    B = rng.uniform(-1, 1, (16, 16)).astype(np.float16)
    C = np.zeros((16, 16), np.float16)
    mod.get_function("wmma_half_acc")(In(np.ascontiguousarray(A.T)), In(B), Out(C), block=(32, 1, 1))
    want = (A.astype(np.float32) @ B.astype(np.float32) + 1).astype(np.float16)
    np.testing.assert_array_equal(C.T, want)


@pytest.mark.parametrize("schedule", ["forward", "reverse", "random"])
def test_each_warp_gets_its_own_product_in_any_schedule(mod, schedule):
    # The lanes of each warp meet at mma_sync and one computes the product for all:
    # each warp must still get its own tile, whichever lane arrives last.
    rng = np.random.default_rng(2)
    A = rng.uniform(-1, 1, (32, 16)).astype(np.float16)
    B = rng.uniform(-1, 1, (16, 16)).astype(np.float16)
    C = np.zeros((32, 16), np.float32)
    try:
        set_schedule(schedule, seed=3)
        mod.get_function("wmma_two_warps")(In(A), In(B), Out(C), np.int32(0), block=(64, 1, 1))
    finally:
        set_schedule("forward")
    want = 2 * (A.astype(np.float32) @ B.astype(np.float32))
    np.testing.assert_allclose(C, want, rtol=1e-5, atol=1e-5)


def test_a_lane_missing_at_mma_sync_is_reported(mod):
    A = np.zeros((32, 16), np.float16)
    B = np.zeros((16, 16), np.float16)
    C = np.zeros((32, 16), np.float32)
    with pytest.raises(LaunchError, match=r"wmma::mma_sync.*exited"):
        mod.get_function("wmma_two_warps")(In(A), In(B), Out(C), np.int32(1), block=(64, 1, 1))
