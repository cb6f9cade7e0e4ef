"""The launchers' contract: what they accept, what they return, and the errors for bad input."""
import numpy as np
import pytest

import gpuedu
from gpuedu import ops

backend = gpuedu.setup(verbose=False)
gpuarray = backend.gpuarray

X = np.arange(12, dtype=np.float32).reshape(3, 4) - 5


def test_ceil_div():
    assert [ops.ceil_div(n, 4) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]


def test_numpy_and_gpuarray_inputs_give_the_same_gpuarray():
    from_host = ops.relu(X)
    from_device = ops.relu(gpuarray.to_gpu(X))
    assert hasattr(from_host, "gpudata") and from_host.shape == X.shape
    np.testing.assert_array_equal(from_host.get(), from_device.get())


def test_out_argument_is_used_and_returned():
    out = gpuarray.empty((4, 3), np.float32)
    assert ops.transpose(X, out=out) is out
    np.testing.assert_array_equal(out.get(), X.T)
    with pytest.raises(ValueError, match=r"shape \(4, 3\)"):
        ops.transpose(X, out=gpuarray.empty((3, 4), np.float32))


def test_wrong_dtype_says_how_to_convert():
    with pytest.raises(TypeError, match=r"float64.*astype\(np.float32\)"):
        ops.relu(X.astype(np.float64))
    with pytest.raises(TypeError, match="int32"):
        ops.reduce_sum(gpuarray.to_gpu(np.arange(5, dtype=np.int32)))
    with pytest.raises(TypeError, match="GPUArray or a NumPy array"):
        ops.relu("not an array")


def test_non_contiguous_host_input_is_copied_but_device_views_are_refused():
    np.testing.assert_array_equal(ops.relu(X.T).get(), np.maximum(X.T, 0))
    transposed_view = gpuarray.to_gpu(X).T          # a GPUArray view with swapped strides
    assert not transposed_view.flags.c_contiguous
    with pytest.raises(ValueError, match="not C-contiguous"):
        ops.relu(transposed_view)


def test_float4_versions_refuse_misaligned_views():
    whole = gpuarray.to_gpu(np.arange(64, dtype=np.float32))
    shifted = whole[1:33]                      # contiguous, but 4 bytes past an aligned address
    np.testing.assert_array_equal(ops.relu(shifted, version=2).get(), np.arange(1, 33, dtype=np.float32))
    with pytest.raises(ValueError, match="16-byte aligned"):
        ops.relu(shifted, version=3)
    with pytest.raises(ValueError, match="16-byte aligned"):
        ops.matmul(shifted.reshape(4, 8), np.ones((8, 4), np.float32), version=6)
    with pytest.raises(ValueError, match="matmul version 7 .* 16-byte aligned"):
        ops.matmul(shifted.reshape(4, 8), np.ones((8, 4), np.float32), version=7)


def test_shape_errors():
    with pytest.raises(ValueError, match="inner dimensions differ: a is 3x4, b is 3x4"):
        ops.matmul(X, X)
    with pytest.raises(ValueError, match="must be 2-D"):
        ops.softmax_rows(X.ravel())
    with pytest.raises(ValueError, match="must be 2-D"):
        ops.transpose(X.reshape(3, 2, 2))


def test_version_and_block_errors():
    with pytest.raises(ValueError, match="reduce_sum has versions 1, 2, 3, 4, 5, 6, 7; got version=9"):
        ops.reduce_sum(X, version=9)
    with pytest.raises(ValueError, match="power of two"):
        ops.reduce_sum(X, version=3, block_size=96)
    with pytest.raises(ValueError, match="multiple of 32"):
        ops.reduce_sum(X, version=6, block_size=100)
    with pytest.raises(ValueError, match=r"\[2, 1024\]"):
        ops.reduce_sum(X, version=1, block_size=1)
    with pytest.raises(ValueError, match=r"\[1, 1024\]"):
        ops.relu(X, block_size=2048)
    with pytest.raises(TypeError, match="must be an int"):
        ops.relu(X, block_size=256.0)
    with pytest.raises(ValueError, match="1..32"):
        ops.matmul(X, X.T, version=1, block_size=64)
    with pytest.raises(ValueError, match="tile must be 8, 16 or 32"):
        ops.matmul(X, X.T, version=3, tile=12)
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        ops.activation(X, "swish")
    with pytest.raises(ValueError, match="multiple of 32"):
        ops.softmax_rows(X, version=3, block_size=48)


def test_empty_inputs_launch_nothing_and_return_the_right_shape():
    empty = np.zeros((0, 5), np.float32)
    assert ops.relu(empty).shape == (0, 5)
    assert ops.transpose(empty).shape == (5, 0)
    assert ops.softmax_rows(empty).shape == (0, 5)
    assert ops.matmul(empty, np.zeros((5, 2), np.float32)).shape == (0, 2)


def test_process_survives_bad_calls():
    # after every error above, a good call still works (nothing left half-launched)
    for bad in (lambda: ops.relu(X.astype(np.int64)), lambda: ops.matmul(X, X)):
        with pytest.raises((TypeError, ValueError)):
            bad()
    assert ops.reduce_sum(X).get()[0] == X.sum()


def test_matmul_flops():
    assert ops.matmul_flops(2, 3, 4) == 48


def _count_allocations(monkeypatch):
    """Count every device allocation the backend's gpuarray and driver make from now on."""
    calls = []
    for module, names in ((gpuarray, ("empty", "zeros", "to_gpu", "empty_like", "zeros_like")),
                          (backend.driver, ("mem_alloc",))):
        for name in names:
            original = getattr(module, name)

            def counted(*args, _original=original, _name=name, **kwargs):
                calls.append(_name)
                return _original(*args, **kwargs)
            monkeypatch.setattr(module, name, counted)
    return calls


@pytest.mark.parametrize("version", ops.REDUCE_VERSIONS)
def test_repeated_reduce_sum_with_out_and_workspace_allocates_nothing(monkeypatch, version):
    x = gpuarray.to_gpu(np.arange(70_001, dtype=np.float32) % 7)
    out = gpuarray.empty((1,), np.float32)
    workspace = ops.reduce_workspace(x.size, version)
    calls = _count_allocations(monkeypatch)
    ops.reduce_sum(x, version=version)          # the plain call allocates, so the counting works
    assert calls
    del calls[:]
    for _ in range(3):
        ops.reduce_sum(x, version=version, out=out, workspace=workspace)
    assert calls == []
    assert out.get()[0] == float((np.arange(70_001) % 7).sum())


def test_reduce_workspace_size_and_bad_workspaces():
    assert ops.reduce_workspace_size(10_000, 3, 256) == 40            # 40 partials, then 1 into out
    assert ops.reduce_workspace_size(100_000, 6) == 392 + 4            # 391 -> 2 -> 1, 16-byte aligned
    assert ops.reduce_workspace_size(10_000, 7) == 40 + 1              # 40 blocks' partials, then the ticket
    assert ops.reduce_workspace_size(1, 6) == 0                        # one pass, one value
    x = gpuarray.to_gpu(np.ones(100_000, np.float32))
    with pytest.raises(ValueError, match=r"at least 396 elements.*ops.reduce_workspace\(100000, 6, 256\)"):
        ops.reduce_sum(x, version=6, workspace=gpuarray.empty((3,), np.float32))
    with pytest.raises(ValueError, match="float32"):
        ops.reduce_sum(x, version=3, workspace=gpuarray.empty((1000,), np.float64))
    with pytest.raises(TypeError, match="workspace must be a GPUArray"):
        ops.reduce_sum(x, version=3, workspace=np.zeros(1000, np.float32))
    with pytest.raises(ValueError, match=r"out must be .* shape \(1,\)"):
        ops.reduce_sum(x, out=gpuarray.empty((2,), np.float32))
    assert ops.reduce_sum(x, version=6).get()[0] == 100_000     # and the process goes on


def test_version_7_is_one_launch_whose_ticket_comes_back_to_zero(monkeypatch):
    from gpuedu import launch
    x = gpuarray.to_gpu((np.arange(300_007, dtype=np.float32) % 13) - 6)
    workspace = ops.reduce_workspace(x.size, 7)
    launches = []
    original = launch.launch
    monkeypatch.setattr(launch, "launch", lambda fn, *a, **k: (launches.append(fn), original(fn, *a, **k))[1])
    sums = [ops.reduce_sum(x, version=7, workspace=workspace).get()[0] for _ in range(3)]
    assert len(launches) == 3                                    # one launch a sum: no zeroing, no second pass
    assert sums == [float(((np.arange(300_007) % 13) - 6).sum())] * 3
    # The ticket (the float slot after the partial sums, read as bits) is 0 again after each launch.
    blocks = min(-(-x.size // 256), ops.REDUCE_MAX_BLOCKS)
    assert workspace.get()[4 * -(-blocks // 4):].view(np.uint32).tolist() == [0]


def test_version_7_refuses_a_workspace_whose_ticket_it_cannot_vouch_for():
    x = gpuarray.to_gpu(np.ones(100_000, np.float32))
    size = ops.reduce_workspace_size(x.size, 7)
    for other in (gpuarray.zeros((size,), np.float32), ops.reduce_workspace(x.size, 6)):
        with pytest.raises(ValueError, match=r"ticket that must start at 0.*ops.reduce_workspace\(100000, 7, 256\)"):
            ops.reduce_sum(x, version=7, workspace=other)
    assert ops.reduce_sum(x, version=7, workspace=ops.reduce_workspace(x.size, 7)).get()[0] == 100_000


def test_the_package_only_gathers_the_families_names():
    # gpuedu.ops is an index: every launcher, ladder and reference lives in its family's module
    import ast
    import os
    with open(os.path.join(os.path.dirname(ops.__file__), "__init__.py"), encoding="utf-8") as f:
        body = ast.parse(f.read()).body
    code = [type(node).__name__ for node in body[1:] if not isinstance(node, (ast.Import, ast.ImportFrom))]
    assert isinstance(body[0], ast.Expr) and code == []
    assert ops.relu is ops.elementwise.relu and ops.MATMUL_VERSIONS is ops.gemm.VERSIONS
    assert ops.REDUCE_VERSIONS is ops.reduction.VERSIONS and ops.conv.VERSIONS == (1, 2, 3, 4)
