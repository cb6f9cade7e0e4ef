"""Starting MPI programs: find ``mpiexec`` and ``mpi4py``, run a script on N ranks with a time limit.

The course uses MPICH from PyPI (``pip install "gpuedu[mpi]"``): its ``mpiexec`` runs any number of ranks on
any number of cores, as root too, with no flags and no network.  Open MPI from PyPI works as well but
refuses root without ``OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1`` and more ranks than
cores without ``--oversubscribe``; ``mpiexec_command`` adds those when it finds Open MPI.

Scripts run as ``python -m mpi4py script.py``: an exception left uncaught on one rank then aborts every
rank (MPI_Abort), instead of leaving the others waiting for it forever.
"""
import os
import shutil
import signal
import subprocess
import sys

INSTALL_HINT = 'pip install "gpuedu[mpi]"  (mpi4py and MPICH, both from PyPI)'


class MPIUnavailable(RuntimeError):
    """mpi4py or an mpiexec is missing."""


def find_mpiexec():
    """The ``mpiexec`` beside this Python (a PyPI MPI installs it there) or on PATH; None if there is none."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("mpiexec")


def mpi_status():
    """(usable, reason): whether mpi4py imports and an mpiexec exists, and what to install if not."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False, f"mpi4py is not installed: {INSTALL_HINT}"
    if find_mpiexec() is None:
        return False, f"no mpiexec beside {sys.executable} or on PATH: {INSTALL_HINT}"
    return True, "mpi4py and mpiexec found"


def mpi_flavour(mpiexec):
    """'mpich', 'openmpi' or 'unknown', from ``mpiexec --version``."""
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    low = out.lower()
    if "open mpi" in low or "open-mpi" in low or "openrte" in low:
        return "openmpi"
    if "hydra" in low or "mpich" in low:
        return "mpich"
    return "unknown"


def mpiexec_prefix():
    """``mpiexec`` and the flags this machine's MPI needs before ``-n``: Open MPI's ``--oversubscribe``
    (more ranks than cores), nothing for MPICH. Raises MPIUnavailable, saying what to install, if there is none."""
    ok, reason = mpi_status()
    if not ok:
        raise MPIUnavailable(reason)
    mpiexec = find_mpiexec()
    return [mpiexec, *(["--oversubscribe"] if mpi_flavour(mpiexec) == "openmpi" else [])]


def mpiexec_command(ranks, script, args=()):
    """The command that runs ``script`` on ``ranks`` processes with this Python."""
    if not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 1:
        raise ValueError(f"ranks must be a positive integer, got {ranks!r}")
    return [*mpiexec_prefix(), "-n", str(ranks), sys.executable, "-m", "mpi4py", str(script), *map(str, args)]


def mpi_environment():
    """This environment plus what Open MPI needs to run as root (harmless for MPICH): a notebook whose
    shell cells start ``mpiexec`` itself does ``os.environ.update(mpi_environment())`` once."""
    env = dict(os.environ)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


def run(script, ranks, args=(), timeout=300, check=True):
    """Run ``script`` on ``ranks`` MPI processes; return the CompletedProcess (stdout and stderr as text).

    ``timeout`` seconds for the whole run (the processes are killed after it).  ``check``: raise
    RuntimeError with the ranks' output when the run fails, so a notebook shows what went wrong.
    """
    cmd = mpiexec_command(ranks, script, args)
    # A session of its own, so a run past its time is killed whole: mpiexec, its proxies and every rank.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, env=mpi_environment(), start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, _ = proc.communicate()
        raise RuntimeError(f"{os.path.basename(str(script))} on {ranks} ranks did not finish within {timeout} s "
                           f"(killed). Its output so far:\n{stdout[-2000:]}") from None
    done = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    if check and done.returncode != 0:
        raise RuntimeError(f"{os.path.basename(str(script))} on {ranks} ranks failed (exit status "
                           f"{done.returncode}).\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}")
    return done
