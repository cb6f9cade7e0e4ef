"""Ring all-reduce over an mpi4py communicator, written step by step as the lesson teaches it.

N ranks sit on a ring; rank r sends to r+1 and receives from r-1.  The buffer is cut into N chunks
(sizes differ by at most one element, so any length works, even one shorter than N).

1. Reduce-scatter, N-1 steps: in step s rank r sends chunk (r - s) mod N and adds the chunk
   (r - s - 1) mod N that arrives.  Afterwards rank r holds the complete sum of chunk (r + 1) mod N.
2. All-gather, N-1 steps: in step s rank r sends chunk (r + 1 - s) mod N and overwrites chunk (r - s) mod N
   with the one that arrives.  Afterwards every rank holds every complete chunk.

Each rank sends 2(N-1) chunks, 2(N-1)/N of the buffer, whatever N is: that is why the ring is
bandwidth-optimal.  Every complete chunk is summed on one rank and then copied, so all ranks end with
bit-identical results (data-parallel training relies on it: the parameters never drift apart).

Every receive waits at most ``timeout`` seconds: a rank that died or is stuck shows up as a
``PeerTimeout`` naming the silent neighbour instead of a hang.  Before the ring starts, the ranks compare
their buffers' lengths and dtypes, so a mismatch is named on every rank instead of corrupting the sum.
"""
import os
import time

import numpy as np

DEFAULT_TIMEOUT = 60.0        # seconds a receive may wait; GPUEDU_MPI_TIMEOUT overrides it
SUPPORTED_DTYPES = (np.float32, np.float64, np.int32, np.int64)
_TAG = 7301                   # tag of the ring's messages (checks use their own collectives)


class PeerTimeout(RuntimeError):
    """A neighbour on the ring sent nothing within the timeout: it died, hangs, or skipped the call."""


def default_timeout():
    raw = os.environ.get("GPUEDU_MPI_TIMEOUT")
    if raw is None:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"GPUEDU_MPI_TIMEOUT={raw!r} is not a number of seconds: set it to e.g. 60") from None
    if not value > 0:
        raise ValueError(f"GPUEDU_MPI_TIMEOUT={raw!r} must be a positive number of seconds")
    return value


def chunk_bounds(n, parts):
    """(start, stop) of each of ``parts`` chunks of ``n`` elements; the first n % parts are one longer."""
    if parts < 1:
        raise ValueError(f"parts must be at least 1, got {parts}")
    base, extra = divmod(int(n), int(parts))
    bounds, start = [], 0
    for i in range(parts):
        stop = start + base + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def wait_all(requests, timeout, what):
    """Wait for MPI requests, at most ``timeout`` seconds; PeerTimeout (after cancelling them) otherwise."""
    from mpi4py import MPI
    deadline = time.monotonic() + timeout
    polls = 0
    while not MPI.Request.Testall(requests):
        # Give the core away between polls: with more ranks than cores, the rank we wait for may need it.
        os.sched_yield()
        polls += 1
        if polls % 1024 == 0 and time.monotonic() > deadline:
            for req in requests:
                if req != MPI.REQUEST_NULL:
                    req.Cancel()
            raise PeerTimeout(f"{what}: nothing arrived within {timeout:g} s. A rank died, hangs, or "
                              f"did not make the same call; raise GPUEDU_MPI_TIMEOUT if it is only slow")


def check_same_buffer(comm, n, dtype, what="ring_allreduce"):
    """Every rank must reduce a buffer of the same length and dtype; raise on all ranks, naming them, if not."""
    mine = (int(n), np.dtype(dtype).str)
    everyone = comm.allgather(mine)
    if any(other != mine for other in everyone):
        listing = ", ".join(f"rank {r}: {size} x {np.dtype(dt).name}" for r, (size, dt) in enumerate(everyone))
        raise ValueError(f"{what}: the ranks' buffers differ ({listing}); every rank must pass a buffer of "
                         f"the same length and dtype")


def _host_view(buf):
    if not isinstance(buf, np.ndarray):
        raise TypeError(f"ring_allreduce takes a numpy.ndarray or a GPUArray, got {type(buf).__name__}")
    if buf.dtype.type not in SUPPORTED_DTYPES:
        names = ", ".join(np.dtype(t).name for t in SUPPORTED_DTYPES)
        raise TypeError(f"ring_allreduce sums {names}; got {buf.dtype}: convert with .astype(np.float32)")
    if not buf.flags.c_contiguous or not buf.flags.writeable:
        raise ValueError("ring_allreduce works in place on a writeable, C-contiguous array: "
                         "pass np.ascontiguousarray(buf) and use the result")
    return buf.reshape(-1)


def ring_steps(flat, comm, timeout, scratch=None, add=np.add):
    """The ring itself, in place on a 1-D array (or anything slicing like one, with ``add(a, b, out=a)``)."""
    size, rank = comm.Get_size(), comm.Get_rank()
    if size == 1:
        return flat
    bounds = chunk_bounds(flat.shape[0], size)
    right, left = (rank + 1) % size, (rank - 1) % size
    longest = max(stop - start for start, stop in bounds)
    if scratch is None:
        scratch = np.empty(longest, flat.dtype)

    def chunk(i):
        start, stop = bounds[i % size]
        return flat[start:stop]

    for phase, first in (("reduce-scatter", 0), ("all-gather", 1)):
        for step in range(size - 1):
            send = chunk(rank + first - step)
            recv_index = rank - step - 1 + first
            incoming = chunk(recv_index)
            target = scratch[:incoming.shape[0]] if phase == "reduce-scatter" else incoming
            reqs = [comm.Irecv(target, source=left, tag=_TAG), comm.Isend(send, dest=right, tag=_TAG)]
            wait_all(reqs, timeout, f"rank {rank}, ring_allreduce {phase} step {step + 1} of {size - 1}, "
                                    f"waiting for rank {left}")
            if phase == "reduce-scatter":
                add(incoming, target, out=incoming)
    return flat


def ring_allreduce(comm, buf, timeout=None, check=True, transport="auto"):
    """Sum ``buf`` over every rank of ``comm``, in place, with the ring algorithm; return ``buf``.

    ``buf``: a NumPy array (float32, float64, int32 or int64, C-contiguous) or a GPUArray.  Sizes need not
    divide by the number of ranks.  ``check`` compares lengths and dtypes across ranks first (one small
    collective).  ``timeout``: seconds each receive may wait (default 60, or GPUEDU_MPI_TIMEOUT).

    GPUArrays: ``transport="host"`` copies to the host, runs the ring there and copies back (always works,
    the emulator included); ``"device"`` hands device buffers to a CUDA-aware MPI and adds on the device
    (a real GPU and an MPI built with CUDA support); ``"auto"`` picks ``"device"`` when both hold.
    """
    timeout = default_timeout() if timeout is None else float(timeout)
    if hasattr(buf, "gpudata"):
        return _allreduce_gpuarray(comm, buf, timeout, check, transport)
    if transport not in ("auto", "host"):
        raise ValueError(f"transport={transport!r} is for GPUArrays; a NumPy buffer always goes through the host")
    flat = _host_view(buf)
    if check:
        check_same_buffer(comm, flat.shape[0], flat.dtype)
    ring_steps(flat, comm, timeout)
    return buf


def cuda_aware_mpi():
    """True when the MPI library says it can take CUDA device buffers (MPIX_Query_cuda_support)."""
    from mpi4py import MPI
    query = getattr(MPI, "Query_cuda_support", None)
    try:
        return bool(query()) if query is not None else False
    except Exception:          # an MPI without the MPIX extension raises NotImplementedError
        return False


def _allreduce_gpuarray(comm, buf, timeout, check, transport):
    from .. import backend
    if transport not in ("auto", "host", "device"):
        raise ValueError(f"transport must be 'auto', 'host' or 'device', got {transport!r}")
    on_gpu = backend.active().name == "cuda"
    if transport == "auto":
        transport = "device" if on_gpu and cuda_aware_mpi() else "host"
    if transport == "device":
        if not on_gpu:
            raise ValueError("transport='device' needs a real GPU: the CPU emulator's GPUArrays go through "
                             "the host (transport='host')")
        if not cuda_aware_mpi():
            raise ValueError("transport='device' needs an MPI built with CUDA support, and this one says it "
                             "is not (MPIX_Query_cuda_support); use transport='host'")
        return _ring_on_device(comm, buf, timeout, check)
    host = ring_allreduce(comm, buf.get(), timeout=timeout, check=check)   # the NumPy path, on a host copy
    buf.set(host)
    return buf


def _ring_on_device(comm, buf, timeout, check):
    """The same ring with device chunks handed to CUDA-aware MPI (``__cuda_array_interface__``)."""
    from .. import backend
    ga = backend.active().gpuarray
    if not buf.flags.c_contiguous:
        raise ValueError("ring_allreduce needs a contiguous GPUArray")
    flat = buf.reshape(buf.size)
    if check:
        check_same_buffer(comm, flat.shape[0], flat.dtype)
    # Kernels queued on any stream must finish before MPI reads the memory: MPI knows nothing of streams.
    backend.active().driver.Context.synchronize()
    longest = -(-flat.shape[0] // comm.Get_size())
    scratch = ga.empty(max(longest, 1), flat.dtype)

    def add(a, b, out):
        out += b
        backend.active().driver.Context.synchronize()

    ring_steps(flat, comm, timeout, scratch=scratch, add=add)
    return buf
