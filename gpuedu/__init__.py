"""gpuedu: GPU programming for deep learning from first principles, with PyCUDA."""

__version__ = "0.1.0"


def setup(*args, **kwargs):
    """Choose real PyCUDA or the CPU emulator for this process; see ``gpuedu.backend.setup``."""
    from .backend import setup as _setup
    return _setup(*args, **kwargs)
