"""The optimizers' two kernel versions (one launch per tensor, one launch for all) and the skip flag."""
import numpy as np
import pytest

import gpuedu
from gpuedu import nn

backend = gpuedu.setup(verbose=False)
ga = backend.gpuarray

# Tensor sizes off every block boundary, one of a single element, so the offsets table is exercised.
SHAPES = [(37, 300), (300,), (300, 5), (1,), (5,)]


def parameters(seed=0):
    rng = np.random.default_rng(seed)
    return [nn.Parameter(f"p{i}", rng.standard_normal(shape).astype(np.float32)) for i, shape in enumerate(SHAPES)]


def set_gradients(params, step):
    rng = np.random.default_rng(100 + step)
    for p in params:
        p.grad.set(rng.standard_normal(p.shape).astype(np.float32))


def make(kind, params, multi_tensor):
    if kind == "sgd":
        return nn.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-3, multi_tensor=multi_tensor)
    return nn.Adam(params, lr=1e-2, weight_decay=1e-3, multi_tensor=multi_tensor)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_one_launch_for_all_tensors_gives_the_same_bits_as_one_per_tensor(kind):
    one, each = parameters(), parameters()
    opt_one, opt_each = make(kind, one, True), make(kind, each, False)
    skip = ga.zeros(1, np.int32)
    for step in range(6):
        skip.fill(1 if step in (2, 3) else 0)          # two steps skipped on the device
        set_gradients(one, step)
        set_gradients(each, step)
        opt_one.step(skip=skip)
        opt_each.step(skip=skip)
    for a, b in zip(one, each):
        assert np.array_equal(a.numpy(), b.numpy()), a.name
    for sa, sb in zip(opt_one.state, opt_each.state):
        assert all(np.array_equal(sa[k].get(), sb[k].get()) for k in sa)
    if kind == "adam":
        assert opt_one.t == opt_each.t == 4            # the skipped steps did not count


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_a_set_skip_flag_leaves_parameters_and_state_untouched(kind):
    params = parameters()
    opt = make(kind, params, True)
    set_gradients(params, 0)
    opt.step()                                          # moments and velocity become nonzero
    before = [p.numpy() for p in params], [{k: v.get() for k, v in s.items()} for s in opt.state]
    set_gradients(params, 1)
    opt.step(skip=ga.to_gpu(np.array([1], np.int32)))
    assert all(np.array_equal(b, p.numpy()) for b, p in zip(before[0], params))
    assert all(np.array_equal(b[k], s[k].get()) for b, s in zip(before[1], opt.state) for k in s)
    opt.step(skip=ga.to_gpu(np.array([0], np.int32)))  # a clear flag: the step happens
    assert not np.array_equal(before[0][0], params[0].numpy())


def test_sgd_matches_the_rule_written_in_numpy():
    params = parameters()
    opt = nn.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-3)
    w = [p.numpy() for p in params]
    v = [np.zeros_like(x) for x in w]
    for step in range(3):
        set_gradients(params, step)
        g = [p.grad.get() for p in params]
        opt.step()
        for i in range(len(w)):
            v[i] = np.float32(0.9) * v[i] + (g[i] + np.float32(1e-3) * w[i])
            w[i] = w[i] - np.float32(0.05) * v[i]
    for p, expected in zip(params, w):
        assert np.allclose(p.numpy(), expected, rtol=1e-6, atol=1e-7), p.name


def test_the_table_follows_a_parameter_whose_array_was_replaced():
    params = parameters()
    opt = nn.SGD(params, lr=0.5)
    set_gradients(params, 0)
    opt.step()
    params[1].value = ga.to_gpu(np.zeros(SHAPES[1], np.float32))   # a new array at a new address
    params[1].grad.set(np.ones(SHAPES[1], np.float32))
    opt.step()
    assert np.array_equal(params[1].numpy(), np.full(SHAPES[1], -0.5, np.float32))


def test_a_bad_skip_flag_is_refused_with_what_it_must_be():
    opt = nn.SGD(parameters(), lr=0.1)
    with pytest.raises(TypeError, match="1-element int32 GPUArray"):
        opt.step(skip=ga.zeros(1, np.float32))
    with pytest.raises(TypeError, match="1-element int32 GPUArray"):
        opt.step(skip=True)
