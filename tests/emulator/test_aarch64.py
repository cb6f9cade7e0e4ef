"""aarch64 Linux: how atomics are built there (gpuedu.emulator.compiler.atomics_path), and faults named as reads or
writes from the faulting instruction. The choice of flags is tested on every machine; the kernels run on aarch64
(natively, or in `make toolchains`' arm64 chroot through qemu)."""
import platform
import struct
import subprocess

import numpy as np
import pytest

from gpuedu.emulator import compiler, driver as drv
from gpuedu.emulator._errors import LaunchError
from gpuedu.emulator.compiler import SourceModule

on_aarch64 = pytest.mark.skipif(platform.machine() != "aarch64", reason="runs aarch64 code: aarch64 Linux only "
                                                                        "(make toolchains TOOLCHAINS=arm64 runs it)")


def test_atomics_are_built_inline_on_aarch64_lse_where_the_cpu_has_it_and_nothing_changes_elsewhere():
    assert compiler.atomics_path("x86_64") == ([], None)
    flags, words = compiler.atomics_path("aarch64", has_lse=True)
    assert flags == ["-march=armv8-a+lse"] and "LSE" in words
    flags, words = compiler.atomics_path("aarch64", has_lse=False)
    assert flags == ["-mno-outline-atomics"] and "exclusive" in words and "no LSE" in words
    # this machine's choice is in every module's flags, and so in every cache key
    assert all(flag in compiler.CXX_FLAGS for flag in compiler.atomics_path()[0])


def _auxv(*pairs):
    return b"".join(struct.pack("<QQ", key, value) for key, value in pairs + ((0, 0),))


def test_lse_is_read_from_the_auxiliary_vector_then_from_cpuinfo_and_is_absent_when_neither_says(tmp_path):
    auxv, cpuinfo = tmp_path / "auxv", tmp_path / "cpuinfo"
    auxv.write_bytes(_auxv((6, 4096), (16, compiler.HWCAP_ATOMICS | 0xff)))      # AT_PAGESZ, then AT_HWCAP
    assert compiler.aarch64_has_lse(str(auxv), str(cpuinfo))
    auxv.write_bytes(_auxv((16, 0xff)))                                          # an ARMv8.0 core's HWCAP
    assert not compiler.aarch64_has_lse(str(auxv), str(cpuinfo))
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd evtstrm aes crc32 atomics fphp\n")
    missing = str(tmp_path / "none")
    assert compiler.aarch64_has_lse(missing, str(cpuinfo))
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd evtstrm crc32 cpuid\n")
    assert not compiler.aarch64_has_lse(missing, str(cpuinfo))
    assert not compiler.aarch64_has_lse(missing, missing)


ATOMICS = r"""
__global__ void histogram(const int* x, int* bins, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[x[i] % 16], 1);
}
__global__ void block_sums(const float* x, float* total) {
  __shared__ float s[128];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 128 + t];
  __syncthreads();
  for (int k = 64; k > 0; k >>= 1) {
    if (t < k) s[t] += s[t + k];
    __syncthreads();
  }
  if (t == 0) atomicAdd(total, s[0]);
}
__global__ void swaps(int* cell, unsigned* cas_hits) {
  int old = atomicExch(cell, (int)threadIdx.x);
  if (atomicCAS(cas_hits + (old & 1), 0u, 1u) == 0u) atomicAdd(cas_hits + 2, 1u);
}
"""


def _nm_undefined(path):
    done = subprocess.run(["nm", "-D", "--undefined-only", path], capture_output=True, text=True)
    return done.stdout


@on_aarch64
@pytest.mark.parametrize("flags", ["", "-march=armv8-a -mno-outline-atomics", "-march=armv8-a -moutline-atomics"],
                         ids=["this machine's way", "exclusive loops", "libgcc's outline helpers"])
def test_every_way_of_building_atomics_on_aarch64_gives_the_right_answer(flags, monkeypatch):
    # The way the emulator picks, the other inline way, and the compilers' default (helpers called from the
    # module, which the link check must take for the compiler's lowering, not a host call).
    monkeypatch.setenv("GPUEDU_CXXFLAGS", flags)
    mod = SourceModule(ATOMICS)
    x = np.arange(10_000, dtype=np.int32)
    bins = np.zeros(16, np.int32)
    mod.get_function("histogram")(drv.In(x), drv.InOut(bins), np.int32(x.size), block=(128, 1, 1), grid=(79, 1))
    assert (bins == np.bincount(x % 16, minlength=16)).all()
    ones, total = np.ones(128 * 40, np.float32), np.zeros(1, np.float32)
    mod.get_function("block_sums")(drv.In(ones), drv.InOut(total), block=(128, 1, 1), grid=(40, 1))
    assert total[0] == ones.size
    cell, hits = np.zeros(1, np.int32), np.zeros(3, np.uint32)
    mod.get_function("swaps")(drv.InOut(cell), drv.InOut(hits), block=(64, 1, 1))
    assert 0 <= cell[0] < 64 and hits[2] == hits[0] + hits[1] and 1 <= hits[2] <= 2


@on_aarch64
def test_the_emulators_own_way_leaves_no_helper_call_in_a_module():
    mod = SourceModule(ATOMICS)
    assert "__aarch64_" not in _nm_undefined(mod._path)


FAULTS = r"""
__global__ void read_one(const float* x, float* y) { y[0] = x[1 << 22]; }
__global__ void write_one(float* x) { x[1 << 22] = 1.0f; }
__global__ void read_four(const float4* x, float4* y) { y[0] = x[1 << 22]; }
__global__ void write_four(float4* x) { x[1 << 22] = make_float4(1.0f, 2.0f, 3.0f, 4.0f); }
__global__ void read_pair(const double2* x, double* y) { double2 v = x[1 << 22]; y[0] = v.x + v.y; }
__global__ void write_pair(long long* x) { x[1 << 22] = 1; x[(1 << 22) + 1] = 2; }
__global__ void read_signed(const signed char* x, long long* y) { y[0] = x[1 << 24]; }
__global__ void add_atomic(int* x) { atomicAdd(&x[1 << 22], 1); }
"""


@on_aarch64
@pytest.mark.parametrize("kernel, verb", [("read_one", "read"), ("write_one", "wrote"), ("read_four", "read"),
                                          ("write_four", "wrote"), ("read_pair", "read"), ("write_pair", "wrote"),
                                          ("read_signed", "read"), ("add_atomic", "wrote")])
def test_a_fault_is_named_a_read_or_a_write_from_the_instruction_that_faulted(kernel, verb, context):
    # Single and pair registers, SIMD&FP quadwords, a sign-extending load, an atomic (read and written):
    # LDR/STR, LDP/STP, LDR q/STR q, LDRSB, LDADD or an exclusive loop.
    mod = SourceModule(FAULTS)
    small, out = drv.mem_alloc(64), drv.mem_alloc(64)
    args = (small, out) if kernel.startswith("read") else (small,)
    # (described by the address alone, or against an allocation it lands near: other tests' buffers may lie there)
    with pytest.raises(LaunchError, match=rf"kernel '{kernel}' thread \(0,0,0\) of block \(0,0,0\) {verb} "
                                          rf"(address|past the end|\d+ bytes before the start)"):
        mod.get_function(kernel)(*args, block=(1, 1, 1))
    # and the next launch runs
    ones = np.ones(128, np.float32)
    total = np.zeros(1, np.float32)
    SourceModule(ATOMICS).get_function("block_sums")(drv.In(ones), drv.InOut(total), block=(128, 1, 1))
    assert total[0] == 128


@on_aarch64
def test_the_atomics_benchmark_measures_each_way_and_checks_the_kernels_did_their_work():
    # One way's measurement, as benchmarks/atomics_bench.py runs each (a fresh process, the way's flags): its
    # positive times, and the reduction's total checked there (it exits otherwise).
    import json
    import os
    import sys
    script = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "atomics_bench.py")
    env = dict(os.environ, GPUEDU_CXXFLAGS="-march=armv8-a -mno-outline-atomics")
    done = subprocess.run([sys.executable, script, "--child"], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    times = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(times) == ["barrier_reduction_ms", "barrier_reduction_no_atomic_ms", "contended_atomicadd_ms",
                             "contended_float_atomicadd_ms", "uncontended_atomicadd_ms", "uncontended_float_atomicadd_ms"]
    assert all(t > 0 for t in times.values())
