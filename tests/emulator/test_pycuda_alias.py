"""After use_emulator(), PyCUDA's module names resolve to the emulator (checked in a fresh process)."""
import subprocess
import sys
import textwrap


def run_fresh(code):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_pycuda_modules_resolve_to_the_emulator():
    out = run_fresh("""
        import gpuedu.backend
        gpuedu.backend.use_emulator()
        import pycuda.driver as drv
        import pycuda.autoinit
        import pycuda.gpuarray
        import pycuda.tools
        import gpuedu.emulator.driver, gpuedu.emulator.gpuarray, gpuedu.emulator.autoinit
        assert drv is gpuedu.emulator.driver
        assert pycuda.gpuarray is gpuedu.emulator.gpuarray
        assert pycuda.autoinit is gpuedu.emulator.autoinit
        assert pycuda.tools.__name__ == "gpuedu.emulator.tools"
        # autoinit made a current context on device 0 and exposes it
        assert drv.Context.get_current() is pycuda.autoinit.context
        assert pycuda.autoinit.device == drv.Device(0)
        print(pycuda.autoinit.device.name())
        import numpy as np
        a = pycuda.gpuarray.to_gpu(np.arange(4, dtype=np.float32))
        print((2 * a).get().tolist())
    """)
    assert out.splitlines() == ["gpuedu CPU emulator", "[0.0, 2.0, 4.0, 6.0]"]


def test_compiler_elementwise_and_reduction_resolve_too():
    out = run_fresh("""
        import gpuedu.backend
        gpuedu.backend.use_emulator()
        import pycuda.autoinit
        from pycuda.compiler import SourceModule
        import pycuda.elementwise, pycuda.reduction
        print(SourceModule.__module__, pycuda.elementwise.__name__, pycuda.reduction.__name__)
    """)
    assert out.split() == ["gpuedu.emulator.compiler", "gpuedu.emulator.elementwise",
                           "gpuedu.emulator.reduction"]


def test_autoinit_detaches_its_context_at_exit():
    out = run_fresh("""
        import gpuedu.emulator.autoinit as autoinit
        import gpuedu.emulator.driver as drv
        ctx = autoinit.context
        autoinit._finish_up()      # what atexit runs
        print(drv.Context.get_current(), ctx._detached)
    """)
    assert out.split() == ["None", "True"]


def test_autoprimaryctx_makes_the_primary_context_current_and_pops_it_at_exit():
    out = run_fresh("""
        import gpuedu.emulator.autoprimaryctx as autoprimaryctx
        import gpuedu.emulator.driver as drv
        ctx = autoprimaryctx.context
        print(drv.Context.get_current() is ctx, ctx is drv.Device(0).retain_primary_context(),
              autoprimaryctx.device == drv.Device(0))
        autoprimaryctx._finish_up()      # what atexit runs
        print(drv.Context.get_current(), ctx._detached)
    """)
    # Popped, not destroyed: the device keeps its primary context for the next to retain it.
    assert out.split() == ["True", "True", "True", "None", "False"]


def test_setup_cpu_gives_the_emulators_autoprimaryctx():
    out = run_fresh("""
        import sys, gpuedu
        gpuedu.setup("cpu", verbose=False)
        import pycuda.autoprimaryctx
        import pycuda.driver as drv
        import gpuedu.emulator.autoprimaryctx
        print(pycuda.autoprimaryctx is gpuedu.emulator.autoprimaryctx,
              drv.Context.get_current() is pycuda.autoprimaryctx.context)
        import numpy as np, pycuda.gpuarray as gpuarray
        print((gpuarray.to_gpu(np.ones(3, np.float32)) + 1).get().tolist())
    """)
    assert out.splitlines() == ["True True", "[2.0, 2.0, 2.0]"]
