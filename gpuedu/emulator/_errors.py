"""The exception classes PyCUDA raises, with the same names and hierarchy.

Real PyCUDA defines them in ``pycuda._driver`` and re-exports them from
``pycuda.driver``; lessons catch them as ``drv.LogicError`` and so on, so the
emulator's ``driver`` module re-exports these.

``learner_frame`` finds, for a message or a warning, the line of the learner's code that led to it.
"""
import os
import sys

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def learner_frame(skip=0):
    """``(frame, stacklevel)``: the innermost frame outside gpuedu (and Python's frozen import machinery), looking
    from ``skip`` frames above the caller outwards, and the ``stacklevel`` that names it to ``warnings.warn``
    called by the caller; the frame is None when gpuedu's own code is all there is."""
    frame, level = sys._getframe(skip + 1), skip + 1
    while frame is not None and frame.f_code.co_filename.startswith((_PACKAGE + os.sep, "<frozen")):
        frame, level = frame.f_back, level + 1
    return frame, level


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
