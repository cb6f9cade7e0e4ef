"""Rank program: ring_allreduce against MPI.Allreduce for odd sizes, two dtypes, NumPy and GPUArray buffers.

Rank 0 prints one JSON line per rank: the cases checked and the largest differences found.
"""
import json

import numpy as np
from mpi4py import MPI

import gpuedu
from gpuedu.distributed import ring_allreduce

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
backend = gpuedu.setup("cpu", verbose=False)
results = []
for n in (0, 1, 2, 3, 5, 7, 64, 1001, 4099):
    for dtype in (np.float32, np.float64):
        rng = np.random.default_rng(1000 * rank + n)
        data = rng.standard_normal(n).astype(dtype)
        expect = np.empty_like(data)
        comm.Allreduce(data, expect, op=MPI.SUM)
        mine = data.copy()
        ring_allreduce(comm, mine)
        dev = backend.gpuarray.to_gpu(data.copy())
        ring_allreduce(comm, dev)
        got_dev = dev.get()
        tol = 1e-5 if dtype == np.float32 else 1e-12
        scale = max(1.0, float(np.abs(expect).max(initial=0)))
        results.append({"n": n, "dtype": np.dtype(dtype).name,
                        "numpy_err": float(np.abs(mine - expect).max(initial=0)) / scale,
                        "gpuarray_err": float(np.abs(got_dev - expect).max(initial=0)) / scale,
                        "tol": tol, "digest": mine.tobytes().hex()[:64]})
# a 2-D array is summed in place too
grid = np.full((3, 5), float(rank + 1), np.float32)
ring_allreduce(comm, grid)
results.append({"grid_ok": bool(np.all(grid == size * (size + 1) / 2))})
everyone = comm.gather({"rank": rank, "size": size, "results": results}, root=0)
if rank == 0:      # one writer: lines from several processes would interleave
    for line in everyone:
        print(json.dumps(line), flush=True)
