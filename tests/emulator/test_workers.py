"""A launch's blocks on several worker threads at once: what must not change with their number."""
import os
import subprocess
import sys

import numpy as np
import pytest

from gpuedu.emulator import _module
from gpuedu.emulator._args import In, InOut, Out
from gpuedu.emulator.compiler import SourceModule
from gpuedu.emulator.driver import LaunchError

SOURCE = r"""
extern "C" __global__ void count(unsigned* c, unsigned long long* sum, float* fsum) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&c[0], 1u);                       // every thread of every block on one address
  atomicAdd(&c[1 + blockIdx.x % 4], 1u);
  atomicAdd(sum, (unsigned long long)i);
  atomicAdd(fsum, 1.0f);                      // exact: every partial sum is a small integer
}
extern "C" __global__ void block_sums(float* out, const float* x) {
  __shared__ float s[128];
  unsigned t = threadIdx.x;
  s[t] = x[blockIdx.x * 128 + t];
  __syncthreads();
  for (unsigned k = 64; k > 0; k >>= 1) {
    if (t < k) s[t] += s[t + k];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
extern "C" __global__ void dynamic_sums(float* out, const float* x) {
  extern __shared__ float d[];
  unsigned t = threadIdx.x;
  d[t] = x[blockIdx.x * blockDim.x + t] * 2.0f;
  __syncthreads();
  if (t == 0) {
    float acc = 0.0f;
    for (unsigned k = 0; k < blockDim.x; ++k) acc += d[k];
    out[blockIdx.x] = acc;
  }
}
extern "C" __global__ void say(int n) {
  if (threadIdx.x < 2) printf("block %u thread %u of %d\n", blockIdx.x, threadIdx.x, n);
}
extern "C" __global__ void fault_in(float* x, int bad) {
  if (blockIdx.x == (unsigned)bad && threadIdx.x == 3) x[-1000000] = 1.0f;
  x[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
}
extern "C" __global__ void assert_in(int bad) {
  assert(!(blockIdx.x == (unsigned)bad && threadIdx.x == 5));
}
extern "C" __global__ void spin_in(int bad, volatile int* flag) {
  if (blockIdx.x == (unsigned)bad) while (*flag == 0) {}
}
"""


@pytest.fixture(scope="module")
def mod(context):
    return SourceModule(SOURCE, no_extern_c=True)


@pytest.fixture
def workers():
    """Set the number of worker threads for one test (then back to what it was)."""
    before = _module.get_threads()
    yield _module.set_threads
    _module.set_threads(before)


def test_atomics_across_blocks_on_several_workers_are_exact(mod, workers):
    for n in (1, 2, 4, 8):
        workers(n)
        c = np.zeros(5, np.uint32)
        s = np.zeros(1, np.uint64)
        f = np.zeros(1, np.float32)
        mod.get_function("count")(InOut(c), InOut(s), InOut(f), block=(64, 1, 1), grid=(400, 1))
        threads = 400 * 64
        assert c.tolist() == [threads] + [threads // 4] * 4, n
        assert int(s[0]) == threads * (threads - 1) // 2 and float(f[0]) == threads, n


@pytest.mark.parametrize("kernel, shared", [("block_sums", 0), ("dynamic_sums", 128 * 4)])
def test_each_worker_has_its_own_shared_memory(mod, workers, kernel, shared):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(300 * 128).astype(np.float32)
    results = []
    for n in (1, 2, 4):
        workers(n)
        out = np.zeros(300, np.float32)
        mod.get_function(kernel)(Out(out), In(x), block=(128, 1, 1), grid=(300, 1), shared=shared)
        results.append(out)
    scale = 2.0 if kernel == "dynamic_sums" else 1.0
    np.testing.assert_allclose(results[0], scale * x.reshape(300, 128).astype(np.float64).sum(1), rtol=1e-4,
                               atol=1e-4)
    for other in results[1:]:
        assert np.array_equal(other, results[0])       # bit for bit: each block sums in its own order


def test_printf_lines_are_whole_and_in_block_order_whatever_the_workers(mod, workers, capfd):
    outputs = []
    for n in (1, 4):
        workers(n)
        mod.get_function("say")(np.int32(7), block=(32, 1, 1), grid=(300, 1))
        outputs.append(capfd.readouterr().out)
    expected = "".join(f"block {b} thread {t} of 7\n" for b in range(300) for t in range(2))
    assert outputs == [expected, expected]


def test_a_fault_in_one_block_stops_the_launch_and_names_that_block(mod, workers):
    workers(4)
    x = np.zeros(200 * 32, np.float32)
    for bad in (0, 77, 199):
        with pytest.raises(LaunchError, match=rf"kernel 'fault_in' thread \(3,0,0\) of block \({bad},0,0\)"):
            mod.get_function("fault_in")(InOut(x), np.int32(bad), block=(32, 1, 1), grid=(200, 1))
    with pytest.raises(LaunchError, match=r"device-side assert triggered: kernel 'assert_in' thread \(5,0,0\) of "
                       r"block \(150,0,0\)"):
        mod.get_function("assert_in")(np.int32(150), block=(32, 1, 1), grid=(400, 1))
    # and the next launches run whole
    mod.get_function("fault_in")(InOut(x), np.int32(-1), block=(32, 1, 1), grid=(200, 1))
    assert x.min() == 1.0


def test_a_timeout_stops_every_worker(mod, workers):
    workers(4)
    flag = np.zeros(1, np.int32)
    before = _module.get_kernel_timeout()
    _module.set_kernel_timeout(0.5)
    try:
        with pytest.raises(LaunchError, match=r"kernel 'spin_in' ran longer than the kernel timeout .* stopped in "
                           r"block \(33,0,0\)"):
            mod.get_function("spin_in")(np.int32(33), In(flag), block=(32, 1, 1), grid=(100, 1))
    finally:
        _module.set_kernel_timeout(before)
    mod.get_function("spin_in")(np.int32(-1), In(flag), block=(32, 1, 1), grid=(100, 1))   # runs on


def test_a_module_with_file_scope_shared_memory_runs_on_one_worker(context, workers):
    workers(4)
    mod = SourceModule("""
    __shared__ float tile[64];
    __global__ void sums(float* out) {
      tile[threadIdx.x] = blockIdx.x + threadIdx.x;
      __syncthreads();
      if (threadIdx.x == 0) { float a = 0; for (int k = 0; k < 64; ++k) a += tile[k]; out[blockIdx.x] = a; }
    }""")
    assert mod.single_worker
    out = np.zeros(500, np.float32)
    mod.get_function("sums")(Out(out), block=(64, 1, 1), grid=(500, 1))
    assert out.tolist() == [64 * b + 63 * 64 / 2 for b in range(500)]


FIRST_DECLARATION = r"""
__global__ void tree(float* out, const float* x, int* arrived, int workers) {
    if (threadIdx.x == 0) {                        // the first block of each worker waits for the others' here,
        atomicAdd(arrived, 1);                     // so that all of them reach the declaration below at once
        while (atomicAdd(arrived, 0) < workers) {}
    }
    __syncthreads();
    __shared__ float partial[128];                 // its first run: on every worker at the same moment
    unsigned t = threadIdx.x;
    partial[t] = x[blockIdx.x * 128 + t];
    __syncthreads();
    for (unsigned s = 64; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = partial[0];
}
"""


def test_a_declaration_run_first_by_several_workers_at_once_gets_one_slot(context, workers):
    """Every worker's first block of a fresh module reaches a __shared__ declaration, run for the first time, at the
    same moment: one slot for the module, whichever worker makes it. (With the key published after the lock was
    let go, a second worker made a slot of its own, and threads of one block read the array at two offsets.)"""
    workers(2)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(64 * 128).astype(np.float32)
    want = x.reshape(64, 128).astype(np.float64).sum(1)
    for k in range(4):                              # fresh modules: the race is on a declaration's first run
        module = SourceModule(FIRST_DECLARATION + f"// {k} {os.getpid()}\n")
        fn = module.get_function("tree")
        out = np.zeros(64, np.float32)
        fn(Out(out), In(x), InOut(np.zeros(1, np.int32)), np.int32(2), block=(128, 1, 1), grid=(64, 1))
        assert module._lib.gpuedu_static_shared(module._kernels["tree"][0]) == 128 * 4, k
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_the_number_of_workers_is_checked(workers):
    for bad in (0, -1, 65, "two"):
        with pytest.raises(ValueError, match="worker threads"):
            workers(bad)
    workers(None)
    assert _module.get_threads() == min(_module.available_cores(), _module.MAX_WORKERS)
    env = dict(os.environ, GPUEDU_THREADS="zero")
    done = subprocess.run([sys.executable, "-c", "import gpuedu.emulator.driver"], env=env, capture_output=True,
                          text=True)
    assert done.returncode != 0 and "GPUEDU_THREADS='zero' cannot be used" in done.stderr
    env["GPUEDU_THREADS"] = "3"
    done = subprocess.run([sys.executable, "-c", "from gpuedu.emulator import _module; print(_module.get_threads())"],
                          env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "3"


def test_a_child_made_by_fork_runs_its_launches_on_threads_of_its_own(mod, workers):
    # The parent's pool of worker threads exists (a launch above used it); the child has none of its threads.
    workers(4)
    c = np.zeros(5, np.uint32)
    s, f = np.zeros(1, np.uint64), np.zeros(1, np.float32)
    mod.get_function("count")(InOut(c), InOut(s), InOut(f), block=(64, 1, 1), grid=(64, 1))
    pid = os.fork()
    if pid == 0:   # the child: a launch on several workers must finish (an alarm ends a child that would hang)
        import signal
        signal.alarm(20)
        try:
            c = np.zeros(5, np.uint32)
            mod.get_function("count")(InOut(c), InOut(s), InOut(f), block=(64, 1, 1), grid=(64, 1))
            os._exit(0 if c[0] == 64 * 64 else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
