"""The aarch64 context switch and fault handling, checked on an x86-64 machine by cross-compiling
the runtime with a kernel and a small C++ driver and running it under qemu-user.

Skipped unless aarch64-linux-gnu-g++ and qemu-aarch64 are installed
(Debian: apt install g++-aarch64-linux-gnu qemu-user)."""
import platform
import shutil
import subprocess

import pytest

from gpuedu.emulator import _scanner, compiler

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(platform.machine() == "aarch64", reason="native aarch64: the other tests run it"),
    pytest.mark.skipif(not (shutil.which("aarch64-linux-gnu-g++") and shutil.which("qemu-aarch64")),
                       reason="needs aarch64-linux-gnu-g++ and qemu-aarch64 (apt install g++-aarch64-linux-gnu "
                              "qemu-user)"),
]

ARM_SRC = r"""
__global__ void block_sum(const float* x, float* out) {
  __shared__ float s[256];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
  if (t == 0) out[blockIdx.x] = s[0];
}
__device__ double warp_sum(double v) {   // doubles live in d8-d15 across the switch
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}
__global__ void warp_sums(const float* x, double* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double s = warp_sum(x[i] * 1.5);
  if (threadIdx.x % 32 == 0) out[i / 32] = s;
}
__global__ void out_of_bounds(float* x) { x[1 << 20] = 1.0f; }
"""

DRIVER = r"""
#include <cmath>
#include <cstdio>
#include <sys/mman.h>
int main() {
  const __gpuedu::KernelInfo* t = gpuedu_kernel_table();
  static float x[1024], out[4];
  static double wout[32];
  double want[4] = {0, 0, 0, 0};
  for (int i = 0; i < 1024; ++i) { x[i] = (float)(i % 7) * 0.25f; want[i / 256] += x[i]; }
  const void* sum_args[2] = {x, out};
  unsigned dims[8] = {4, 1, 1, 256, 1, 1, 0, 49152};  // grid, block, dynamic shared, shared limit
  int ok = 1;
  for (int schedule = 0; schedule < 3; ++schedule) {
    ok &= gpuedu_launch(&t[0], dims, schedule, 1, 0, sum_args) == 0;
    for (int b = 0; b < 4; ++b) ok &= fabs(out[b] - want[b]) < 1e-3;
  }
  const void* warp_args[2] = {x, wout};
  ok &= gpuedu_launch(&t[1], dims, 0, 1, 0, warp_args) == 0;
  for (int w = 0; w < 32; ++w) {
    double s = 0;
    for (int l = 0; l < 32; ++l) s += x[w * 32 + l] * 1.5;
    ok &= fabs(s - wout[w]) < 1e-9;
  }
  float* small = (float*)mmap(0, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  mprotect(small + 1024, 4096, PROT_NONE);
  const void* bad_args[1] = {small};
  unsigned one[8] = {1, 1, 1, 1, 1, 1, 0, 49152};
  ok &= gpuedu_launch(&t[2], one, 0, 1, 0, bad_args) == 1;      // FAULT, and the process goes on
  ok &= gpuedu_launch(&t[0], dims, 0, 1, 0, sum_args) == 0;
  puts(ok ? "ALL OK" : "FAILED");
  return !ok;
}
"""


def test_fibers_and_faults_on_aarch64(tmp_path):
    (tmp_path / "kernel.cu").write_text(_scanner.rewrite_source(ARM_SRC))
    unit = compiler._translation_unit(False)
    scan = subprocess.run(["aarch64-linux-gnu-g++", "-E", "-std=c++17", "-DGPUEDU_SCAN", "-I" + compiler.NATIVE_DIR,
                           "-I" + str(tmp_path), "-"], input=unit, capture_output=True, text=True, cwd=tmp_path)
    assert scan.returncode == 0, scan.stderr
    analysis = _scanner.analyse(_scanner.user_code(scan.stdout, "-", compiler.NATIVE_DIR)[0])
    assert [p for _, p in analysis.kernels] == ["block_sum", "warp_sums", "out_of_bounds"]
    (tmp_path / "module.cpp").write_text(unit + _scanner.entry_points(analysis) + DRIVER)
    flags = [f for f in compiler.CXX_FLAGS if f not in ("-shared", "-fPIC")]
    build = subprocess.run(["aarch64-linux-gnu-g++", *flags, "-I" + compiler.NATIVE_DIR, "-I" + str(tmp_path),
                            "module.cpp", compiler.NATIVE_DIR + "/gpuedu_host.cpp", "-o", "driver"], capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    run = subprocess.run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", "./driver"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert run.stdout.strip() == "ALL OK", run.stdout + run.stderr
