"""The exception classes PyCUDA raises, with the same names and hierarchy.

Real PyCUDA defines them in ``pycuda._driver`` and re-exports them from
``pycuda.driver``; lessons catch them as ``drv.LogicError`` and so on, so the
emulator's ``driver`` module re-exports these.
"""


class Error(Exception):
    """Base class of every error the CUDA driver layer raises."""


class LogicError(Error):
    """The call was wrong: bad arguments, a freed pointer, limits exceeded."""


class LaunchError(Error):
    """A kernel failed while it ran (out-of-bounds access, deadlock, interrupt...)."""


class RuntimeError(Error):  # noqa: A001 - the name PyCUDA uses
    """The driver could not do what was asked for a reason outside the call."""


class MemoryError(Error):  # noqa: A001 - the name PyCUDA uses
    """Device memory is exhausted."""


class CompileError(Error):
    """The kernel source did not compile; ``stderr`` holds the compiler's log."""

    def __init__(self, msg, command_line=None, stdout=None, stderr=None):
        self.msg = msg
        self.command_line = command_line
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(msg)

    def __str__(self):
        text = self.msg
        if self.stderr:
            text += "\n[compiler output]\n" + self.stderr
        return text
