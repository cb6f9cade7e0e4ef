"""conv2d.cu against the float64 references of gpuedu.reference: every version, the gradients, max pooling,
im2col, and the errors a learner can trigger."""
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

import gpuedu
from gpuedu import kernels
from gpuedu.ops import conv
from gpuedu import reference as ref

backend = gpuedu.setup(verbose=False)

# (N, C, H, W, K, R, S, stride, padding): odd sizes that are not multiples of the 16-wide tiles,
# stride 1 and 2, padding 0 and 1, batch 1 and more, a non-square kernel.
SHAPES = [
    (1, 1, 7, 7, 1, 3, 3, 1, 0),
    (2, 3, 9, 11, 5, 3, 3, 1, 1),
    (1, 2, 8, 7, 4, 3, 3, 2, 0),
    (3, 2, 19, 17, 3, 3, 2, 2, 1),
    (2, 4, 18, 21, 17, 5, 5, 1, 1),
]


def make(shape, seed=0):
    N, C, H, W, K, R, S, stride, pad = shape
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((N, C, H, W)).astype(np.float32),
            rng.standard_normal((K, C, R, S)).astype(np.float32),
            rng.standard_normal(K).astype(np.float32), stride, pad)


def tol(w):
    """float32 sums of C*R*S products of standard normals: an error of a few ulps of sqrt(CRS)."""
    return 1e-5 * np.sqrt(w[0].size) * 10


@pytest.mark.parametrize("version", conv.VERSIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_conv2d_versions_match_the_float64_reference(version, shape):
    x, w, b, stride, pad = make(shape)
    for bias, relu in ((None, False), (b, True)):
        got = conv.conv2d(x, w, bias, stride, pad, relu=relu, version=version).get()
        want = ref.conv2d(x, w, bias, stride, pad, relu=relu)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=tol(w), rtol=1e-5)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_conv2d_gradients_match_the_float64_reference(shape):
    x, w, _, stride, pad = make(shape, seed=1)
    dy = np.random.default_rng(2).standard_normal(ref.conv2d(x, w, None, stride, pad).shape).astype(np.float32)
    dx, dw, db = conv.conv2d_backward(dy, x, w, stride, pad)
    rx, rw, rb = ref.conv2d_backward(dy, x, w, stride, pad)
    np.testing.assert_allclose(dx.get(), rx, atol=1e-4, rtol=1e-5)
    np.testing.assert_allclose(dw.get(), rw, atol=1e-4 * np.sqrt(dy[:, 0].size), rtol=1e-5)
    np.testing.assert_allclose(db.get(), rb, atol=1e-4 * np.sqrt(dy[:, 0].size), rtol=1e-5)
    none, dw2, _ = conv.conv2d_backward(dy, x, w, stride, pad, need_input_grad=False)
    assert none is None and np.array_equal(dw2.get(), dw.get())


def test_reference_gradients_match_finite_differences():
    """The float64 reference itself: dL/dx, dL/dw, dL/db of L = sum(g * conv2d) by central differences."""
    x, w, b, stride, pad = make((2, 2, 6, 5, 3, 3, 3, 2, 1), seed=3)
    x, w, b = x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)
    g = np.random.default_rng(4).standard_normal(ref.conv2d(x, w, b, stride, pad).shape)
    dx, dw, db = ref.conv2d_backward(g, x, w, stride, pad)
    from gpuedu.nn.reference import numerical_gradient, relative_error
    for analytic, array in ((dx, x), (dw, w), (db, b)):
        numeric = numerical_gradient(lambda: float(np.sum(g * ref.conv2d(x, w, b, stride, pad))), array)
        assert relative_error(analytic, numeric) < 1e-6


def test_im2col_matches_the_reference_and_makes_conv_a_gemm():
    x, w, _, stride, pad = make((2, 3, 7, 6, 4, 3, 2, 2, 1))
    cols = conv.im2col(x, 3, 2, stride, pad).get()
    np.testing.assert_array_equal(cols, ref.im2col(x, 3, 2, stride, pad).astype(np.float32))
    y = (w.reshape(4, -1).astype(np.float64) @ cols).reshape(4, 2, *ref.conv2d(x, w, None, stride, pad).shape[2:])
    np.testing.assert_allclose(y.transpose(1, 0, 2, 3), ref.conv2d(x, w, None, stride, pad), atol=1e-5)
    assert conv.im2col_bytes(x.shape, w.shape, stride, pad) == (cols.nbytes, x.nbytes)


@pytest.mark.parametrize("ksize,stride", [(2, None), (3, 2), (2, 1), (3, 3)])
@pytest.mark.parametrize("hw", [(8, 8), (7, 9)])
def test_maxpool_forward_and_backward(ksize, stride, hw):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, *hw)).astype(np.float32)
    y, arg = conv.maxpool2d(x, ksize, stride)
    want, want_arg = ref.maxpool2d(x, ksize, stride)
    np.testing.assert_array_equal(y.get(), want.astype(np.float32))
    np.testing.assert_array_equal(arg.get(), want_arg)
    dy = rng.standard_normal(want.shape).astype(np.float32)
    dx = conv.maxpool2d_backward(dy, arg, x.shape, ksize, stride).get()
    np.testing.assert_allclose(dx, ref.maxpool2d_backward(dy, want_arg, x.shape), atol=1e-6)


def test_relu_grad_masks_where_the_output_was_clipped():
    y = np.array([[0.0, 1.5, 0.0, 2.0]], np.float32)
    dy = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    np.testing.assert_array_equal(conv.relu_grad(dy, y).get(), [[0.0, 2.0, 0.0, 4.0]])


def test_version_2_filter_bank_is_reloaded_for_every_call():
    """Version 2 keeps the filters in one __constant__ array: two layers in turn must not see each other's."""
    x, w1, _, s, p = make((1, 2, 9, 9, 3, 3, 3, 1, 1), seed=6)
    _, w2, _, _, _ = make((1, 2, 9, 9, 3, 3, 3, 1, 1), seed=7)
    for w in (w1, w2, w1):
        np.testing.assert_allclose(conv.conv2d(x, w, None, s, p, version=2).get(), ref.conv2d(x, w, None, s, p),
                                   atol=1e-4)


@pytest.mark.parametrize("call,match", [
    (lambda: conv.conv2d(np.zeros((1, 3, 8, 8), np.float32), np.zeros((4, 2, 3, 3), np.float32)),
     "x has 3 channels but the filters expect 2"),
    (lambda: conv.conv2d(np.zeros((1, 1, 4, 4), np.float32), np.zeros((1, 1, 5, 5), np.float32)),
     "does not fit in the 4x4 input padded by 0"),
    (lambda: conv.conv2d(np.zeros((3, 8, 8), np.float32), np.zeros((1, 3, 3, 3), np.float32)),
     "reshape"),
    (lambda: conv.conv2d(np.zeros((1, 1, 8, 8), np.float32), np.zeros((1, 1, 3, 3), np.float32), stride=0),
     "stride must be at least 1"),
    (lambda: conv.conv2d(np.zeros((1, 1, 8, 8), np.float32), np.zeros((1, 1, 3, 3), np.float32), padding=-1),
     "padding must be at least 0"),
    (lambda: conv.conv2d(np.zeros((1, 1, 8, 8), np.float32), np.zeros((2, 1, 3, 3), np.float32),
                         np.zeros(3, np.float32)), "one bias per filter"),
    (lambda: conv.conv2d(np.zeros((1, 1, 8, 8), np.float32), np.zeros((1, 1, 3, 3), np.float32), version=5),
     "versions 1, 2, 3, 4"),
    (lambda: conv.conv2d(np.zeros((1, 1, 20, 20), np.float32), np.zeros((1, 1, 9, 9), np.float32), version=2),
     "use version 1, 3 or 4"),
    (lambda: conv.conv2d(np.zeros((1, 64, 8, 8), np.float32), np.zeros((64, 64, 3, 3), np.float32), version=2),
     "constant memory"),
    (lambda: conv.conv2d(np.zeros((1, 1, 8, 8)), np.zeros((1, 1, 3, 3), np.float32)), "astype"),
    (lambda: conv.maxpool2d(np.zeros((1, 1, 3, 3), np.float32), 4), "does not fit"),
])
def test_bad_calls_raise_errors_that_say_what_to_change(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_padding_lets_a_kernel_larger_than_the_image_fit():
    x, w = np.ones((1, 1, 2, 2), np.float32), np.ones((1, 1, 3, 3), np.float32)
    np.testing.assert_allclose(conv.conv2d(x, w, padding=1).get(), ref.conv2d(x, w, padding=1))


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_conv2d_cu_compiles_with_nvcc(arch):
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([shutil.which("nvcc"), "-cubin", f"-arch={arch}", "-I", kernels.DIR,
                               "-o", os.path.join(tmp, "conv2d.cubin"), kernels.path("conv2d")],
                              capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("version", conv.VERSIONS)
def test_every_launcher_takes_a_stream(version):
    x, w, b, stride, pad = make(SHAPES[1])
    stream = backend.driver.Stream()
    y = conv.conv2d(x, w, b, stride, pad, relu=True, version=version, stream=stream)
    dy = conv.relu_grad(y, y, stream=stream)
    dx, dw, db = conv.conv2d_backward(dy, x, w, stride, pad, stream=stream)
    p, arg = conv.maxpool2d(y, 2, stream=stream)
    dp = conv.maxpool2d_backward(p, arg, tuple(y.shape), 2, stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(y.get(), ref.conv2d(x, w, b, stride, pad, relu=True), atol=tol(w), rtol=1e-5)
    rx, rw, _ = ref.conv2d_backward(dy.get(), x, w, stride, pad)
    np.testing.assert_allclose(dx.get(), rx, atol=1e-3)
    np.testing.assert_allclose(dp.get(), ref.maxpool2d_backward(p.get(), arg.get(), tuple(y.shape)), atol=1e-6)
