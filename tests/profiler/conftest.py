"""What the profiler's tests share: modules of test kernels compiled on the emulator."""
import pytest

import gpuedu


@pytest.fixture(scope="session")
def emulator_module():
    """A function: source -> ``(SourceModule(source), pycuda.gpuarray)`` on the emulator (skips on a GPU)."""
    def compile_on_emulator(source):
        backend = gpuedu.setup(verbose=False)
        if backend.name != "cpu":
            pytest.skip("the counters are the emulator's")
        from pycuda.compiler import SourceModule
        import pycuda.gpuarray as gpuarray
        return SourceModule(source), gpuarray
    return compile_on_emulator
