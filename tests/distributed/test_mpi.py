"""Finding and starting MPI: clear errors where it is missing, a time limit, the failing ranks' output."""
import subprocess
import sys

import pytest

from gpuedu.distributed import mpi


def test_missing_mpi4py_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)        # import mpi4py now raises ImportError
    ok, reason = mpi.mpi_status()
    assert not ok and "gpuedu[mpi]" in reason
    with pytest.raises(mpi.MPIUnavailable, match="gpuedu\\[mpi\\]"):
        mpi.mpiexec_command(2, "x.py")


def test_missing_mpiexec_names_the_extra(monkeypatch):
    monkeypatch.setattr(mpi, "find_mpiexec", lambda: None)
    ok, reason = mpi.mpi_status()
    assert not ok and "no mpiexec" in reason


@pytest.mark.parametrize("ranks", [0, -1, 1.5, True])
def test_bad_rank_counts_are_refused(ranks):
    with pytest.raises(ValueError, match="ranks"):
        mpi.mpiexec_command(ranks, "x.py")


def test_open_mpi_gets_oversubscribe_and_root_permission(monkeypatch):
    monkeypatch.setattr(mpi, "mpi_status", lambda: (True, ""))
    monkeypatch.setattr(mpi, "find_mpiexec", lambda: "/opt/mpi/bin/mpiexec")
    monkeypatch.setattr(mpi, "mpi_flavour", lambda path: "openmpi")
    cmd = mpi.mpiexec_command(4, "train.py", ["--epochs", 2])
    assert cmd[:4] == ["/opt/mpi/bin/mpiexec", "--oversubscribe", "-n", "4"]
    assert cmd[-5:] == ["-m", "mpi4py", "train.py", "--epochs", "2"]
    env = mpi.mpi_environment()
    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == "1" and env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    # what a notebook's shell cell puts before "-n 4 python -m mpi4py script.py" (lesson 12)
    assert mpi.mpiexec_prefix() == ["/opt/mpi/bin/mpiexec", "--oversubscribe"]
    monkeypatch.setattr(mpi, "mpi_flavour", lambda path: "mpich")
    assert mpi.mpiexec_prefix() == ["/opt/mpi/bin/mpiexec"]
    monkeypatch.setattr(mpi, "mpi_status", lambda: (False, "no mpiexec beside python: pip install 'gpuedu[mpi]'"))
    with pytest.raises(mpi.MPIUnavailable, match="gpuedu\\[mpi\\]"):
        mpi.mpiexec_prefix()


@pytest.mark.skipif(not mpi.mpi_status()[0], reason=mpi.mpi_status()[1])
def test_run_reports_a_failing_script_and_a_slow_one(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nprint('about to fail')\nsys.exit(4)\n")
    with pytest.raises(RuntimeError, match="failed .exit status") as info:
        mpi.run(bad, 2, timeout=120)
    assert "about to fail" in str(info.value)
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(60)\n")
    with pytest.raises(RuntimeError, match="did not finish within 2 s"):
        mpi.run(slow, 1, timeout=2)
    assert mpi.mpi_flavour(mpi.find_mpiexec()) in ("mpich", "openmpi")   # PyPI's MPICH, or a system's Open MPI
