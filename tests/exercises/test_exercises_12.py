"""Lesson 12's exercise: the learner's ring all-reduce, run on 1-4 MPI processes by the checker."""
import pytest

from gpuedu import exercises
from gpuedu.distributed import mpi

pytestmark = pytest.mark.skipif(not mpi.mpi_status()[0], reason=mpi.mpi_status()[1])
EX = "12.ring_allreduce"


def solution():
    return exercises.get(EX).solution


def test_the_solution_passes_on_every_rank_count(capsys):
    result = exercises.check(EX, solution())
    assert result, result.report()
    assert len(result.cases) == 4 and "4 ranks: 12 cases" in result.cases[-1]


def test_the_stub_does_not_pass_and_says_the_buffer_is_unchanged():
    result = exercises.check(EX, exercises.stub(EX), verbose=False)
    assert not result and result.kind == "unchanged"
    assert "FILL ME IN" in " ".join(result.notes)


def test_copying_instead_of_adding_is_a_wrong_value():
    wrong = solution().replace("incoming += scratch", "incoming[:] = scratch")
    result = exercises.check(EX, wrong, verbose=False)
    assert not result and result.kind == "wrong_values" and "2 ranks" in result.failure.case


def test_a_missing_all_gather_step_is_caught():
    wrong = solution().replace("for step in range(size - 1):                       # all-gather",
                               "for step in range(size - 2):                       # all-gather")
    assert wrong != solution()
    result = exercises.check(EX, wrong, verbose=False)
    assert not result and result.failure.kind in ("unchanged", "wrong_values")


def test_an_exception_on_a_rank_is_reported_with_its_line(tmp_path):
    program = tmp_path / "mine.py"
    program.write_text("def my_ring_allreduce(comm, buf):\n    raise ValueError('nope')\n")
    result = exercises.check(EX, str(program), verbose=False)
    assert not result and result.kind == "error"
    assert "ValueError: nope (line 2 of your program)" in result.failure.message


@pytest.mark.slow
def test_blocking_sends_of_large_chunks_deadlock_and_the_check_says_so():
    dead = solution().replace("comm.Sendrecv(chunk(rank - step), dest=right, recvbuf=scratch, source=left)",
                              "comm.Send(chunk(rank - step), dest=right)\n        comm.Recv(scratch, source=left)")
    assert dead != solution()
    result = exercises.check(EX, dead, verbose=False)
    assert not result and result.kind == "deadlock" and "Sendrecv" in result.failure.hint


@pytest.mark.parametrize("source, kind, words", [
    ("def f(:\n", "compile_error", "not valid Python"),
    ("def other(comm, buf):\n    pass\n", "missing_function", "my_ring_allreduce"),
    ("no_such_file.py", "bad_source", "no file"),
    (42, "bad_source", "int"),
])
def test_bad_programs_get_a_clear_verdict(source, kind, words):
    result = exercises.check(EX, source, verbose=False)
    assert not result and result.kind == kind and words in result.failure.message


def test_show_prints_the_program_stub(capsys):
    exercises.show(EX)
    out = capsys.readouterr().out
    assert "def my_ring_allreduce(comm, buf):" in out and "mpiexec" in out


def test_a_collective_is_not_a_ring_and_the_check_names_it():
    collective = '''from mpi4py import MPI


def my_ring_allreduce(comm, buf):
    comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
    return buf
'''
    result = exercises.check(EX, collective, verbose=False)
    assert not result and result.kind == "not_a_ring"
    assert "called comm.Allreduce, an MPI collective" in result.failure.message and "Sendrecv" in result.failure.hint


def test_a_gather_to_one_rank_and_back_is_not_a_ring():
    gather = '''import numpy as np


def my_ring_allreduce(comm, buf):
    size, rank = comm.Get_size(), comm.Get_rank()
    if rank == 0:
        other = np.empty_like(buf)
        for r in range(1, size):
            comm.Recv(other, source=r)
            buf += other
        for r in range(1, size):
            comm.Send(buf, dest=r)
    else:
        comm.Send(buf, dest=0)
        comm.Recv(buf, source=0)
    return buf
'''
    result = exercises.check(EX, gather, verbose=False)
    assert not result and result.kind == "not_a_ring"
    # on 2 ranks the root is both neighbours: the steps give it away ("a gather to one rank and back sends fewer")
    assert "a gather to one rank and back sends fewer" in result.failure.message


def test_the_ring_rules_by_hand():
    from gpuedu.exercises.lesson12 import judge_ring

    class Seen:     # what RingWatch writes down: (peer, bytes) sent and received, collectives called
        def __init__(self, sent, received, collectives=()):
            self.sent, self.received, self.collectives = sent, received, list(collectives)

    nbytes, size, rank = 4000, 4, 1                     # right 2, left 0; a chunk is 1000 bytes
    ring = Seen([(2, 1000)] * 6, [(0, 1000)] * 6)
    assert judge_ring(ring, rank, size, nbytes) is None
    assert judge_ring(Seen([], [], ["Allreduce"]), rank, size, nbytes)["message"].endswith(
        "called comm.Allreduce, an MPI collective that does the reduction itself: that is not your ring")
    assert "sent to rank 3, which is not its neighbour" in judge_ring(
        Seen([(3, 1000)] * 6, [(0, 1000)] * 6), rank, size, nbytes)["message"]
    assert "received from rank 2" in judge_ring(Seen([(2, 1000)] * 6, [(2, 1000)] * 6), rank, size, nbytes)["message"]
    assert "sent 4 messages where a ring of 4 ranks sends 2(N - 1) = 6" in judge_ring(
        Seen([(2, 1000)] * 4, [(0, 1000)] * 4), rank, size, nbytes)["message"]
    whole = judge_ring(Seen([(2, 4000)] * 6, [(0, 4000)] * 6), rank, size, nbytes)["message"]
    assert "sent 24,000 bytes where a ring sends about 2(N - 1)/N of the buffer, 6,000 bytes" in whole
    assert judge_ring(Seen([], []), 0, 1, nbytes) is None           # one rank: nothing to send
