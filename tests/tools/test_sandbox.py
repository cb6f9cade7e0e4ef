"""The grading sandbox: what a command inside sees, what it cannot reach, and the limits that stop it."""
import os
import socket
import subprocess
import sys
import threading

import pytest

from gpuedu.tools import sandbox

pytestmark = pytest.mark.skipif(not sandbox.available()[0], reason=f"no sandbox here: {sandbox.available()[1]}")

PY = [sys.executable, "-I", "-c"]


def run(code, limits=None, **kw):
    return sandbox.run(PY + [code], limits or sandbox.Limits(seconds=60), **kw)


def test_files_are_copied_into_a_private_scratch_folder_and_nothing_written_there_comes_back(tmp_path):
    done = run("import os; print(os.getcwd(), open('in.txt').read()); open('out.txt', 'w').write('x'); "
               "print(sorted(os.listdir('.')))", files={"in.txt": b"hello"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["/scratch hello", "['in.txt', 'out.txt']"]
    assert not os.path.exists("/scratch")


def test_the_hosts_files_outside_the_system_and_python_are_not_there(tmp_path):
    secret = tmp_path / "solutions" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("the answers")
    # a file in the home folder (which may hold this Python: then only the Python is shown)
    probe = os.path.join(os.path.expanduser("~"), f".gpuedu-sandbox-probe-{os.getpid()}")
    open(probe, "w").write("mine")
    try:
        done = run(f"import os\nfor p in [{str(secret)!r}, {str(tmp_path)!r}, {probe!r}, '/etc/shadow', '/var/log']:\n"
                   f"    print(p, os.path.exists(p) and (os.path.isdir(p) or os.path.getsize(p) > 0))")
    finally:
        os.unlink(probe)
    seen = dict(line.rsplit(" ", 1) for line in done.stdout.splitlines())
    assert seen == {str(secret): "False", str(tmp_path): "False", probe: "False", "/etc/shadow": "False",
                    "/var/log": "False"}, done.stdout + done.stderr    # /etc/shadow: an empty file, even for root


def test_a_folder_to_hide_inside_a_system_tree_is_empty_in_the_sandbox():
    shown = [d for d in ("/usr/share/doc", "/usr/share/man") if os.path.isdir(d) and os.listdir(d)]
    if not shown:
        pytest.skip("no non-empty /usr/share/doc or /usr/share/man here")
    done = run(f"import os; print(len(os.listdir({shown[0]!r})))", hide=[shown[0]])
    assert done.stdout.strip() == "0", done.stderr


def test_on_a_gpu_machine_the_device_nodes_and_sys_are_passed_in(monkeypatch):
    monkeypatch.setattr(sandbox, "gpu_devices", lambda: ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"])
    args = sandbox._bwrap_prefix(gpu=True)
    for node in ("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"):
        i = args.index(node)
        assert args[i - 1] == "--dev-bind" and args[i + 1] == node
    assert "/sys" in args and "/sys" not in sandbox._bwrap_prefix(gpu=False)
    monkeypatch.delenv("GPUEDU_BACKEND", raising=False)
    assert sandbox._uses_gpu()
    monkeypatch.setenv("GPUEDU_BACKEND", "cpu")
    assert not sandbox._uses_gpu()


def test_system_folders_and_the_installation_are_read_only():
    import gpuedu
    target = os.path.join(os.path.dirname(gpuedu.__file__), "__init__.py")
    done = run(f"import errno\nfor p in [{target!r}, '/usr/bin/gpuedu-test', '/etc/gpuedu-test']:\n"
               f"    try:\n        open(p, 'a').close(); print('wrote', p)\n"
               f"    except OSError as e:\n        print(errno.errorcode[e.errno])")
    assert done.returncode == 0, done.stderr
    assert "wrote" not in done.stdout and done.stdout.split() == ["EROFS"] * 3


def test_there_is_no_network():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    done = run(f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')\n"
               f"except OSError as e:\n    print('refused', e)")
    with pytest.raises(socket.timeout):
        server.accept()
    server.close()
    assert done.stdout.startswith("refused"), done.stdout


def test_only_the_kept_variables_of_the_environment_come_in(monkeypatch):
    monkeypatch.setenv("GPUEDU_TEST_SECRET_TOKEN", "hunter2")
    done = run("import os; print(sorted(os.environ)); print(os.environ['HOME'], os.environ['GPUEDU_CACHE_DIR'])")
    assert "GPUEDU_TEST_SECRET_TOKEN" not in done.stdout and "hunter2" not in done.stdout
    assert done.stdout.splitlines()[1] == "/tmp/home /tmp/gpuedu-kernels"


@pytest.mark.parametrize("code, stopped", [
    ("import time; time.sleep(60)", "time"),
    ("import sys\nwhile True: sys.stdout.write('x' * 65536)", "output"),
])
def test_a_limit_stops_the_command_and_says_which(code, stopped):
    limits = sandbox.Limits(seconds=3, output=1 << 20)
    done = run(code, limits)
    assert done.stopped == stopped
    assert len(done.stdout) + len(done.stderr) <= limits.output
    assert "limit" in limits.describe(stopped)


def test_a_fork_bomb_is_stopped_by_the_process_limit_and_leaves_nothing_behind():
    code = ("import os, time\nfor _ in range(4000):\n    try:\n        if os.fork() == 0:\n            time.sleep(60)\n"
            "            os._exit(0)\n    except OSError:\n        time.sleep(60)\n")
    done = run(code, sandbox.Limits(seconds=60, processes=64))
    assert done.stopped == "processes" or (done.returncode == 0 and done.peak_processes <= 64 + 1)
    left = subprocess.run(["pgrep", "-f", "time.sleep\\(60\\)"], capture_output=True, text=True).stdout.split()
    assert left == []


def test_memory_past_the_limit_is_refused_or_stopped():
    done = run("x = []\nwhile True: x.append(bytearray(64 << 20))", sandbox.Limits(seconds=60, memory=1 << 30))
    assert done.stopped == "memory" or "MemoryError" in done.stderr, (done.stopped, done.stderr[-300:])


def test_without_the_sandbox_the_limits_still_hold_and_the_scratch_folder_is_removed():
    done = run("import os; print(os.getcwd()); import time; time.sleep(60)", sandbox.Limits(seconds=2), sandbox=False)
    assert done.stopped == "time" and not done.sandboxed
    assert not os.path.exists(done.stdout.strip())


def test_no_bubblewrap_is_a_clear_refusal(monkeypatch):
    monkeypatch.setattr(sandbox, "_probe_cache", {})
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    ok, why = sandbox.available()
    assert not ok and "apt install bubblewrap" in why
    with pytest.raises(sandbox.SandboxUnavailable, match="bubblewrap is not installed"):
        sandbox.run(PY + ["print(1)"], sandbox.Limits(seconds=5))
