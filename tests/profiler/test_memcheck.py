"""gpuedu.memcheck(): what compute-sanitizer's memcheck reports, where a plain launch is silent."""
import numpy as np
import pytest

import gpuedu
from gpuedu.emulator import driver as drv

SOURCE = r"""
__global__ void one_past(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i <= n) x[i] = 1.0f; }
__global__ void before(float* x) { x[(int)threadIdx.x - 1] = 2.0f; }
__global__ void dynamic_past(float* out) { extern __shared__ float d[]; d[threadIdx.x] = 1.0f; out[0] = d[0]; }
__global__ void misaligned(float* out, char* raw) { float4 v = *(float4*)(raw + 4); out[0] = v.x; }
__global__ void fine(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 1.0f; }
"""


@pytest.fixture(scope="module")
def emu(emulator_module):
    return emulator_module(SOURCE)


def checked(fn, *args, **launch):
    with gpuedu.memcheck() as mc:
        fn(*args, **launch)
    return mc.errors


def test_a_write_one_element_past_a_buffer_stops_a_plain_launch_and_memcheck_names_the_thread(emu):
    mod, gpuarray = emu
    x = gpuarray.zeros(99, np.float32)        # 396 bytes: the 4 after it are mapped, so nothing faults,
    with pytest.raises(drv.LaunchError, match=r"kernel 'one_past' wrote past the end of a 396-byte allocation "
                       r"\(bytes 396 to 399, right after its end\).*parameter #0"):   # but they are watched
        mod.get_function("one_past")(x, np.int32(99), block=(128, 1, 1))
    [e] = checked(mod.get_function("one_past"), x, np.int32(99), block=(128, 1, 1))
    assert (e["kind"], e["space"], e["access"], e["size"]) == ("out of bounds", "global", "write", 4)
    assert e["offset"] == 396 and e["region_bytes"] == 396 and e["thread"] == (99, 0, 0)
    assert e["line"] == "kernel.cu:2"


def test_a_write_just_before_a_buffer_is_found(emu):
    mod, gpuarray = emu
    x = gpuarray.zeros(99, np.float32)
    [e] = checked(mod.get_function("before"), x, block=(4, 1, 1))
    assert e["offset"] == -4 and e["thread"] == (0, 0, 0)


def test_dynamic_shared_memory_past_what_the_launch_asked_for_is_found(emu):
    mod, gpuarray = emu
    out = gpuarray.zeros(1, np.float32)
    [e] = checked(mod.get_function("dynamic_past"), out, block=(64, 1, 1), shared=128)
    assert (e["space"], e["region"], e["offset"], e["count"]) == ("shared", "dynamic", 128, 32)


def test_a_vector_load_not_aligned_to_its_size_is_found(emu):
    mod, gpuarray = emu
    out, raw = gpuarray.zeros(1, np.float32), gpuarray.zeros(64, np.uint8)
    [e] = checked(mod.get_function("misaligned"), out, raw, block=(1, 1, 1))
    assert (e["kind"], e["size"], e["offset"]) == ("misaligned", 16, 4)


def test_a_correct_kernel_has_no_errors_and_the_report_says_so(emu):
    mod, gpuarray = emu
    x = gpuarray.zeros(99, np.float32)
    with gpuedu.memcheck() as mc:
        mod.get_function("fine")(x, np.int32(99), block=(128, 1, 1))
    assert mc.errors == [] and "memcheck: no invalid accesses found" in str(mc)
    np.testing.assert_array_equal(x.get(), np.ones(99, np.float32))
