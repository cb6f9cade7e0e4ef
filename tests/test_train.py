"""gpuedu.train.fit: the MLP learns digits on the device; history, progress, energy note, bad input; one loop
for the FP32 step and the mixed-precision one."""
import matplotlib
import numpy as np
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


def test_fit_copies_the_metrics_back_once_per_epoch_in_fp32_and_mixed_precision(digits, monkeypatch):
    # Every copy back waits for the GPU; the loops may do one per epoch (the loss and the accuracy are
    # summed on the device), never one per step.  The loader's own host-to-device copies are not counted.
    from gpuedu.nn import amp
    from stall_helpers import count_stalls
    epochs, loader = 2, data.DataLoader(digits.x_train[:256], digits.y_train[:256], batch_size=32, seed=0)
    model = nn.mlp([64, 16, 10], seed=0)
    with count_stalls(monkeypatch) as calls:
        train.fit(model, loader, epochs, nn.SGD(model.parameters(), lr=0.1), quiet=True)
    copies_back = [c for c in calls if c.startswith(("GPUArray.get", "driver.memcpy_dtoh"))]
    assert len(copies_back) == epochs, copies_back       # loss sum, correct count and status words: one copy an epoch
    half = amp.MixedPrecisionMLP(nn.mlp([64, 16, 10], seed=0))
    trainer = amp.MixedPrecisionTrainer(half, nn.SGD(half.parameters(), lr=0.1), amp.LossScaler(1024.0))
    with count_stalls(monkeypatch) as calls:
        history = train.fit(trainer, loader, epochs, quiet=True)
    copies_back = [c for c in calls if c.startswith(("GPUArray.get", "driver.memcpy_dtoh"))]
    assert len(copies_back) == epochs and len(history.loss) == epochs, copies_back


def test_a_training_step_brings_its_own_optimizer_and_loss(digits):
    from gpuedu.nn import amp
    half = amp.MixedPrecisionMLP(nn.mlp([64, 10], seed=0))
    trainer = amp.MixedPrecisionTrainer(half, nn.SGD(half.parameters(), lr=0.1))
    loader = data.DataLoader(digits.x_train[:64], digits.y_train[:64], batch_size=32)
    with pytest.raises(TypeError, match="brings its own optimizer and loss"):
        train.fit(trainer, loader, 1, nn.SGD(half.parameters(), lr=0.1))
    model = nn.mlp([64, 10], seed=0)
    with pytest.raises(TypeError, match="needs an optimizer"):
        train.fit(model, loader, 1)


def test_the_fp32_step_is_the_one_loop_s_step_and_matches_a_hand_written_epoch(digits):
    # fit(model, ...) is fit(Step(model, optimizer), ...): the same losses, bit for bit, as the steps by hand.
    loader = data.DataLoader(digits.x_train[:256], digits.y_train[:256], batch_size=64, seed=0)
    model = nn.mlp([64, 16, 10], seed=0)
    history = train.fit(model, loader, 2, nn.SGD(model.parameters(), lr=0.1), quiet=True)
    by_hand = nn.mlp([64, 16, 10], seed=0)
    step = train.Step(by_hand, nn.SGD(by_hand.parameters(), lr=0.1))
    hand_loader, losses = data.DataLoader(digits.x_train[:256], digits.y_train[:256], batch_size=64, seed=0), []
    for _ in range(2):
        step.reset_loss()
        for xb, yb in hand_loader:
            step.step(xb, yb)
        losses.append(step.epoch_result())
    if gpuedu.backend.active().name == "cpu":
        assert history.loss == [l for l, _ in losses] and history.train_accuracy == [a for _, a in losses]
    else:   # the loss kernel adds each row to the epoch total with a float atomicAdd: its order varies on a GPU
        np.testing.assert_allclose(history.loss, [l for l, _ in losses], rtol=1e-5)
        assert history.train_accuracy == pytest.approx([a for _, a in losses], abs=1 / 256)
    assert step.rows == 256


NAN_SCRIPT = r'''
import numpy as np
import gpuedu
gpuedu.setup("cpu", verbose=False)
from gpuedu import data, nn, train
digits = data.load_digits(seed=0)
model = nn.mlp([64, 32, 32, 32, 10], activation="relu", seed=0)
loader = data.DataLoader(digits.x_train[:256], digits.y_train[:256], batch_size=64, seed=0)
calls = [0]
first = model.layers[1].forward
def poisoned(x):
    # in the last step of the last epoch (the 4th of epoch 3), one of layer 1's outputs is NaN (after its ReLU);
    # layer 2's ReLU turns it into a zero, so the logits and the loss stay finite: only the check sees it.
    calls[0] += 1
    y = first(x)
    if calls[0] == 12:
        host = y.get()
        host[0, 0] = np.nan
        y.set(host)
    return y
model.layers[1].forward = poisoned
try:
    train.fit(model, loader, 3, nn.SGD(model.parameters(), lr=0.1), quiet=True)
    print("NO ERROR")
except train.NonFiniteActivations as exc:
    print("stopped:", exc)
    print("where:", exc.epoch, exc.step, exc.layer, exc.count, len(exc.history.loss))
model.layers[1].forward = first
fresh = nn.mlp([64, 10], seed=0)
history = train.fit(fresh, loader, 1, nn.SGD(fresh.parameters(), lr=0.1), quiet=True)
print("afterwards:", np.isfinite(history.loss[0]) and history.loss[0] > 0)
'''


def test_nan_activations_stop_training_naming_the_epoch_step_and_layer_where_they_first_appeared(tmp_path):
    # In a fresh process: the loop goes on to train another model afterwards.
    import os
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", NAN_SCRIPT], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "NO ERROR" not in out, out
    assert ("stopped: training stopped: 1 activations were NaN or infinite in epoch 3; the first appeared in step 4 "
            "of that epoch, in the output of layer 1 (Dense(32, 32, activation='relu'))") in out, out
    assert "where: 3 4 1 1 2" in out, out            # epoch 3, step 4, layer 1, one value; two epochs' history
    assert "afterwards: True" in out


def test_the_activation_check_counts_nan_and_inf_on_the_device_and_keeps_the_highest_rank(digits):
    from gpuedu.ops import dense
    ga = gpuedu.launch.gpuarray()
    status = ga.zeros(2, np.int32)
    x = np.ones(5000, np.float32)
    x[[17, 4000]] = np.nan
    x[2500] = -np.inf
    dense.count_nonfinite(status, ga.to_gpu(x), 7)
    dense.count_nonfinite(status, ga.to_gpu(np.ones(10, np.float32)), 99)    # nothing to count: no rank
    dense.count_nonfinite(status, ga.to_gpu(x[:100]), 3)                     # a lower rank: kept out
    assert status.get().tolist() == [4, 7]
