"""Faults a plain launch used to let through without a word, each run in a fresh process: the launch fails with
a message that says what was wrong, the process lives on, and a correct kernel runs afterwards.

(Each script ends with the same correct kernel; the test reads what the script printed.)
"""
import os
import re
import subprocess
import sys
import textwrap


PROLOGUE = textwrap.dedent(r'''
    import os, sys
    import numpy as np
    from gpuedu.emulator import driver as drv, gpuarray
    from gpuedu.emulator.compiler import SourceModule
    drv.init()
    ctx = drv.Device(0).make_context()

    def attempt(label, launch):
        try:
            launch()
            print(label, "NO ERROR", flush=True)
        except drv.LaunchError as exc:
            print(label, "LaunchError:", exc, flush=True)

    def correct_kernel_runs():
        good = SourceModule("__global__ void good(int* x) { x[threadIdx.x] = 7 * threadIdx.x; }").get_function("good")
        out = np.zeros(64, np.int32)
        good(drv.Out(out), block=(64, 1, 1))
        return out.tolist() == [7 * i for i in range(64)]
''')

EPILOGUE = '\nprint("afterwards:", correct_kernel_runs(), flush=True)\n'


def run(body, timeout=300, **env):
    """What the script printed (stdout), run in a fresh Python; it must exit normally."""
    script = PROLOGUE + textwrap.dedent(body) + EPILOGUE
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **env))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "afterwards: True" in done.stdout, done.stdout[-3000:]
    return done.stdout


def line(out, label):
    found = [text for text in out.splitlines() if text.startswith(label + " ")]
    assert found, out
    return found[0][len(label) + 1:]


# ---- an index megabytes past a buffer, into another GPUArray ----------------------------------------

FAR = r'''
small = gpuarray.zeros(1024, np.float32)
big = gpuarray.zeros(4 << 20, np.float32)          # 16 MiB, allocated next
far = SourceModule("__global__ void far(float* a, long long k) { a[k + threadIdx.x] = 7.0f; }").get_function("far")
for mib in (6, 12, 40):
    attempt(f"far{mib}", lambda: far(small, np.int64(1024 + (mib << 20) // 4), block=(32, 1, 1)))
print("big untouched:", not big.get().any())

# A map expression that writes (an assignment is an expression): 8 MiB past `y`.
from gpuedu.emulator.reduction import ReductionKernel
x = gpuarray.to_gpu(np.ones(1000, np.float32))
y = gpuarray.zeros(1000, np.float32)
victim = gpuarray.zeros(4 << 20, np.float32)
mapped = ReductionKernel(np.float32, neutral="0", reduce_expr="a+b", map_expr="(y[i + (2 << 20)] = x[i])",
                         arguments="const float* x, float* y")
attempt("map", lambda: mapped(x, y).get())
print("victim untouched:", not victim.get().any())
'''


def test_a_write_megabytes_past_a_buffer_faults_in_its_gap_instead_of_landing_in_another_array():
    out = run(FAR)
    for mib in (6, 12):
        assert (f"kernel 'far' thread (0,0,0) of block (0,0,0) wrote past the end of a 4096-byte allocation "
                f"(at byte offset {4096 + (mib << 20)}, {mib << 20} bytes past its end)") in line(out, f"far{mib}")
    # nearer the next buffer than its own: named as the gap below that one
    assert (f"kernel 'far' thread (0,0,0) of block (0,0,0) wrote {(64 - 40) << 20} bytes before the start of a "
            f"16777216-byte allocation") in line(out, "far40")
    assert "big untouched: True" in out
    assert ("kernel 'reduce_kernel_stage1' thread (0,0,0) of block (0,0,0) wrote past the end of a 4000-byte "
            "allocation (at byte offset 8388608, 8384608 bytes past its end)") in line(out, "map")
    assert "victim untouched: True" in out


# ---- a process made by fork() after a launch, or while another thread launches -------------------------

FORK = r'''
import threading, time
from gpuedu.emulator import compiler
compiler.set_threads(2)
mod = SourceModule(r"""
__global__ void bad(float* x) { if (blockIdx.x == 7) x[threadIdx.x * 100000000LL] = 1.0f; }
__global__ void slack(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i <= n) x[i] = 1.0f; }
__global__ void deep(float* x, int n) { float t[40000]; for (int i = 0; i < 40000; ++i) t[i] = i; __syncthreads(); x[0] = t[n]; }
__global__ void spin(int* flag, float* x) { while (!*(volatile int*)flag) {} x[threadIdx.x] = 1.0f; }
""")
x = gpuarray.zeros(99, np.float32)
mod.get_function("slack")(x, np.int32(98), block=(128, 1, 1), grid=(2, 1))    # a launch on two workers first

def child_launches(tag):
    attempt(f"{tag}-bad", lambda: mod.get_function("bad")(x, block=(32, 1, 1), grid=(16, 1)))
    attempt(f"{tag}-slack", lambda: mod.get_function("slack")(x, np.int32(99), block=(128, 1, 1), grid=(2, 1)))
    attempt(f"{tag}-deep", lambda: mod.get_function("deep")(x, np.int32(3), block=(64, 1, 1)))
    print(f"{tag}-afterwards:", correct_kernel_runs(), flush=True)

pid = os.fork()
if pid == 0:
    child_launches("after")
    os._exit(0)
print("after-status:", os.waitpid(pid, 0)[1], flush=True)

# Fork while another thread of this process is inside a launch (the kernel spins until told to stop).
flag = gpuarray.zeros(1, np.int32)
spinner = threading.Thread(target=lambda: mod.get_function("spin")(flag, x, block=(1, 1, 1)))
spinner.start()
time.sleep(0.5)
pid = os.fork()
if pid == 0:
    child_launches("during")
    os._exit(0)
flag.fill(1)
spinner.join()
print("during-status:", os.waitpid(pid, 0)[1], flush=True)
'''


def test_a_child_made_by_fork_after_a_launch_or_during_one_gets_the_same_checks_as_its_parent():
    out = run(FORK, timeout=600)
    for tag in ("after", "during"):
        assert ("kernel 'bad' thread (1,0,0) of block (7,0,0) wrote address" in line(out, f"{tag}-bad")), out
        assert "kernel 'slack' wrote past the end of a 396-byte allocation (bytes 396 to 399" in line(out, f"{tag}-slack")
        assert "kernel 'deep' thread (0,0,0) of block (0,0,0) overflowed its stack" in line(out, f"{tag}-deep")
        assert f"{tag}-afterwards: True" in out
        assert f"{tag}-status: 0" in out


# ---- a local array written past its end -------------------------------------------------------------------

LOCAL = r'''
import gpuedu
mod = SourceModule(r"""
__global__ void local(float* out, int k) {
  float t[16];
  for (int j = 0; j < 16; ++j) t[j] = j;
  t[k] = 5.0f;
  out[threadIdx.x] = t[threadIdx.x % 16];
}""")
out = gpuarray.zeros(32, np.float32)
for k in (1000, 5000, 40000):
    attempt(f"plain{k}", lambda: mod.get_function("local")(out, np.int32(k), block=(32, 1, 1)))
# A few elements past the end stay in the thread's own frame, where only memcheck's bounds checks see them.
with gpuedu.memcheck():
    attempt("memcheck20", lambda: mod.get_function("local")(out, np.int32(20), block=(32, 1, 1)))
'''


def test_a_local_array_written_far_past_its_end_stops_a_plain_launch_and_memcheck_finds_a_near_one():
    out = run(LOCAL)
    for k in (1000, 5000, 40000):
        assert ("kernel 'local' thread (0,0,0) of block (0,0,0) wrote past the end of a local array (its stack "
                "frame was overwritten)") in line(out, f"plain{k}")
    # (g++ spells the array's type 'float [16]', clang++ 'float[16]')
    assert re.search(r"indexed the array 'float ?\[16\]' at \[20\] \(line 5 of your source\), outside it",
                     line(out, "memcheck20"))


# ---- shared memory written or read far past what a block has ----------------------------------------------------

SHARED_FAR = r'''
from gpuedu.emulator import compiler
mod = SourceModule(r"""
__global__ void far_static(float* out, int k) {       // a barrier: its threads run as fibers
  __shared__ float s[256];
  s[threadIdx.x] = 1.0f;
  s[threadIdx.x + k] = 2.0f;
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x];
}
__global__ void far_static_read(float* out, int k) {  // none: a plain loop over its threads
  __shared__ float r[64];
  r[threadIdx.x % 64] = 1.0f;
  out[threadIdx.x] = r[threadIdx.x + k];
}
__global__ void far_dynamic(float* out, int k) {
  extern __shared__ float d[];
  d[threadIdx.x + k] = 2.0f;
  out[threadIdx.x] = 1.0f;
}
__global__ void far_dynamic_read(float* out, int k) {
  extern __shared__ float d[];
  out[threadIdx.x] = d[threadIdx.x + k];
}
""")
# A module whose __shared__ variables take 32 KiB, launched first: the next module's far write lands where this
# one's variables were, which must fault all the same.
big = SourceModule(r"""
__global__ void big(float* out) {
  __shared__ float b[8192];
  for (int i = threadIdx.x; i < 8192; i += blockDim.x) b[i] = i;
  __syncthreads();
  out[threadIdx.x] = b[8191 - threadIdx.x];
}""").get_function("big")
small = SourceModule(r"""
__global__ void small(float* out, int k) { __shared__ float t[256]; t[threadIdx.x + k] = 1.0f; out[0] = t[0]; }
""").get_function("small")
# Correct kernels with static and dynamic shared memory, on two workers: one array is declared only in some
# blocks, so that it registers while the other worker runs blocks (which then run the declaration themselves).
good = SourceModule(r"""
__global__ void block_sum(const float* x, float* out) {
  __shared__ float s[256];
  extern __shared__ float d[];
  d[threadIdx.x] = x[blockIdx.x * 256 + threadIdx.x];
  s[threadIdx.x] = d[threadIdx.x];
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
  if (blockIdx.x % 7 == 3) {
    __shared__ float late[8192];                       // 32 KiB, on pages of its own
    late[threadIdx.x * 32] = blockIdx.x;
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] += late[255 * 32] - blockIdx.x;
  }
}""").get_function("block_sum")

def shared_kernels_run():
    compiler.set_threads(2)
    x = np.arange(64 * 256, dtype=np.float32) % 17
    sums = gpuarray.zeros(64, np.float32)
    good(gpuarray.to_gpu(x), sums, block=(256, 1, 1), grid=(64, 1), shared=1024)
    out = gpuarray.zeros(256, np.float32)
    big(out, block=(256, 1, 1))
    compiler.set_threads(1)
    return np.array_equal(sums.get(), x.reshape(64, 256).sum(axis=1)) and out.get()[0] == 8191

out = gpuarray.zeros(256, np.float32)
print("before:", shared_kernels_run(), flush=True)
cases = [
    ("static", lambda: mod.get_function("far_static")(out, np.int32(100000), block=(256, 1, 1))),
    ("static-read", lambda: mod.get_function("far_static_read")(out, np.int32(100000), block=(256, 1, 1))),
    ("static-small", lambda: small(out, np.int32(4096), block=(32, 1, 1))),
    ("dynamic", lambda: mod.get_function("far_dynamic")(out, np.int32(5000), block=(32, 1, 1), shared=1024)),
    ("dynamic-read", lambda: mod.get_function("far_dynamic_read")(out, np.int32(5000), block=(32, 1, 1),
                                                                  shared=1000)),
]
for label, launch in cases:
    attempt(label, launch)
    print(f"{label}-afterwards:", shared_kernels_run(), flush=True)
# On two workers, after the late array registered: each worker's far write faults too.
compiler.set_threads(2)
attempt("static-workers", lambda: mod.get_function("far_static")(out, np.int32(100000), block=(256, 1, 1),
                                                                 grid=(16, 1)))
attempt("dynamic-workers", lambda: mod.get_function("far_dynamic")(out, np.int32(5000), block=(32, 1, 1),
                                                                   grid=(16, 1), shared=1024))
compiler.set_threads(1)
'''


def test_a_shared_memory_index_far_out_of_range_stops_a_plain_launch():
    out = run(SHARED_FAR)
    assert "before: True" in out
    hint = (". An index far out of range faults on a GPU too; check each index against the array's size. "
            "gpuedu.memcheck() names the line")
    assert line(out, "static") == (
        "LaunchError: kernel 'far_static' thread (0,0,0) of block (0,0,0) wrote past the block's static __shared__ "
        "memory: 398976 bytes past the end of the __shared__ array 's' (1024 bytes), the kernel's last before that "
        "address" + hint)
    assert line(out, "static-read") == (
        "LaunchError: kernel 'far_static_read' thread (0,0,0) of block (0,0,0) read past the block's static "
        "__shared__ memory: 399744 bytes past the end of the __shared__ array 'r' (256 bytes), the kernel's last "
        "before that address" + hint)
    # within the 32 KiB the module launched before it used: this module's launch closed them again
    assert line(out, "static-small") == (
        "LaunchError: kernel 'small' thread (0,0,0) of block (0,0,0) wrote past the block's static __shared__ "
        "memory: 15360 bytes past the end of the __shared__ array 't' (1024 bytes), the kernel's last before that "
        "address" + hint)
    advice = ("which faults on a GPU too; pass a larger shared= (in bytes, not elements) or check the index. "
              "gpuedu.memcheck() names the line")
    assert line(out, "dynamic") == (
        "LaunchError: kernel 'far_dynamic' thread (0,0,0) of block (0,0,0) wrote past the dynamic shared memory the "
        "launch asked for (shared=1024 bytes): at byte 20000 of it, 18976 bytes past its end, " + advice)
    assert line(out, "dynamic-read") == (
        "LaunchError: kernel 'far_dynamic_read' thread (0,0,0) of block (0,0,0) read past the dynamic shared memory "
        "the launch asked for (shared=1000 bytes): at byte 20000 of it, 19000 bytes past its end, " + advice)
    for label in ("static", "static-read", "static-small", "dynamic", "dynamic-read"):
        assert f"{label}-afterwards: True" in out, out
    # (which of the grid's blocks a faulting worker ran first depends on the workers' timing)
    assert re.match(r"LaunchError: kernel 'far_static' thread \(0,0,0\) of block \(\d+,0,0\) wrote past the "
                    r"block's static __shared__ memory: 398976 bytes past", line(out, "static-workers"))
    assert re.match(r"LaunchError: kernel 'far_dynamic' thread \(0,0,0\) of block \(\d+,0,0\) wrote past the "
                    r"dynamic shared memory the launch asked for \(shared=1024 bytes\): at byte 20000",
                    line(out, "dynamic-workers"))


# ---- shared memory and vector types where only memcheck sees the access --------------------------------------

MEMCHECK_ONLY = r'''
import gpuedu
mod = SourceModule(r"""
__global__ void far_static(float* out, int k) {
  __shared__ float s[256];
  s[threadIdx.x] = 1.0f;
  s[threadIdx.x + k] = 2.0f;
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x];
}
__global__ void far_dynamic(float* out, int k) {
  extern __shared__ float d[];
  d[threadIdx.x + k] = 2.0f;
  out[threadIdx.x] = 1.0f;
}
__global__ void misaligned(float* out, char* raw) { float4 v = *(float4*)(raw + 4); out[0] = v.x + v.w; }
""")
out, raw = gpuarray.zeros(256, np.float32), gpuarray.zeros(64, np.uint8)
with gpuedu.memcheck() as mc:
    attempt("static", lambda: mod.get_function("far_static")(out, np.int32(100000), block=(256, 1, 1)))
    mod.get_function("far_dynamic")(out, np.int32(4096), block=(32, 1, 1), shared=1024)
for e in mc.errors:
    print("found:", e["kernel"], e["kind"], e["space"], e.get("region"), e["offset"], e["size"], e["line"])
with gpuedu.memcheck() as mc:
    mod.get_function("misaligned")(out, raw, block=(1, 1, 1))
for e in mc.errors:
    print("found:", e["kernel"], e["kind"], e["space"], e.get("region"), e["offset"], e["size"], e["line"])
'''


def test_what_only_memcheck_sees_it_names_with_the_line():
    out = run(MEMCHECK_ONLY)
    # an index 100,000 floats past a static __shared__ array: the profiled build's bounds check names it
    assert re.search(r"indexed the array 'float ?\[256\]' at \[100000\] \(line 5 of your source\), outside it",
                     line(out, "static"))
    assert "found: far_dynamic out of bounds shared dynamic 16384 4 kernel.cu:11" in out
    from gpuedu.emulator.compiler import find_cxx
    if "clang" not in find_cxx()[1].lower():
        # (clang++ loads only the floats the kernel uses, each aligned: there is no 16-byte access for memcheck to
        # see, on this build, as tests/profiler/test_memcheck.py's vector-load test finds on clang++ too)
        assert "found: misaligned misaligned global allocation 4 16 kernel.cu:14" in out
