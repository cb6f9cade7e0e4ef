"""gpuedu.launch: the one path from a launcher to a kernel: the cache, the launch on a stream, the argument checks."""
import numpy as np
import pytest

import gpuedu
from gpuedu import launch as L
from gpuedu import ops

backend = gpuedu.setup(verbose=False)
ga = backend.gpuarray


def test_one_kernel_cache_keyed_by_backend_file_options_name_and_signature(monkeypatch):
    loads = []
    original = L.kernels.load

    def counting_load(name, options=()):
        loads.append((name, tuple(options)))
        return original(name, options)
    monkeypatch.setattr(L.kernels, "load", counting_load)
    monkeypatch.setattr(L, "_cache", {})
    a = L.kernel("matmul", "matmul_kernel3", "PPPiii", ("-DTILE=8",))
    assert L.kernel("matmul", "matmul_kernel3", "PPPiii", ["-DTILE=8"]) is a     # a list of options is the same key
    assert L.kernel("matmul", "matmul_kernel3", "PPPiii", ("-DTILE=16",)) is not a
    assert L.kernel("matmul", "matmul_kernel3") is not a                          # unprepared: its own entry
    assert loads == [("matmul", ("-DTILE=8",)), ("matmul", ("-DTILE=16",)), ("matmul", ())]
    assert {key[0] for key in L._cache} == {backend.name}


def test_ceil_div_is_the_one_everywhere():
    assert [L.ceil_div(n, 4) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]
    assert ops.ceil_div is L.ceil_div
    from gpuedu.exercises import _exercise
    assert _exercise.ceil_div is L.ceil_div


def test_ptr_gives_the_address_or_null():
    x = ga.to_gpu(np.zeros(4, np.float32))
    assert L.ptr(x) == int(x.gpudata) and L.ptr(None) == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_device_array_copies_a_host_array_and_keeps_a_device_one(dtype):
    host = np.arange(6, dtype=dtype).reshape(2, 3)
    on_device = L.device_array(host, "x", dtype, ndim=2)
    np.testing.assert_array_equal(on_device.get(), host)
    assert L.device_array(on_device, "x", dtype) is on_device
    np.testing.assert_array_equal(L.device_array([[1, 2]], "x", np.int64).get(), [[1, 2]])


def test_device_array_refusals_name_the_argument_and_the_fix():
    with pytest.raises(TypeError, match=r"w has dtype float64; the kernel takes float32: pass w.astype\(np.float32\)"):
        L.device_array(np.zeros(3), "w")
    with pytest.raises(TypeError, match=r"x has dtype float32; the kernel takes float16: convert it on the device"):
        L.device_array(ga.zeros(3, np.float32), "x", np.float16, hint="convert it on the device")
    with pytest.raises(TypeError, match="b must be a GPUArray or a NumPy array, got str"):
        L.device_array("b", "b")
    with pytest.raises(ValueError, match=r"a must be 2-D, got shape \(3,\)"):
        L.device_array(np.zeros(3, np.float32), "a", ndim=2)
    with pytest.raises(ValueError, match="y is not C-contiguous"):
        L.device_array(ga.to_gpu(np.zeros((3, 4), np.float32)).T, "y")


def test_output_makes_or_checks_the_result():
    made = L.output(None, (2, 5), np.float16)
    assert made.shape == (2, 5) and made.dtype == np.float16
    assert L.output(made, (2, 5), np.float16) is made
    with pytest.raises(ValueError, match=r"dw must be a C-contiguous float32 GPUArray of shape \(2, 5\), got float16"):
        L.output(made, (2, 5), name="dw")
    with pytest.raises(TypeError, match="out must be a GPUArray, got ndarray"):
        L.output(np.zeros((2, 5), np.float32), (2, 5))


def _record_streams(monkeypatch):
    seen = []
    original = L.launch

    def recording(fn, grid, block, args, stream=None, shared_size=0):
        seen.append(stream)
        return original(fn, grid, block, args, stream, shared_size)
    monkeypatch.setattr(L, "launch", recording)
    return seen


@pytest.mark.parametrize("call", [
    lambda x, s: ops.relu(x, version=3, stream=s),
    lambda x, s: ops.transpose(x, stream=s),
    lambda x, s: ops.copy2d(x, stream=s),
    lambda x, s: ops.reduce_sum(x, version=6, stream=s),
    lambda x, s: ops.reduce_sum(x, version=7, stream=s),
    lambda x, s: ops.reduce_pass(x, 3, stream=s),
    lambda x, s: ops.softmax_rows(x, stream=s),
    lambda x, s: ops.matmul(x, x.T.copy(), version=7, stream=s),
], ids=["activation", "transpose", "copy2d", "reduce_sum", "reduce_sum v7", "reduce_pass", "softmax", "matmul"])
def test_every_ops_launcher_launches_on_the_stream_it_is_given(monkeypatch, call):
    x = np.arange(64 * 48, dtype=np.float32).reshape(64, 48) / 1000
    stream = backend.driver.Stream()
    seen = _record_streams(monkeypatch)
    on_stream = call(x, stream)
    stream.synchronize()
    assert seen and all(s is stream for s in seen)
    seen.clear()
    np.testing.assert_allclose(on_stream.get(), call(x, None).get(), rtol=1e-6)
    assert seen and all(s is None for s in seen)


def test_convolution_version_3_multiplies_on_the_callers_stream(monkeypatch):
    from gpuedu.ops import conv
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    stream = backend.driver.Stream()
    seen = _record_streams(monkeypatch)
    y = conv.conv2d(x, w, version=3, stream=stream)
    stream.synchronize()
    assert len(seen) == 3 and all(s is stream for s in seen)       # im2col, the GEMM, bias and activation
    np.testing.assert_allclose(y.get(), conv.conv2d(x, w, version=1).get(), rtol=1e-4, atol=1e-5)


# ---- who launches: the op families of gpuedu/ops/ and nothing else ---------------------------------------

import ast  # noqa: E402
import os  # noqa: E402

PACKAGE = os.path.dirname(os.path.abspath(gpuedu.__file__))
#: Where launching is the job: the op families, the launch path itself, and the code that runs, times or
#: observes launches as such (the emulator, the profiler, the benchmarks' timers).
MAY_LAUNCH = ("ops" + os.sep, "launch.py", "emulator" + os.sep, "profiler" + os.sep, "bench" + os.sep)


def direct_launches(source, filename="<source>"):
    """(line, call) of each launch.kernel(...), launch.launch(...) or .prepared_call / .prepared_async_call
    in one module's source, whatever name gpuedu.launch is imported under."""
    tree = ast.parse(source, filename)
    names, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                module = (node.module or "").split(".")
                if alias.name == "launch" and (module[-1:] == ["gpuedu"] or module == [""]):
                    names.add(alias.asname or alias.name)      # from gpuedu import launch, from .. import launch
                if alias.name in ("kernel", "launch") and module[-1:] == ["launch"]:
                    names.add(("bare", alias.asname or alias.name))   # from gpuedu.launch import kernel
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "gpuedu.launch":
                    names.add(alias.asname or "gpuedu.launch")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in ("prepared_call", "prepared_async_call"):
                found.append((node.lineno, f".{func.attr}("))
            elif func.attr in ("kernel", "launch") and ast.unparse(func.value) in names:
                found.append((node.lineno, f"{ast.unparse(func)}("))
        elif isinstance(func, ast.Name) and ("bare", func.id) in names:
            found.append((node.lineno, f"{func.id}("))
    return found


def test_the_launch_check_finds_every_form():
    source = ("from .. import launch as L\nfrom gpuedu import launch\nimport gpuedu.launch\n"
              "from gpuedu.launch import kernel as k\n"
              "L.kernel('a', 'b', 'P')\nlaunch.launch(f, g, b, ())\ngpuedu.launch.kernel('a', 'b')\n"
              "k('a', 'b')\nf.prepared_call(g, b)\nf.prepared_async_call(g, b, s)\n"
              "L.ceil_div(1, 2)\nother.launch()\n")
    assert [line for line, _ in direct_launches(source)] == [5, 6, 7, 8, 9, 10]


def test_only_the_op_families_launch_kernels():
    # Every launch of a course kernel goes through a launcher of gpuedu/ops/; the layers, the loss, the
    # optimizers, the trainer, the exercises, the tools call those launchers, never the launch path itself.
    outside = []
    for dirpath, _, files in os.walk(PACKAGE):
        for filename in files:
            path = os.path.join(dirpath, filename)
            where = os.path.relpath(path, PACKAGE)
            if not filename.endswith(".py") or where.startswith(MAY_LAUNCH):
                continue
            with open(path, encoding="utf-8") as f:
                outside += [f"gpuedu/{where}:{line}: {call}" for line, call in direct_launches(f.read(), path)]
    assert outside == [], ("launch through a launcher of gpuedu/ops/ (one module per op family) instead:\n"
                           + "\n".join(outside))
