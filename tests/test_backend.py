"""setup() in every situation this machine can produce.

Each case runs in a child Python so that this process's sys.modules and sys.meta_path stay as
they were.  Fake ``pycuda`` packages stand in for the real one: one whose driver library is
missing, one whose driver sees no device, and one with a device of a chosen architecture.
"""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")

# The real pycuda.driver imports its C extension, linked against libcuda.so.1.
FAKE_DRIVER_NO_LIBCUDA = '''
raise ImportError("libcuda.so.1: cannot open shared object file: No such file or directory")
'''

# A driver module shaped like pycuda.driver; the device is configured by FAKE_* below.
FAKE_DRIVER = '''
class RuntimeError(Exception):
    pass

_initialised = False
_context = None

def init(flags=0):
    global _initialised
    if FAKE_INIT_ERROR:
        raise RuntimeError(FAKE_INIT_ERROR)
    _initialised = True

def get_driver_version():
    return 13000

class Device:
    def __init__(self, i):
        self.i = i
    @staticmethod
    def count():
        return FAKE_COUNT
    def name(self):
        return "Fake GPU"
    def compute_capability(self):
        return FAKE_CC
    def total_memory(self):
        return 80 * 2**30
    def make_context(self):
        global _context
        _context = Context(self)
        return _context
    def retain_primary_context(self):
        global _primary
        if _primary is None:
            _primary = Context(self, primary=True)
        return _primary

_primary = None

class Context:
    def __init__(self, device, primary=False):
        self.device = device
        self.primary = primary
    def push(self):
        global _context
        _context = self
    def pop(self):
        global _context
        _context = None
    @staticmethod
    def get_current():
        if not _initialised:
            raise RuntimeError("cuCtxGetCurrent failed: initialization error")
        return _context
    @staticmethod
    def get_device():
        return _context.device
'''

FAKE_DRIVER_LAUNCH = '''
class Out:
    def __init__(self, array):
        self.array = array

class _Module:
    def get_function(self, name):
        def launch(out, block, grid):
            out.array[:block[0]] = 1.0
        return launch

def module_from_file(path):
    if FAKE_LOAD_ERROR:
        raise RuntimeError(FAKE_LOAD_ERROR)
    assert open(path, "rb").read(4) == b"\\x7fELF", "the preflight hands over a cubin"
    return _Module()
'''

FAKE_AUTOINIT = '''
import pycuda.driver as cuda
cuda.init()
context = cuda.Device(0).make_context()
'''

FAKE_AUTOPRIMARYCTX = '''
import pycuda.driver as cuda
cuda.init()
context = cuda.Device(0).retain_primary_context()
context.push()
'''


def make_fake_pycuda(root, driver_source, autoinit_source=None):
    pkg = os.path.join(root, "pycuda")
    os.makedirs(pkg)
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write('VERSION_TEXT = "2099.1"\n')
    with open(os.path.join(pkg, "driver.py"), "w") as f:
        f.write(driver_source)
    with open(os.path.join(pkg, "autoinit.py"), "w") as f:
        f.write(autoinit_source or FAKE_AUTOINIT)
    with open(os.path.join(pkg, "autoprimaryctx.py"), "w") as f:
        f.write(FAKE_AUTOPRIMARYCTX)
    return root


def fake_device(tmp_path, init_error=None, count=1, cc=(9, 0), load_error=None):
    source = (f"FAKE_INIT_ERROR = {init_error!r}\nFAKE_COUNT = {count}\nFAKE_CC = {tuple(cc)!r}\n"
              f"FAKE_LOAD_ERROR = {load_error!r}\n" + FAKE_DRIVER + FAKE_DRIVER_LAUNCH)
    return make_fake_pycuda(str(tmp_path / "fake"), source)


def child_pythonpath(*first):
    """PYTHONPATH for a child process: ``first`` (a fake PyCUDA, the repository) ahead of the parent's own
    entries, which stay: a GPU machine may have PyCUDA or nbval there (installed with --target), and a child
    that loses them fails for a reason that is not the test's."""
    return os.pathsep.join([p for p in (*first, *os.environ.get("PYTHONPATH", "").split(os.pathsep)) if p])


# A child that sees no PyCUDA, on any machine (a GPU machine has the real one installed): the preflight's
# search for it answers "not installed", as it does where nothing is there.
NO_PYCUDA = "import gpuedu.preflight\ngpuedu.preflight.find_real_pycuda = lambda: None\n"


def run_child(code, fake=None, backend_env=None, no_pycuda=False):
    env = {k: v for k, v in os.environ.items() if k not in ("GPUEDU_BACKEND", "PYTHONPATH")}
    env["PYTHONPATH"] = child_pythonpath(fake, REPO)
    if backend_env is not None:
        env["GPUEDU_BACKEND"] = backend_env
    code = (NO_PYCUDA if no_pycuda else "") + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, cwd=REPO, stdin=subprocess.DEVNULL)


def ok(proc):
    assert proc.returncode == 0, f"child failed:\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


REPORT = '''
import sys, gpuedu
b = gpuedu.setup()
print("NAME", b.name)
print("REASON", b.reason)
print("ALIAS", sys.modules["pycuda"].__name__)
'''


def test_no_pycuda_gives_cpu_with_the_reason():
    out = ok(run_child(REPORT, no_pycuda=True))
    assert "NAME cpu" in out
    assert "REASON no usable GPU: pycuda is not installed" in out
    assert "ALIAS gpuedu.emulator" in out
    # the one line the lesson shows
    assert "gpuedu: backend cpu, the CPU emulator, because no usable GPU: pycuda is not installed" in out


def test_pycuda_without_driver_library_gives_cpu(tmp_path):
    fake = make_fake_pycuda(str(tmp_path / "fake"), FAKE_DRIVER_NO_LIBCUDA)
    out = ok(run_child(REPORT, fake=fake))
    assert "NAME cpu" in out
    assert "no NVIDIA driver" in out
    # the half-imported real pycuda must not be what `import pycuda` gives now
    assert "ALIAS gpuedu.emulator" in out


def test_driver_without_device_gives_cpu(tmp_path):
    fake = fake_device(tmp_path, init_error="cuInit failed: no CUDA-capable device is detected")
    out = ok(run_child(REPORT, fake=fake))
    assert "NAME cpu" in out
    assert "no CUDA device" in out


def test_zero_devices_gives_cpu(tmp_path):
    fake = fake_device(tmp_path, count=0)
    out = ok(run_child(REPORT, fake=fake))
    assert "REASON no usable GPU: no CUDA device" in out


def test_forced_cpu_is_honoured_even_with_a_usable_looking_gpu(tmp_path):
    fake = fake_device(tmp_path)
    out = ok(run_child(REPORT, fake=fake, backend_env="cpu"))
    assert "NAME cpu" in out
    assert "REASON GPUEDU_BACKEND=cpu was asked for" in out


def test_argument_overrides_environment():
    out = ok(run_child('''
        import gpuedu
        b = gpuedu.setup(backend="CPU", verbose=False)
        print("NAME", b.name, "|", b.reason)
    ''', backend_env="cuda"))
    assert "NAME cpu | backend='cpu' was asked for" in out


def test_forced_cuda_without_gpu_is_a_clear_error():
    proc = run_child('''
        import gpuedu
        from gpuedu.backend import BackendError
        try:
            gpuedu.setup()
        except BackendError as e:
            print("ERROR", e)
    ''', backend_env="cuda", no_pycuda=True)
    out = ok(proc)
    assert "ERROR GPUEDU_BACKEND=cuda was asked for but the GPU is not usable: pycuda is not installed" in out
    assert "gpuedu doctor" in out


def test_unknown_backend_name_is_a_clear_error():
    out = ok(run_child('''
        import gpuedu
        try:
            gpuedu.setup()
        except ValueError as e:
            print("ERROR", e)
    ''', backend_env="rocm"))
    assert "ERROR GPUEDU_BACKEND='rocm' is not a backend gpuedu knows; use one of auto, cuda, cpu" in out


def test_second_call_returns_the_same_backend_without_probing_again(tmp_path):
    fake = fake_device(tmp_path, init_error="cuInit failed: no CUDA-capable device is detected")
    out = ok(run_child('''
        import subprocess, sys, gpuedu
        calls = []     # driver probes: children running this Python
        real_run = subprocess.run
        def counting_run(*a, **k):
            if a[0][0] == sys.executable:
                calls.append(a[0])
            return real_run(*a, **k)
        subprocess.run = counting_run
        first = gpuedu.setup(verbose=False)
        after_first = len(calls)
        second = gpuedu.setup(verbose=False)
        print("SAME", first is second, "PROBES", after_first, len(calls))
        try:
            gpuedu.setup("cuda")
        except gpuedu.backend.BackendError as e:
            print("SWITCH", e)
    ''', fake=fake))
    assert "SAME True PROBES 1 1" in out
    assert "SWITCH this process already uses the cpu backend" in out
    assert "Restart the kernel" in out


def test_active_without_setup_chooses_quietly():
    out = ok(run_child('''
        import gpuedu.backend as backend
        print("NAME", backend.active().name)
    ''', no_pycuda=True))
    assert out.strip() == "NAME cpu"


def test_emulator_modules_are_reachable_under_pycuda_names():
    out = ok(run_child('''
        import gpuedu, importlib
        gpuedu.setup("cpu", verbose=False)
        import pycuda, gpuedu.emulator
        print("SAME", pycuda is gpuedu.emulator, pycuda.__spec__.name)
        try:
            import pycuda.gl
        except ModuleNotFoundError as e:
            print("MISSING", e.name, "|", e)
    '''))
    assert "SAME True gpuedu.emulator" in out
    assert "MISSING pycuda.gl | pycuda.gl is not part of the gpuedu CPU emulator" in out
    assert "pycuda.driver" in out and "pycuda.gpuarray" in out and "pycuda.memory" not in out
    assert "pycuda.curandom" in out


@needs_nvcc
def test_device_nvcc_cannot_target_gives_cpu(tmp_path):
    fake = fake_device(tmp_path, cc=(3, 0))
    out = ok(run_child(REPORT, fake=fake))
    assert "NAME cpu" in out
    assert "cannot target sm_30 of Fake GPU" in out
    assert "nvcc " in out


@needs_nvcc
def test_usable_device_gives_cuda_and_real_pycuda(tmp_path):
    fake = fake_device(tmp_path, cc=(9, 0))
    out = ok(run_child(REPORT + 'print("CONTEXT", sys.modules["pycuda.driver"].Context.get_current() is not None)\n',
                       fake=fake))
    assert "NAME cuda" in out
    assert "REASON a usable GPU was found" in out
    assert "ALIAS pycuda" in out          # the real package, not the emulator
    assert "CONTEXT True" in out          # setup() made the context, as pycuda.autoinit does
    assert "gpuedu: backend cuda, Fake GPU (sm_90), because a usable GPU was found" in out


@needs_nvcc
def test_driver_too_old_for_the_toolkit_gives_cpu(tmp_path):
    fake = fake_device(tmp_path, cc=(9, 0), load_error="cuModuleLoadData failed: the provided PTX was "
                                                       "compiled with an unsupported toolchain.")
    out = ok(run_child(REPORT, fake=fake))
    assert "NAME cpu" in out
    assert "the NVIDIA driver (CUDA 13.0) cannot run code built by nvcc" in out
    assert "update the driver" in out


@needs_nvcc
def test_gpu_that_fails_after_the_probe_is_a_clear_error(tmp_path):
    fake = fake_device(tmp_path, cc=(9, 0))
    with open(os.path.join(fake, "pycuda", "autoprimaryctx.py"), "w") as f:
        f.write('raise RuntimeError("cuDevicePrimaryCtxRetain failed: out of memory")\n')
    out = ok(run_child('''
        import gpuedu
        try:
            gpuedu.setup()
        except gpuedu.backend.BackendError as e:
            print("ERROR", e)
    ''', fake=fake))
    assert "ERROR the GPU passed the preflight in a child process but PyCUDA failed to start here" in out
    assert "cuDevicePrimaryCtxRetain failed: out of memory" in out and "GPUEDU_BACKEND=cpu" in out


@needs_nvcc
def test_gpu_backend_uses_the_primary_context_that_torch_and_cupy_share(tmp_path):
    fake = fake_device(tmp_path, cc=(9, 0))
    out = ok(run_child(REPORT + '''
drv = sys.modules["pycuda.driver"]
print("PRIMARY", drv.Context.get_current().primary)
print("MODULES", "pycuda.autoprimaryctx" in sys.modules, "pycuda.autoinit" in sys.modules)
''', fake=fake))
    assert "NAME cuda" in out
    assert "PRIMARY True" in out          # retained and pushed, not a new context from cuCtxCreate
    assert "MODULES True False" in out    # pycuda.autoinit would have made a second context


@pytest.mark.parametrize("module", ["autoinit", "autoprimaryctx"])
def test_a_context_the_learner_made_first_is_kept(tmp_path, module):
    fake = fake_device(tmp_path, cc=(9, 0))
    out = ok(run_child(f'''
        import pycuda.{module}          # the learner initialised PyCUDA before gpuedu
        import sys, gpuedu
        before = sys.modules["pycuda.driver"].Context.get_current()
        b = gpuedu.setup(verbose=False)
        after = sys.modules["pycuda.driver"].Context.get_current()
        print("NAME", b.name, "|", b.reason)
        print("SAME", before is after, after.primary)
    ''', fake=fake, backend_env="auto"))
    assert "NAME cuda | real PyCUDA was already initialised in this process" in out
    assert f"SAME True {module == 'autoprimaryctx'}" in out
    # a context of the learner's own cannot be shared with PyTorch or CuPy: say so
    assert ("do not mix them into this process" in out) == (module == "autoinit")


def test_initialised_real_pycuda_is_never_shadowed(tmp_path):
    fake = fake_device(tmp_path, cc=(9, 0))
    out = ok(run_child('''
        import pycuda.autoinit          # the learner initialised PyCUDA before gpuedu
        import sys, gpuedu
        from gpuedu.backend import BackendError, use_emulator
        b = gpuedu.setup(verbose=False)
        print("NAME", b.name, "|", b.reason, "|", sys.modules["pycuda"].__name__)
        for attempt in (lambda: use_emulator(), lambda: gpuedu.setup("cpu")):
            try:
                attempt()
            except BackendError as e:
                print("REFUSED", str(e)[:40])
    ''', fake=fake, backend_env="auto"))
    assert "NAME cuda | real PyCUDA was already initialised in this process" in out
    assert out.splitlines()[0].endswith("| pycuda")      # the real package, not the emulator
    assert out.count("REFUSED") == 2


def test_missing_cxx_is_reported_with_what_to_install(tmp_path):
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    out = ok(run_child(f'''
        import os
        os.environ["PATH"] = {str(empty_bin)!r}
        os.environ.pop("CXX", None)
        import gpuedu
        b = gpuedu.setup()
        print("USABLE", b.usable)
    '''))
    assert "USABLE False" in out
    assert "gpuedu: WARNING the emulator cannot build kernels: no C++ compiler found" in out
    assert "sudo apt install g++" in out


def test_a_cxx_that_does_not_exist_is_not_replaced_behind_the_learners_back(tmp_path):
    # doctor and setup ask the emulator, which uses $CXX when it is set: a wrong one is reported, not skipped
    out = ok(run_child(f'''
        import os
        os.environ["CXX"] = {str(tmp_path / "no-such-g++")!r}
        import gpuedu
        from gpuedu import preflight
        from gpuedu.tools import doctor
        print("FOUND", preflight.find_cxx())
        finding = doctor.check_cxx()
        print("DOCTOR", finding.ok, finding.value)
    '''))
    assert "FOUND None" in out
    assert "DOCTOR False CXX=" in out and "is not a working C++ compiler" in out


def test_only_pycudas_own_module_names_resolve_to_the_emulator():
    out = ok(run_child('''
        import gpuedu
        gpuedu.setup("cpu", verbose=False)
        import pycuda.driver, pycuda.gpuarray, pycuda.tools
        for name in ("pycuda.function", "pycuda.memory", "pycuda._errors", "pycuda._module", "pycuda._memory"):
            try:
                __import__(name)
                print("IMPORTED", name)
            except ModuleNotFoundError as e:
                print("REFUSED", name, "PyCUDA has no such module" in str(e))
    '''))
    assert "IMPORTED" not in out
    assert out.count("True") == 5


def test_a_childs_pythonpath_keeps_the_parents_entries_after_its_own(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/site/a", "/site/b"]))
    assert child_pythonpath("/fake", None, REPO) == os.pathsep.join(["/fake", REPO, "/site/a", "/site/b"])
    monkeypatch.delenv("PYTHONPATH")
    assert child_pythonpath(REPO) == REPO
