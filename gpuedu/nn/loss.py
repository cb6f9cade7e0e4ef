"""Softmax cross-entropy, forward and backward in one kernel (``gpuedu.ops.loss``), with the metrics kept on the
device."""
import numpy as np

from .. import launch as L
from ..checks import check_device_features, to_device_labels
from ..ops import loss as _loss


class SoftmaxCrossEntropy:
    """Mean cross-entropy of softmax(logits) against integer labels.

    ``dlogits = loss(logits, labels)`` returns dL/dlogits = (softmax - onehot) / batch and adds the batch's
    summed loss and number of correct predictions to device accumulators, so a training loop can run a
    whole epoch without copying anything back; ``result()`` reads them once.
    """

    def __init__(self):
        ga = L.gpuarray()
        self._loss_sum = ga.zeros(1, np.float32)
        self._correct = ga.zeros(1, np.int32)
        self._status = ga.zeros(2, np.int32)    # rows with a label outside [0, classes); rows with NaN/inf logits
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
        _loss.softmax_xent(dlogits, self._loss_sum, self._correct, self._status, logits, labels, self.stream)
        self._classes = classes
        self._rows += rows
        return dlogits

    def reset(self):
        """Zero the accumulated loss and correct count (a kernel on the loss's stream: no copy, no wait)."""
        self._loss_sum.fill(0, stream=self.stream)
        self._correct.fill(0, stream=self.stream)
        self._status.fill(0, stream=self.stream)
        self._rows = 0

    def result(self):
        """(mean loss, accuracy) over every row since the last ``reset()``: the one copy back."""
        if self._rows == 0:
            raise RuntimeError("no batch since the last reset(): call the loss on a batch first")
        bad_labels, not_finite = (int(v) for v in self._status.get())
        if bad_labels:
            raise ValueError(f"{bad_labels} of the {self._rows} rows since the last reset() had a label outside "
                             f"[0, {self._classes}): labels are class indices 0 to {self._classes - 1}. Those rows were "
                             f"left out of the loss and the gradient; check the labels (e.g. labels.get().min() and "
                             f".max()) and the model's number of outputs. reset() to go on")
        if not_finite:
            raise ValueError(f"the logits of {not_finite} of the {self._rows} rows since the last reset() were NaN or "
                             f"infinite, so the loss is NaN: training diverged (lower the learning rate) or the inputs "
                             f"hold NaN or inf. reset() to go on")
        return float(self._loss_sum.get()[0]) / self._rows, int(self._correct.get()[0]) / self._rows

    @property
    def rows(self):
        return self._rows
