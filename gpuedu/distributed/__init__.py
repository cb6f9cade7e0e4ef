"""gpuedu.distributed: training beyond one process with MPI (mpi4py), written as the lesson teaches it.

Install the optional extra first: ``pip install "gpuedu[mpi]"`` (mpi4py and MPICH from PyPI).  Programs run
under ``mpiexec -n N python -m mpi4py script.py``; ``run(script, ranks)`` does that from Python or a notebook.

Collectives
    ``ring_allreduce(comm, buf)``  sums a NumPy array or a GPUArray in place over every rank: reduce-scatter
        then all-gather, 2(N-1) send/receive steps, any length; lengths and dtypes are compared across ranks
        first, and a silent neighbour raises ``PeerTimeout`` instead of hanging.
    ``chunk_bounds(n, parts)``  how a buffer (or a batch) is cut among ranks.
    ``nccl_allreduce(comm, gpuarray)``  the same sum with NCCL through CuPy, on a real GPU (``nccl_available()``),
        one GPU per rank (``pin_rank_to_gpu(rank, gpus)`` before CUDA starts).
Data parallel
    ``DataParallel(model, comm)`` / ``fit_data_parallel(model, comm, x, y, epochs, batch_size, optimizer)``:
        shards of each global batch, gradients bucketed (``GradientBuckets``) and all-reduced, identical
        parameters on every rank (``parameters_identical``).
Pipeline (model parallel)
    ``PipelineStage(layers, comm)``: rank k runs stage k; ``train_step(x, y, micro_batches, optimizer)``.
The napkin math (``gpuedu.distributed.cost``)
    ``ring_seconds``, ``ring_bytes_sent``, ``bus_bandwidth``, ``fit_alpha_beta``, ``pipeline_bubble``.
"""
from . import cost
from .nccl import nccl_allreduce, nccl_available, pin_rank_to_gpu
from .mpi import MPIUnavailable, find_mpiexec, mpi_environment, mpi_status, mpiexec_command, mpiexec_prefix, run
from .parallel import (DataParallel, GradientBuckets, PipelineStage, broadcast_parameters, fit_data_parallel,
                       parameters_digest, parameters_identical)
from .ring import PeerTimeout, chunk_bounds, check_same_buffer, cuda_aware_mpi, ring_allreduce
