"""The kernels of ``gpuedu/kernels/nn_loss.cu``: softmax cross-entropy (forward and backward in one kernel,
the metrics kept on the device) for ``gpuedu.nn.SoftmaxCrossEntropy``, and the row argmax of predictions."""
from .. import launch as L

THREADS = 128        # a thread per row


def softmax_xent(dlogits, loss_sum, correct, status, logits, labels, stream=None):
    """dlogits = (softmax(logits) - onehot(labels)) / rows; adds the batch's summed loss to ``loss_sum``
    (float32 [1]) and its correct predictions to ``correct`` (int32 [1]), on the device; counts in ``status``
    (int32 [2]) the rows whose label is not in [0, classes) (left out, with a zero gradient) and the rows whose
    logits are NaN or infinite."""
    rows, classes = logits.shape
    f = L.kernel("nn_loss", "softmax_xent", "PPPPPPii")
    L.launch(f, (L.ceil_div(rows, THREADS), 1), (THREADS, 1, 1),
             (L.ptr(dlogits), L.ptr(loss_sum), L.ptr(correct), L.ptr(status), L.ptr(logits), L.ptr(labels),
              L.i32(rows), L.i32(classes)), stream)


def argmax_rows(pred, logits, stream=None):
    """pred[r] = the column of row r's largest logit (int32 [rows])."""
    rows, classes = logits.shape
    f = L.kernel("nn_loss", "argmax_rows", "PPii")
    L.launch(f, (L.ceil_div(rows, THREADS), 1), (THREADS, 1, 1),
             (L.ptr(pred), L.ptr(logits), L.i32(rows), L.i32(classes)), stream)
