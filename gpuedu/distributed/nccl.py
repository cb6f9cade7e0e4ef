"""All-reduce of GPUArrays with NCCL, reached through CuPy, with MPI only to hand out NCCL's unique id.

NCCL is what PyTorch and most GPU trainers use underneath: it runs rings and trees over NVLink, PCIe and
InfiniBand, on the GPU's own streams.  Needs a real GPU, CuPy built with NCCL (``pip install cupy-cuda12x``)
and one process per GPU (``pin_rank_to_gpu`` gives each rank its own, before CUDA starts).  gpuedu's PyCUDA works in the device's primary context, the one CuPy uses, so a
GPUArray's pointer can be handed to NCCL as it is.
"""
import os

NCCL_HINT = "install CuPy with NCCL for your CUDA (e.g. pip install cupy-cuda12x), one process per GPU"

_communicators = {}


def pin_rank_to_gpu(rank, gpus):
    """Let this process see only GPU number ``rank`` of the ``gpus`` it could see, as its device 0.

    NCCL takes one rank per GPU (two ranks on one GPU are refused), and PyCUDA and CuPy both work on device 0:
    call this with the node-local rank before anything starts CUDA in the process (before ``gpuedu.setup()``).
    It narrows ``CUDA_VISIBLE_DEVICES`` (keeping the GPUs an outer setting already chose) and returns its value.
    An MPI built with CUDA support may start CUDA in ``MPI_Init`` already; with one, set ``CUDA_VISIBLE_DEVICES``
    per rank where the ranks are started instead (a wrapper script around the program, or the scheduler).
    """
    for name, value in (("rank", rank), ("gpus", gpus)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if gpus < 1 or not 0 <= rank < gpus:
        raise ValueError(f"rank {rank} has no GPU of its own among {gpus}: NCCL needs one GPU per rank, so start "
                         f"at most {gpus} rank(s) (mpiexec -n {max(gpus, 1)})")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    choices = [v.strip() for v in visible.split(",") if v.strip()] if visible else [str(i) for i in range(gpus)]
    if len(choices) < gpus:
        raise ValueError(f"CUDA_VISIBLE_DEVICES={visible!r} lists {len(choices)} GPU(s), fewer than the {gpus} "
                         f"given: pass the number of GPUs this process can see")
    os.environ["CUDA_VISIBLE_DEVICES"] = choices[rank]
    return choices[rank]


def nccl_available():
    """(available, reason)."""
    from .. import backend
    if backend.active().name != "cuda":
        return False, "NCCL needs a real GPU: the CPU emulator's GPUArrays use ring_allreduce(transport='host')"
    try:
        from cupy.cuda import nccl
    except Exception as e:          # ImportError, or CuPy built without NCCL
        return False, f"CuPy with NCCL is not importable ({type(e).__name__}: {e}): {NCCL_HINT}"
    return True, f"NCCL {nccl.get_version()} through CuPy"


def _communicator(comm):
    from cupy.cuda import nccl
    key = id(comm)
    nc = _communicators.get(key)
    if nc is None:
        uid = nccl.get_unique_id() if comm.Get_rank() == 0 else None
        uid = comm.bcast(uid, root=0)        # the only thing MPI does here
        nc = nccl.NcclCommunicator(comm.Get_size(), uid, comm.Get_rank())
        _communicators[key] = nc
    return nc


def nccl_allreduce(comm, buf, stream=None):
    """Sum the GPUArray ``buf`` over every rank of the mpi4py ``comm`` with NCCL, in place; return ``buf``.

    ``stream``: a ``pycuda.driver.Stream`` to run on (the default stream otherwise); kernels that wrote
    ``buf`` on another stream must be finished or ordered before it (a stream's ``synchronize()``).
    """
    import numpy as np
    ok, reason = nccl_available()
    if not ok:
        raise RuntimeError(reason)
    from cupy.cuda import nccl
    types = {np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64,
             np.dtype(np.int32): nccl.NCCL_INT32, np.dtype(np.int64): nccl.NCCL_INT64}
    if not hasattr(buf, "gpudata"):
        raise TypeError(f"nccl_allreduce takes a GPUArray, got {type(buf).__name__}: use ring_allreduce for NumPy")
    if np.dtype(buf.dtype) not in types:
        raise TypeError(f"nccl_allreduce sums float32, float64, int32 or int64; got {buf.dtype}")
    from .ring import check_same_buffer
    check_same_buffer(comm, buf.size, buf.dtype, "nccl_allreduce")
    handle = 0 if stream is None else stream.handle
    ptr = int(buf.gpudata)
    _communicator(comm).allReduce(ptr, ptr, buf.size, types[np.dtype(buf.dtype)], nccl.NCCL_SUM, handle)
    if stream is None:
        from .. import backend
        backend.active().driver.Context.synchronize()
    return buf
