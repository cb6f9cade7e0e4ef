"""The loss scaler's state machine: its one-thread kernel, driven from the host step by step (the
device unscale is in test_amp_training.py, the trainer's on-device use in test_step_sync.py)."""
import numpy as np
import pytest

from gpuedu.nn.amp import LossScaler


def run(scaler, pattern):
    """Feed update() a string of steps: 'o' = overflow, '.' = good; return (applied flags, scales)."""
    applied, scales = [], []
    for c in pattern:
        applied.append(scaler.update(c == "o"))
        scales.append(scaler.scale)
    return applied, scales


def test_overflow_skips_the_step_and_halves_the_scale():
    s = LossScaler(init_scale=1024.0, growth_interval=3)
    applied, scales = run(s, "oo")
    assert applied == [False, False]
    assert scales == [512.0, 256.0]
    assert (s.steps, s.skipped, s.good_steps) == (2, 2, 0)


def test_scale_doubles_after_a_run_of_good_steps_and_the_run_restarts():
    s = LossScaler(init_scale=8.0, growth_interval=3)
    applied, scales = run(s, "......")
    assert all(applied)
    assert scales == [8.0, 8.0, 16.0, 16.0, 16.0, 32.0]


def test_an_overflow_resets_the_run_of_good_steps():
    s = LossScaler(init_scale=64.0, growth_interval=3)
    applied, scales = run(s, "..o...")
    assert applied == [True, True, False, True, True, True]
    # two good steps, then an overflow: halve, and the count starts again from zero
    assert scales == [64.0, 64.0, 32.0, 32.0, 32.0, 64.0]
    assert s.skipped == 1


def test_static_scaler_keeps_its_scale_but_still_skips_overflowing_steps():
    s = LossScaler(init_scale=128.0, dynamic=False, growth_interval=1)
    applied, scales = run(s, ".o..")
    assert applied == [True, False, True, True]
    assert scales == [128.0] * 4


def test_scale_is_clamped_to_its_bounds():
    s = LossScaler(init_scale=2.0, min_scale=1.0, max_scale=4.0, growth_interval=1)
    _, scales = run(s, "ooo...")
    assert scales == [1.0, 1.0, 1.0, 2.0, 4.0, 4.0]


def written_rules(pattern, init_scale, dynamic=True, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                  min_scale=2.0 ** -24, max_scale=2.0 ** 24):
    """The rules as the docstring states them, in float32 like the device's S: (applied, scale) per step."""
    f32 = np.float32
    scale, good, out = f32(init_scale), 0, []
    for c in pattern:
        if c == "o":
            good = 0
            if dynamic:
                scale = max(f32(scale * f32(backoff_factor)), f32(min_scale))
        else:
            good += 1
            if dynamic and good >= growth_interval:
                scale, good = min(f32(scale * f32(growth_factor)), f32(max_scale)), 0
        out.append((c != "o", float(scale)))
    return out


@pytest.mark.parametrize("settings", [
    dict(init_scale=3.0, growth_factor=1.5, backoff_factor=0.25, growth_interval=3, min_scale=0.75, max_scale=20.0),
    dict(init_scale=2.0 ** 10, growth_interval=2, min_scale=2.0 ** 8, max_scale=2.0 ** 12),
    dict(init_scale=7.0, dynamic=False, growth_interval=1),
])
def test_the_kernel_follows_the_written_rules_over_a_long_random_sequence(settings):
    draws = np.random.default_rng(0).choice(["o", "."], size=120, p=[0.3, 0.7])
    pattern = "".join(draws[:60]) + "." * 30 + "".join(draws[60:])     # a long good run reaches max_scale
    s = LossScaler(**settings)
    applied, scales = run(s, pattern)
    expected = written_rules(pattern, **settings)
    assert list(zip(applied, scales)) == expected
    assert s.skipped == pattern.count("o") and s.steps == len(pattern)
    # both clamps were reached where the scale may move
    if settings.get("dynamic", True):
        assert min(scales) == settings["min_scale"] and max(scales) == settings["max_scale"]


def test_scales_keeps_the_scale_of_the_last_history_steps_in_order():
    s = LossScaler(init_scale=1.0, growth_interval=1, history=4)
    run(s, "......")
    # the scale each update was called with: 1, 2, 4, ... 32; the last four of them, oldest first
    assert s.scales == [4.0, 8.0, 16.0, 32.0]
    assert LossScaler(history=4).scales == []


@pytest.mark.parametrize("kwargs, message", [
    (dict(init_scale=0.0), "init_scale"),
    (dict(init_scale=float("inf")), "init_scale"),
    (dict(growth_factor=1.0), "growth_factor"),
    (dict(backoff_factor=1.5), "backoff_factor"),
    (dict(growth_interval=0), "growth_interval"),
    (dict(growth_interval=2.5), "growth_interval"),
    (dict(init_scale=2.0 ** 30), "must lie in"),
    (dict(max_scale=1e39), "max_scale"),
    (dict(history=0), "history"),
])
def test_bad_settings_are_refused_with_the_name_of_the_setting(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LossScaler(**kwargs)


# ---- every tensor in one launch ----------------------------------------------------------------------
def _launches(monkeypatch):
    from gpuedu import launch
    names = []
    original = launch.launch
    monkeypatch.setattr(launch, "launch", lambda fn, *a, **k: (names.append(launch.function_name(fn)),
                                                               original(fn, *a, **k))[1])
    return names


def test_the_multi_tensor_unscale_and_refresh_give_the_per_tensor_kernels_bits(monkeypatch):
    import pycuda.gpuarray as ga
    from gpuedu.ops import amp as ops_amp
    from gpuedu.ops.optim import TensorTable, skip_pointer
    rng = np.random.default_rng(3)
    sizes = (1, 255, 256, 257, 4099)                      # tensors that end mid-block and across blocks
    g16 = [ga.to_gpu((rng.standard_normal(n) * 1000).astype(np.float16)) for n in sizes]
    scale = ga.to_gpu(np.array([1024.0], np.float32))
    one = [ga.empty(n, np.float32) for n in sizes]
    every = [ga.empty(n, np.float32) for n in sizes]
    flags = ga.zeros(2, np.int32)
    for grad, half in zip(one, g16):
        ops_amp.unscale(grad, flags[0:1], half, scale)
    names = _launches(monkeypatch)
    ops_amp.unscale_multi(TensorTable(), list(zip(every, g16)), flags[1:2], scale)
    assert names == ["unscale_half_to_float_multi"]
    for a, b in zip(one, every):
        np.testing.assert_array_equal(a.get(), b.get())
    assert flags.get().tolist() == [0, 0]
    g16[3][7:8] = np.array([np.inf], np.float16)          # one Inf in one tensor raises the flag
    ops_amp.unscale_multi(TensorTable(), list(zip(every, g16)), flags[1:2], scale)
    assert flags.get()[1] == 1
    masters = [ga.to_gpu(rng.standard_normal(n).astype(np.float32)) for n in sizes]
    copies = [ga.to_gpu(np.zeros(n, np.float16)) for n in sizes]
    skip = ga.to_gpu(np.array([1], np.int32))
    ops_amp.refresh_half_copy_multi(TensorTable(), list(zip(copies, masters)), skip_pointer(skip))
    assert all(not c.get().any() for c in copies)        # a skipped step leaves the copies alone
    ops_amp.refresh_half_copy_multi(TensorTable(), list(zip(copies, masters)), skip_pointer(None))
    for c, m in zip(copies, masters):
        np.testing.assert_array_equal(c.get(), m.get().astype(np.float16))
    with pytest.raises(ValueError, match="float16 copy, float32 master"):
        ops_amp.refresh_half_copy_multi(TensorTable(), [(masters[0], copies[0])], skip_pointer(None))


def test_a_mixed_precision_step_unscales_and_refreshes_every_tensor_in_one_launch_each(monkeypatch):
    import pycuda.gpuarray as ga
    from gpuedu import nn
    from gpuedu.nn import amp
    model = amp.MixedPrecisionMLP(nn.mlp([16, 32, 32, 4], activation="relu", seed=0))
    trainer = amp.MixedPrecisionTrainer(model, nn.SGD(model.parameters(), lr=0.1, momentum=0.9))
    rng = np.random.default_rng(0)
    x = ga.to_gpu(rng.standard_normal((8, 16)).astype(np.float32))
    y = ga.to_gpu(rng.integers(0, 4, 8).astype(np.int32))
    trainer.step(x, y)
    names = _launches(monkeypatch)
    trainer.step(x, y)
    assert names.count("unscale_half_to_float_multi") == 1 and names.count("refresh_half_copy_multi") == 1
    assert "unscale_half_to_float" not in names and "refresh_half_copy" not in names
    # the whole step: 3 layers' forward (GEMM, bias, ReLU) and backward, the loss and the bookkeeping
    assert len(names) == 25, names
