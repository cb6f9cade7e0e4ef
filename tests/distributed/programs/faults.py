"""Rank program for the fault tests; the first argument picks what goes wrong.

mismatch  rank 1 passes a longer buffer: every rank must raise ValueError naming the sizes
raise     rank 1 raises before the all-reduce: python -m mpi4py aborts every rank
die       rank 1 exits at once, without a word: mpiexec ends the run
silent    rank 1 skips the all-reduce and waits: the others' receives time out (PeerTimeout)
"""
import os
import sys
import time

import numpy as np
from mpi4py import MPI

from gpuedu.distributed import PeerTimeout, ring_allreduce

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
case = sys.argv[1]
buf = np.ones(10, np.float32)
if case == "mismatch":
    if rank == 1:
        buf = np.ones(12, np.float32)
    try:
        ring_allreduce(comm, buf)
        said = f"rank {rank} summed"
    except ValueError as e:
        said = f"rank {rank} refused: {e}"
    said = comm.gather(said, root=0)      # one writer: lines from several processes would interleave
    if rank == 0:
        print("\n".join(said), flush=True)
elif case == "raise":
    if rank == 1:
        raise RuntimeError("rank 1 fails on purpose")
    ring_allreduce(comm, buf, timeout=120)
elif case == "die":
    if rank == 1:
        os._exit(3)
    ring_allreduce(comm, buf, timeout=120)
elif case == "silent":
    if rank == 1:
        time.sleep(4)        # never joins; the others give up after 1 s
    else:
        try:
            ring_allreduce(comm, buf, timeout=1.0, check=False)
        except PeerTimeout as e:
            print(f"rank {rank} timed out: {e}", flush=True)
else:
    raise SystemExit(f"unknown case {case!r}")
