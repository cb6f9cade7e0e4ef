"""Rank program: data-parallel training against single-process training with the same global batches.

Argument: bucket size in bytes.  Rank 0 prints one JSON line: the histories, whether all ranks ended
bit-identical, the largest parameter difference from ``gpuedu.train.fit`` run alone on rank 0, and each
rank's (busy seconds, epoch seconds) per epoch.
"""
import json
import sys

import numpy as np
from mpi4py import MPI

import gpuedu
from gpuedu import data, nn, train
from gpuedu.distributed import GradientBuckets, fit_data_parallel, parameters_identical

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
bucket_bytes = int(sys.argv[1])
gpuedu.setup("cpu", verbose=False)
digits = data.load_digits()
x, y = digits.x_train[:250], digits.y_train[:250]
BATCH, EPOCHS = 50, 2


def model_and_optimizer():
    model = nn.mlp([64, 32, 10], seed=3)
    return model, nn.SGD(model.parameters(), lr=0.1, momentum=0.9)


model, opt = model_and_optimizer()
hist = fit_data_parallel(model, comm, x, y, EPOCHS, BATCH, opt, seed=5, bucket_bytes=bucket_bytes, quiet=True)
same = parameters_identical(model, comm)
busy = comm.gather((hist.busy_seconds, hist.epoch_seconds), root=0)
buckets = len(GradientBuckets(model.parameters(), bucket_bytes))
if rank == 0:
    solo, solo_opt = model_and_optimizer()
    ref = train.fit(solo, data.DataLoader(x, y, BATCH, seed=5), EPOCHS, solo_opt, quiet=True)
    diff = max(float(np.abs(p.value.get() - q.value.get()).max())
               for p, q in zip(model.parameters(), solo.parameters()))
    print(json.dumps({"ranks": size, "identical": same, "buckets": buckets, "max_param_diff": diff,
                      "loss": hist.loss, "ref_loss": ref.loss, "accuracy": hist.train_accuracy,
                      "ref_accuracy": ref.train_accuracy, "busy": busy}), flush=True)
