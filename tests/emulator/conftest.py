"""What the emulator's tests share."""
import subprocess
import sys

import pytest

import gpuedu.emulator.driver as drv


@pytest.fixture(scope="module")
def context():
    """A current context on the emulated device for one test module, as pycuda.autoinit makes."""
    drv.init()
    ctx = drv.Device(0).make_context()
    yield ctx
    ctx.detach()


@pytest.fixture(scope="session")
def address_space_limit():
    """For the tests of a process under an address-space limit (RLIMIT_AS): skipped where setting one does not
    apply it, as under qemu-user (how `make toolchains`' arm64 leg runs), which takes the call and limits nothing,
    since the limit would bind qemu's own memory too. Asked of a fresh process, never of this one."""
    probe = ("import resource; limit = 8 << 30; resource.setrlimit(resource.RLIMIT_AS, (limit, limit)); "
             "print(resource.getrlimit(resource.RLIMIT_AS)[0] == limit)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    if done.stdout.strip() != "True":
        pytest.skip("this system takes an address-space limit (RLIMIT_AS) without applying it (qemu-user does so: "
                    f"it would limit the emulator itself): {done.stdout.strip() or done.stderr.strip()[-200:]}")
