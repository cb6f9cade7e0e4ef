"""The profiler's counts, racecheck's hazards and memcheck's errors do not depend on how many worker threads
the emulator runs a launch's blocks on: a counted launch runs them on every worker, as a plain one does, and
the L2 model and memcheck take each block's requests and errors in the grid's order (racecheck's launches run
on one worker)."""
import numpy as np
import pytest

import gpuedu
from gpuedu.emulator import _module, hooks

SOURCE = r"""
__global__ void reduce(float* out, const float* x, int n) {
  __shared__ float s[128];
  int t = threadIdx.x, i = blockIdx.x * 256 + t;
  s[t] = (i < n ? x[i] : 0.0f) + (i + 128 < n ? x[i + 128] : 0.0f);
  __syncthreads();
  for (int k = 64; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
  if (t == 0) atomicAdd(out, s[0]);
}
__global__ void racy(unsigned* out) {
  __shared__ unsigned c;
  if (threadIdx.x == 0) c = 0;
  __syncthreads();
  c += 1;                                   // a race between the block's threads
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = c;
}
__global__ void one_past(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i <= n) x[i] = 1.0f; }
"""


@pytest.fixture(scope="module")
def emu(emulator_module):
    return emulator_module(SOURCE)


def under(n, what, run):
    before = _module.get_threads()
    _module.set_threads(n)
    try:
        with what() as session:
            run()
        return session
    finally:
        _module.set_threads(before)


def test_counts_racecheck_and_memcheck_are_the_same_with_one_worker_or_several(emu):
    mod, gpuarray = emu
    x = gpuarray.to_gpu(np.arange(100_000, dtype=np.float32) % 7)
    total = gpuarray.zeros(1, np.float32)
    counts = []
    for n in (1, 4):
        prof = under(n, gpuedu.profile, lambda: mod.get_function("reduce")(total, x, np.int32(100_000),
                                                                         block=(128, 1, 1), grid=(391, 1)))
        counts.append(dict(prof.kernels[0].metrics))
    assert counts[0] == counts[1] and counts[0]["smsp__sass_inst_executed_op_shared_atom.sum"] == 0

    out = gpuarray.zeros(8, np.uint32)
    hazards = [sorted((h["kind"], h["first"]["line"], h["second"]["line"]) for h in
                      under(n, gpuedu.racecheck, lambda: mod.get_function("racy")(out, block=(32, 1, 1),
                                                                                  grid=(8, 1))).hazards)
               for n in (1, 4)]
    assert hazards[0] == hazards[1] and hazards[0]

    y = gpuarray.zeros(99, np.float32)
    errors = [[(e["kind"], e["thread"], e["offset"], e["line"]) for e in
               under(n, gpuedu.memcheck, lambda: mod.get_function("one_past")(y, np.int32(99), block=(64, 1, 1),
                                                                              grid=(2, 1))).errors]
              for n in (1, 4)]
    assert errors[0] == errors[1] == [("out of bounds", (35, 0, 0), 396, "kernel.cu:18")]


KERNELS = r"""
#define TILE 16
// A reduction through shared memory with a barrier each step, one float atomic a block.
__global__ void block_sum(float* out, float* partial, const float* x, int n) {
  __shared__ float s[256];
  int t = threadIdx.x, i = blockIdx.x * 512 + t;
  s[t] = (i < n ? x[i] : 0.0f) + (i + 256 < n ? x[i + 256] : 0.0f);
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
  if (t == 0) { partial[blockIdx.x] = s[0]; atomicAdd(out, s[0]); }
}
// The same with the block's buffer in dynamic shared memory.
__global__ void block_sum_dynamic(float* partial, const float* x, int n) {
  extern __shared__ float s[];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
  if (t == 0) partial[blockIdx.x] = s[0];
}
// A tiled matmul: two shared tiles per block, loaded and used between barriers.
__global__ void tiled_matmul(float* c, const float* a, const float* b, int n) {
  __shared__ float as[TILE][TILE];
  __shared__ float bs[TILE][TILE + 1];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += TILE) {
    as[threadIdx.y][threadIdx.x] = a[row * n + k0 + threadIdx.x];
    bs[threadIdx.y][threadIdx.x] = b[(k0 + threadIdx.y) * n + col];
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
    __syncthreads();
  }
  c[row * n + col] = acc;
}
// Atomics: a histogram in shared memory (ATOMS), merged into global bins (RED), and a ticket whose value is read
// (ATOM), with a data-dependent branch.
__global__ void histogram(unsigned* bins, unsigned* tickets, const unsigned* keys, int n) {
  __shared__ unsigned local[64];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  if (t < 64) local[t] = 0;
  __syncthreads();
  if (i < n) atomicAdd(&local[keys[i] & 63], 1u);
  __syncthreads();
  if (t < 64 && local[t]) atomicAdd(&bins[t], local[t]);
  if (t == 0) tickets[blockIdx.x] = atomicAdd(&tickets[gridDim.x], 1u) % 3 == 0 ? 1u : 2u;
}
// L2 reuse: block b reads chunk b and chunk b + 16 of x, so each chunk is read again 16 blocks later; whether an
// L2 of a few KB still holds it then depends on the order the blocks' requests reach the model.
__global__ void revisit(float* out, const float* x, int chunks) {
  int mine = blockIdx.x * blockDim.x + threadIdx.x;
  int other = ((blockIdx.x + 16) % chunks) * blockDim.x + threadIdx.x;
  out[mine] = x[mine] + x[other];
}
"""


@pytest.fixture(scope="module")
def kernels(emulator_module):
    return emulator_module(KERNELS)


def launches(mod, gpuarray):
    """(name, run) for each launch the test counts, with its inputs."""
    rng = np.random.default_rng(7)
    x = gpuarray.to_gpu(rng.random(40_000, dtype=np.float32))
    total, partial = gpuarray.zeros(1, np.float32), gpuarray.zeros(128, np.float32)
    n = 64
    a, b = (gpuarray.to_gpu(rng.random((n, n), dtype=np.float32)) for _ in range(2))
    c = gpuarray.empty((n, n), np.float32)
    keys = gpuarray.to_gpu(rng.integers(0, 1 << 20, 20_000, dtype=np.uint32))
    bins, tickets = gpuarray.zeros(64, np.uint32), gpuarray.zeros(80, np.uint32)
    y = gpuarray.empty(40_000, np.float32)
    return [
        ("block_sum", lambda: mod.get_function("block_sum")(total, partial, x, np.int32(40_000), block=(256, 1, 1),
                                                            grid=(79, 1))),
        ("block_sum_dynamic", lambda: mod.get_function("block_sum_dynamic")(partial, x, np.int32(40_000),
                                                                            block=(512, 1, 1), grid=(79, 1),
                                                                            shared=512 * 4)),
        ("tiled_matmul", lambda: mod.get_function("tiled_matmul")(c, a, b, np.int32(n), block=(16, 16, 1),
                                                                  grid=(n // 16, n // 16))),
        ("histogram", lambda: mod.get_function("histogram")(bins, tickets, keys, np.int32(20_000),
                                                            block=(256, 1, 1), grid=(79, 1))),
        ("revisit", lambda: mod.get_function("revisit")(y, x, np.int32(256), block=(128, 1, 1), grid=(256, 1))),
    ]


def counted(run, workers, l2_bytes):
    """Every raw count of one launch (the L2 model's for each size in l2_bytes too), on `workers` threads."""
    before = _module.get_threads()
    _module.set_threads(workers)
    seen = []
    try:
        with hooks.counting(seen.append, l2_bytes=l2_bytes):
            run()
    finally:
        _module.set_threads(before)
    (record,) = seen
    assert record.counts is not None, record.reason
    return record.counts


def test_every_count_is_the_same_on_one_two_or_four_workers(kernels):
    """Barriers with static and dynamic shared memory, a tiled matmul, shared and global atomics (ATOMS, RED and
    ATOM) and chunks read twice, whose lines a small L2 keeps or evicts by the order of the requests: each count, the L2
    model's DRAM traffic at every size included, is what one worker running the blocks in the grid's order (the
    order counting followed when it ran on one worker) gives."""
    mod, gpuarray = kernels
    # L2 sizes of 4 KB to 1 MB: the small ones evict lines another block will read again, so their DRAM counts
    # change with the order the blocks' requests reach the model.
    l2_bytes = (4 << 10, 16 << 10, 64 << 10, 1 << 20)
    for name, run in launches(mod, gpuarray):
        one, two, four = (counted(run, workers, l2_bytes) for workers in (1, 2, 4))
        assert one == two == four, (name, {k: (one[k], two[k], four[k]) for k in one
                                           if not one[k] == two[k] == four[k]})
        assert one["threads"] > 0 and one["global_ld_requests"] > 0
        if name == "revisit":
            small, large = (one[hooks.l2_keys(size)[0]] for size in (4 << 10, 1 << 20))
            assert small > large == one["dram_read_pairs"]   # a small L2 reads lines again: the order shows
        if name == "histogram":
            assert one["shared_atom_requests"] and one["global_red_requests"] and one["global_atom_requests"]
        if name.startswith("block_sum") or name == "tiled_matmul":
            assert one["shared_ld_requests"] and one["barriers"]


def test_a_counted_launch_runs_on_every_worker_and_a_racecheck_on_one(kernels):
    """The instrumented twin of a module that runs on every core runs on every core too: a counted launch asks for
    as many workers as a plain one (racecheck, which looks for hazards between blocks, asks for one)."""
    mod, gpuarray = kernels
    x, y = gpuarray.to_gpu(np.ones(4096, np.float32)), gpuarray.empty(4096, np.float32)
    asked = []
    twin_module = None

    def run():
        mod.get_function("revisit")(y, x, np.int32(32), block=(128, 1, 1), grid=(32, 1))

    with gpuedu.profile():
        run()
    twin_module = mod._profile_twin.module
    assert not mod.single_worker and not twin_module.single_worker
    launch = twin_module._lib.gpuedu_launch

    def spy(*args):
        asked.append(args[-1])
        return launch(*args)

    before = _module.get_threads()
    _module.set_threads(4)
    try:
        twin_module._lib.gpuedu_launch = spy
        with gpuedu.profile():
            run()
        with gpuedu.memcheck():
            run()
        with gpuedu.racecheck():
            run()
    finally:
        del twin_module._lib.gpuedu_launch
        _module.set_threads(before)
    assert asked == [4, 4, 1]


def test_memcheck_reports_the_first_thread_in_the_grid_s_order_with_any_number_of_workers(emulator_module):
    """A thread of every eighth block reads just past the end of an allocation: one error at that line, counted
    once per thread, and the thread named is the first in the grid's order, however many workers ran the blocks."""
    mod, gpuarray = emulator_module(r"""
__global__ void some_blocks_past(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int j = blockIdx.x % 8 == 5 && threadIdx.x == 60 ? n : i % n;
  y[i] = x[j];
}
""")
    x, y = gpuarray.to_gpu(np.ones(99, np.float32)), gpuarray.empty(64 * 64, np.float32)
    found = []
    for workers in (1, 2, 4):
        errors = under(workers, gpuedu.memcheck, lambda: mod.get_function("some_blocks_past")(
            y, x, np.int32(99), block=(64, 1, 1), grid=(64, 1))).errors
        found.append([(e["kind"], e["access"], e["block"], e["thread"], e["count"], e["offset"]) for e in errors])
    assert found[0] == found[1] == found[2] == [("out of bounds", "read", (5, 0, 0), (60, 0, 0), 8, 396)]
