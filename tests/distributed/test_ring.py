"""ring_allreduce on 1 to 4 real MPI processes (mpiexec), against MPI.Allreduce; and the faults."""
import json
import os

import numpy as np
import pytest

from gpuedu.distributed import chunk_bounds, mpi, ring_allreduce

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")
MPI_OK, MPI_REASON = mpi.mpi_status()
needs_mpi = pytest.mark.skipif(not MPI_OK, reason=MPI_REASON)


class Solo:
    """A communicator of one rank, without MPI: enough for the checks that need no messages."""

    def Get_size(self):
        return 1

    def Get_rank(self):
        return 0

    def allgather(self, x):
        return [x]


def rank_lines(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("n, parts", [(10, 4), (3, 4), (0, 2), (7, 1), (4099, 3)])
def test_chunk_bounds_cover_the_buffer_evenly(n, parts):
    bounds = chunk_bounds(n, parts)
    assert len(bounds) == parts and bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    sizes = [stop - start for start, stop in bounds]
    assert max(sizes) - min(sizes) <= 1


@needs_mpi
@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_ring_allreduce_equals_mpi_allreduce(ranks):
    done = mpi.run(os.path.join(PROGRAMS, "ring_cases.py"), ranks, timeout=300)
    lines = rank_lines(done.stdout)
    assert sorted(l["rank"] for l in lines) == list(range(ranks))
    for line in lines:
        cases = line["results"]
        assert cases[-1] == {"grid_ok": True}
        assert len(cases) == 19
        for case in cases[:-1]:
            assert case["numpy_err"] <= case["tol"], case
            assert case["gpuarray_err"] <= case["tol"], case
    # every rank ends with bit-identical sums
    for i in range(len(lines[0]["results"]) - 1):
        assert len({l["results"][i]["digest"] for l in lines}) == 1


@needs_mpi
def test_mismatched_buffers_are_named_on_every_rank():
    done = mpi.run(os.path.join(PROGRAMS, "faults.py"), 3, ["mismatch"], timeout=120)
    refused = [l for l in done.stdout.splitlines() if "refused" in l]
    assert len(refused) == 3
    assert all("rank 1: 12 x float32" in l and "rank 0: 10 x float32" in l for l in refused)


@needs_mpi
@pytest.mark.parametrize("case", ["raise", "die"])
def test_a_failing_rank_ends_the_run_with_an_error(case):
    done = mpi.run(os.path.join(PROGRAMS, "faults.py"), 3, [case], timeout=120, check=False)
    assert done.returncode != 0
    if case == "raise":
        assert "rank 1 fails on purpose" in done.stderr


@needs_mpi
def test_a_silent_rank_gives_the_others_a_timeout_naming_it():
    done = mpi.run(os.path.join(PROGRAMS, "faults.py"), 2, ["silent"], timeout=120)
    assert "rank 0 timed out" in done.stdout
    assert "waiting for rank 1" in done.stdout


def test_one_rank_without_mpi_processes_is_the_identity():
    buf = np.arange(5, dtype=np.float32)
    assert ring_allreduce(Solo(), buf) is buf
    np.testing.assert_array_equal(buf, np.arange(5, dtype=np.float32))


@pytest.mark.parametrize("buf, error, words", [
    (np.ones(4, np.float16), TypeError, "float16"),
    (np.ones((4, 4), np.float32)[:, 1], ValueError, "C-contiguous"),
    ([1.0, 2.0], TypeError, "list"),
])
def test_bad_buffers_get_a_clear_error(buf, error, words):
    with pytest.raises(error, match=words):
        ring_allreduce(Solo(), buf)


def test_bad_timeout_setting_is_named(monkeypatch):
    from gpuedu.distributed.ring import default_timeout
    monkeypatch.setenv("GPUEDU_MPI_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="GPUEDU_MPI_TIMEOUT"):
        default_timeout()


@needs_mpi
@pytest.mark.gpu
def test_ring_allreduce_of_device_arrays_on_a_real_gpu():
    env_backend = os.environ.get("GPUEDU_BACKEND")
    os.environ["GPUEDU_BACKEND"] = "cuda"
    try:
        import pycuda.driver as drv
        drv.init()
        done = mpi.run(os.path.join(PROGRAMS, "ring_gpu.py"), 2, [drv.Device.count()], timeout=300)
    finally:
        if env_backend is None:
            os.environ.pop("GPUEDU_BACKEND")
        else:
            os.environ["GPUEDU_BACKEND"] = env_backend
    (line,) = rank_lines(done.stdout)
    for transport, err in line["worst"].items():
        assert err < 1e-4, (transport, err)
    assert ("device" in line["worst"]) == line["cuda_aware"]
    assert ("nccl" in line["worst"]) == (line["nccl"][0] and line["own_gpu"])
