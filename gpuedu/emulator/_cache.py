"""The kernel cache: where compiled modules are kept, and the rule that makes that folder safe to load from.

The modules in it run as the user's own code, so the folder must be the user's alone (``trusted_folder``).
``compiler`` builds into it and ``function.module_from_buffer`` loads from it; ``gpuedu.preflight`` and
``gpuedu doctor`` report ``cache_path()``: one rule for all of them.
"""
import os
import stat
import sys
import tempfile
import warnings

from ._errors import CompileError


def cache_dir():
    """The folder of compiled kernel modules: ``$GPUEDU_CACHE_DIR``, else ``gpuedu/kernels`` in the platform's
    cache folder (``$XDG_CACHE_HOME``, by default ``~/.cache``, on Linux; ``~/Library/Caches`` on macOS).

    The modules in it run as your own code, so the folder must be yours alone: it is created with
    mode 0700, and one that is a symbolic link, belongs to another user or that others may write
    into is refused (CompileError, with the reason). One that cannot be created or written is
    replaced, for this process, by a private temporary folder, with a warning.
    """
    return trusted_folder(cache_path())


def cache_path():
    """The kernel cache's path by the rule above, without creating or checking it (doctor reports it)."""
    return os.path.abspath(os.environ.get("GPUEDU_CACHE_DIR") or os.path.join(user_cache_root(), "gpuedu", "kernels"))


def user_cache_root():
    """The platform's folder for a user's caches: ``$XDG_CACHE_HOME`` (an absolute path) or ``~/.cache`` on
    Linux and other POSIX systems, ``~/Library/Caches`` on macOS (as platformdirs decides)."""
    if sys.platform == "darwin":
        return os.path.join(os.path.expanduser("~"), "Library", "Caches")
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):           # the XDG rule: a relative value is invalid and ignored
        return xdg
    return os.path.join(os.path.expanduser("~"), ".cache")


_trusted = {}   # folder asked for -> the folder used


def cache_problem(path):
    """Why ``path`` cannot be trusted as a kernel cache, or None (also when it does not exist yet)."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):   # not there (yet): creating it will tell
        return None
    except OSError as exc:
        return f"it cannot be examined ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link, which another user could point at their own files"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a folder"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"it belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return (f"other users may write into it (mode {stat.S_IMODE(st.st_mode):o}): after checking what is in it, "
                f"`chmod 700` it, or delete it and let gpuedu create it again")
    return None


def trusted_folder(path):
    """``path`` as a kernel cache (created 0700), or a private temporary folder when it cannot be written."""
    if path in _trusted:
        return _trusted[path]
    refuse = ("the kernel cache {path} is refused: {problem}. Compiled kernels run as your own code, so the "
              "cache must be yours alone: set GPUEDU_CACHE_DIR to a folder of your own (gpuedu creates it with "
              "mode 0700)")
    problem = cache_problem(path)
    if problem:
        raise CompileError(refuse.format(path=path, problem=problem))
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        reason = f"it cannot be created ({exc.strerror})"
    else:
        problem = cache_problem(path)   # again: it may have appeared meanwhile, made by someone else
        if problem:
            raise CompileError(refuse.format(path=path, problem=problem))
        if os.access(path, os.W_OK | os.X_OK):
            _trusted[path] = path
            return path
        reason = "it is not writable"
    fallback = tempfile.mkdtemp(prefix="gpuedu-kernels-")   # mode 0700, this user's
    warnings.warn(f"the kernel cache {path} cannot be used ({reason}); kernels compile into {fallback} for this "
                  f"process and will compile again next time. Set GPUEDU_CACHE_DIR to a writable folder of your "
                  f"own to keep them.", stacklevel=3)
    _trusted[path] = fallback
    return fallback
