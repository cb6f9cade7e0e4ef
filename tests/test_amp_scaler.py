"""The loss scaler's state machine (host logic only; the device unscale is in test_amp_training.py)."""
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


@pytest.mark.parametrize("kwargs, message", [
    (dict(init_scale=0.0), "init_scale"),
    (dict(init_scale=float("inf")), "init_scale"),
    (dict(growth_factor=1.0), "growth_factor"),
    (dict(backoff_factor=1.5), "backoff_factor"),
    (dict(growth_interval=0), "growth_interval"),
    (dict(growth_interval=2.5), "growth_interval"),
    (dict(init_scale=2.0 ** 30), "must lie in"),
])
def test_bad_settings_are_refused_with_the_name_of_the_setting(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LossScaler(**kwargs)
