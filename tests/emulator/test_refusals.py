"""What a GPU (or nvcc, or compute-sanitizer) refuses, the emulator refuses too, with a message that says what
was wrong; each case runs in a fresh process, as a new learner's notebook would, and afterwards a correct
kernel still runs there."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PRELUDE = """
import numpy as np
import gpuedu
gpuedu.setup("cpu", verbose=False)
import pycuda.autoinit
import pycuda.driver as drv
import pycuda.gpuarray as gpuarray
from pycuda.compiler import SourceModule
"""

AFTERWARDS = """
_check = SourceModule("__global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }").get_function("twice")
_x = gpuarray.to_gpu(np.arange(32, dtype=np.float32))
_check(_x, block=(32, 1, 1), grid=(1, 1))
assert (_x.get() == 2 * np.arange(32)).all()
print("A CORRECT KERNEL RAN AFTERWARDS")
"""


def fresh(code, timeout=240):
    """Run ``code`` (after the prelude) in a new Python process, then a correct kernel; (stdout, stderr)."""
    from test_backend import child_pythonpath
    env = dict(os.environ, PYTHONPATH=child_pythonpath(ROOT))
    env.pop("GPUEDU_BACKEND", None)
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code) + AFTERWARDS], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "A CORRECT KERNEL RAN AFTERWARDS" in proc.stdout
    return proc.stdout, proc.stderr


def refused(code, exception="drv.LaunchError"):
    """``code`` must raise ``exception``; returns its message (printed by the child between markers)."""
    body = "try:\n" + textwrap.indent(textwrap.dedent(code), "    ") + \
           f"\n    print('NOT REFUSED')\nexcept {exception} as _e:\n    print('REFUSED<<' + str(_e) + '>>')\n"
    out, _ = fresh(body)
    assert "NOT REFUSED" not in out, out
    return out.split("REFUSED<<", 1)[1].split(">>", 1)[0]


def test_printf_keeps_a_gpus_fifo_per_launch_and_says_what_it_dropped():
    out, err = fresh("""
        noisy = SourceModule(r'''__global__ void noisy() { printf("thread %4d says hello\\n", threadIdx.x); }''')
        noisy.get_function("noisy")(block=(1024, 1, 1), grid=(64, 1))      # 64 Ki lines of 23 bytes: 1.5 MB
        drv.Context.synchronize()
        print("LAUNCH DONE")
        drv.Context.set_limit(drv.limit.PRINTF_FIFO_SIZE, 220)
        noisy.get_function("noisy")(block=(32, 1, 1), grid=(1, 1))
    """)
    first = out.split("LAUNCH DONE")[0]
    assert len(first) <= 1 << 20 and first.count("says hello") == (1 << 20) // 23
    assert "more bytes of this launch's output were dropped" in err and "PRINTF_FIFO_SIZE" in err
    second = out.split("LAUNCH DONE")[1]
    assert second.count("says hello") == 9 and f"{23 * 23:,} more bytes" in err


def test_a_size_that_is_not_an_integer_is_refused():
    message = refused("drv.mem_alloc(1.5)", "TypeError")
    assert "cuMemAlloc: bytes must be an integer, got float 1.5" in message and "int(1.5)" in message


SCALE = """
scale = SourceModule("__global__ void scale(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2.0f; }")
scale = scale.get_function("scale")
"""


@pytest.mark.parametrize("given, words", [
    ("drv.InOut(np.ones(64))", "InOut of a float64 array, whose elements are 8 bytes"),
    ("gpuarray.to_gpu(np.ones(64))", "a float64 GPUArray, whose elements are 8 bytes"),
    ("gpuarray.to_gpu(np.ones(64, np.int16))", "a int16 GPUArray, whose elements are 2 bytes"),
])
def test_an_array_of_another_element_size_is_refused_for_a_typed_pointer(given, words):
    message = refused(SCALE + f"scale({given}, np.int32(64), block=(64, 1, 1), grid=(1, 1))", "TypeError")
    assert "takes a pointer to 4-byte floating-point numbers there, got " + words in message
    assert "a.astype(np.float32)" in message


def test_a_prepared_call_refuses_the_same_arrays_as_a_plain_call():
    message = refused(SCALE + "scale.prepare('Pi').prepared_call((1, 1), (64, 1, 1), gpuarray.to_gpu(np.ones(64)), "
                              "np.int32(64))", "TypeError")
    assert "got a float64 GPUArray, whose elements are 8 bytes" in message


def test_elements_of_the_right_size_but_another_kind_pass_as_bits():
    out, _ = fresh(SCALE + textwrap.dedent("""
        bits = SourceModule("__global__ void bits(int* x) { x[threadIdx.x] = threadIdx.x; }").get_function("bits")
        x = gpuarray.zeros(4, np.float32)          # PyCUDA's own test_large_smem does this
        bits(x, block=(4, 1, 1), grid=(1, 1))
        print("BITS:", x.get().view(np.int32).tolist())
    """))
    assert "BITS: [0, 1, 2, 3]" in out


def test_a_host_address_is_refused_before_the_kernel_can_write_there():
    out, _ = fresh(SCALE + textwrap.dedent("""
        host = np.ones(64, np.float32)
        try:
            scale(np.intp(host.ctypes.data), np.int32(64), block=(64, 1, 1), grid=(1, 1))
        except drv.LaunchError as e:
            print("REFUSED:", e)
        print("HOST UNCHANGED:", bool((host == 1).all()))
        mapped = drv.pagelocked_zeros(64, np.float32, mem_flags=drv.host_alloc_flags.DEVICEMAP)
        mapped[:] = 3
        scale(np.intp(mapped.base.get_device_pointer()), np.int32(64), block=(64, 1, 1), grid=(1, 1))
        print("MAPPED:", mapped[:2])
    """))
    assert "which is not device memory" in out and "parameter #0 (0-based)" in out
    assert "HOST UNCHANGED: True" in out and "MAPPED: [6. 6.]" in out


LOAD = '''
load = SourceModule("""__global__ void load(float4* out, const float4* in) { out[threadIdx.x] = in[threadIdx.x]; }""")
load = load.get_function("load")
'''


def test_a_pointer_argument_that_breaks_its_types_alignment_is_refused():
    message = refused(LOAD + """
src, dst = gpuarray.zeros(64, np.float32), gpuarray.zeros(64, np.float32)
load(dst, np.intp(int(src.gpudata) + 4), block=(4, 1, 1), grid=(1, 1))
""")
    assert "parameter #1 (0-based)" in message and "not a multiple of 16" in message
    assert "misaligned address" in message and "gpuedu.memcheck()" in message
    # an offset that keeps the alignment is fine, and so is any offset of 4 bytes for a float*
    out, _ = fresh(SCALE + LOAD + textwrap.dedent("""
        x = gpuarray.zeros(64, np.float32)
        scale(np.intp(int(x.gpudata) + 4), np.int32(8), block=(8, 1, 1), grid=(1, 1))
        load(x, np.intp(int(x.gpudata) + 16), block=(4, 1, 1), grid=(1, 1))
        print("ALIGNED RAN")
    """))
    assert "ALIGNED RAN" in out


UB = r'''
ub = SourceModule("""
__device__ int half_defined(int a) { if (a > 100) return 1; }
__global__ void no_return(int* x) { x[threadIdx.x] = half_defined(x[threadIdx.x]); }
__global__ void unreachable(int* x) { if (x[0] == 0) __builtin_unreachable(); x[1] = 1; }
__global__ void one_past(float* x) { float a[8]; for (int i = 0; i <= 8; ++i) a[i] = x[i]; x[0] = a[3] + a[7]; }
""")
xi = gpuarray.zeros(64, np.int32)
xf = gpuarray.zeros(64, np.float32)
'''


def test_a_function_that_ends_without_return_is_named_at_its_line():
    message = refused(UB + "ub.get_function('no_return')(xi, block=(32, 1, 1), grid=(1, 1))")
    assert "reached the end of a function that returns a value without a `return` (line 2 of your source)" \
        in message and "thread (0,0,0) of block (0,0,0)" in message


def test_reaching_builtin_unreachable_is_named_as_undefined_behaviour():
    message = refused(UB + "ub.get_function('unreachable')(xi, block=(32, 1, 1), grid=(1, 1))")
    assert "reached __builtin_unreachable() (line 4 of your source): undefined behaviour" in message


def test_memcheck_names_a_local_array_written_one_past_its_end():
    out, _ = fresh(UB + textwrap.dedent("""
        with gpuedu.memcheck() as prof:
            try:
                ub.get_function('one_past')(xf, block=(32, 1, 1), grid=(1, 1))
            except drv.LaunchError as e:
                print("REFUSED:", e)
    """))
    # (the compiler names the type: 'float [8]' in g++'s words, 'float[8]' in clang's)
    assert re.search(r"indexed the array 'float ?\[8\]' at \[8\] \(line 5 of your source\), outside it", out), out


def test_a_local_array_overrun_upwards_in_a_barrier_kernel_is_not_called_a_stack_overflow():
    message = refused("""
        over = SourceModule('''__global__ void over(float* x, int n) {
            float a[8];
            for (int i = 0; i < n; ++i) a[i] = x[i % 64];
            __syncthreads();
            x[0] = a[3] + a[7]; }''').get_function("over")
        over(gpuarray.zeros(64, np.float32), np.int32(5000), block=(32, 1, 1), grid=(1, 1))
    """)
    assert "wrote past the end of a local array" in message and "overflowed its stack" not in message
    assert "gpuedu.memcheck() names the line" in message


def test_a_write_far_before_a_buffer_faults_instead_of_landing_in_the_buffer_below():
    message = refused("""
        below = gpuarray.zeros(1 << 20, np.float32)
        x = gpuarray.zeros(1024, np.float32)
        back = SourceModule("__global__ void back(float* x, int k) { x[(int)threadIdx.x - k] = 1.0f; }")
        try:
            back.get_function("back")(x, np.int32(900000), block=(32, 1, 1), grid=(1, 1))
        finally:
            print("BELOW UNTOUCHED:", float(below.get().max()) == 0.0)
    """)
    assert "bytes before the start of a 4096-byte allocation" in message


def test_an_interrupt_from_outside_stops_an_endless_kernel_within_a_second_and_the_process_goes_on():
    """What Jupyter's interrupt does: another process sends SIGINT while a kernel with barriers spins."""
    import signal
    import time
    from test_backend import child_pythonpath
    code = PRELUDE + textwrap.dedent("""
        import sys, time
        spin = SourceModule('''__global__ void spin(int* flag) {
            while (flag[0] == 0) { __syncthreads(); } }''').get_function("spin")
        flag = gpuarray.zeros(1, np.int32)
        for attempt in range(2):
            print("LAUNCHING", flush=True)
            start = time.perf_counter()
            try:
                spin(flag, block=(64, 1, 1), grid=(1, 1))
            except KeyboardInterrupt as e:
                print(f"INTERRUPTED after {time.perf_counter() - start:.2f} s: {e}", flush=True)
    """) + AFTERWARDS
    env = dict(os.environ, PYTHONPATH=child_pythonpath(ROOT))
    env.pop("GPUEDU_BACKEND", None)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=ROOT, stdin=subprocess.DEVNULL)
    lines = []
    try:
        for _ in range(2):
            while True:
                line = proc.stdout.readline()
                assert line, "".join(lines) + proc.stderr.read()
                lines.append(line)
                if line.startswith("LAUNCHING"):
                    break
            time.sleep(1.0)
            sent = time.perf_counter()
            proc.send_signal(signal.SIGINT)
            line = proc.stdout.readline()
            lines.append(line)
            assert line.startswith("INTERRUPTED") and "kernel 'spin' interrupted" in line, "".join(lines)
            assert time.perf_counter() - sent < 1.0
        # (read through the same buffered files as above: communicate() would skip what readline() buffered)
        out, err = proc.stdout.read(), proc.stderr.read()
        proc.wait(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0 and "A CORRECT KERNEL RAN AFTERWARDS" in out, "".join(lines) + out + err
