"""gpuedu.profile(): what it records, how it reports, and what it does when a launch cannot be counted."""
import os
import subprocess
import sys

import numpy as np
import pytest

import gpuedu
from gpuedu.profiler import metrics

SOURCE = r"""
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
__global__ void out_of_bounds(float* x) { x[threadIdx.x + 64] = 1.0f; }   // x holds 64 floats
"""


@pytest.fixture(scope="module")
def emu(emulator_module):
    return emulator_module(SOURCE)


def test_one_record_per_launch_in_launch_order_with_its_shape(emu):
    mod, gpuarray = emu
    x = gpuarray.to_gpu(np.ones(300, np.float32))
    fn = mod.get_function("scale")
    with gpuedu.profile() as prof:
        fn(x, np.float32(2), np.int32(300), block=(128, 1, 1), grid=(3, 1))
        fn(x, np.float32(3), np.int32(64), block=(64, 1, 1), grid=(1, 1), shared=256)
    assert [(k.name, k.grid, k.block, k.shared_dynamic) for k in prof] == [
        ("scale", (3, 1, 1), (128, 1, 1), 0), ("scale", (1, 1, 1), (64, 1, 1), 256)]
    first = prof.kernels[0].metrics
    assert first["launch__grid_size"] == 3 and first["launch__block_size"] == 128
    assert all(isinstance(first[name], int) for name in metrics.COUNTED)
    np.testing.assert_array_equal(x.get(), [6] * 64 + [2] * 236)
    fn(x, np.float32(1), np.int32(300), block=(128, 1, 1), grid=(3, 1))
    assert len(prof) == 2                      # launches after the block are not recorded


def test_library_launches_are_profiled_like_any_other(emu):
    _, gpuarray = emu
    from gpuedu import ops
    a = gpuarray.to_gpu(np.ones((32, 32), np.float32))
    with gpuedu.profile() as prof:
        ops.matmul(a, a, version=2)
    assert [k.name for k in prof] == ["matmul_kernel2"]
    assert prof.kernels[0].sectors_per_request("ld") == 2.0   # a 16x16 block: half a warp per row of B


def test_each_figure_says_what_kind_it_is():
    assert metrics.kind("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum") == "counted"
    assert metrics.kind("dram__bytes_read.sum") == "modelled"
    assert metrics.kind("launch__registers_per_thread") == "compiler"
    with pytest.raises(KeyError, match="unknown metric 'l1tex__nonsense'.*dram__bytes_read.sum"):
        metrics.kind("l1tex__nonsense")
    assert metrics.ncu_command("train.py").startswith("ncu --metrics l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,")


def test_the_table_has_a_row_per_launch_and_says_the_counts_are_exact(emu):
    mod, gpuarray = emu
    x = gpuarray.to_gpu(np.ones(64, np.float32))
    with gpuedu.profile() as prof:
        mod.get_function("scale")(x, np.float32(2), np.int32(64), block=(64, 1, 1), grid=(1, 1))
    text = str(prof)
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["kernel", "grid", "block", "ld"]
    assert lines[1].split()[:6] == ["scale", "1", "64", "2", "4.0", "2"]
    assert "counted by the emulator (exact)" in text
    # every lane of both warps loads and stores: 32 active lanes per memory instruction
    assert lines[0].split()[13] == "lanes" and lines[1].split()[10] == "32.0"
    with gpuedu.profile() as empty:
        pass
    assert "no kernel was launched" in str(empty)


def test_a_failed_launch_is_recorded_raised_and_the_next_one_runs(emu):
    mod, gpuarray = emu
    from pycuda.driver import LaunchError
    x = gpuarray.to_gpu(np.ones(64, np.float32))
    with gpuedu.profile() as prof:
        with pytest.raises(LaunchError, match="past the end of a 256-byte allocation"):
            mod.get_function("out_of_bounds")(x, block=(32, 1, 1), grid=(1, 1))
        mod.get_function("scale")(x, np.float32(2), np.int32(64), block=(64, 1, 1), grid=(1, 1))
    assert prof.kernels[0].error.startswith("LaunchError")
    assert "(failed)" in str(prof)
    assert prof.kernels[1].metrics["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] == 2
    np.testing.assert_array_equal(x.get(), np.full(64, 2, np.float32))


def test_a_module_without_source_runs_plainly_and_says_why_it_has_no_counts(emu, tmp_path):
    _, gpuarray = emu
    from pycuda import driver
    from pycuda.compiler import compile as compile_source
    module = driver.module_from_buffer(compile_source(SOURCE))
    x = gpuarray.to_gpu(np.ones(32, np.float32))
    with gpuedu.profile() as prof:
        module.get_function("scale")(x, np.float32(5), np.int32(32), block=(32, 1, 1), grid=(1, 1))
    rec = prof.kernels[0]
    assert rec.metrics["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] is None
    assert "source is unknown" in rec.reasons["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]
    with pytest.raises(ValueError, match="no counts to model"):
        rec.predict("H100")
    np.testing.assert_array_equal(x.get(), np.full(32, 5, np.float32))


def test_device_variables_are_shared_with_the_instrumented_build(emu):
    _, gpuarray = emu
    from pycuda import driver
    from pycuda.compiler import SourceModule
    mod = SourceModule(r"""
    __constant__ float factor[1];
    __device__ unsigned int calls;
    __global__ void apply(float* x) { x[threadIdx.x] *= factor[0]; if (threadIdx.x == 0) calls += 1; }
    """)
    ptr, _ = mod.get_global("factor")
    driver.memcpy_htod(ptr, np.array([3], np.float32))
    x = gpuarray.to_gpu(np.ones(32, np.float32))
    with gpuedu.profile():
        mod.get_function("apply")(x, block=(32, 1, 1), grid=(1, 1))
    mod.get_function("apply")(x, block=(32, 1, 1), grid=(1, 1))
    calls = np.zeros(1, np.uint32)
    driver.memcpy_dtoh(calls, mod.get_global("calls")[0])
    assert calls[0] == 2
    np.testing.assert_array_equal(x.get(), np.full(32, 9, np.float32))


def test_the_gpu_path_times_each_launch_with_events_and_names_the_ncu_command(emu):
    # On the emulator's driver, which has PyCUDA's Function and Event, the GPU path's wrapper runs as it would.
    mod, gpuarray = emu
    from gpuedu.profiler.session import Profile, _time_gpu_launches
    prof = Profile()
    x = gpuarray.to_gpu(np.ones(32, np.float32))
    restore = _time_gpu_launches(prof)
    try:
        mod.get_function("scale")(x, np.float32(2), np.int32(32), block=(32, 1, 1), grid=(1, 1))
    finally:
        restore()
    rec = prof.kernels[0]
    assert rec.backend == "cuda" and rec.seconds >= 0 and rec.block == (32, 1, 1)
    assert rec.metrics["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] is None
    assert "ncu --metrics" in rec.reasons["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]


def test_a_kernel_from_launch_kernel_is_named_even_where_the_function_carries_no_name(monkeypatch):
    # Real PyCUDA's Function has no name attribute: the profile and the trace on a GPU must still say
    # which kernel each launch was, for every kernel the course launches through launch.kernel.
    from gpuedu import launch

    class Nameless:            # what a real PyCUDA Function looks like to getattr
        def prepare(self, signature):
            pass

    class Module:
        def get_function(self, name):
            return Nameless()
    monkeypatch.setattr(launch.kernels, "load", lambda file, options=(): Module())
    monkeypatch.setattr(launch, "_cache", {})
    monkeypatch.setattr(launch, "_names", {})
    fn = launch.kernel("reduction", "reduce_kernel6", "PPi")
    assert launch.function_name(fn) == "reduce_kernel6"
    assert launch.function_name(Nameless()) == "kernel"          # one it did not hand out
    assert launch.function_name(Nameless(), default="?") == "?"


PREAMBLE = ("import sys\nimport numpy as np\nimport gpuedu\ngpuedu.setup(verbose=False)\nfrom gpuedu import ops\n"
            "import pycuda.gpuarray as gpuarray\n")


def profile_command(tmp_path, body, *args):
    """``gpuedu profile ARGS`` on the emulator, where "job.py" in ARGS is a script of the imports above and ``body``
    in ``tmp_path`` (any other name, a script that is not there)."""
    script = tmp_path / "job.py"
    script.write_text(PREAMBLE + body)
    env = dict(os.environ, GPUEDU_BACKEND="cpu")
    args = [str(tmp_path / a) if a.endswith(".py") else a for a in args]
    return subprocess.run([sys.executable, "-m", "gpuedu", "profile", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_gpuedu_profile_command_runs_a_script_and_prints_the_table(tmp_path):
    out = profile_command(tmp_path, "a = gpuarray.to_gpu(np.ones((16, 16), np.float32))\n"
                                    "ops.matmul(a, a, version=int(sys.argv[1]))\nprint('ran version', sys.argv[1])\n",
                          "job.py", "2")
    assert out.returncode == 0, out.stderr
    assert "ran version 2" in out.stdout
    assert "1 kernel launch in" in out.stdout and "matmul_kernel2" in out.stdout
    missing = profile_command(tmp_path, "", "nope.py")
    assert missing.returncode == 2 and "no such script" in missing.stderr


def test_gpuedu_profile_csv_writes_each_launchs_figures_as_ncu_lays_out_its_rows(tmp_path):
    import csv
    table = tmp_path / "counted.csv"
    body = "x = gpuarray.to_gpu(np.arange(-100, 100, dtype=np.float32))\nops.relu(x, version=1)\nops.relu(x, version=2)\n"
    out = profile_command(tmp_path, body, "--gpu", "H200", "--csv", str(table), "job.py")
    assert out.returncode == 0, out.stderr
    assert f"written to {table}" in out.stdout
    with open(table, newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["ID"] for r in rows} == {"0", "1"}
    by = {(r["ID"], r["Metric Name"]): r for r in rows}
    # 200 floats in blocks of 256: one block of 8 warps, 200 threads do work; ReLU v1 reads each element once:
    # 200 floats = 800 bytes = 25 sectors, in 7 requests (the 7 warps with a lane below 200)
    ld = by[("0", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum")]
    assert ld["Kernel Name"] == "activation_kernel1" and ld["Metric Kind"] == "counted"
    assert int(ld["Metric Value"]) == 25
    assert int(by[("0", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")]["Metric Value"]) == 7
    assert by[("0", "dram__bytes_read.sum")]["Metric Kind"] == "modelled"
    assert int(by[("1", "smsp__threads_launched.sum")]["Metric Value"]) > 0
    # a folder that is not there is refused before the script runs
    refused = profile_command(tmp_path, body, "--csv", str(tmp_path / "no" / "x.csv"), "job.py")
    assert refused.returncode == 2 and "no such folder" in refused.stderr and "==PROF==" not in refused.stdout


def test_counts_extrapolate_exactly_from_two_sizes_to_a_third(emu):
    _, gpuarray = emu
    from gpuedu import ops
    from gpuedu.profiler.scaling import extrapolate
    records = {}
    for n in (32, 64, 128):
        a = gpuarray.to_gpu(np.ones((n, n), np.float32))
        with gpuedu.profile() as prof:
            ops.matmul(a, a, version=3, tile=16)
        records[n] = prof.kernels[0]
    guess = extrapolate(records[32], records[64], 32, 64, 128, grid=records[128].grid)
    assert guess.metrics == records[128].metrics
    assert guess.exponents["global_ld_requests"] == 3.0     # the K loop: n**3
    assert guess.exponents["global_st_sectors"] == 2.0      # one store a thread: n**2
    assert guess.exponents["dram_read_sectors"] == 2.0
    with pytest.raises(ValueError, match="the sizes must grow"):
        extrapolate(records[64], records[32], 64, 32, 128, grid=(8, 8))


def test_counts_that_are_sums_of_powers_extrapolate_exactly_as_polynomials(emu):
    # attention: the N x N scores (n**2) beside the N x d rows (n); one power through two sizes misses, the
    # quadratic through three sizes hits a fourth exactly, every count and every grid dimension
    _, gpuarray = emu
    from gpuedu.ops import attention
    from gpuedu.profiler.scaling import extrapolate, extrapolate_polynomial
    rng = np.random.default_rng(0)
    records = {}
    for n in (64, 128, 192, 256):
        q, k, v = (gpuarray.to_gpu(rng.standard_normal((1, n, 16)).astype(np.float32)) for _ in range(3))
        with gpuedu.profile() as prof:
            attention.attention(q, k, v, version=1)           # S, then P = softmax(S), then P V
        records[n] = prof.kernels
    for i, want in enumerate(records[256]):
        guess = extrapolate_polynomial([records[n][i] for n in (64, 128, 192)], (64, 128, 192), 256)
        assert guess.name == want.name and guess.grid == want.grid
        assert guess.metrics == want.metrics
    pv = [records[n][2] for n in (128, 192, 256)]                # reads P (n**2 floats) and V (n rows)
    power = extrapolate(pv[0], pv[1], 128, 192, 256, grid=pv[2].grid)
    assert power.metrics["dram__bytes_read.sum"] != pv[2].metrics["dram__bytes_read.sum"]
    stores = extrapolate_polynomial([records[n][0] for n in (64, 128, 192)], (64, 128, 192), 256)
    c0, c1, c2 = stores.coefficients["global_st_sectors"]
    assert abs(c2 - 1 / 8) < 1e-9 and abs(c1) < 1e-6 and abs(c0) < 1e-3    # S: n**2 floats, 8 to a sector
    with pytest.raises(ValueError, match="one record per size"):
        extrapolate_polynomial(records[64], (64,), 128)
    with pytest.raises(ValueError, match="must be positive and grow"):
        extrapolate_polynomial([records[128][0], records[64][0]], (128, 64), 256)
    with pytest.raises(ValueError, match="one kernel"):
        extrapolate_polynomial([records[64][0], records[128][1]], (64, 128), 256)


def test_a_host_compiler_that_cannot_instrument_leaves_the_launch_plain_with_the_reason(emu, monkeypatch):
    _, gpuarray = emu
    from pycuda.compiler import SourceModule
    from gpuedu.emulator import compiler
    mod = SourceModule(SOURCE.replace("x[i] *= a", "x[i] *= a + 0.0f"))   # a module of its own
    monkeypatch.setattr(compiler, "profile_flags", lambda version: ["-fsanitize=no-such-sanitizer"])
    x = gpuarray.to_gpu(np.ones(32, np.float32))
    with gpuedu.profile() as prof:
        mod.get_function("scale")(x, np.float32(4), np.int32(32), block=(32, 1, 1), grid=(1, 1))
    rec = prof.kernels[0]
    assert rec.metrics["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] is None
    assert "could not build the instrumented module" in rec.reasons["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]
    np.testing.assert_array_equal(x.get(), np.full(32, 4, np.float32))


@pytest.mark.gpu
def test_on_a_gpu_each_launch_is_timed_with_events_and_the_counters_point_to_ncu(gpu_context):
    from pycuda.compiler import SourceModule
    import pycuda.gpuarray as gpuarray
    fn = SourceModule(SOURCE).get_function("scale")
    x = gpuarray.to_gpu(np.ones(1 << 20, np.float32))
    with gpuedu.profile() as prof:
        fn(x, np.float32(2), np.int32(1 << 20), block=(256, 1, 1), grid=((1 << 20) // 256, 1))
    rec = prof.kernels[0]
    assert rec.backend == "cuda" and rec.seconds > 0 and rec.grid == (4096, 1, 1)
    assert rec.metrics["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] is None
    assert "ncu --metrics" in rec.reasons["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]
    np.testing.assert_array_equal(x.get(), np.full(1 << 20, 2, np.float32))


def test_a_record_is_modelled_on_the_compute_pipe_it_is_given(emu):
    mod, gpuarray = emu
    x = gpuarray.to_gpu(np.ones(300, np.float32))
    with gpuedu.profile() as prof:
        mod.get_function("scale")(x, np.float32(2), np.int32(300), block=(128, 1, 1), grid=(3, 1))
    (rec,) = prof.kernels
    fp32, tensor = (rec.predict("H100", flops=1e12, pipe=pipe) for pipe in ("fp32", "tensor"))
    assert fp32.terms["compute"] / tensor.terms["compute"] == pytest.approx(989 / 67)
    assert any("FP32 peak of 67 TFLOP/s" in note for note in fp32.assumptions)
    assert any("tensor-core peak of 989 TFLOP/s" in note for note in tensor.assumptions)
    with pytest.raises(ValueError, match="pipe must be one of"):
        rec.predict("H100", flops=1e12, pipe="fp64")
