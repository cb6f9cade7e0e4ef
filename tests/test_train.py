"""gpuedu.train.fit: the MLP learns digits on the device; history, progress, energy note, bad input."""
import matplotlib
import pytest

import gpuedu
from gpuedu import data, nn, train

matplotlib.use("Agg")
backend = gpuedu.setup(verbose=False)


@pytest.fixture(scope="module")
def digits():
    return data.load_digits(seed=0)


def test_mlp_reaches_97_percent_on_digits(digits, capsys):
    model = nn.mlp([64, 128, 10], activation="relu", seed=0)
    loader = data.DataLoader(digits.x_train, digits.y_train, batch_size=32, seed=0)
    history = train.fit(model, loader, epochs=20, optimizer=nn.Adam(model.parameters(), lr=1e-3),
                        test=(digits.x_test, digits.y_test), progress=False)
    assert history.test_accuracy[-1] >= 0.97, history.summary()
    assert history.loss[-1] < 0.25 * history.loss[0]          # it learned, not guessed
    assert len(history.epoch_seconds) == 20 and min(history.samples_per_second) > 0
    out = capsys.readouterr().out
    assert out.count("epoch ") == 20 and "test accuracy" in out
    # The test accuracy fit reports is the model's own, recomputed independently here.
    assert model.accuracy(digits.x_test, digits.y_test) == history.test_accuracy[-1]


def test_without_the_optimizer_step_nothing_is_learned(digits):
    class NoStep(nn.SGD):
        def step(self):
            pass

    model = nn.mlp([64, 32, 10], seed=1)
    loader = data.DataLoader(digits.x_train, digits.y_train, batch_size=128, seed=0)
    history = train.fit(model, loader, epochs=2, optimizer=NoStep(model.parameters(), lr=0.1), quiet=True)
    assert history.loss[0] == pytest.approx(history.loss[1], rel=1e-5)
    assert history.train_accuracy[0] == history.train_accuracy[1]


def test_energy_is_reported_unavailable_with_a_reason_on_the_emulator(digits):
    model = nn.mlp([64, 10], seed=0)
    loader = data.DataLoader(digits.x_train[:100], digits.y_train[:100], batch_size=50)
    history = train.fit(model, loader, 1, nn.SGD(model.parameters(), lr=0.1), quiet=True)
    if backend.name == "cpu":
        assert history.energy_note == "unavailable: the CPU emulator has no power sensor"
        assert history.energy_joules == [None]
    else:
        assert history.energy_note.startswith(("unavailable: ", "NVML"))


def test_quiet_prints_nothing_and_the_bar_goes_to_stderr(digits, capsys, monkeypatch):
    # this test is about the bar itself: a TQDM_DISABLE in the environment must not hide it.
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    model = nn.mlp([64, 10], seed=0)
    loader = data.DataLoader(digits.x_train[:64], digits.y_train[:64], batch_size=16)
    train.fit(model, loader, 2, nn.SGD(model.parameters(), lr=0.1), quiet=True)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    train.fit(model, loader, 1, nn.SGD(model.parameters(), lr=0.1))
    captured = capsys.readouterr()
    assert "epoch   1" in captured.out and "batch" in captured.err


def test_fit_rejects_what_cannot_train(digits):
    model = nn.mlp([64, 10], seed=0)
    opt = nn.SGD(model.parameters(), lr=0.1)
    loader = data.DataLoader(digits.x_train, digits.y_train, batch_size=64)
    with pytest.raises(ValueError, match="epochs"):
        train.fit(model, loader, 0, opt)
    with pytest.raises(ValueError, match="the model takes 32"):
        train.fit(nn.mlp([32, 10]), loader, 1, opt)
    with pytest.raises(ValueError, match="labels go up to 9"):
        train.fit(nn.mlp([64, 5]), loader, 1, opt)


def test_plot_history_draws_every_curve(digits):
    history = train.History(loss=[1.0, 0.5], train_accuracy=[0.5, 0.8], test_accuracy=[0.4, 0.7])
    ax = train.plot_history(history, title="curves")
    labels = [l.get_label() for l in ax.get_legend().get_lines()]
    assert labels == ["training loss", "train accuracy", "test accuracy"]
    assert "test accuracy 0.7000" in history.summary()


def test_median_seconds_measures_the_call():
    calls = []
    seconds = train.median_seconds(lambda: (calls.append(1), __import__("time").sleep(0.01)), repeats=3, warmup=2)
    assert len(calls) == 5 and 0.009 < seconds < 0.5
    with pytest.raises(ValueError, match="repeats"):
        train.median_seconds(lambda: None, repeats=0)
    delays = iter([0.05, 0.001, 0.05])
    fastest = train.median_seconds(lambda: __import__("time").sleep(next(delays)), repeats=3, warmup=0, reduce="min")
    assert fastest < 0.04
    with pytest.raises(ValueError, match="reduce"):
        train.median_seconds(lambda: None, reduce="mean")


class FakeNVML:
    """Stands in for pynvml: an energy counter in millijoules that rises 2.5 J per read."""

    def __init__(self, fail=None):
        self.fail, self.millijoules = fail, 1000

    def nvmlInit(self):
        if self.fail:
            raise RuntimeError(self.fail)

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("device", index)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        self.millijoules += 2500
        return self.millijoules


def test_energy_meter_reads_nvml_on_a_gpu_and_says_why_not_elsewhere(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML())
    meter = train.EnergyMeter("cuda")
    assert meter.available and meter.reason == "NVML total energy counter"
    a, b = meter.read_joules(), meter.read_joules()
    assert b - a == pytest.approx(2.5)
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML(fail="NVML_ERROR_NOT_SUPPORTED"))
    meter = train.EnergyMeter("cuda")
    assert not meter.available and meter.read_joules() is None
    assert meter.reason.startswith("unavailable: NVML cannot read") and "NOT_SUPPORTED" in meter.reason
    monkeypatch.setitem(sys.modules, "pynvml", None)          # import pynvml raises ImportError
    assert train.EnergyMeter("cuda").reason == "unavailable: pynvml is not installed (pip install nvidia-ml-py)"
    assert train.EnergyMeter("cpu").reason == "unavailable: the CPU emulator has no power sensor"


def test_plot_timeline_draws_a_bar_per_copy_and_per_step():
    marks = [(0.0, 1.0, 1.0, 3.0), (1.0, 2.0, 3.0, 5.0)]
    ax = train.plot_timeline(marks, title="overlapped")
    copies, steps = ax.collections
    assert len(copies.get_paths()) == 2 and len(steps.get_paths()) == 2
    assert ax.get_title() == "overlapped"
    with pytest.raises(ValueError, match="ends >= starts"):
        train.plot_timeline([(2.0, 1.0, 0.0, 1.0)])


def test_fit_and_train_mixed_copy_the_metrics_back_once_per_epoch(digits, monkeypatch):
    # Every copy back waits for the GPU; the loops may do one per epoch (the loss and the accuracy are
    # summed on the device), never one per step.  The loader's own host-to-device copies are not counted.
    from gpuedu.nn import amp
    from test_step_sync import count_stalls
    epochs, loader = 2, data.DataLoader(digits.x_train[:256], digits.y_train[:256], batch_size=32, seed=0)
    model = nn.mlp([64, 16, 10], seed=0)
    with count_stalls(monkeypatch) as calls:
        train.fit(model, loader, epochs, nn.SGD(model.parameters(), lr=0.1), quiet=True)
    copies_back = [c for c in calls if c.startswith(("GPUArray.get", "driver.memcpy_dtoh"))]
    assert len(copies_back) == 2 * epochs, copies_back          # loss sum and correct count, per epoch
    half = amp.MixedPrecisionMLP(nn.mlp([64, 16, 10], seed=0))
    trainer = amp.MixedPrecisionTrainer(half, nn.SGD(half.parameters(), lr=0.1), amp.LossScaler(1024.0))
    with count_stalls(monkeypatch) as calls:
        history = amp.train_mixed(trainer, loader, epochs)
    copies_back = [c for c in calls if c.startswith(("GPUArray.get", "driver.memcpy_dtoh"))]
    assert len(copies_back) == epochs and len(history) == epochs, copies_back
