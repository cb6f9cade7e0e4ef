"""Every kernel source the emulator's tests run also compiles with the real nvcc, for sm_75 and
sm_90 (sm_80 and sm_90 where a source needs Ampere; inline PTX for the architectures its list names, sm_90a for
Hopper's), wrapped the way SourceModule wraps it: nothing the emulator accepts is invalid CUDA."""
import importlib
import os
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.nvcc

# (test module, source constant, no_extern_c, extra nvcc options)
SOURCES = [
    ("test_launch", "INDEX_SRC", False, []),
    ("test_launch", "NAMESPACE_SRC", True, []),
    ("test_warp", "WARP_SRC", False, []),
    ("test_errors", "ERRORS_SRC", False, []),
    ("test_device_language", "DEVICE_SRC", False, []),
    ("test_device_language", "TEMPLATE_SRC", True, ["-DOFFSET=3"]),
    ("test_fp16", "FP16_SRC", True, []),
    ("test_bf16", "BF16_SRC", True, []),
    ("test_wmma", "WMMA_SRC", True, []),
    ("test_atomics", "ATOMICS_SRC", False, []),
    ("test_compile_cache", "CACHE_SRC", False, ["-DVALUE(i)=(i)"]),
    ("test_compile_linkage", "EXTERN_BLOCK_SRC", True, []),
    ("test_compile_linkage", "LIBC_NAMES_SRC", False, []),
    ("test_compile_linkage", "CXX_NAMES_SRC", True, []),
    ("test_cooperative_groups", "CG_SRC", True, []),
    ("test_curand", "CURAND_SRC", True, []),
    ("test_curandom", "CURANDOM_SRC", True, []),
    ("test_curandom", "CURANDOM_MRG_SRC", True, []),
    ("test_curandom", "CURANDOM_SOBOL32_SRC", True, []),
    ("test_curandom", "CURANDOM_SCRAMBLED_SOBOL32_SRC", True, []),
    ("test_curandom", "CURANDOM_SOBOL64_SRC", True, []),
    ("test_curandom", "CURANDOM_SCRAMBLED_SOBOL64_SRC", True, []),
    ("test_complex", "COMPLEX_SRC", False, []),
]

# Sources that need sm_80 (bfloat16's WMMA fragments and atomics), compiled for it instead of sm_75.
AMPERE = {("test_bf16", "BF16_SRC")}


# Sources with inline PTX, each with the architectures it is compiled for: Ampere's and later (cp.async,
# mma.m16n8k16, the mbarriers of sm_80) for sm_80 and sm_90; Hopper's (try_wait, transaction counts, setmaxnreg,
# the warpgroup MMA wgmma) for sm_90a alone, as ptxas has them.
PTX_SOURCES = [
    ("test_ptx", "PTX_SRC", ("sm_80", "sm_90")),
    ("test_ptx", "MISSING_WAIT_SRC", ("sm_80", "sm_90")),
    ("test_mbarrier", "AMPERE_MBARRIER_SRC", ("sm_80", "sm_90")),
    ("test_mbarrier", "MBARRIER_SRC", ("sm_90a",)),
    ("test_wgmma", "SHAPES_SRC", ("sm_90a",)),
    ("test_wgmma", "WGMMA_SRC", ("sm_90a",)),
    ("test_wgmma", "MEETING_SRC", ("sm_90a",)),
    ("test_tma", "TMA_SRC", ("sm_90a",)),
    ("test_wgmma", "TEMPLATE_SRC", ("sm_90a",)),
    ("test_clusters", "CLUSTER_SRC", ("sm_90a",)),
]


def _curand_include():
    """A folder holding NVIDIA's curand_kernel.h: the toolkit's own, or the nvidia-curand wheel's; None if neither."""
    nvcc = shutil.which("nvcc")
    folders = [os.path.join(os.path.dirname(os.path.realpath(nvcc)), "..", "include")] if nvcc else []
    folders += ["/usr/local/cuda/include", os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include")]
    try:
        import nvidia
        for root in nvidia.__path__:
            folders += [os.path.join(root, sub, "include") for sub in ("cu13", "cu12", "curand")]
    except ImportError:
        pass
    return next((f for f in folders if os.path.isfile(os.path.join(f, "curand_kernel.h"))), None)


def _source(module, name):
    here = os.path.dirname(__file__)
    spec = importlib.util.spec_from_file_location(f"_nvcc_{module}", os.path.join(here, module + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)


@pytest.mark.parametrize("module,name,no_extern_c,options", SOURCES, ids=[f"{m}.{n}" for m, n, _, _ in SOURCES])
def test_kernel_sources_compile_with_nvcc(tmp_path, module, name, no_extern_c, options):
    src = _source(module, name)
    if "curand_kernel.h" in src:   # cuRAND's headers come with the toolkit's cuRAND, not with nvcc itself
        folder = _curand_include()
        if folder is None:
            pytest.skip("NVIDIA's curand_kernel.h is not installed (the CUDA toolkit's cuRAND, or pip's nvidia-curand)")
        options = [*options, "-I" + folder]
    if "pycuda-complex.hpp" in src:  # PyCUDA's SourceModule gives nvcc its header folder with every source
        from gpuedu.profiler.resources import pycuda_include_dir
        options = [*options, "-I" + pycuda_include_dir()]
    if not no_extern_c:
        src = 'extern "C" {\n' + src + "\n}\n"     # what SourceModule does by default
    path = tmp_path / "kernel.cu"
    path.write_text(src)
    # one nvcc run builds both targets (a fatbin holding an sm_75, or sm_80, and an sm_90 cubin)
    first = "80" if (module, name) in AMPERE else "75"
    archs = ["-gencode", f"arch=compute_{first},code=sm_{first}", "-gencode", "arch=compute_90,code=sm_90"]
    proc = subprocess.run(["nvcc", "-fatbin", *archs, *options, "-o", str(tmp_path / "k.fatbin"), str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("module,name,archs", PTX_SOURCES, ids=[f"{m}.{n}" for m, n, _ in PTX_SOURCES])
def test_inline_ptx_sources_compile_with_nvcc_for_their_architectures(tmp_path, module, name, archs):
    path = tmp_path / "kernel.cu"
    source = _source(module, name)
    # (wrapped in extern "C" as SourceModule wraps it, but a source whose kernels say extern "C" themselves: a
    # template must keep C++ linkage, SourceModule's no_extern_c=True)
    path.write_text(source if 'extern "C"' in source else 'extern "C" {\n' + source + "\n}\n")
    if len(archs) == 1:
        command = ["nvcc", "-cubin", f"-arch={archs[0]}", "-o", str(tmp_path / "k.cubin"), str(path)]
    else:
        gencodes = [g for a in archs for g in ("-gencode", f"arch=compute{a[2:]},code={a}")]
        command = ["nvcc", "-fatbin", *gencodes, "-o", str(tmp_path / "k.fatbin"), str(path)]
    proc = subprocess.run(command, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
