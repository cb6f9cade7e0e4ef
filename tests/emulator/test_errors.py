"""Bad kernels and bad launches raise the error PyCUDA would raise (or a clear LaunchError),
and the process lives on: after each, the emulator still runs a kernel correctly."""
import os
import re
import signal
import threading

import numpy as np
import pytest

from gpuedu.emulator import _module as function
from gpuedu.emulator._alloc import DeviceAllocation
from gpuedu.emulator._args import In, InOut, Out
from gpuedu.emulator._errors import CompileError, LaunchError, LogicError
from gpuedu.emulator.compiler import SourceModule, get_kernel_timeout, set_kernel_timeout

ERRORS_SRC = r"""
#include <assert.h>
__global__ void add_unguarded(float* c, const float* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  c[i] = a[i] + 1.0f;                   // no `if (i < n)`: the last block runs past the end
}
__global__ void write_null(int* p) { int* q = 0; q[threadIdx.x] = 1; }
__global__ void early_exit_then_barrier(float* x, int n) {
  __shared__ float s[256];
  int i = threadIdx.x;
  if (i >= n) return;                    // some threads leave before the barrier
  s[i] = x[i];
  __syncthreads();
  x[i] = s[(i + 1) % n];
}
__global__ void shuffle_after_exit(float* x) {
  if (threadIdx.x >= 16) return;         // half the warp leaves
  float v = __shfl_down_sync(0xffffffffu, x[threadIdx.x], 1);
  x[threadIdx.x] = v;
}
__global__ void split_warp(float* x) {
  float v = x[threadIdx.x];
  if (threadIdx.x < 16) v = __shfl_sync(0xffffffffu, v, 0);   // waits for lanes 16..31...
  else __syncthreads();                                       // ...which wait here for lanes 0..15
  x[threadIdx.x] = v;
}
__global__ void different_intrinsics(int* x) {
  int v = x[threadIdx.x];
  if (threadIdx.x % 2) v = __shfl_xor_sync(0xffffffffu, v, 1);
  else v = (int)__ballot_sync(0xffffffffu, v);
  x[threadIdx.x] = v;
}
__global__ void spin_forever(int* flag) {
  while (flag[0] == 0) { }               // nobody ever sets the flag
}
__global__ void check_positive(const int* x) { assert(x[threadIdx.x] > 0); }
__device__ int deep(int depth) {
  volatile char big[4096];              // 4 KiB of stack per call
  big[0] = (char)depth;
  return depth > 0 ? deep(depth - 1) + big[0] : big[0];
}
__global__ void recurse(int* out, int depth) {
  __syncthreads();                       // a barrier: threads run as fibers, on 128 KiB stacks
  out[0] = deep(depth);
}
// The barrier hides behind a function pointer, which the emulator's analysis does not follow.
__device__ void wait_for_block() { __syncthreads(); }
typedef void (*step_fn)();
__device__ step_fn steps[1] = {wait_for_block};
__global__ void barrier_through_pointer(int* out) {
  out[threadIdx.x] = 1;
  steps[0]();
}
__global__ void big_tiles(float* out) {
  __shared__ float a[64][64], b[64][64];   // 32 KiB of static shared memory
  a[threadIdx.x][0] = 1.0f;
  b[threadIdx.x][0] = 2.0f;
  out[threadIdx.x] = a[threadIdx.x][0] + b[threadIdx.x][0];
}
__global__ void divide(int* x, int d) { x[threadIdx.x] = x[threadIdx.x] / d; }
__global__ void ok(int* out) { out[threadIdx.x] = threadIdx.x * 2; }
"""


@pytest.fixture(scope="module")
def mod():
    return SourceModule(ERRORS_SRC)


def still_works(mod):
    out = np.zeros(64, np.int32)
    mod.get_function("ok")(Out(out), block=(64, 1, 1))
    np.testing.assert_array_equal(out, np.arange(64) * 2)


def test_out_of_bounds_read_names_thread_block_and_allocation(mod):
    n = 1000
    a = DeviceAllocation(n * 4)
    c = DeviceAllocation(n * 4)
    with pytest.raises(LaunchError) as info:
        mod.get_function("add_unguarded")(c, a, np.int32(n), block=(256, 1, 1), grid=(4, 1))
    msg = str(info.value)
    assert "kernel 'add_unguarded' thread (232,0,0) of block (3,0,0)" in msg
    assert "read past the end of a 4000-byte allocation" in msg and "if (i < n)" in msg
    still_works(mod)


def test_null_pointer_write(mod):
    with pytest.raises(LaunchError, match=r"wrote address 0x0: a null"):
        mod.get_function("write_null")(DeviceAllocation(4), block=(1, 1, 1))
    still_works(mod)


def test_barrier_after_early_exit(mod):
    x = np.ones(256, np.float32)
    with pytest.raises(LaunchError, match=r"__syncthreads reached by 200 of 256 threads; 56 exited"):
        mod.get_function("early_exit_then_barrier")(InOut(x), np.int32(200), block=(256, 1, 1))
    still_works(mod)


def test_shuffle_naming_exited_lanes(mod):
    x = np.ones(32, np.float32)
    with pytest.raises(LaunchError, match=r"16 threads at __shfl_down_sync\(mask=0xffffffff\), 16 exited"):
        mod.get_function("shuffle_after_exit")(InOut(x), block=(32, 1, 1))
    still_works(mod)


def test_deadlock_between_a_warp_intrinsic_and_a_barrier(mod):
    x = np.ones(32, np.float32)
    with pytest.raises(LaunchError, match=r"deadlock: warp 0 has 16 threads at __shfl_sync\(mask=0xffffffff\) "
                                          r"waiting for 16 lanes that are at __syncthreads"):
        mod.get_function("split_warp")(InOut(x), block=(32, 1, 1))
    still_works(mod)


def test_lanes_at_different_intrinsics(mod):
    x = np.ones(32, np.int32)
    with pytest.raises(LaunchError, match=r"meet at different warp intrinsics"):
        mod.get_function("different_intrinsics")(InOut(x), block=(32, 1, 1))
    still_works(mod)


def test_integer_division_by_zero(mod):
    x = np.arange(8, dtype=np.int32)
    with pytest.raises(LaunchError, match=r"thread \(0,0,0\) of block \(0,0,0\) divided an integer by zero"):
        mod.get_function("divide")(InOut(x), np.int32(0), block=(8, 1, 1))
    mod.get_function("divide")(InOut(x), np.int32(2), block=(8, 1, 1))
    assert x.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    still_works(mod)


def test_device_assert(mod):
    with pytest.raises(LaunchError, match=r"device-side assert triggered.*x\[threadIdx.x\] > 0"):
        mod.get_function("check_positive")(In(np.array([1, 2, 0, 4], np.int32)), block=(4, 1, 1))
    still_works(mod)


def test_endless_loop_stops_on_sigint(mod):
    flag = DeviceAllocation(4)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt, match="spin_forever"):
            mod.get_function("spin_forever")(flag, block=(1, 1, 1))
    finally:
        timer.cancel()
    still_works(mod)


def test_endless_loop_stops_at_the_timeout(mod):
    set_kernel_timeout(0.3)
    try:
        with pytest.raises(LaunchError, match=r"ran longer than the kernel timeout \(0.3 s"):
            mod.get_function("spin_forever")(DeviceAllocation(4), block=(1, 1, 1))
    finally:
        set_kernel_timeout(None)
    still_works(mod)


def test_kernel_timeout_can_be_read_and_restored(mod):
    previous = get_kernel_timeout()
    try:
        set_kernel_timeout(2)
        assert get_kernel_timeout() == 2.0
        set_kernel_timeout(None)
        assert get_kernel_timeout() is None
        with pytest.raises(ValueError, match="positive seconds or None"):
            set_kernel_timeout(0)
        assert get_kernel_timeout() is None      # a rejected value leaves the limit as it was
        set_kernel_timeout(0.3)
        with pytest.raises(LaunchError, match=r"kernel timeout \(0.3 s"):
            mod.get_function("spin_forever")(DeviceAllocation(4), block=(1, 1, 1))
    finally:
        set_kernel_timeout(previous)
    assert get_kernel_timeout() == previous
    still_works(mod)


def test_stack_overflow_in_a_fiber(mod):
    out = np.zeros(1, np.int32)
    mod.get_function("recurse")(Out(out), np.int32(3), block=(2, 1, 1))
    assert out[0] == 3 + 2 + 1
    with pytest.raises(LaunchError, match=r"overflowed its stack"):
        mod.get_function("recurse")(Out(out), np.int32(100000), block=(2, 1, 1))
    still_works(mod)


def test_barrier_the_analysis_missed_is_an_error_not_garbage(mod, monkeypatch):
    out = np.zeros(32, np.int32)
    f = mod.get_function("barrier_through_pointer")
    assert not f.needs_fibers
    with pytest.raises(LaunchError, match=r"reached __syncthreads while running its threads as a plain loop.*"
                                          r"GPUEDU_FIBERS=always"):
        f(Out(out), block=(32, 1, 1))
    monkeypatch.setattr(function, "_force_fibers", 1)   # what GPUEDU_FIBERS=always sets at import
    f(Out(out), block=(32, 1, 1))
    assert (out == 1).all()
    still_works(mod)


def test_python_handlers_restored_after_launch(mod):
    # Python's handler in charge first, as in a notebook (a test runner's worker process may ignore SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        still_works(mod)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)    # Python's own handler is back in charge (raised on this thread)
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("block,grid,shared,match", [
    ((64, 32, 1), (1, 1), 0, r"2048 threads; the device allows at most 1024"),
    ((1, 1, 128), (1, 1), 0, r"dimension z is 128, the device allows at most 64"),
    ((32, 1, 1), (1, 70000), 0, r"dimension y is 70000"),
    ((0, 1, 1), (1, 1), 0, r"non-positive"),
    ((32, 1, 1), (1, 1), 49 * 1024 + 1, r"50177 bytes of dynamic shared memory; the limit for this kernel is 49152"),
])
def test_launch_limits(mod, block, grid, shared, match):
    with pytest.raises(LogicError, match=match):
        mod.get_function("ok")(DeviceAllocation(4096), block=block, grid=grid, shared=shared)
    still_works(mod)


def test_static_plus_dynamic_shared_memory_limit(mod):
    f = mod.get_function("big_tiles")
    out = np.zeros(64, np.float32)
    f(Out(out), block=(64, 1, 1))
    assert (out == 3).all() and f.shared_size_bytes == 32768
    with pytest.raises(LaunchError, match=r"too many resources requested for launch: 32768 bytes of static "
                                          r"__shared__ memory \+ 20480 bytes of dynamic"):
        f(Out(out), block=(64, 1, 1), shared=20 * 1024)
    f.set_attribute("MAX_DYNAMIC_SHARED_SIZE_BYTES", 64 * 1024)   # the opt-in, as on a real device
    f(Out(out), block=(64, 1, 1), shared=20 * 1024)
    still_works(mod)


def test_float_grid_is_rejected_with_a_hint(mod):
    with pytest.raises(TypeError, match=r"grid entries must be ints, got 3.90625.*\(n \+ 255\) // 256"):
        mod.get_function("ok")(DeviceAllocation(4096), block=(64, 1, 1), grid=(1000 / 256, 1))
    still_works(mod)


def test_wrong_argument_count(mod):
    with pytest.raises(LogicError, match=r"kernel 'ok' takes 1 argument, got 2"):
        mod.get_function("ok")(DeviceAllocation(256), np.int32(1), block=(64, 1, 1))
    still_works(mod)


def test_python_scalars_are_rejected_with_a_hint(mod):
    a = DeviceAllocation(4000)
    with pytest.raises(TypeError, match=r"invalid type on parameter #2 \(0-based\).*np.int32\(n\)"):
        mod.get_function("add_unguarded")(a, a, 1000, block=(1, 1, 1))
    with pytest.raises(TypeError, match=r"expects a 4-byte integer there, got float64"):
        mod.get_function("add_unguarded")(a, a, np.float64(3), block=(1, 1, 1))
    with pytest.raises(TypeError, match=r"expects a 8-byte pointer there, got int32"):
        mod.get_function("add_unguarded")(np.int32(0), a, np.int32(1), block=(1, 1, 1))
    with pytest.raises(TypeError, match=r"got a NumPy array, which lives in host memory; wrap it as drv.In"):
        mod.get_function("add_unguarded")(a, np.zeros(4, np.float32), np.int32(1), block=(1, 1, 1))
    still_works(mod)


def test_compile_error_points_at_the_users_line():
    src = "__global__ void broken(float* x) {\n  int i = threadIdx.x;\n  x[i] = undefined_name;\n}\n"
    with pytest.raises(CompileError) as info:
        SourceModule(src)
    text = str(info.value)
    assert "kernel.cu:3:" in text and "undefined_name" in text


def test_fp16_header_inside_extern_c_fails_like_nvcc():
    src = "#include <cuda_fp16.h>\n__global__ void k(__half* x) { x[0] = __hadd(x[0], x[1]); }\n"
    with pytest.raises(CompileError, match=r"no_extern_c=True"):
        SourceModule(src)


def test_cxx_kernel_needs_its_mangled_name():
    mod = SourceModule("__global__ void plain(int* x) { x[0] = 1; }\n"
                       "extern \"C\" __global__ void c_named(int* x) { x[0] = 2; }\n", no_extern_c=True)
    with pytest.raises(LogicError, match=r"C\+\+ linkage.*'_Z5plainPi'"):
        mod.get_function("plain")
    out = np.zeros(1, np.int32)
    mod.get_function("_Z5plainPi")(Out(out), block=(1, 1, 1))
    assert out[0] == 1
    mod.get_function("c_named")(Out(out), block=(1, 1, 1))
    assert out[0] == 2


def _run_python(code, **env):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_faulthandler_still_reports_crashes_outside_launches():
    code = (
        "import faulthandler, ctypes, numpy as np\n"
        "faulthandler.enable()\n"
        "from gpuedu.emulator.compiler import SourceModule\n"
        "from gpuedu.emulator._args import Out\n"
        "m = SourceModule('__global__ void k(int* x) { x[threadIdx.x] = 1; }')\n"
        "x = np.zeros(4, np.int32)\n"
        "m.get_function('k')(Out(x), block=(4, 1, 1))\n"
        "print('launched', x.sum(), flush=True)\n"
        "ctypes.string_at(0)   # a real crash, outside any launch\n")
    proc = _run_python(code)
    assert "launched 4" in proc.stdout
    assert proc.returncode != 0 and "Fatal Python error: Segmentation fault" in proc.stderr


def test_schedule_from_the_environment():
    code = ("from gpuedu.emulator import compiler\n"
            "print(compiler.get_schedule())\n")
    assert _run_python(code, GPUEDU_SCHEDULE="reverse").stdout.strip() == "reverse"
    assert "unknown schedule" in _run_python(code, GPUEDU_SCHEDULE="sideways").stderr


WATCHED = r"""
__global__ void one_past(float* x, int n) { int i = threadIdx.x; if (i <= n) x[i] = 1.0f; }
__global__ void one_before(float* out, float* x) { x[(int)threadIdx.x - 1] = 2.0f; }
__global__ void inside(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] = 3.0f; }
"""


def test_a_write_into_the_slack_past_the_end_or_just_before_the_start_stops_the_launch(context):
    from gpuedu.emulator import gpuarray
    mod = SourceModule(WATCHED)
    x = gpuarray.zeros(5, np.float32)                 # 20 bytes: the 12 after it are mapped, nothing faults
    with pytest.raises(LaunchError, match=r"^kernel 'one_past' wrote past the end of a 20-byte allocation "
                       r"\(bytes 20 to 23, right after its end\).*parameter #0 \(0-based\).*gpuedu\.memcheck\(\)"):
        mod.get_function("one_past")(x, np.int32(5), block=(8, 1, 1))
    mod.get_function("inside")(x, np.int32(5), block=(8, 1, 1))       # reported once; the buffer goes on
    np.testing.assert_array_equal(x.get(), np.full(5, 3.0, np.float32))
    with pytest.raises(LaunchError, match=r"kernel 'one_before' wrote just before the start of a 20-byte "
                       r"allocation \(bytes -4 to -1; a negative index\?\).*parameter #1"):
        mod.get_function("one_before")(gpuarray.zeros(4, np.float32), x, block=(2, 1, 1))
    view = gpuarray.zeros(12, np.float32)[4:]           # a view: the watch is the whole allocation's
    with pytest.raises(LaunchError, match="past the end of a 48-byte allocation"):
        mod.get_function("one_past")(view, np.int32(8), block=(9, 1, 1))
    # drv.Out's buffer (the size of the NumPy array) is watched too
    with pytest.raises(LaunchError, match="past the end of a 12-byte allocation"):
        mod.get_function("one_past")(Out(np.zeros(3, np.float32)), np.int32(3), block=(4, 1, 1))


DYNAMIC = r"""
__global__ void fill(float* out, int count) {
  extern __shared__ float buf[];
  for (int i = threadIdx.x; i < count; i += blockDim.x) buf[i] = i;
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = buf[count - 1];
}
"""


@pytest.mark.parametrize("count, shared, ok", [(64, 256, True), (20, 64, False), (65, 256, False), (64, 64, False),
                                               (1, 0, False)])
def test_a_block_that_writes_past_the_dynamic_shared_memory_it_asked_for_stops_the_launch(context, count, shared,
                                                                                          ok):
    fill = SourceModule(DYNAMIC).get_function("fill")
    out = np.zeros(2, np.float32)
    if ok:
        fill(Out(out), np.int32(count), block=(32, 1, 1), grid=(2, 1), shared=shared)
        assert out.tolist() == [count - 1] * 2
        return
    if 4 * count <= (shared + 127) // 128 * 128:
        # within the 128-byte line the launch's bytes end in: the watched bytes after them changed
        message = (rf"^kernel 'fill' block \(0,0,0\) wrote past the dynamic shared memory the launch asked for "
                   rf"\(shared={shared} bytes\): bytes {shared} to {4 * count - 1} of the dynamic buffer changed")
    else:
        # past that line the next page faults: thread 0 writes every 32nd float, the first past the line faults
        first = next(i for i in range(0, count, 32) if 4 * i >= (shared + 127) // 128 * 128)
        at = "right after its end" if 4 * first == shared else f"{4 * first - shared} bytes past its end"
        message = (rf"^kernel 'fill' thread \(0,0,0\) of block \(0,0,0\) wrote past the dynamic shared memory the "
                   rf"launch asked for \(shared={shared} bytes\): at byte {4 * first} of it, {at}")
    with pytest.raises(LaunchError, match=message + r".*shared= \(in bytes, not elements\)"):
        fill(Out(out), np.int32(count), block=(32, 1, 1), grid=(2, 1), shared=shared)
    fill(Out(out), np.int32(8), block=(32, 1, 1), grid=(2, 1), shared=32)     # the next launch is clean
    assert out.tolist() == [7.0, 7.0]


FILE_SCOPE_DYNAMIC = r"""
extern __shared__ float buf[];
__global__ void reverse(float* out) {
  buf[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}
__global__ void past(float* out, int k) { buf[threadIdx.x + k] = 1.0f; out[0] = buf[0]; }
"""


def test_an_extern_shared_array_at_file_scope_names_the_module_s_own_buffer_and_is_watched_there(context):
    # The array is the module's buffer itself (no pointer to a worker's): the launch's bytes start there, and the
    # bytes past them are watched, as before dynamic shared memory ended against an inaccessible page.
    mod = SourceModule(FILE_SCOPE_DYNAMIC)
    assert mod.single_worker
    out = np.zeros(64, np.float32)
    mod.get_function("reverse")(Out(out), block=(64, 1, 1), grid=(3, 1), shared=256)
    assert out.tolist() == list(range(63, -1, -1))
    with pytest.raises(LaunchError, match=r"^kernel 'past' block \(0,0,0\) wrote past the dynamic shared memory the "
                       r"launch asked for \(shared=256 bytes\): bytes 256 to 383 of the dynamic buffer changed"):
        mod.get_function("past")(Out(out), np.int32(64), block=(32, 1, 1), shared=256)


STATIC_SHARED = r"""
__shared__ float file_scope[8];
extern "C" __global__ void past(float* out, int extra) {
  __shared__ float tile[32];
  tile[threadIdx.x + extra] = threadIdx.x;             // extra > 0 writes past the end
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x];
}
extern "C" __global__ void grid2d(float* out, int col) {
  __shared__ float t[4][5];
  t[threadIdx.y][threadIdx.x + col] = 1.0f;            // col = 1 runs off the last row's end
  out[0] = t[0][0];
}
extern "C" __global__ void vectors(float4* out) {
  __shared__ __align__(16) float4 v[8];
  v[threadIdx.x] = make_float4(threadIdx.x, 1, 2, 3);
  __syncthreads();
  out[threadIdx.x] = v[7 - threadIdx.x];
}
extern "C" __global__ void global_array(float* out, int i) { file_scope[i] = 5.0f; out[0] = file_scope[0]; }
template <int N> __device__ void fill(float* s, int extra) { for (int k = 0; k < N + extra; ++k) s[k] = k; }
extern "C" __global__ void through_helper(float* out, int extra) {
  __shared__ float buf[16];
  fill<16>(buf, extra);
  out[0] = buf[15];
}
"""


@pytest.mark.parametrize("kernel, args, block, message", [
    ("past", (np.int32(1),), (32, 1, 1), "__shared__ array 'tile' (128 bytes): bytes 128 to 131"),
    ("grid2d", (np.int32(1),), (5, 4, 1), "__shared__ array 't' (80 bytes): bytes 80 to 83"),
    ("global_array", (np.int32(8),), (1, 1, 1), "__shared__ array 'file_scope' (32 bytes): bytes 32 to 35"),
    ("through_helper", (np.int32(2),), (1, 1, 1), "__shared__ array 'buf' (64 bytes): bytes 64 to 71"),
])
def test_a_block_that_writes_past_a_static_shared_array_stops_the_launch_naming_the_array(context, kernel, args,
                                                                                        block, message):
    mod = SourceModule(STATIC_SHARED, no_extern_c=True)
    out = np.zeros(32, np.float32)
    with pytest.raises(LaunchError, match=rf"^kernel '{kernel}' block \(0,0,0\) wrote past the end of the "
                       + re.escape(message) + " from its start changed"):
        mod.get_function(kernel)(Out(out), *args, block=block)
    mod.get_function("past")(Out(out), np.int32(0), block=(32, 1, 1))     # in bounds: fine, and clean again
    assert out.tolist() == list(range(32))


def test_shared_arrays_keep_their_alignment_and_size(context):
    mod = SourceModule(STATIC_SHARED, no_extern_c=True)
    out = np.zeros((8, 4), np.float32)
    mod.get_function("vectors")(Out(out), block=(8, 1, 1))
    assert out[:, 0].tolist() == list(range(7, -1, -1)) and out[:, 1:].tolist() == [[1, 2, 3]] * 8
    past = mod.get_function("past")
    past(Out(np.zeros(32, np.float32)), np.int32(0), block=(32, 1, 1))
    assert past.shared_size_bytes == 128 + 32      # its tile, and the file-scope array every kernel counts


def test_a_module_with_a_file_scope_shared_array_loads_in_a_process_that_goes_on(tmp_path):
    # Its declaration registers while the module loads; the shared-memory limit check there used to jump
    # to a launch that did not exist, and the process died.
    import subprocess
    import sys
    script = (
        "import numpy as np\n"
        "from gpuedu.emulator import driver as drv\n"
        "from gpuedu.emulator.compiler import SourceModule\n"
        "drv.init(); ctx = drv.Device(0).make_context()\n"
        "mod = SourceModule('__shared__ float fs[8];\\n'\n"
        "                   '__global__ void g(float* out) { fs[threadIdx.x] = threadIdx.x; out[threadIdx.x] = fs[threadIdx.x]; }')\n"
        "out = np.zeros(8, np.float32)\n"
        "mod.get_function('g')(drv.Out(out), block=(8, 1, 1))\n"
        "print('afterwards:', out.tolist())\n")
    env = dict(os.environ, GPUEDU_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "afterwards: [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]" in done.stdout


def test_only_single_static_shared_arrays_get_a_guard_and_lines_stay_where_they_were():
    from gpuedu.emulator._scanner import SINGLE_WORKER_SYMBOL, rewrite_source
    decls = ("__shared__ float tile[16][17];\n__shared__ int count;\n__shared__ float a[4], b[4];\n"
             "volatile __shared__ __align__(32) double v[8];\n")
    # At file scope: variables of the module, and the module runs its blocks on one worker thread.
    out = rewrite_source(decls)
    lines = out.splitlines()
    assert lines[0].startswith("__gpuedu_file_scope_shared__ __gpuedu::GuardedShared<float [16][17], 16> "
                               "__gpuedu_shared_array_1; static auto& tile = __gpuedu_shared_array_1.value;")
    assert "GuardedShared" not in lines[1] and "GuardedShared" not in lines[2]
    assert lines[3].startswith("volatile __gpuedu_file_scope_shared__ __gpuedu::GuardedShared<double [8], 32>")
    assert f"const int {SINGLE_WORKER_SYMBOL} = 1;" in "\n".join(lines[4:])
    # In a function: each a slot of the running worker's shared memory, the array with its guard; lines stay.
    src = "__global__ void k() {\n" + decls + "}\n"
    lines = rewrite_source(src).splitlines()
    assert len(lines) == 6 and SINGLE_WORKER_SYMBOL not in rewrite_source(src)
    assert lines[1] == ("static long long __gpuedu_shared_key_1; auto& tile = "
                        "__gpuedu::shared_var<__gpuedu::GuardedShared<float [16][17], 16>>(&__gpuedu_shared_key_1, "
                        "\"tile\").value;")
    assert "GuardedShared" not in lines[2] and "auto& count = __gpuedu_shared_v_2.count;" in lines[2]
    assert "struct __gpuedu_shared_t_3 {  float a[4], b[4]; };" in lines[3]
    assert "auto& a = __gpuedu_shared_v_3.a; auto& b = __gpuedu_shared_v_3.b;" in lines[3]
    assert "GuardedShared<double [8], 32>>(&__gpuedu_shared_key_4, \"v\")" in lines[4]


def test_file_scope_is_told_from_function_bodies():
    from gpuedu.emulator._scanner import SINGLE_WORKER_SYMBOL, rewrite_source
    inside = [
        "struct S { __device__ void f() const { __shared__ int x; x = 1; } };",
        "template <int N> __device__ auto g(int i) -> int { __shared__ int y[N]; return y[i]; }",
        "namespace n { extern \"C\" __global__ void k(int* p) { if (p) { __shared__ int z; z = 1; } } }",
        "struct T { int v; __device__ T() : v(0) { __shared__ int w; w = 0; } };",
    ]
    for src in inside:
        assert SINGLE_WORKER_SYMBOL not in rewrite_source(src), src
        # a profiled build runs on every worker as the plain one does; a source that launches grids from device
        # code runs on one whatever it holds
        assert SINGLE_WORKER_SYMBOL not in rewrite_source(src, profile=True), src
        assert SINGLE_WORKER_SYMBOL in rewrite_source(src, device_launches=True), src
    outside = [
        "__shared__ int x;",
        "namespace n { __shared__ float s[4]; }",
        "extern \"C\" { __shared__ float s[4]; }",
        "struct S { int a; }; __shared__ S s;",
        "#define SMEM __shared__\n__global__ void k() { SMEM int x; }",   # a macro's is not rewritten
    ]
    for src in outside:
        assert SINGLE_WORKER_SYMBOL in rewrite_source(src), src
        assert SINGLE_WORKER_SYMBOL in rewrite_source(src, profile=True), src
    # extern __shared__ (the dynamic buffer): in a function, a pointer to the running worker's; at file scope the
    # module's own buffer, on one worker
    assert SINGLE_WORKER_SYMBOL not in rewrite_source("__global__ void k() { extern __shared__ float buf[]; }")
    out = rewrite_source("extern __shared__ float buf[];\n__global__ void k() {}")
    assert out.startswith('extern float buf[] __asm__("__gpuedu_dynamic_shared");') and SINGLE_WORKER_SYMBOL in out

def test_a_profiled_build_spells_cuda_s_pragma_unroll_as_the_host_compiler_s_for_innermost_loops():
    from gpuedu.emulator._scanner import UNROLL_ALL, rewrite_source
    src = ("__global__ void k(float* o) {\n#pragma unroll\n  for (int i = 0; i < 4; i++) o[i] = 0;\n"
           "  #pragma unroll 2\n  for (int i = 0; i < 4; i++) { o[i] = 1; }\n#pragma unroll (8)\n"
           "  for (int i = 0; i < 8; i++) o[i] = 2;\n  // #pragma unroll\n"
           "#pragma unroll\n  for (int i = 0; i < 4; i++) {  // for the rows\n"
           "#pragma unroll\n    for (int j = 0; j < 4; j++) o[i * 4 + j] = 3;\n  }\n"
           "#pragma unroll\n  for (int i = 0; i < 4; i++)\n    for (int j = 0; j < 4; j++) o[j] = 4;\n}\n")
    lines = rewrite_source(src, profile=True).splitlines()
    assert lines[1] == f"#pragma GCC unroll {UNROLL_ALL}"
    assert lines[3] == "  #pragma GCC unroll 2" and lines[5] == "#pragma GCC unroll 8"
    assert lines[7] == "  // #pragma unroll"           # a comment stays one
    # a loop around another loop stays a loop (a comment naming one in a body is no loop); the inner one unrolls
    assert lines[8] == "#pragma unroll" and lines[10] == f"#pragma GCC unroll {UNROLL_ALL}"
    assert lines[13] == "#pragma unroll"
    assert lines[:17] == [rewritten if i in (1, 3, 5, 10) else line for i, (line, rewritten) in
                          enumerate(zip(src.splitlines(), lines))]   # every other line as it was, where it was
    assert rewrite_source(src).splitlines()[1] == "#pragma unroll"   # a plain build leaves it to the compiler
