"""Rank program: an MLP split into one stage per rank, against the same MLP unsplit on rank 0.

Checks the pipeline's forward output and, after two SGD steps with micro-batches, every parameter.
Rank 0 prints one JSON line with the largest differences.
"""
import json

import numpy as np
from mpi4py import MPI

import gpuedu
from gpuedu import data, nn
from gpuedu.distributed import PipelineStage

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
gpuedu.setup("cpu", verbose=False)
digits = data.load_digits()
x, y = digits.x_train[:90], digits.y_train[:90]
widths = [64, 48, 32, 24, 10][:size] + [10] if size < 4 else [64, 48, 32, 24, 10]
full = nn.mlp(widths, seed=1)            # every rank builds the whole model and keeps its own layers
per_stage = np.array_split(np.arange(len(full.layers)), size)
mine = [full.layers[i] for i in per_stage[rank]]
stage = PipelineStage(mine, comm)
opt = nn.SGD(stage.parameters(), lr=0.1)
logits = stage.forward(x if rank == 0 else None)
losses = [stage.train_step(x if rank == 0 else None, y if stage.last else None, micro_batches=4, optimizer=opt)
          for _ in range(2)]
stage_params = comm.gather([p.value.get() for p in stage.parameters()], root=0)
logits_seen = comm.bcast(logits, root=size - 1)
if rank == 0:
    ref = nn.mlp(widths, seed=1)
    ref_logits = ref.forward(x).get()
    ref_opt, loss = nn.SGD(ref.parameters(), lr=0.1), nn.SoftmaxCrossEntropy()
    for _ in range(2):
        ref.backward(loss(ref.forward(x), y))
        ref_opt.step()
    got = [p for params in stage_params for p in params]
    diffs = [float(np.abs(a - b.value.get()).max()) for a, b in zip(got, ref.parameters())]
    print(json.dumps({"stages": size, "params": len(got), "ref_params": len(ref.parameters()),
                      "logits_diff": float(np.abs(logits_seen - ref_logits).max()),
                      "param_diff": max(diffs)}), flush=True)
