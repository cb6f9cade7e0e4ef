"""Exercises of lessons/12_beyond_one_gpu.ipynb: the learner's own ring all-reduce, on real MPI processes."""
import numpy as np

from . import register
from ._program import ProgramExercise

SIZES = (1, 3, 4, 10, 1001, 1 << 18)     # shorter than the ranks, odd, and large enough for MPI's rendezvous


def _chunks(n, size):
    return [(n * i // size, n * (i + 1) // size) for i in range(size)]


# What a ring may not use: MPI's own collectives do the whole job (or gather it on one rank) in one call.
COLLECTIVES = frozenset("""
    Allreduce allreduce Reduce reduce Bcast bcast Gather gather Gatherv Allgather allgather Allgatherv Scatter
    scatter Scatterv Reduce_scatter Reduce_scatter_block Alltoall alltoall Alltoallv Scan scan Exscan exscan
    Iallreduce Ireduce Ibcast Igather Iallgather Ireduce_scatter Ialltoall
""".split())


def _nbytes(buf):
    """Bytes in an MPI buffer argument: an array, or [array, type] / [array, count, type]."""
    if isinstance(buf, (list, tuple)) and buf:
        buf = buf[0]
    return int(getattr(buf, "nbytes", 0))


class RingWatch:
    """The communicator the learner's function gets: every call goes to the real one, and what a ring is made
    of is written down: the ranks each message went to and came from, its bytes, and any collective called."""

    def __init__(self, comm):
        self._comm = comm
        self.sent, self.received, self.collectives = [], [], []    # (peer, bytes); names

    def __getattr__(self, name):
        attr = getattr(self._comm, name)
        if name in COLLECTIVES:
            def collective(*args, **kwargs):
                self.collectives.append(name)
                return attr(*args, **kwargs)
            return collective
        return attr

    def _send(self, buf, dest):
        self.sent.append((dest, _nbytes(buf)))

    def Send(self, buf, dest, tag=0):
        self._send(buf, dest)
        return self._comm.Send(buf, dest, tag)

    def Isend(self, buf, dest, tag=0):
        self._send(buf, dest)
        return self._comm.Isend(buf, dest, tag)

    def Ssend(self, buf, dest, tag=0):
        self._send(buf, dest)
        return self._comm.Ssend(buf, dest, tag)

    def Recv(self, buf, source=None, tag=None, status=None):
        source, tag = _any(source, tag)
        self.received.append((source, _nbytes(buf)))
        return self._comm.Recv(buf, source, tag, status)

    def Irecv(self, buf, source=None, tag=None):
        source, tag = _any(source, tag)
        self.received.append((source, _nbytes(buf)))
        return self._comm.Irecv(buf, source, tag)

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=None, recvtag=None, status=None):
        source, recvtag = _any(source, recvtag)
        self._send(sendbuf, dest)
        self.received.append((source, _nbytes(recvbuf)))
        return self._comm.Sendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag, status)

    def Sendrecv_replace(self, buf, dest, sendtag=0, source=None, recvtag=None, status=None):
        source, recvtag = _any(source, recvtag)
        self._send(buf, dest)
        self.received.append((source, _nbytes(buf)))
        return self._comm.Sendrecv_replace(buf, dest, sendtag, source, recvtag, status)

    def send(self, obj, dest, tag=0):
        self._send(obj, dest)
        return self._comm.send(obj, dest, tag)

    def isend(self, obj, dest, tag=0):
        self._send(obj, dest)
        return self._comm.isend(obj, dest, tag)

    def recv(self, buf=None, source=None, tag=None, status=None):
        source, tag = _any(source, tag)
        self.received.append((source, 0))
        return self._comm.recv(buf, source, tag, status)

    def sendrecv(self, sendobj, dest, sendtag=0, recvbuf=None, source=None, recvtag=None, status=None):
        source, recvtag = _any(source, recvtag)
        self._send(sendobj, dest)
        self.received.append((source, 0))
        return self._comm.sendrecv(sendobj, dest, sendtag, recvbuf, source, recvtag, status)


def _any(source, tag):
    """mpi4py's defaults for a receive's source and tag (MPI.ANY_SOURCE, MPI.ANY_TAG), whatever MPI's numbers."""
    from mpi4py import MPI
    return (MPI.ANY_SOURCE if source is None else source), (MPI.ANY_TAG if tag is None else tag)


def judge_ring(watch, rank, size, nbytes):
    """None when ``watch`` saw a ring all-reduce of ``nbytes`` on this rank, else what is missing (a dict)."""
    if size == 1:
        return None
    right, left = (rank + 1) % size, (rank - 1) % size
    hint = ("a ring sends only to the right neighbour (rank + 1) mod N and receives only from the left one, "
            "2(N - 1) times, each time one chunk of about 1/N of the buffer: comm.Sendrecv(chunk, dest=right, "
            "recvbuf=incoming, source=left)")
    if watch.collectives:
        return {"kind": "not_a_ring", "hint": hint,
                "message": f"the values are right, but rank {rank} called comm.{watch.collectives[0]}, an MPI "
                           f"collective that does the reduction itself: that is not your ring"}
    stranger = next((peer for peer, _ in watch.sent if peer != right), None)
    if stranger is None:
        from mpi4py import MPI
        stranger = next((peer for peer, _ in watch.received if peer not in (left, MPI.ANY_SOURCE)), None)
        direction = "received from"
    else:
        direction = "sent to"
    if stranger is not None:
        return {"kind": "not_a_ring", "hint": hint,
                "message": f"the values are right, but rank {rank} {direction} rank {stranger}, which is not its "
                           f"neighbour in the ring (right {right}, left {left}): gathering to one rank and sending "
                           f"back is not a ring, and its one rank moves N times the data"}
    steps = len(watch.sent)
    if steps != 2 * (size - 1):
        return {"kind": "not_a_ring", "hint": hint,
                "message": f"the values are right, but rank {rank} sent {steps} message{'s' if steps != 1 else ''} "
                           f"where a ring of {size} ranks sends 2(N - 1) = {2 * (size - 1)}, one per reduce-scatter "
                           f"and all-gather step (a gather to one rank and back sends fewer)"}
    sent = sum(b for _, b in watch.sent)
    ideal = 2 * (size - 1) * nbytes / size
    slack = 2 * (size - 1) * (nbytes / size + 16)      # chunks differ from 1/N by at most an element
    if abs(sent - ideal) > slack:
        return {"kind": "not_a_ring", "hint": hint,
                "message": f"the values are right, but rank {rank} sent {sent:,} bytes where a ring sends about "
                           f"2(N - 1)/N of the buffer, {ideal:,.0f} bytes: each step should move one chunk"}
    return None


def ring_cases(function, comm, seed):
    """Every rank: run the learner's function on each case, compare with MPI.Allreduce and check that it is a
    ring (neighbours only, 2(N - 1) steps, about 2(N - 1)/N of the buffer sent); say what is wrong."""
    from mpi4py import MPI
    rank, size = comm.Get_rank(), comm.Get_size()
    results = []
    for n in SIZES:
        for dtype in (np.float32, np.float64):
            label = f"n = {n}, {np.dtype(dtype).name}"
            data = np.random.default_rng([seed, rank, n]).standard_normal(n).astype(dtype)
            expect = np.empty_like(data)
            comm.Allreduce(data, expect, op=MPI.SUM)
            buf = data.copy()
            watch = RingWatch(comm)
            function(watch, buf)
            tol = (1e-5 if dtype == np.float32 else 1e-12) * max(1.0, float(np.abs(expect).max()))
            wrong = np.abs(buf - expect) > tol
            digests = comm.allgather(buf.tobytes())
            entry = {"case": label, "ok": not wrong.any() and len(set(digests)) == 1}
            values_right = comm.allgather(not wrong.any())      # (the real communicator: not the learner's)
            if wrong.any():
                entry.update(_diagnose(buf, data, expect, wrong, rank, size, n))
            elif all(values_right) and (verdict := judge_ring(watch, rank, size, data.nbytes)) is not None:
                entry.update(verdict, ok=False)
            elif not entry["ok"]:
                entry.update(kind="ranks_differ", message=f"every rank holds the sum to within rounding, "
                             f"but not bit for bit the same one (rank {rank} differs from another)",
                             hint="each complete chunk should be summed on one rank and then copied to the others "
                                  "(the all-gather copies, it does not add): then all ranks agree exactly, and "
                                  "data-parallel training keeps identical weights")
            results.append(entry)
    return results


def _diagnose(buf, data, expect, wrong, rank, size, n):
    first = int(np.argmax(wrong))
    message = (f"on rank {rank}, {int(wrong.sum())} of {n} elements are wrong; the first at index {first}: "
               f"expected {expect[first]:.6g}, got {buf[first]:.6g}")
    if np.array_equal(buf, data):
        return {"kind": "unchanged", "message": message,
                "hint": "buf still holds this rank's own values: sum in place, into buf itself (buf[a:b] += "
                        "what arrived), do not rebind the name to a new array, and let the all-gather bring "
                        "every complete chunk to every rank (N - 1 steps)"}
    bad_chunks = [i for i, (a, b) in enumerate(_chunks(n, size)) if wrong[a:b].any()]
    if size > 1 and n < size:
        hint = (f"n = {n} is smaller than the {size} ranks, so some chunks are empty: send and receive them "
                f"anyway (zero elements), so every rank makes the same 2(N-1) steps")
    elif len(bad_chunks) < size:
        hint = (f"chunks {bad_chunks} of {size} are wrong, the others right: in reduce-scatter step s rank r sends "
                f"chunk (r - s) mod N and adds into chunk (r - s - 1) mod N; in all-gather it sends chunk "
                f"(r + 1 - s) mod N and copies into chunk (r - s) mod N")
    else:
        hint = ("every chunk is wrong: check that reduce-scatter adds what arrives and the all-gather copies it "
                "(adding there counts values twice), each for N - 1 steps")
    return {"kind": "wrong_values", "message": message, "hint": hint}


register(ProgramExercise(
    id="12.ring_allreduce",
    title="Your own ring all-reduce on MPI processes",
    text="Sum a 1-D NumPy array over every rank of an mpi4py communicator, in place, with the ring: cut the "
         "buffer into N chunks (N ranks); N - 1 reduce-scatter steps, in each of which every rank sends one "
         "chunk to its right neighbour and adds the chunk arriving from its left one into its own copy; then "
         "N - 1 all-gather steps that pass the complete chunks round the ring, copying them. Every rank must "
         "end with the same sum as MPI.Allreduce, for any length (even one shorter than N). Use "
         "comm.Sendrecv (or Isend and Recv): if every rank first makes a blocking Send of a large chunk, "
         "they all wait for a receive no one has posted.",
    function="my_ring_allreduce",
    rank_cases=ring_cases,
    stub='''import numpy as np


def my_ring_allreduce(comm, buf):
    """Sum buf (a 1-D NumPy array) over every rank of comm, in place, with a ring."""
    size, rank = comm.Get_size(), comm.Get_rank()
    right, left = (rank + 1) % size, (rank - 1) % size
    bounds = [(len(buf) * i // size, len(buf) * (i + 1) // size) for i in range(size)]   # chunk i: buf[a:b]
    # FILL ME IN (roughly 10 lines: N - 1 reduce-scatter steps, then N - 1 all-gather steps)
''',
    solution='''import numpy as np


def my_ring_allreduce(comm, buf):
    """Sum buf (a 1-D NumPy array) over every rank of comm, in place, with a ring."""
    size, rank = comm.Get_size(), comm.Get_rank()
    right, left = (rank + 1) % size, (rank - 1) % size
    bounds = [(len(buf) * i // size, len(buf) * (i + 1) // size) for i in range(size)]   # chunk i: buf[a:b]

    def chunk(i):
        a, b = bounds[i % size]
        return buf[a:b]

    for step in range(size - 1):                       # reduce-scatter: add what arrives
        incoming = chunk(rank - step - 1)
        scratch = np.empty_like(incoming)
        comm.Sendrecv(chunk(rank - step), dest=right, recvbuf=scratch, source=left)
        incoming += scratch
    for step in range(size - 1):                       # all-gather: copy the complete chunks
        comm.Sendrecv(chunk(rank + 1 - step), dest=right, recvbuf=chunk(rank - step), source=left)
    return buf
''',
    launch="your file runs under mpiexec on 1, 2, 3 and 4 ranks; on each, my_ring_allreduce(comm, buf) is called "
           "for lengths 1, 3, 4, 10, 1001 and 262144 in float32 and float64 and compared with MPI.Allreduce "
           "(and every rank must end bit-identical); the check also watches the messages: each rank talks to its "
           "neighbours only, 2(N - 1) times, sending about 2(N - 1)/N of the buffer (an MPI collective, or a gather "
           "to one rank and back, is not a ring)",
    time_limit=30.0,
    deadlock_hint="the ranks wait for each other: if each first makes a blocking comm.Send of a large chunk, MPI "
                  "holds it until the neighbour posts the matching receive, which it never does because it "
                  "is sending too. Use comm.Sendrecv(send, dest=right, recvbuf=incoming, source=left), or "
                  "comm.Isend, then comm.Recv, then wait on the send's request.",
))
