"""Launch overhead: host microseconds per kernel launch, ``__call__`` vs ``prepared_call``.

``func(*args, block=, grid=)`` inspects every argument on every call to work out its C type;
``func.prepare("Pi")`` does that once, and ``prepared_call`` then only packs the values. For
small kernels the launch is the cost, so this is the number that decides how small a kernel
is worth launching. The kernel below does nothing, so the launch path alone is timed; batches of
launches are timed on the host clock and the device is synchronised between batches, outside
the timed interval.
"""
import numpy as np

from .records import Skipped

# Two parameters, as a typical elementwise launch has; the empty body leaves only the launch.
EMPTY_KERNEL_SOURCE = r"""
__global__ void empty_kernel(float *out, int n)
{
}
"""


def measure_launch(run):
    launches = run.sizes["launches"]
    sizes = {"launches_per_repeat": launches, "block": 32, "grid": 1}
    state = {}

    def setup():
        if run.drv is None:
            raise Skipped("pycuda.driver is not available on this backend")
        if not state:
            module = run.backend.compiler.SourceModule(EMPTY_KERNEL_SOURCE)
            state["fn"] = module.get_function("empty_kernel")
            state["buf"] = run.drv.mem_alloc(4)
        return state["fn"], state["buf"]

    with run.figure("launch_call", "launch", "us/launch", sizes,
                    note="func(buf, np.int32(0), block=(32,1,1), grid=(1,1)), an empty kernel") as fig:
        fn, buf = setup()
        n = np.int32(0)
        call = lambda: fn(buf, n, block=(32, 1, 1), grid=(1, 1))
        for _ in range(run.warmup):
            call()
        seconds = run.timer.time_launches(call, launches, run.repeats)
        fig.record([s * 1e6 for s in seconds], seconds)

    with run.figure("launch_prepared_call", "launch", "us/launch", sizes, ["launch_call"],
                    note='func.prepare("Pi"); func.prepared_call((1,1), (32,1,1), buf, np.int32(0))') as fig:
        fn, buf = setup()
        fn.prepare("Pi")
        address, n = int(buf), np.int32(0)
        call = lambda: fn.prepared_call((1, 1), (32, 1, 1), address, n)
        for _ in range(run.warmup):
            call()
        seconds = run.timer.time_launches(call, launches, run.repeats)
        fig.record([s * 1e6 for s in seconds], seconds)
