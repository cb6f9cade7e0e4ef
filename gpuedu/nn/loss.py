"""Softmax cross-entropy, forward and backward in one kernel (``gpuedu.ops.loss``), with the metrics kept on the
device."""
import numpy as np

from .. import launch as L
from ..checks import check_device_features, to_device_labels
from ..ops import loss as _loss


class _Slot:
    """A place in the metrics buffer, given to the loss kernel as a pointer (``launch.ptr`` reads ``gpudata``)."""

    def __init__(self, address):
        self.gpudata = address


class SoftmaxCrossEntropy:
    """Mean cross-entropy of softmax(logits) against integer labels.

    ``dlogits = loss(logits, labels)`` returns dL/dlogits = (softmax - onehot) / batch and adds the batch's
    summed loss and number of correct predictions to device accumulators, so a training loop can run a
    whole epoch without copying anything back; ``result()`` reads them once.
    """

    def __init__(self):
        ga = L.gpuarray()
        # One device buffer, so that reading the metrics is one copy back: the summed loss (a float32's bits),
        # the correct predictions, the rows whose label is outside [0, classes), the rows with NaN/inf logits;
        # then two words for the training loop's count of NaN/inf activations (activation_status).
        self._metrics = ga.zeros(6, np.int32)
        self._classes = None
        self._rows = 0
        self._grad = {}
        self.stream = None

    def __call__(self, logits, labels):
        check_device_features(logits, "logits")
        rows, classes = logits.shape
        labels = to_device_labels(labels, classes, rows)
        dlogits = self._grad.get((rows, classes))
        if dlogits is None:
            dlogits = self._grad[(rows, classes)] = L.gpuarray().empty((rows, classes), np.float32)
        _loss.softmax_xent(dlogits, *self._slots(), logits, labels, self.stream)
        self._classes = classes
        self._rows += rows
        return dlogits

    def reset(self):
        """Zero the accumulated loss and correct count (a kernel on the loss's stream: no copy, no wait)."""
        self._metrics.fill(0, stream=self.stream)
        self._rows = 0

    def _slots(self):
        """The device addresses of the loss sum, the correct count and the two status counts, in the buffer."""
        base = int(self._metrics.gpudata)
        return tuple(_Slot(base + 4 * k) for k in range(3))

    @property
    def activation_status(self):
        """Two int32 words on the device, zeroed by ``reset()`` and read back with the metrics (``read()``), where
        the training loop counts NaN and inf among the layers' outputs (``train.Step``)."""
        return _Slot(int(self._metrics.gpudata) + 16)

    def read(self):
        """The metrics buffer on the host (int32 [6]): the one copy back of an epoch; ``result(metrics)`` reads it."""
        return self._metrics.get()

    def result(self, metrics=None):
        """(mean loss, accuracy) over every row since the last ``reset()``: the one copy back (or ``metrics``, what
        ``read()`` gave)."""
        if self._rows == 0:
            raise RuntimeError("no batch since the last reset(): call the loss on a batch first")
        if metrics is None:
            metrics = self.read()
        bad_labels, not_finite = int(metrics[2]), int(metrics[3])
        if bad_labels:
            raise ValueError(bad_labels_message(bad_labels, self._rows, self._classes, "reset()"))
        if not_finite:
            raise ValueError(f"the logits of {not_finite} of the {self._rows} rows since the last reset() were NaN or "
                             f"infinite, so the loss is NaN: training diverged (lower the learning rate) or the inputs "
                             f"hold NaN or inf. reset() to go on")
        loss_sum = float(metrics[0:1].view(np.float32)[0])
        return loss_sum / self._rows, int(metrics[1]) / self._rows

    @property
    def rows(self):
        return self._rows


def bad_labels_message(bad, rows, classes, reset):
    """What a loss says when ``bad`` of its ``rows`` rows since ``reset`` had a label outside [0, classes)."""
    return (f"{bad} of the {rows} rows since the last {reset} had a label outside [0, {classes}): labels are class "
            f"indices 0 to {classes - 1}. Those rows were left out of the loss and the gradient; check the labels "
            f"(e.g. labels.get().min() and .max()) and the model's number of outputs. {reset} to go on")
