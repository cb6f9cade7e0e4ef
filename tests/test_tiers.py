"""The tier machinery itself: markers skip with a reason where the tool or device is missing."""
import pytest


@pytest.mark.nvcc
def test_nvcc_tier_builds_a_cubin(tmp_path):
    import subprocess
    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void k(int *x) { x[threadIdx.x] = threadIdx.x; }\n')
    proc = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-o", str(tmp_path / "k.cubin"), str(src)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "k.cubin").read_bytes()[:4] == b"\x7fELF"


@pytest.mark.gpu
def test_gpu_tier_runs_a_kernel_on_the_device(gpu_context):
    import numpy as np
    from pycuda.compiler import SourceModule
    mod = SourceModule("__global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }")
    x = np.arange(32, dtype=np.float32)
    mod.get_function("twice")(gpu_context.InOut(x), block=(32, 1, 1), grid=(1, 1))
    assert np.array_equal(x, 2 * np.arange(32, dtype=np.float32))


def test_markers_are_declared(pytestconfig):
    declared = " ".join(pytestconfig.getini("markers"))
    for marker in ("gpu:", "nvcc:", "slow:"):
        assert marker in declared


def test_skip_reasons_name_what_is_missing(pytester):
    from gpuedu import preflight
    usable, reason, _ = preflight.check_gpu()
    pytester.makeconftest(open(__file__.replace("test_tiers.py", "conftest.py")).read())
    pytester.makepyfile(test_x="""
        import pytest
        @pytest.mark.gpu
        def test_needs_gpu():
            pass
    """)
    pytester.makeini("[pytest]\nmarkers =\n    gpu: real device\n    nvcc: nvcc\n")
    result = pytester.runpytest("-rs")
    if usable:
        result.assert_outcomes(passed=1)
    else:
        result.assert_outcomes(skipped=1)
        result.stdout.fnmatch_lines([f"*no usable GPU: {reason}*"])


def test_running_out_of_memory_mappings_is_explained(pytester):
    pytester.makeconftest(open(__file__.replace("test_tiers.py", "conftest.py")).read())
    pytester.makepyfile(test_x="""
        def test_loads_a_module():
            raise OSError("/tmp/k.so: failed to map segment from shared object")
    """)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*memory mappings*", "*this test process holds * memory mappings; the kernel allows*"])
