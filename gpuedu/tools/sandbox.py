"""A sandbox for code that the grader did not write: a submitted notebook, and the checks of its answers.

``run(argv, limits, files=...)`` runs ``argv`` under bubblewrap (``bwrap``, Debian's ``bubblewrap`` package) in
new user, mount, PID, network, IPC and UTS namespaces, with every capability dropped:

- the file system is the system's (``/usr``, ``/etc`` less its password hashes, ``/opt``) and this Python's
  installation with gpuedu, all read-only; nothing else of the host is there: no home folder, no other
  submission, no solution, no ``/tmp``, ``/var`` or ``/run``;
- ``/scratch`` (the working folder, where ``files`` are copied in) and ``/tmp`` are private tmpfs folders of
  ``limits.disk`` bytes each, gone when the command ends: nothing a submission writes reaches the host;
- there is no network (a loopback device only);
- limits: wall time (``limits.seconds``), memory (the sum of the resident memory of every process, and on the
  emulator each process's address space), processes (``limits.processes``, counted by a watchdog, and
  ``RLIMIT_NPROC`` where the kernel applies it), a file's size, and what the command prints (``limits.output``);
- the kernel cache is private (``$GPUEDU_CACHE_DIR`` in ``/tmp``), so one submission cannot plant a compiled
  kernel that another loads;
- on a GPU machine the NVIDIA device nodes are passed in.

What comes back is what the command printed on stdout and stderr (at most ``limits.output`` bytes), its exit
status, and, when a limit stopped it, which one (``Outcome.stopped``).

``run(..., sandbox=False)`` runs the same command with the same limits and a private scratch folder, but
without namespaces: for machines where no sandbox can be made, when the instructor says so
(``gpuedu grade --no-sandbox``).
"""
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Optional

GIB = 1 << 30
MIB = 1 << 20
SCRATCH = "/scratch"
SYSTEM_TREES = ("/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
HIDDEN_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers")
HIDDEN_TREES = ("/etc/ssh", "/etc/sudoers.d", "/etc/ssl/private")
# what of the host's environment a sandboxed command keeps; everything else is left out (tokens, proxies...)
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "CC", "CXX", "GPUEDU_BACKEND", "GPUEDU_EMULATOR_THREADS",
            "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "CUDA_VISIBLE_DEVICES", "CUDA_HOME")
WATCH_EVERY = 0.05    # seconds between the watchdog's looks at the sandbox's processes


class SandboxUnavailable(RuntimeError):
    """No sandbox can be made on this machine; the message says why and what to do."""


@dataclass
class Limits:
    seconds: float = 600.0
    memory: int = 4 * GIB          # bytes: resident memory of all the processes together
    processes: int = 256
    output: int = 8 * MIB          # bytes of stdout + stderr
    disk: int = 1 * GIB            # bytes in /scratch, and again in /tmp
    file_size: int = 1 * GIB       # bytes in one file (RLIMIT_FSIZE)

    def describe(self, what):
        return {"time": f"the time limit ({self.seconds:g} s)",
                "memory": f"the memory limit ({self.memory / GIB:g} GiB)",
                "processes": f"the process limit ({self.processes} processes)",
                "output": f"the output limit ({self.output / MIB:g} MiB)"}[what]


@dataclass
class Outcome:
    returncode: Optional[int]
    stdout: str
    stderr: str
    stopped: Optional[str] = None      # "time", "memory", "processes", "output", or None
    seconds: float = 0.0
    peak_processes: int = 0
    peak_memory: int = 0
    sandboxed: bool = True

    @property
    def crashed(self):
        """The signal that killed the command (when no limit did), or None."""
        if self.stopped is None and self.returncode is not None and self.returncode < 0:
            return signal.Signals(-self.returncode).name
        return None


def bwrap_path():
    return shutil.which("bwrap")


_probe_cache = {}


def available():
    """(True, "") when a sandbox can be made here, else (False, why and what to do)."""
    if "result" in _probe_cache:
        return _probe_cache["result"]
    if not sys.platform.startswith("linux"):
        result = (False, f"the sandbox uses Linux namespaces, and this is {sys.platform}: grade on Linux (a "
                         f"container or a virtual machine will do)")
    elif bwrap_path() is None:
        result = (False, "bubblewrap is not installed: sudo apt install bubblewrap (Debian, Ubuntu), "
                         "sudo dnf install bubblewrap (Fedora)")
    else:
        try:
            probe = subprocess.run(_bwrap_prefix(gpu=False) + ["--", "true"], capture_output=True, text=True,
                                   timeout=30, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            probe = subprocess.CompletedProcess([], 1, "", str(e))
        if probe.returncode == 0:
            result = (True, "")
        else:
            why = (probe.stderr.strip().splitlines() or ["no message"])[-1]
            result = (False, f"bubblewrap could not make a sandbox here ({why}). Unprivileged user namespaces "
                             f"may be off: sudo sysctl kernel.unprivileged_userns_clone=1 (Debian), or on Ubuntu "
                             f"24.04 an AppArmor profile for bwrap; in a container, run it with --privileged or "
                             f"grade on the host")
    _probe_cache["result"] = result
    return result


def _python_trees():
    """The folders this Python and gpuedu are imported from (read-only in the sandbox): the prefixes, gpuedu's
    package, and the import path of ``python -I`` (site-packages and what their .pth files add), which leaves
    out the current folder and $PYTHONPATH: a folder the grader happens to stand in is not shown."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))       # gpuedu/, above gpuedu/tools/
    trees = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
             package}
    trees.update(isolated_path())
    trees = sorted(os.path.realpath(t) for t in trees if t and os.path.isabs(t) and os.path.exists(t))
    kept = []
    for t in trees:            # a folder inside one already kept comes with it
        if not any(t == k or t.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(t)
    return kept


def isolated_path():
    """``sys.path`` of this interpreter started with ``-I`` (asked once)."""
    if "path" not in _probe_cache:
        try:
            done = subprocess.run([sys.executable, "-I", "-c", "import json, sys; print(json.dumps(sys.path))"],
                                  capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
            import json
            _probe_cache["path"] = [p for p in json.loads(done.stdout) if isinstance(p, str)]
        except (OSError, ValueError, subprocess.TimeoutExpired):
            _probe_cache["path"] = []
    return _probe_cache["path"]


def _under(path, roots):
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def gpu_devices():
    """The NVIDIA device nodes of this machine (empty without a GPU)."""
    if not os.path.isdir("/dev"):
        return []
    return sorted(os.path.join("/dev", n) for n in os.listdir("/dev") if n.startswith("nvidia"))


def _bwrap_prefix(gpu, limits=None, hide=(), files=()):
    """bwrap's arguments up to the command."""
    limits = limits or Limits()
    args = [bwrap_path() or "bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--hostname", "gpuedu-sandbox"]
    if os.getuid() == 0:      # do not look like root inside: programs that refuse or change behaviour as root
        args += ["--uid", "65534", "--gid", "65534"]
    system = []
    for tree in SYSTEM_TREES:
        if os.path.islink(tree):
            args += ["--symlink", os.readlink(tree), tree]
        elif os.path.isdir(tree):
            args += ["--ro-bind", tree, tree]
            system.append(tree)
    for f in HIDDEN_FILES:
        if os.path.isfile(f):
            args += ["--ro-bind", "/dev/null", f]
    for d in HIDDEN_TREES:
        if os.path.isdir(d):
            args += ["--tmpfs", d]
    args += ["--dev", "/dev", "--proc", "/proc"]
    if gpu:
        for node in gpu_devices():
            args += ["--dev-bind", node, node]
        args += ["--ro-bind", "/sys", "/sys"]
    # hide the given folders where a system tree would show them (submissions kept under /opt, say)
    for path in hide:
        path = os.path.realpath(path)
        if _under(path, system) and os.path.isdir(path):
            args += ["--tmpfs", path]
    args += ["--size", str(limits.disk), "--tmpfs", "/tmp", "--size", str(limits.disk), "--tmpfs", SCRATCH]
    for tree in _python_trees():     # after /tmp: a virtual environment made in /tmp stays visible
        args += ["--ro-bind", tree, tree]
    for name, fd in files:
        args += ["--file", str(fd), f"{SCRATCH}/{name}"]
    args += ["--chdir", SCRATCH]
    return args


def environment(scratch, extra=None):
    """The environment inside: the kept variables of this one, a private home and kernel cache."""
    env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    tmp = "/tmp" if scratch == SCRATCH else os.path.join(scratch, ".tmp")
    env.update(HOME=os.path.join(tmp, "home"), TMPDIR=tmp, XDG_CACHE_HOME=os.path.join(tmp, "cache"),
               GPUEDU_CACHE_DIR=os.path.join(tmp, "gpuedu-kernels"), MPLBACKEND="Agg", TQDM_DISABLE="1",
               PYTHONDONTWRITEBYTECODE="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.update(extra or {})
    return env


def _descendants(root):
    """{pid: resident bytes} of ``root`` and every process under it (from /proc)."""
    parent, rss = {}, {}
    page = os.sysconf("SC_PAGE_SIZE")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/statm") as f:
                resident = int(f.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        parent[int(name)] = int(fields[1])
        rss[int(name)] = resident
    found, todo = {}, [root]
    children = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found[pid] = rss.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return found


def _proportional(tree):
    """The sum of the processes' proportional set sizes (a shared page counted once in all), in bytes; their
    resident sizes where the kernel gives no PSS."""
    total = 0
    for pid, resident in tree.items():
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                pss = next((int(l.split()[1]) * 1024 for l in f if l.startswith("Pss:")), None)
        except (OSError, ValueError, IndexError):
            pss = None
        total += resident if pss is None else pss
    return total


def _reader(stream, sink, budget, over):
    """Read ``stream`` into ``sink`` (a list of bytes) until EOF; past ``budget[0]`` bytes set ``over``."""
    while True:
        chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
        if not chunk:
            return
        if budget[0] > 0:
            sink.append(chunk[:budget[0]])
        budget[0] -= len(chunk)
        if budget[0] < 0:
            over.set()


def _set_limits(limits, address_space):
    """What the child sets before it runs the command: numbers computed here, in the parent (a function run
    between fork and exec must not do more than call setrlimit)."""
    nproc = None
    if os.getuid() != 0:        # the kernel does not apply RLIMIT_NPROC to root: the watchdog does
        # RLIMIT_NPROC counts all of this user's processes: leave room for those already running
        mine = sum(1 for n in os.listdir("/proc") if n.isdigit() and _owner(n) == os.getuid())
        nproc = mine + limits.processes
    limit_as = limits.memory if address_space else None

    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size, limits.file_size))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if nproc is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        if limit_as is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
    return apply


def _owner(pid):
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return -1


def _uses_gpu():
    if os.environ.get("GPUEDU_BACKEND", "").lower() == "cpu":
        return False
    return bool(gpu_devices())


def run(argv, limits, *, files=(), stdin=b"", sandbox=True, hide=(), env_extra=None):
    """Run ``argv`` (a command inside the sandbox) with ``files`` ({name: bytes}) copied into its scratch
    folder, ``stdin`` on its standard input; returns an ``Outcome``.  Raises ``SandboxUnavailable`` when
    ``sandbox`` and no sandbox can be made."""
    gpu = _uses_gpu()
    host_scratch = None
    pass_fds, opened = [], []
    try:
        if sandbox:
            ok, why = available()
            if not ok:
                raise SandboxUnavailable(why)
            mapped = []
            for name, data in dict(files).items():
                r, w = os.pipe()
                opened += [r]
                _feed(w, data)
                mapped.append((name, r))
                pass_fds.append(r)
            cmd = _bwrap_prefix(gpu, limits, hide, mapped) + ["--"] + list(argv)
            env = environment(SCRATCH, env_extra)
            cwd = None
        else:
            host_scratch = tempfile.mkdtemp(prefix="gpuedu-grade-")
            os.makedirs(os.path.join(host_scratch, ".tmp", "home"))
            for name, data in dict(files).items():
                with open(os.path.join(host_scratch, name), "wb") as f:
                    f.write(data)
            cmd = list(argv)
            env = environment(host_scratch, env_extra)
            cwd = host_scratch
        return _supervise(cmd, env, cwd, limits, stdin, pass_fds, address_space=not gpu, sandboxed=sandbox)
    finally:
        for fd in opened:
            try:
                os.close(fd)
            except OSError:
                pass
        if host_scratch:
            shutil.rmtree(host_scratch, ignore_errors=True)


def _feed(fd, data):
    """Write ``data`` into the pipe's write end ``fd`` from a thread (bwrap reads it while it sets up)."""
    def write():
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view[:65536]):]
        except OSError:
            pass
        finally:
            os.close(fd)
    threading.Thread(target=write, daemon=True).start()


def _supervise(cmd, env, cwd, limits, stdin, pass_fds, address_space, sandboxed):
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=cwd, pass_fds=pass_fds, start_new_session=True,
                            preexec_fn=_set_limits(limits, address_space))
    budget, over = [limits.output], threading.Event()
    out, err = [], []
    readers = [threading.Thread(target=_reader, args=(proc.stdout, out, budget, over), daemon=True),
               threading.Thread(target=_reader, args=(proc.stderr, err, budget, over), daemon=True)]
    for t in readers:
        t.start()
    try:
        proc.stdin.write(stdin)
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass
    stopped, peak_n, peak_mem = None, 0, 0
    while proc.poll() is None:
        if time.monotonic() - start > limits.seconds:
            stopped = "time"
        elif over.is_set():
            stopped = "output"
        else:
            tree = _descendants(proc.pid)
            n, mem = len(tree) - (1 if sandboxed else 0), sum(tree.values())   # bwrap itself is not counted
            if n > limits.processes:
                stopped = "processes"
            elif mem > limits.memory:
                # resident sizes count the pages that forked processes share once per process: the
                # proportional sizes count each page once
                mem = _proportional(tree)
                if mem > limits.memory:
                    stopped = "memory"
            peak_n, peak_mem = max(peak_n, n), max(peak_mem, mem)
        if stopped:
            _kill(proc)
            break
        time.sleep(WATCH_EVERY)
    proc.wait()
    if not sandboxed:          # without a PID namespace, what the command left behind in its session goes too
        _kill(proc)
    for t in readers:
        t.join(timeout=5)
    if stopped is None and over.is_set():
        stopped = "output"
    return Outcome(proc.returncode, b"".join(out).decode("utf-8", "replace"), b"".join(err).decode("utf-8", "replace"),
                   stopped, time.monotonic() - start, peak_n, peak_mem, sandboxed)


def _kill(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
