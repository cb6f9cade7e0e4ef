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
