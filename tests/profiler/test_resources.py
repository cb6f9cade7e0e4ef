"""Registers and shared memory from the real compiler: parsed from ptxas, cached on disk, never made up."""
import json
import os
import subprocess
import warnings

import pytest

from gpuedu import kernels
from gpuedu.emulator.hooks import CacheDamageWarning
from gpuedu.profiler import resources
from gpuedu.profiler.resources import ResourcesUnavailable, parse_ptxas, plain_name, resource_usage

TILE_KERNEL = """
__global__ void padded_tile(float* out, const float* in) {
    __shared__ float t[32][33];   // 32 x 33 x 4 bytes = 4224
    t[threadIdx.y][threadIdx.x] = in[threadIdx.y * 32 + threadIdx.x];
    __syncthreads();
    out[threadIdx.y * 32 + threadIdx.x] = t[threadIdx.x][threadIdx.y];
}
"""

SIZED_KERNEL = """
__global__ void sized(float* out) {
    __shared__ float s[N];
    s[threadIdx.x] = out[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = s[N - 1 - threadIdx.x];
}
"""

# C++ linkage: two instantiations of a template and one plain function, all mangled.
CPP_KERNELS = """
template <int N> __global__ void scale(float* x) { x[threadIdx.x] *= N; }
template __global__ void scale<2>(float*);
template __global__ void scale<3>(float*);
namespace course { __global__ void axpy(float a, const float* x, float* y) { y[threadIdx.x] += a * x[threadIdx.x]; } }
"""

# A local array indexed at run time cannot live in registers: it takes stack (local memory).
LOCAL_KERNEL = """
__global__ void lookup(float* out, const int* index) {
    float table[64], sum = 0.0f;
    for (int i = 0; i < 64; ++i) table[i] = sum += out[i * blockDim.x + threadIdx.x];  // running sums
    out[threadIdx.x] = table[index[threadIdx.x]];
}
"""

PTXAS_REPORT = """\
ptxas info    : 40 bytes gmem
ptxas info    : Function properties for _Z8warp_sumPf
    24 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Compiling entry function '_ZN6course4axpyEfPKfPf' for 'sm_90'
ptxas info    : Function properties for _ZN6course4axpyEfPKfPf
    16 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 4224 bytes smem
ptxas info    : Compiling entry function 'plain' for 'sm_90'
ptxas info    : Function properties for plain
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
"""


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    """Each test starts with an empty disk cache of its own and nothing remembered in memory."""
    monkeypatch.setenv("GPUEDU_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(resources, "_results", {})
    return tmp_path


@pytest.mark.parametrize("symbol, name", [
    ("transpose_kernel3", "transpose_kernel3"),
    ("_Z10cpp_kernelPfi", "cpp_kernel"),
    ("_Z5scaleILi2EEvPf", "scale"),
    ("_ZN6course4axpyEfPKfPf", "axpy"),
    ("_ZN6course5scaleILi3EEEvPf", "scale"),
    ("_ZL6hiddenPf", "hidden"),
])
def test_plain_name_of_mangled_symbols(symbol, name):
    assert plain_name(symbol) == name


def test_parse_ptxas_reads_each_entry_function_and_skips_device_functions():
    found = parse_ptxas(PTXAS_REPORT)
    assert found == {
        "_ZN6course4axpyEfPKfPf": {"registers": 40, "shared_static": 4224, "local": 16,
                                   "spill_stores": 4, "spill_loads": 4, "arch": "sm_90"},
        "plain": {"registers": 8, "shared_static": 0, "local": 0,
                  "spill_stores": 0, "spill_loads": 0, "arch": "sm_90"},
    }


def test_nvcc_missing_says_so_and_how_to_fix_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ResourcesUnavailable, match="nvcc is not on PATH: install the CUDA toolkit"):
        resource_usage(TILE_KERNEL, "padded_tile")


def test_options_as_one_string_is_a_type_error():
    with pytest.raises(TypeError, match="sequence of flags"):
        resource_usage(SIZED_KERNEL, "sized", options="-DN=64")


@pytest.mark.nvcc
def test_static_shared_array_and_registers():
    usage = resource_usage(TILE_KERNEL, "padded_tile", arch="sm_90")
    assert usage["shared_static"] == 4224
    assert 1 <= usage["registers"] <= 255
    assert (usage["local"], usage["arch"], usage["function"]) == (0, "sm_90", "padded_tile")


@pytest.mark.nvcc
def test_course_kernels_compile_with_their_headers():
    # copy_transpose.cu includes common.cuh from gpuedu/kernels and declares its own extern "C".
    source = kernels.source("copy_transpose")
    tiled = resource_usage(source, "transpose_kernel2", arch="sm_75", no_extern_c=True)
    padded = resource_usage(source, "transpose_kernel3", arch="sm_75", no_extern_c=True)
    assert (tiled["shared_static"], padded["shared_static"]) == (32 * 32 * 4, 32 * 33 * 4)
    assert tiled["arch"] == "sm_75"


@pytest.mark.nvcc
def test_options_reach_the_compiler_and_the_cache_key():
    assert resource_usage(SIZED_KERNEL, "sized", options=["-DN=64"])["shared_static"] == 256
    assert resource_usage(SIZED_KERNEL, "sized", options=["-DN=128"])["shared_static"] == 512


@pytest.mark.nvcc
def test_cpp_linkage_kernel_found_by_plain_or_mangled_name():
    usage = resource_usage(CPP_KERNELS, "axpy", no_extern_c=True)
    assert usage["function"] == "_ZN6course4axpyEfPKfPf"
    assert resource_usage(CPP_KERNELS, "_Z5scaleILi2EEvPf", no_extern_c=True)["registers"] > 0
    with pytest.raises(ValueError, match="several kernels are named 'scale'.*_Z5scaleILi3EEvPf"):
        resource_usage(CPP_KERNELS, "scale", no_extern_c=True)


@pytest.mark.nvcc
def test_unknown_kernel_lists_the_ones_there_are():
    with pytest.raises(ValueError, match="no kernel is named 'tile'.*padded_tile"):
        resource_usage(TILE_KERNEL, "tile")


@pytest.mark.nvcc
def test_local_array_shows_as_local_memory():
    assert resource_usage(LOCAL_KERNEL, "lookup")["local"] >= 64 * 4


@pytest.mark.nvcc
def test_compile_error_is_unavailable_with_the_compiler_message():
    with pytest.raises(ResourcesUnavailable, match="(?s)nvcc failed to compile the source for sm_90:.*undefined_name"):
        resource_usage("__global__ void broken(float* x) { x[0] = undefined_name; }", "broken")


@pytest.mark.nvcc
def test_second_call_reads_the_cache_without_running_nvcc(monkeypatch, fresh_cache):
    first = resource_usage(TILE_KERNEL, "padded_tile")
    files = os.listdir(os.path.join(fresh_cache, "resources"))
    assert len(files) == 1 and files[0].endswith(".json")   # written whole: no temporary left

    def no_compiler(*args, **kwargs):
        raise AssertionError(f"nvcc ran again: {args}")

    monkeypatch.setattr(subprocess, "run", no_compiler)
    assert resource_usage(TILE_KERNEL, "padded_tile") == first     # from memory
    monkeypatch.setattr(resources, "_results", {})
    assert resource_usage(TILE_KERNEL, "padded_tile") == first     # from disk, as a new process would


@pytest.mark.nvcc
def test_damaged_cache_file_is_compiled_again(fresh_cache):
    first = resource_usage(TILE_KERNEL, "padded_tile")
    folder = os.path.join(fresh_cache, "resources")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "w") as f:
            f.write("{not json")
    resources._results.clear()
    with pytest.warns(CacheDamageWarning, match="nvcc resource figures .* are damaged .*not the JSON"):
        assert resource_usage(TILE_KERNEL, "padded_tile") == first


def test_kept_figures_are_read_only_when_their_checksum_holds(tmp_path):
    path = str(tmp_path / "figures.json")
    figures = {"padded_tile": {"registers": 26, "shared_static": 4224}}
    resources._write_atomically(path, {"arch": "sm_90", "functions": figures})
    assert resources._load(path) == figures and os.listdir(tmp_path) == ["figures.json"]
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:                     # a figure changed since: valid JSON, wrong numbers
        f.write(text.replace("4224", "4242"))
    with pytest.warns(CacheDamageWarning, match="checksum differs"):
        assert resources._load(path) is None
    with open(path, "w") as f:                     # kept by an earlier gpuedu: no checksum, measured again quietly
        json.dump({"arch": "sm_90", "functions": figures}, f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resources._load(path) is None
    assert resources._load(str(tmp_path / "absent.json")) is None
