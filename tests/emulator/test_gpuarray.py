"""The emulator's pycuda.gpuarray against NumPy, including its errors."""
import numpy as np
import pytest

import gpuedu.emulator.driver as drv
import gpuedu.emulator.gpuarray as gpuarray


pytestmark = pytest.mark.usefixtures("context")


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_round_trip_and_attributes(rng):
    a = rng.standard_normal((3, 5)).astype(np.float32)
    g = gpuarray.to_gpu(a)
    assert g.shape == (3, 5) and g.dtype == np.float32 and g.size == g.mem_size == 15
    assert g.nbytes == 60 and g.ndim == 2 and g.strides == a.strides and len(g) == 3
    assert isinstance(g.gpudata, drv.DeviceAllocation) and g.ptr == int(g.gpudata)
    np.testing.assert_array_equal(g.get(), a)
    out = np.empty_like(a)
    assert g.get(out) is out
    np.testing.assert_array_equal(out, a)
    locked = g.get(pagelocked=True)
    assert isinstance(locked.base, drv.PagelockedHostAllocation)
    np.testing.assert_array_equal(locked, a)
    assert str(g) == str(a) and repr(g) == repr(a)
    # a Fortran-ordered host array keeps its order
    f = gpuarray.to_gpu(np.asfortranarray(a))
    assert f.flags.f_contiguous and not f.flags.c_contiguous
    np.testing.assert_array_equal(f.get(), a)


def test_data_is_on_the_device_not_a_host_copy():
    g = gpuarray.to_gpu(np.arange(4, dtype=np.int32))
    drv.memcpy_htod(int(g.gpudata) + 8, np.int32(99))
    assert g.get().tolist() == [0, 1, 99, 3]


def test_creation_functions():
    assert not gpuarray.zeros((2, 3), np.float32).get().any()
    np.testing.assert_array_equal(gpuarray.ones(4, np.int32).get(), [1, 1, 1, 1])
    e = gpuarray.empty((2, 2), np.float64)
    assert e.shape == (2, 2) and e.dtype == np.float64
    z = gpuarray.zeros_like(e)
    assert z.shape == e.shape and z.dtype == e.dtype and not z.get().any()
    assert gpuarray.empty_like(e, dtype=np.float32).dtype == np.float32
    assert gpuarray.ones_like(e).get().sum() == 4
    np.testing.assert_array_equal(gpuarray.arange(5, dtype=np.float32).get(), np.arange(5, dtype=np.float32))
    np.testing.assert_allclose(gpuarray.arange(1, 2, 0.25, dtype=np.float32).get(), [1, 1.25, 1.5, 1.75])
    assert gpuarray.zeros(0, np.float32).get().shape == (0,)
    g = gpuarray.GPUArray(7, np.float32)
    assert g.shape == (7,)
    with pytest.raises(ValueError, match="negative"):
        gpuarray.empty((-1, 3), np.float32)
    with pytest.raises(TypeError, match="numpy array"):
        gpuarray.to_gpu([1, 2, 3])


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "**"])
def test_arithmetic_matches_numpy(op, rng):
    a = rng.uniform(0.5, 2, 1000).astype(np.float32)
    b = rng.uniform(0.5, 2, 1000).astype(np.float32)
    ga, gb = gpuarray.to_gpu(a), gpuarray.to_gpu(b)
    calc = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
            "/": lambda x, y: x / y, "**": lambda x, y: x ** y}[op]
    for left, right, expected in [(ga, gb, calc(a, b)), (ga, 3.0, calc(a, 3.0)), (2.0, ga, calc(2.0, a))]:
        result = calc(left, right)
        assert isinstance(result, gpuarray.GPUArray) and result.dtype == np.float32
        np.testing.assert_allclose(result.get(), expected, rtol=1e-6)


def test_in_place_and_unary(rng):
    a = rng.standard_normal(257).astype(np.float32)
    b = rng.standard_normal(257).astype(np.float32)
    g = gpuarray.to_gpu(a)
    ptr = g.ptr
    g += gpuarray.to_gpu(b)
    g *= 2
    g -= 1.5
    g /= gpuarray.to_gpu(np.full(257, 4, np.float32))
    assert g.ptr == ptr   # in place: same memory
    expected = ((a + b) * 2 - 1.5) / 4
    np.testing.assert_allclose(g.get(), expected, rtol=1e-6)
    np.testing.assert_array_equal((-g).get(), -expected)
    np.testing.assert_array_equal(abs(g).get(), np.abs(expected))
    h = gpuarray.to_gpu(np.full(3, 2.0, np.float32))
    h **= 3
    np.testing.assert_array_equal(h.get(), [8, 8, 8])


def test_result_dtypes_follow_pycuda():
    i = gpuarray.to_gpu(np.arange(4, dtype=np.int32))
    f = gpuarray.to_gpu(np.ones(4, np.float32))
    d = gpuarray.to_gpu(np.ones(4, np.float64))
    assert (i + f).dtype == np.float64          # as numpy: int32 + float32 -> float64
    assert (f + d).dtype == np.float64
    assert (f * 2.5).dtype == np.float32          # a Python scalar does not widen
    assert (i + 1).dtype == np.int32
    assert (f + np.float64(1)).dtype == np.float64
    assert (i * 10**12).dtype == np.int64          # too big for int32: widened, not wrapped


def test_0d_arrays_broadcast_and_other_shapes_do_not():
    g = gpuarray.to_gpu(np.arange(6, dtype=np.float32).reshape(2, 3))
    s = gpuarray.to_gpu(np.array(10, np.float32))
    assert s.shape == () and s.size == 1
    np.testing.assert_array_equal((g + s).get(), np.arange(6).reshape(2, 3) + 10)
    np.testing.assert_array_equal((s - g).get(), 10 - np.arange(6).reshape(2, 3))
    with pytest.raises(ValueError, match=r"not the same shape: \(2, 3\) and \(3,\)"):
        g + gpuarray.to_gpu(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="not the same shape"):
        g * gpuarray.to_gpu(np.ones((3, 2), np.float32))
    with pytest.raises(ValueError, match="in place"):
        s += g


def test_mixing_with_host_arrays_is_a_clear_error():
    g = gpuarray.to_gpu(np.ones(3, np.float32))
    host = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="to_gpu"):
        g + host
    with pytest.raises(TypeError, match="to_gpu"):
        host + g
    with pytest.raises(TypeError, match="GPUArray and list"):
        g * [1, 2, 3]


def test_comparisons_give_ones_and_zeros():
    a = np.array([1, 5, 3, 7], np.float32)
    b = np.array([2, 5, 1, 9], np.float32)
    ga, gb = gpuarray.to_gpu(a), gpuarray.to_gpu(b)
    for got, expected in [(ga < gb, a < b), (ga <= gb, a <= b), (ga > gb, a > b), (ga >= gb, a >= b),
                          (ga == gb, a == b), (ga != gb, a != b), (ga > 3, a > 3)]:
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.get(), expected.astype(np.float32))
    with pytest.raises(TypeError, match="not hashable"):
        hash(ga)


def test_reductions_return_0d_arrays(rng):
    a = rng.standard_normal(10_001).astype(np.float32)
    b = rng.standard_normal(10_001).astype(np.float32)
    ga, gb = gpuarray.to_gpu(a), gpuarray.to_gpu(b)
    for result, expected in [(gpuarray.sum(ga), a.sum(dtype=np.float64)), (gpuarray.dot(ga, gb), a @ b.astype(np.float64)),
                             (gpuarray.max(ga), a.max()), (gpuarray.min(ga), a.min())]:
        assert isinstance(result, gpuarray.GPUArray) and result.shape == () and result.dtype == np.float32
        assert result.get() == pytest.approx(expected, rel=1e-4, abs=1e-3)
    assert gpuarray.sum(ga, dtype=np.float64).dtype == np.float64
    ints = gpuarray.to_gpu(np.arange(100, dtype=np.int32))
    assert gpuarray.sum(ints).get() == 4950 and gpuarray.sum(ints).dtype == np.int32
    assert bool(gpuarray.any(ints)) and not bool(gpuarray.all(ints))
    with pytest.raises(ValueError, match="not the same shape"):
        gpuarray.dot(ga, gpuarray.to_gpu(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match="empty"):
        gpuarray.max(gpuarray.empty(0, np.float32))
    np.testing.assert_array_equal(gpuarray.minimum(ga, 0).get(), np.minimum(a, 0))
    np.testing.assert_array_equal(gpuarray.maximum(ga, gb).get(), np.maximum(a, b))


def test_slices_are_views_sharing_memory():
    g = gpuarray.to_gpu(np.arange(100, dtype=np.float32))
    part = g[10:20]
    assert part.shape == (10,) and part.ptr == g.ptr + 40 and part.base is g
    np.testing.assert_array_equal(part.get(), np.arange(10, 20))
    part.fill(-1)
    assert g.get()[9:21].tolist() == [9] + [-1] * 10 + [20]
    part += 1
    assert g.get()[10] == 0
    host = g.get()
    np.testing.assert_array_equal(g[::10].get(), host[::10])
    np.testing.assert_array_equal(g[::-1].get(), host[::-1])
    np.testing.assert_array_equal(g[95:5:-7].get(), host[95:5:-7])
    assert g[3:3].size == 0 and g[3:3].get().shape == (0,)
    assert g[-1].get() == 99 and g[5].shape == ()
    m = gpuarray.to_gpu(np.arange(12, dtype=np.int32).reshape(3, 4))
    np.testing.assert_array_equal(m[1].get(), [4, 5, 6, 7])
    np.testing.assert_array_equal(m[:, 2].get(), [2, 6, 10])
    np.testing.assert_array_equal(m[..., 1:3].get(), np.arange(12).reshape(3, 4)[..., 1:3])
    m[0] = np.array([9, 9, 9, 9], np.int32)
    m[2, 1:3] = 0
    assert m.get().tolist() == [[9, 9, 9, 9], [4, 5, 6, 7], [8, 0, 0, 11]]
    with pytest.raises(IndexError, match="out of bounds"):
        g[100]
    with pytest.raises(IndexError, match="too many indices"):
        g[1, 2]
    with pytest.raises(RuntimeError, match="only contiguous arrays"):
        g[::2] + 1


def test_reshape_ravel_view_astype_copy():
    a = np.arange(12, dtype=np.float32)
    g = gpuarray.to_gpu(a)
    r = g.reshape(3, 4)
    assert r.shape == (3, 4) and r.ptr == g.ptr
    np.testing.assert_array_equal(r.get(), a.reshape(3, 4))
    assert g.reshape((2, -1)).shape == (2, 6)
    assert r.ravel().shape == (12,)
    with pytest.raises(ValueError, match="total size"):
        g.reshape(5, 3)
    v = g.view(np.int32)
    np.testing.assert_array_equal(v.get(), a.view(np.int32))
    np.testing.assert_array_equal(r.T.get(), a.reshape(3, 4).T)
    i = g.astype(np.int32)
    assert i.dtype == np.int32 and i.get().tolist() == list(range(12))
    c = g.copy()
    c.fill(0)
    assert g.get().sum() == 66 and c.ptr != g.ptr


def test_set_checks_size_and_dtype():
    g = gpuarray.empty(4, np.float32)
    g.set(np.arange(4, dtype=np.float32))
    assert g.get().tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="same size"):
        g.set(np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="same dtype"):
        g.set(np.zeros(4, np.float64))
    with pytest.raises(TypeError, match="same dtype"):
        g.get(np.zeros(4, np.float64))
    with pytest.warns(UserWarning, match="different shape"):
        g.set(np.zeros((2, 2), np.float32))


def test_freed_memory_is_a_logic_error_not_a_crash():
    g = gpuarray.to_gpu(np.ones(8, np.float32))
    view = g[2:4]
    g.gpudata.free()
    with pytest.raises(drv.LogicError, match="freed"):
        g.get()
    with pytest.raises(drv.LogicError, match="freed"):
        view.get()
    with pytest.raises(drv.LogicError, match="freed"):
        g + 1
    # the process goes on
    assert gpuarray.to_gpu(np.ones(2, np.float32)).get().sum() == 2


def test_pool_allocator(rng):
    from gpuedu.emulator.tools import DeviceMemoryPool
    pool = DeviceMemoryPool()
    a = gpuarray.to_gpu(rng.standard_normal(100).astype(np.float32), allocator=pool.allocate)
    b = a * 2
    assert b.allocator == pool.allocate
    assert pool.active_blocks == 2
    ptr = b.ptr
    del b
    assert pool.active_blocks == 1 and pool.held_blocks == 1
    c = a + 1                       # reuses the block b gave back
    assert c.ptr == ptr
    np.testing.assert_allclose(c.get(), a.get() + 1)
    del c
    pool.free_held()
    assert pool.held_blocks == 0


def test_conditionals_and_complex():
    c = gpuarray.to_gpu(np.array([1, -1, 2, -2], np.float32))
    t = gpuarray.to_gpu(np.ones(4, np.float32))
    e = gpuarray.zeros(4, np.float32)
    assert gpuarray.if_positive(c, t, e).get().tolist() == [1, 0, 1, 0]
    z = gpuarray.to_gpu(np.array([1 + 2j, 3 - 4j], np.complex64))
    assert z.real.get().tolist() == [1, 3] and z.imag.get().tolist() == [2, -4]
    assert abs(z).dtype == np.float32 and abs(z).get().tolist() == [pytest.approx(5 ** 0.5), 5]
    np.testing.assert_array_equal(z.conj().get(), np.conj(z.get()))
    joined = gpuarray.concatenate([t, e])
    assert joined.get().tolist() == [1] * 4 + [0] * 4
    assert gpuarray.stack([t, e]).shape == (2, 4)


def test_cumath_matches_numpy(rng):
    from gpuedu.emulator import cumath
    a = rng.uniform(0.1, 3, 100).astype(np.float32)
    g = gpuarray.to_gpu(a)
    for name, ref in [("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("tanh", np.tanh),
                      ("sin", np.sin), ("floor", np.floor), ("asin", lambda v: np.arcsin(v / 3))]:
        arg = g / 3 if name == "asin" else g
        result = getattr(cumath, name)(arg)
        assert result.dtype == np.float32
        np.testing.assert_allclose(result.get(), ref(a), rtol=1e-6)
    np.testing.assert_allclose(cumath.fmod(g, g * 0 + 1).get(), np.fmod(a, 1), rtol=1e-6)
    frac, whole = cumath.modf(g)
    np.testing.assert_allclose(frac.get() + whole.get(), a)
    m, e = cumath.frexp(g)
    np.testing.assert_allclose(cumath.ldexp(m, e).get(), a)
    with pytest.raises(TypeError, match="to_gpu"):
        cumath.exp(a)


def test_cumath_takes_out_and_stream_by_keyword_or_position(rng):
    from gpuedu.emulator import cumath
    a = rng.uniform(-3, 3, 300)
    g = gpuarray.to_gpu(a)
    stream = drv.Stream()
    for call in (lambda out: cumath.exp(g, out=out), lambda out: cumath.exp(g, out),
                 lambda out: cumath.exp(g, stream=stream, out=out)):
        out = gpuarray.empty_like(g)
        assert call(out) is out
        np.testing.assert_allclose(out.get(), np.exp(a), rtol=1e-12)
    for result in (cumath.exp(g, stream=stream), cumath.exp(g, stream)):
        assert result.shape == a.shape
        np.testing.assert_allclose(result.get(), np.exp(a), rtol=1e-12)
    with pytest.raises(ValueError, match="out must have"):
        cumath.exp(g, out=gpuarray.empty(300, np.float32))


def test_take_gathers_by_index():
    a = gpuarray.to_gpu(np.array([10, 20, 30, 40], np.float32))
    idx = gpuarray.to_gpu(np.array([3, 0, 0, 2], np.int32))
    assert gpuarray.take(a, idx).get().tolist() == [40, 10, 10, 30]
    with pytest.raises(IndexError, match="outside"):
        gpuarray.take(a, gpuarray.to_gpu(np.array([4], np.int32)))


def test_mul_add_reverse_squeeze(rng):
    a = rng.standard_normal(50).astype(np.float32)
    b = rng.standard_normal(50).astype(np.float32)
    ga, gb = gpuarray.to_gpu(a), gpuarray.to_gpu(b)
    np.testing.assert_allclose(ga.mul_add(2.0, gb, -0.5).get(), 2 * a - 0.5 * b, rtol=1e-6)
    np.testing.assert_array_equal(ga.reverse().get(), a[::-1])
    m = gpuarray.to_gpu(np.arange(6, dtype=np.int32).reshape(1, 6, 1))
    assert m.squeeze().shape == (6,) and m.squeeze().get().tolist() == list(range(6))
    with pytest.raises(ValueError, match="not the same shape"):
        ga.mul_add(1.0, gpuarray.zeros(3, np.float32), 1.0)


# --------------------------------------------------------------------------- logical operations, vector types

def test_logical_and_or_not_match_numpy_with_arrays_and_scalars(rng):
    x = rng.random((10, 4))
    x[::3] = 0.0
    y = rng.random((10, 4))
    y[1::2] = 0.0
    xg, yg = gpuarray.to_gpu(x), gpuarray.to_gpu(y)
    for name in ("logical_and", "logical_or"):
        op, expected = getattr(gpuarray, name), getattr(np, name)
        result = op(xg, yg)
        assert result.dtype == np.bool_ and result.shape == x.shape
        np.testing.assert_array_equal(result.get(), expected(x, y))
        np.testing.assert_array_equal(op(xg, 0.0).get(), expected(x, 0.0))
        np.testing.assert_array_equal(op(1.0, xg).get(), expected(1.0, x))
    np.testing.assert_array_equal(gpuarray.logical_not(xg).get(), np.logical_not(x))
    out = gpuarray.empty(x.shape, np.bool_)
    assert gpuarray.logical_and(xg, yg, out) is out
    np.testing.assert_array_equal(out.get(), np.logical_and(x, y))
    with pytest.raises(NotImplementedError, match="broadcasting"):
        gpuarray.logical_or(xg, gpuarray.zeros(4, np.float64))


def test_vector_types_are_structured_dtypes_kernels_read_by_field():
    from gpuedu.emulator.elementwise import ElementwiseKernel
    assert gpuarray.vec.float4.names == ("x", "y", "z", "w") and gpuarray.vec.float4.itemsize == 16
    assert gpuarray.vec.double2.itemsize == 16 and gpuarray.vec.char3.itemsize == 3
    filled = gpuarray.GPUArray(7, dtype=gpuarray.vec.float3).fill(gpuarray.vec.make_float3(1.5, -2.0, 3.0))
    assert filled.get().dtype == gpuarray.vec.float3
    assert filled.get().tolist() == [(1.5, -2.0, 3.0)] * 7
    host = np.zeros(50, gpuarray.vec.float4)
    for field, scale in zip("xyzw", (1.0, 0.5, -2.0, 3.0)):
        host[field] = np.arange(50) * scale
    out = gpuarray.empty(50, np.float32)
    ElementwiseKernel("float4 *v, float *out", "out[i] = v[i].x + v[i].y * v[i].z - v[i].w")(
        gpuarray.to_gpu(host), out)
    np.testing.assert_allclose(out.get(), host["x"] + host["y"] * host["z"] - host["w"], rtol=1e-6)
    with pytest.raises(TypeError, match="takes 2 values"):
        gpuarray.vec.make_int2(1)
