"""What the emulator's tests share."""
import pytest

import gpuedu.emulator.driver as drv


@pytest.fixture(scope="module")
def context():
    """A current context on the emulated device for one test module, as pycuda.autoinit makes."""
    drv.init()
    ctx = drv.Device(0).make_context()
    yield ctx
    ctx.detach()
