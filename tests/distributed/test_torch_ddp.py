"""Lesson 12's PyTorch DDP program (taken from the notebook) gives gpuedu's whole-batch gradients.

Runs where PyTorch is installed (its CPU wheel is enough: gloo); skipped elsewhere, with the reason.
"""
import importlib.util
import os
import subprocess
import sys

import nbformat
import numpy as np
import pytest

LESSON = os.path.join(os.path.dirname(__file__), "..", "..", "lessons", "12_beyond_one_gpu.ipynb")
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None or not os.path.exists(TORCHRUN),
                                reason="PyTorch is not installed (pip install torch, the CPU wheel is enough)")


def lesson_program(name):
    nb = nbformat.read(LESSON, as_version=4)
    head = f"%%writefile {name}\n"
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith(head))
    return cell.source[len(head):]


@pytest.mark.slow
def test_ddp_on_two_processes_gives_gpuedus_gradient_of_the_whole_batch(tmp_path):
    import gpuedu
    from gpuedu import data, nn
    try:                  # gpuedu's gradient on the emulator (a process already on a GPU cannot switch)
        gpuedu.setup("cpu", verbose=False)
    except gpuedu.backend.BackendError as e:
        pytest.skip(f"needs the emulator in this process: {e}")
    (tmp_path / "ddp_mlp.py").write_text(lesson_program("ddp_mlp.py"))
    digits = data.load_digits(seed=0)
    net = nn.mlp([64, 128, 10], seed=0)
    xb, yb = digits.x_train[:96], digits.y_train[:96]
    np.savez(tmp_path / "mlp_init.npz", **{f"{k}{i}": p.numpy() for i, layer in enumerate(net.layers)
                                          for k, p in (("W", layer.W), ("b", layer.b))})
    np.savez(tmp_path / "batch.npz", x=xb, y=yb)
    net.backward(nn.SoftmaxCrossEntropy()(net.forward(xb), yb))
    done = subprocess.run([TORCHRUN, "--standalone", "--nproc_per_node=2", "ddp_mlp.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = np.load(tmp_path / "ddp_grads.npz")
    for i, layer in enumerate(net.layers):
        np.testing.assert_allclose(theirs[f"W{i}"], layer.W.grad.get(), atol=1e-6)
        np.testing.assert_allclose(theirs[f"b{i}"], layer.b.grad.get(), atol=1e-6)
