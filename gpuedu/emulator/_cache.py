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



def cache_dir():
    """The folder of compiled kernel modules: ``$GPUEDU_CACHE_DIR``, else ``gpuedu/kernels`` in the platform's
    cache folder (``$XDG_CACHE_HOME``, by default ``~/.cache``, on Linux; ``~/Library/Caches`` on macOS).

    The modules in it run as your own code, so the folder must be yours alone: it is created with
    mode 0700, and one that is a symbolic link, belongs to another user or that others may write
    into is refused. A refused folder, or one that cannot be created or written, is replaced for the
    rest of the process by a private temporary folder, with a warning that says why.
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
    """``path`` as a kernel cache (created 0700), or, when it cannot be trusted or written, a private temporary
    folder for the rest of this process (with a warning that says why)."""
    if path in _trusted:
        return _trusted[path]
    problem = cache_problem(path)
    if problem:
        # Nothing is loaded from a folder others could have planted modules in; the course goes on.
        return _fall_back(path, f"it is refused: {problem}. Compiled kernels run as your own code, so the cache "
                                f"must be yours alone")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        return _fall_back(path, f"it cannot be created ({exc.strerror})")
    problem = cache_problem(path)   # again: it may have appeared meanwhile, made by someone else
    if problem:
        return _fall_back(path, f"it is refused: {problem}")
    if not os.access(path, os.W_OK | os.X_OK):
        return _fall_back(path, "it is not writable")
    _trusted[path] = path
    return path


def _fall_back(path, reason):
    fallback = tempfile.mkdtemp(prefix="gpuedu-kernels-")   # mode 0700, this user's
    warnings.warn(f"the kernel cache {path} cannot be used ({reason}); kernels compile into {fallback} for this "
                  f"process and will compile again next time. Set GPUEDU_CACHE_DIR to a folder of your own "
                  f"(gpuedu creates it with mode 0700) to keep them.", stacklevel=4)
    _trusted[path] = fallback
    return fallback
