"""Rank program for the gpu tier: ring_allreduce on real GPUArrays, through the host and, where the MPI
is CUDA-aware, with device buffers, and with NCCL where CuPy brings it and every rank has a GPU of its own
(argument: how many GPUs the machine has).  Rank 0 prints one JSON line."""
import json
import sys

import numpy as np
from mpi4py import MPI

from gpuedu.distributed import cuda_aware_mpi, nccl_allreduce, nccl_available, pin_rank_to_gpu, ring_allreduce

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
gpus = int(sys.argv[1]) if len(sys.argv) > 1 else 1
own_gpu = gpus >= comm.Get_size()               # NCCL refuses two ranks on one GPU
if own_gpu:
    pin_rank_to_gpu(rank, gpus)                 # before CUDA starts in this process
import gpuedu  # noqa: E402  (after the GPU is chosen)

backend = gpuedu.setup("cuda", verbose=False)
transports = (["host"] + (["device"] if cuda_aware_mpi() else [])
              + (["nccl"] if nccl_available()[0] and own_gpu else []))
worst = {}
for transport in transports:
    err = 0.0
    for n in (1, 7, 1001, 1 << 20):
        x = np.random.default_rng([rank, n]).standard_normal(n).astype(np.float32)
        expect = np.empty_like(x)
        comm.Allreduce(x, expect)
        dev = backend.gpuarray.to_gpu(x)
        if transport == "nccl":
            nccl_allreduce(comm, dev)
        else:
            ring_allreduce(comm, dev, transport=transport)
        err = max(err, float(np.abs(dev.get() - expect).max()))
    worst[transport] = comm.allreduce(err, op=MPI.MAX)
if rank == 0:
    print(json.dumps({"worst": worst, "cuda_aware": cuda_aware_mpi(), "nccl": nccl_available(), "own_gpu": own_gpu}))
