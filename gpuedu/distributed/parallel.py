"""Data-parallel and pipeline (model-parallel) training of ``gpuedu.nn`` models over MPI ranks.

Data parallel: every rank holds the whole model and takes its shard of each global batch.  After
backward, the gradients are packed into buckets, scaled by the shard's share of the batch and summed
with ``ring_allreduce``: every rank then holds the gradient of the whole batch, applies the same
optimizer step, and the parameters stay bit-identical across ranks.  With one rank this is exactly
``gpuedu.train.fit`` on the same batches.

Pipeline: the model's layers are split into stages, one per rank; a batch is cut into micro-batches that
flow forward through the stages while later stages still work on earlier ones.  A stage keeps only each
micro-batch's input and recomputes its forward just before the backward (re-materialisation, as GPipe
does), because a layer keeps the state of its last forward only.
"""
import hashlib
import sys
import time

import numpy as np

from .. import launch as L
from ..data import epoch_batches
from ..checks import check_host_features, check_host_labels
from ..nn.loss import SoftmaxCrossEntropy
from ..nn.model import Sequential
from .ring import chunk_bounds, default_timeout, ring_allreduce, wait_all

DEFAULT_BUCKET_BYTES = 1 << 20      # 1 MiB of float32 gradients per all-reduce
_ACT_TAG, _GRAD_TAG = 7401, 7402


def _backend():
    from .. import backend
    return backend.active()


def broadcast_parameters(model, comm, root=0):
    """Copy rank ``root``'s parameter values to every rank (start data-parallel training identical)."""
    for p in model.parameters():
        host = p.value.get()
        comm.Bcast(host, root=root)
        p.value.set(host)


def parameters_digest(model):
    """A SHA-256 of every parameter's bytes: equal digests mean bit-identical models."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.name.encode())
        h.update(np.ascontiguousarray(p.value.get()).tobytes())
    return h.hexdigest()


def parameters_identical(model, comm):
    """True on every rank when all ranks hold bit-identical parameters."""
    return len(set(comm.allgather(parameters_digest(model)))) == 1


class GradientBuckets:
    """Gradients packed into buckets of about ``bucket_bytes`` each, one all-reduce per bucket.

    Parameters are taken last layer first (the order backward finishes them, so a bucket could start its
    all-reduce while backward goes on); a parameter larger than a bucket gets a bucket of its own.  Fewer,
    larger messages pay the per-message latency fewer times: that is all bucketing buys, and it is a lot
    when a model has many small tensors (biases, norms).
    """

    def __init__(self, params, bucket_bytes=DEFAULT_BUCKET_BYTES):
        if not isinstance(bucket_bytes, (int, np.integer)) or bucket_bytes < 4:
            raise ValueError(f"bucket_bytes must be an integer of at least 4 (one float32), got {bucket_bytes!r}")
        params = list(params)
        if not params:
            raise ValueError("the model has no parameters to synchronise")
        for p in params:
            if p.grad.dtype != np.float32:
                raise TypeError(f"{p.name}'s gradient is {p.grad.dtype}; buckets hold float32 gradients")
        self.bucket_bytes = int(bucket_bytes)
        self.buckets, current, used = [], [], 0
        for p in reversed(params):
            size = p.grad.size * 4
            if current and used + size > self.bucket_bytes:
                self.buckets.append(current)
                current, used = [], 0
            current.append(p)
            used += size
        self.buckets.append(current)
        ga = L.gpuarray()
        self._flat = [ga.empty(sum(p.grad.size for p in bucket), np.float32) for bucket in self.buckets]

    def __len__(self):
        return len(self.buckets)

    def allreduce(self, comm, scale=1.0, timeout=None, transport="auto"):
        """Replace every gradient by the sum over ranks of ``scale`` times it."""
        drv = _backend().driver
        for bucket, flat in zip(self.buckets, self._flat):
            offset = 0
            for p in bucket:                      # pack: device-to-device copies into one buffer
                drv.memcpy_dtod(int(flat.gpudata) + offset * 4, p.grad.gpudata, p.grad.size * 4)
                offset += p.grad.size
            if scale != 1.0:
                flat *= np.float32(scale)
            ring_allreduce(comm, flat, timeout=timeout, check=False, transport=transport)
            offset = 0
            for p in bucket:                      # unpack
                drv.memcpy_dtod(p.grad.gpudata, int(flat.gpudata) + offset * 4, p.grad.size * 4)
                offset += p.grad.size


class DataParallel:
    """Wrap ``model`` for data-parallel training over ``comm``: ``step(xb, yb, loss, optimizer)``."""

    def __init__(self, model, comm, bucket_bytes=DEFAULT_BUCKET_BYTES, timeout=None, transport="auto"):
        self.model, self.comm = model, comm
        self.timeout = default_timeout() if timeout is None else float(timeout)
        self.transport = transport
        broadcast_parameters(model, comm)
        self.buckets = GradientBuckets(model.parameters(), bucket_bytes)
        # Seconds spent computing (forward, backward, optimizer) and in the gradients' all-reduce, over every
        # step so far: how much of its time a rank works, which is what data parallelism spends on communication.
        self.stats = {"busy_seconds": 0.0, "allreduce_seconds": 0.0, "steps": 0}

    def _finished(self):
        """The clock once the device has finished what was queued (so GPU work is counted where it ran)."""
        _backend().driver.Context.synchronize()
        return time.perf_counter()

    def shard(self, rows):
        """(start, stop) of this rank's rows in a global batch of ``rows``."""
        size = self.comm.Get_size()
        if rows < size:
            raise ValueError(f"a global batch of {rows} rows cannot give each of {size} ranks a row: "
                             f"use a batch of at least {size}")
        return chunk_bounds(rows, size)[self.comm.Get_rank()]

    def step(self, xb, yb, loss, optimizer):
        """One step on the global batch (xb, yb), host arrays: this rank computes its shard only."""
        start, stop = self.shard(len(xb))
        t0 = time.perf_counter()
        logits = self.model.forward(xb[start:stop])
        dlogits = loss(logits, yb[start:stop])
        self.model.backward(dlogits)
        t1 = self._finished()
        # Each shard's loss is its own mean: weight it by its share, and the sum is the batch's mean.
        self.buckets.allreduce(self.comm, scale=(stop - start) / len(xb), timeout=self.timeout,
                               transport=self.transport)
        t2 = time.perf_counter()
        optimizer.step()
        t3 = self._finished()
        self.stats["busy_seconds"] += (t1 - t0) + (t3 - t2)
        self.stats["allreduce_seconds"] += t2 - t1
        self.stats["steps"] += 1


def fit_data_parallel(model, comm, x, y, epochs, batch_size, optimizer, loss=None, seed=0, shuffle=True,
                      test=None, bucket_bytes=DEFAULT_BUCKET_BYTES, quiet=False, timeout=None):
    """Train ``model`` on every rank of ``comm`` with global batches of ``batch_size``; return a History.

    Every rank passes the same (x, y) and seed: each draws the same batches as ``DataLoader(x, y,
    batch_size, seed=seed)`` and computes its shard of each.  The loss and accuracy in the history are over
    the whole data set (summed over ranks); the epoch lines print on rank 0 only.  ``history.busy_seconds``
    holds, per epoch, this rank's seconds of computing (forward, backward, optimizer): the rest of
    ``epoch_seconds`` went to the all-reduce and the loop around it.
    """
    from ..train import History
    check_host_features(x, "x", model.in_features)
    check_host_labels(y, model.out_features, len(x), "y")
    if not isinstance(epochs, (int, np.integer)) or epochs < 1:
        raise ValueError(f"epochs must be a positive integer, got {epochs!r}")
    if not isinstance(batch_size, (int, np.integer)) or not 1 <= batch_size <= len(x):
        raise ValueError(f"batch_size must be an integer from 1 to {len(x)} (the data's rows), got {batch_size!r}")
    trainer = DataParallel(model, comm, bucket_bytes, timeout)
    loss = loss or SoftmaxCrossEntropy()
    rng = np.random.default_rng(seed)
    history = History(energy_note="not measured in data-parallel training")
    rank = comm.Get_rank()
    for epoch in range(epochs):
        loss.reset()
        busy = trainer.stats["busy_seconds"]
        start = time.perf_counter()
        for rows in epoch_batches(rng, len(x), int(batch_size), shuffle):
            trainer.step(x[rows], y[rows], loss, optimizer)
        history.busy_seconds.append(trainer.stats["busy_seconds"] - busy)
        mean, acc = loss.result()
        local = np.array([mean * loss.rows, acc * loss.rows, loss.rows], np.float64)
        total = np.empty_like(local)
        comm.Allreduce(local, total)
        seconds = time.perf_counter() - start
        history.loss.append(total[0] / total[2])
        history.train_accuracy.append(total[1] / total[2])
        history.epoch_seconds.append(seconds)
        history.samples_per_second.append(total[2] / seconds)
        history.energy_joules.append(None)
        if test is not None:
            history.test_accuracy.append(model.accuracy(*test))
        if not quiet and rank == 0:
            line = f"epoch {epoch + 1:3d}: loss {history.loss[-1]:.4f}, train accuracy {history.train_accuracy[-1]:.4f}"
            if test is not None:
                line += f", test accuracy {history.test_accuracy[-1]:.4f}"
            print(line, file=sys.stdout, flush=True)
    return history


class PipelineStage:
    """This rank's stage of a model split over the ranks of ``comm`` (rank k runs stage k).

    ``layers``: this stage's layers (a list or a ``Sequential``); the first stage's input width and the last
    stage's output width come from them.  ``train_step`` and ``forward`` are collective: every rank calls
    them, the first stage with the batch's features, the last with its labels.
    """

    def __init__(self, layers, comm, timeout=None):
        self.model = layers if isinstance(layers, Sequential) else Sequential(list(layers))
        self.comm = comm
        self.rank, self.stages = comm.Get_rank(), comm.Get_size()
        self.first, self.last = self.rank == 0, self.rank == self.stages - 1
        self.timeout = default_timeout() if timeout is None else float(timeout)
        self.in_features, self.out_features = self.model.in_features, self.model.out_features
        if self.in_features is None or self.out_features is None:
            raise ValueError("a pipeline stage needs layers with known widths (a Dense layer first and last)")
        widths = comm.allgather((self.in_features, self.out_features))
        for k in range(1, self.stages):
            if widths[k][0] != widths[k - 1][1]:
                raise ValueError(f"stage {k} takes {widths[k][0]} features but stage {k - 1} gives "
                                 f"{widths[k - 1][1]}: split the model where the widths match")
        self.loss = SoftmaxCrossEntropy() if self.last else None
        self.stats = {}

    def parameters(self):
        return self.model.parameters()

    def _recv(self, rows, cols, source, tag, what):
        buf = np.empty((rows, cols), np.float32)
        wait_all([self.comm.Irecv(buf, source=source, tag=tag)], self.timeout,
                 f"pipeline stage {self.rank}, waiting for {what} from rank {source}")
        return buf

    def _rows(self, x):
        rows = len(x) if self.first else None
        return self.comm.bcast(rows, root=0)

    def forward(self, x=None):
        """Inference through every stage; the last stage returns the logits (a NumPy array), others None."""
        rows = self._rows(x)
        if self.first:
            check_host_features(x, "x", self.in_features)
            inp = x
        else:
            inp = self._recv(rows, self.in_features, self.rank - 1, _ACT_TAG, "activations")
        out = self.model.forward(np.ascontiguousarray(inp)).get()
        if self.last:
            return out
        wait_all([self.comm.Isend(out, dest=self.rank + 1, tag=_ACT_TAG)], self.timeout,
                 f"pipeline stage {self.rank}, sending activations to rank {self.rank + 1}")
        return None

    def train_step(self, x=None, y=None, micro_batches=4, optimizer=None):
        """One optimizer step on a batch cut into ``micro_batches``; returns the batch's mean loss on the
        last stage (None elsewhere).  ``self.stats`` then holds this rank's busy and wall seconds."""
        if optimizer is None:
            raise ValueError("train_step needs this stage's optimizer (built on stage.parameters())")
        t0 = time.perf_counter()
        busy = 0.0
        rows = self._rows(x)
        if not isinstance(micro_batches, (int, np.integer)) or not 1 <= micro_batches <= rows:
            raise ValueError(f"micro_batches must be an integer from 1 to the batch's {rows} rows, got {micro_batches!r}")
        if self.first:
            check_host_features(x, "x", self.in_features)
        if self.last:
            check_host_labels(y, self.out_features, rows, "y")
            self.loss.reset()
        ga = L.gpuarray()
        params = self.parameters()
        acc = [ga.zeros(p.grad.shape, np.float32) for p in params]
        parts = chunk_bounds(rows, int(micro_batches))
        inputs, sends = [], []
        # Forward phase: each micro-batch's input is kept; the last stage goes straight on to its backward.
        for start, stop in parts:
            if self.first:
                inp = np.ascontiguousarray(x[start:stop])
            else:
                inp = self._recv(stop - start, self.in_features, self.rank - 1, _ACT_TAG, "activations")
            inputs.append(inp)
            tb = time.perf_counter()
            out = self.model.forward(inp)
            if self.last:
                dlogits = self.loss(out, y[start:stop])
                dlogits *= np.float32((stop - start) / rows)    # each micro-batch's share of the batch mean
                dx = self._backward(dlogits, acc)
                if not self.first:
                    host = dx.get()
                    sends.append((host, self.comm.Isend(host, dest=self.rank - 1, tag=_GRAD_TAG)))
            else:
                host = out.get()
                sends.append((host, self.comm.Isend(host, dest=self.rank + 1, tag=_ACT_TAG)))
            busy += time.perf_counter() - tb
        # Backward phase (all but the last stage): recompute the forward, then backward, in the same order.
        if not self.last:
            for (start, stop), inp in zip(parts, inputs):
                dy = self._recv(stop - start, self.out_features, self.rank + 1, _GRAD_TAG, "gradients")
                tb = time.perf_counter()
                self.model.forward(inp)
                dx = self._backward(ga.to_gpu(dy), acc)
                if not self.first:
                    host = dx.get()
                    sends.append((host, self.comm.Isend(host, dest=self.rank - 1, tag=_GRAD_TAG)))
                busy += time.perf_counter() - tb
        wait_all([req for _, req in sends], self.timeout, f"pipeline stage {self.rank}, sending to a neighbour")
        tb = time.perf_counter()
        for p, a in zip(params, acc):
            p.grad.set(a.get())
        optimizer.step()
        busy += time.perf_counter() - tb
        self.stats = {"busy_seconds": busy, "wall_seconds": time.perf_counter() - t0}
        return self.loss.result()[0] if self.last else None

    def _backward(self, dy, acc):
        """Backward through this stage, adding the parameters' gradients into ``acc``; returns dL/dinput."""
        grad = dy
        layers = self.model.layers
        for i in range(len(layers) - 1, -1, -1):
            grad = layers[i].backward(grad, need_input_grad=i > 0 or not self.first)
        for p, a in zip(self.parameters(), acc):
            a += p.grad
        return grad
