"""nccl_allreduce's side of the contract with NCCL, on the emulator: a stand-in for CuPy's NCCL module
records what gpuedu asks of it and adds the other ranks' contributions into device memory, as NCCL would.
On a real GPU the gpu tier (test_ring.py, programs/ring_gpu.py) runs it against NCCL itself."""
import sys
import types

import numpy as np
import pytest

import gpuedu
from gpuedu.distributed import nccl as nccl_module


class FakeNccl(types.ModuleType):
    """What gpuedu uses of ``cupy.cuda.nccl``: ids, a communicator, allReduce, the type and op codes."""
    NCCL_FLOAT32, NCCL_FLOAT64, NCCL_INT32, NCCL_INT64, NCCL_SUM = 7, 8, 2, 4, 0

    def __init__(self, others):
        super().__init__("cupy.cuda.nccl")
        self.others, self.made, self.calls = others, [], []
        fake = self

        class NcclCommunicator:
            def __init__(self, nranks, uid, rank):
                fake.made.append((nranks, uid, rank))

            def allReduce(self, send, recv, count, dtype, op, stream):
                fake.calls.append((send, recv, count, dtype, op, stream))
                drv = gpuedu.setup("cpu", verbose=False).driver
                host = np.empty(count, {fake.NCCL_FLOAT32: np.float32, fake.NCCL_FLOAT64: np.float64,
                                        fake.NCCL_INT32: np.int32, fake.NCCL_INT64: np.int64}[dtype])
                drv.memcpy_dtoh(host, send)
                for other in fake.others:                     # what the other ranks hold
                    host += other.astype(host.dtype)
                drv.memcpy_htod(recv, host)

        self.NcclCommunicator = NcclCommunicator

    def get_unique_id(self):
        return ("unique", 42)

    def get_version(self):
        return 22000


class Comm:
    """Rank 0 of ``size`` ranks, every one of which passes the same buffer unless ``theirs`` says otherwise."""

    def __init__(self, size=2, theirs=None):
        self.size, self.theirs, self.bcasts = size, theirs, []

    def Get_rank(self):
        return 0

    def Get_size(self):
        return self.size

    def bcast(self, obj, root=0):
        self.bcasts.append((obj, root))
        return obj

    def allgather(self, mine):
        return [mine] + [self.theirs or mine] * (self.size - 1)


def cpu_backend():
    """The emulator, where this process may use it; these tests stand a fake NCCL in for CuPy's on it (a process
    already on a GPU, as under gpu-check's tests step, cannot switch: the gpu tier runs NCCL for real)."""
    try:
        return gpuedu.setup("cpu", verbose=False)
    except gpuedu.backend.BackendError as e:
        pytest.skip(f"needs the emulator in this process: {e}")


@pytest.fixture
def fake_nccl(monkeypatch):
    backend = cpu_backend()

    def install(others=()):
        fake = FakeNccl(list(others))
        cupy, cuda = types.ModuleType("cupy"), types.ModuleType("cupy.cuda")
        cuda.nccl, cupy.cuda = fake, cuda
        monkeypatch.setitem(sys.modules, "cupy", cupy)
        monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
        monkeypatch.setitem(sys.modules, "cupy.cuda.nccl", fake)
        monkeypatch.setattr(nccl_module, "nccl_available", lambda: (True, "NCCL 22000 through CuPy (a stand-in)"))
        monkeypatch.setattr(nccl_module, "_communicators", {})
        return fake
    return backend, install


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_the_sum_lands_in_the_gpuarray_in_place(fake_nccl, dtype):
    backend, install = fake_nccl
    other = np.arange(5, dtype=dtype) * 10
    fake = install([other])
    mine = np.arange(5, dtype=dtype)
    buf = backend.gpuarray.to_gpu(mine)
    assert nccl_module.nccl_allreduce(Comm(), buf) is buf
    np.testing.assert_array_equal(buf.get(), mine + other)
    ((send, recv, count, code, op, stream),) = fake.calls
    assert send == recv == int(buf.gpudata) and count == 5 and op == fake.NCCL_SUM and stream == 0
    assert code == {np.float32: fake.NCCL_FLOAT32, np.float64: fake.NCCL_FLOAT64,
                    np.int32: fake.NCCL_INT32, np.int64: fake.NCCL_INT64}[dtype]


def test_rank_0_makes_the_id_mpi_hands_it_out_and_the_communicator_is_made_once(fake_nccl):
    backend, install = fake_nccl
    fake = install()
    comm = Comm(size=2)
    buf = backend.gpuarray.to_gpu(np.ones(3, np.float32))
    nccl_module.nccl_allreduce(comm, buf)
    nccl_module.nccl_allreduce(comm, buf)
    assert comm.bcasts == [(("unique", 42), 0)]          # MPI's only job: the unique id, once
    assert fake.made == [(2, ("unique", 42), 0)]
    assert len(fake.calls) == 2


def test_a_stream_is_handed_to_nccl(fake_nccl):
    backend, install = fake_nccl
    fake = install()
    stream = backend.driver.Stream()
    nccl_module.nccl_allreduce(Comm(), backend.gpuarray.to_gpu(np.ones(4, np.float32)), stream=stream)
    assert fake.calls[0][5] == stream.handle


def test_bad_buffers_are_refused_with_what_to_do(fake_nccl):
    backend, install = fake_nccl
    fake = install()
    with pytest.raises(TypeError, match="takes a GPUArray, got ndarray: use ring_allreduce for NumPy"):
        nccl_module.nccl_allreduce(Comm(), np.ones(4, np.float32))
    with pytest.raises(TypeError, match="sums float32, float64, int32 or int64; got float16"):
        nccl_module.nccl_allreduce(Comm(), backend.gpuarray.to_gpu(np.ones(4, np.float16)))
    with pytest.raises(ValueError, match="the ranks' buffers differ .*rank 1: 5 x float32"):
        nccl_module.nccl_allreduce(Comm(theirs=(5, np.dtype(np.float32).str)),
                                   backend.gpuarray.to_gpu(np.ones(4, np.float32)))
    assert fake.calls == []


def test_without_a_gpu_it_says_so_before_touching_anything():
    backend = cpu_backend()
    ok, reason = nccl_module.nccl_available()
    assert not ok and "NCCL needs a real GPU" in reason and "ring_allreduce" in reason
    with pytest.raises(RuntimeError, match="NCCL needs a real GPU"):
        nccl_module.nccl_allreduce(Comm(), backend.gpuarray.zeros(4, np.float32))


def test_each_rank_is_pinned_to_a_gpu_of_its_own(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert nccl_module.pin_rank_to_gpu(1, 4) == "1"
    import os
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 5")         # an outer setting already chose two GPUs
    assert nccl_module.pin_rank_to_gpu(1, 2) == "5" and os.environ["CUDA_VISIBLE_DEVICES"] == "5"


def test_more_ranks_than_gpus_is_refused_with_how_many_to_start(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(ValueError, match=r"rank 2 has no GPU of its own among 2: .*mpiexec -n 2"):
        nccl_module.pin_rank_to_gpu(2, 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(ValueError, match="lists 1 GPU"):
        nccl_module.pin_rank_to_gpu(1, 2)
    with pytest.raises(TypeError, match="gpus must be an int"):
        nccl_module.pin_rank_to_gpu(0, 1.0)


def test_pinning_can_come_first_importing_it_starts_no_cuda():
    # pin_rank_to_gpu must run before CUDA starts: importing gpuedu.distributed may not import PyCUDA or CuPy
    import os
    import subprocess
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import sys; from gpuedu.distributed import pin_rank_to_gpu; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pycuda', 'cupy')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=repo))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
