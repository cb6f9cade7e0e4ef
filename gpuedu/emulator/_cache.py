"""The kernel cache: where compiled modules are kept, and the rule that makes that folder safe to load from.

The modules in it run as the user's own code, so the folder must be the user's alone (``trusted_folder``).
``compiler`` builds into it and ``function.module_from_buffer`` loads from it; ``gpuedu.preflight`` and
``gpuedu doctor`` report ``cache_path()``: one rule for all of them.
"""
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
import warnings

from ._errors import learner_frame

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
    sweep_leftovers(path)   # once per process and folder
    return path


def _fall_back(path, reason):
    fallback = tempfile.mkdtemp(prefix="gpuedu-kernels-")   # mode 0700, this user's
    warnings.warn(f"the kernel cache {path} cannot be used ({reason}); kernels compile into {fallback} for this "
                  f"process and will compile again next time. Set GPUEDU_CACHE_DIR to a folder of your own "
                  f"(gpuedu creates it with mode 0700) to keep them.", stacklevel=4)
    _trusted[path] = fallback
    return fallback


# ---- what is kept in the cache, and the check before anything in it is used ----------------------------------
#
# Every artefact (a kernel module, the worker library, the runtime's objects, the precompiled prelude) is a file
# whose name carries the first hex digits of its SHA-256, written once and never changed, and a small JSON entry
# under a name of its own key that points at it with its size and full SHA-256. Both are written to a temporary
# name, flushed to disk and renamed into place, entry last: a process killed at any moment leaves either no
# entry or a whole one, never an entry for a file cut short. Before an artefact is loaded, linked or handed to
# the compiler, its size and checksum are compared with its entry's (``verified``); one that differs, a disk's
# damage or a hand's, is reported in one line and built again, never loaded. A loaded library runs as code: a
# truncated one dies with SIGBUS, garbled code with SIGILL, and both would kill the Python process.


class CacheDamageWarning(UserWarning):
    """A file in the kernel cache was damaged (cut short, altered) and is being built again."""


def file_seal(path):
    """``(size, sha256 hex)`` of a file, or None when it cannot be read."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            size = 0
            while chunk := f.read(1 << 20):
                size += len(chunk)
                h.update(chunk)
    except OSError:
        return None
    return size, h.hexdigest()


def damaged(path, what, why):
    """Say in one line that the cached ``what`` at ``path`` is damaged and built again; remove it."""
    warnings.warn(f"gpuedu: the cached {what} {path} is damaged ({why}); building it again", CacheDamageWarning,
                  stacklevel=learner_frame()[1])
    _remove_tree_quietly(path)


def read_entry(entry_path, what):
    """The JSON entry at ``entry_path`` as a dict; None when there is none (silently) or it is damaged (said)."""
    try:
        with open(entry_path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        damaged(entry_path, f"entry of a {what}", f"it cannot be read: {exc.strerror}")
        return None
    try:
        entry = json.loads(data)
        if not isinstance(entry, dict):
            raise ValueError("not an object")
    except (ValueError, UnicodeDecodeError) as exc:
        damaged(entry_path, f"entry of a {what}", f"it is not the JSON gpuedu wrote: {exc}")
        return None
    return entry


def verified(path, size, sha256, what):
    """Whether the file at ``path`` is the one its entry describes (``size`` bytes hashing to ``sha256``).

    A missing file is False silently; one that differs is reported as damaged (one line) and removed.
    """
    try:
        actual = os.stat(path).st_size
    except OSError:
        return False
    if not isinstance(size, int) or not isinstance(sha256, str):
        damaged(path, what, "its entry records no size and checksum")
        return False
    if actual != size:
        damaged(path, what, f"{actual} bytes where {size} were written: cut short or overwritten")
        return False
    seal = file_seal(path)
    if seal is None or seal[1] != sha256:
        damaged(path, what, "its checksum differs from the one recorded when it was written")
        return False
    return True


def sync_file(path):
    """Flush a file's contents to the disk, so a rename after it never exposes a name without its data."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path, data):
    """Write ``data`` (bytes) to ``path`` through a temporary file in the same folder: flushed, then renamed."""
    tmp = temporary_name(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        remove_quietly(tmp)
        raise


def write_entry(entry_path, entry):
    """Write a JSON entry atomically (temporary file, flushed, renamed)."""
    write_atomically(entry_path, json.dumps(entry).encode())


def publish(tmp, folder, stem, suffix, entry_path, what, extra=None):
    """Move a freshly built file ``tmp`` into ``folder`` under ``<stem>-<sha256 prefix><suffix>``, then write its
    entry (size, checksum, and ``extra``); return the final path. ``tmp`` may be a folder (the precompiled
    prelude's), whose one file is sealed."""
    target_file = tmp
    if os.path.isdir(tmp):
        (name,) = os.listdir(tmp)
        target_file = os.path.join(tmp, name)
    sync_file(target_file)
    size, digest = file_seal(target_file)
    final = os.path.join(folder, f"{stem}-{digest[:16]}{suffix}")
    if os.path.isdir(tmp):
        inner = os.path.join(final, os.path.basename(target_file))
        if os.path.isdir(final) and verified(inner, size, digest, what):
            shutil.rmtree(tmp, ignore_errors=True)     # another process built the same bytes first
        else:
            shutil.rmtree(final, ignore_errors=True)
            os.rename(tmp, final)
        sealed = inner
    else:
        os.replace(tmp, final)   # the same name always holds the same bytes: replacing one is harmless
        sealed = final
    write_entry(entry_path, {**(extra or {}), "file": os.path.basename(final),
                             "sealed": os.path.relpath(sealed, folder), "size": size, "sha256": digest})
    return final


def lookup(folder, entry_path, what, entry=None):
    """``(path, entry)`` of the verified artefact an entry points at, or ``(None, None)``: no entry, an entry of
    an earlier gpuedu (built again silently), or damage (said, and cleared). ``entry``: one already read."""
    entry = read_entry(entry_path, what) if entry is None else entry
    if entry is None or "sealed" not in entry:
        return None, None
    name, sealed = entry.get("file"), entry.get("sealed")
    if not isinstance(name, str) or not isinstance(sealed, str) or os.sep in name or \
            os.path.isabs(sealed) or ".." in sealed.split(os.sep):
        damaged(entry_path, f"entry of a {what}", "it names no file of the cache")
        return None, None
    path = os.path.join(folder, name)
    if not verified(os.path.join(folder, sealed), entry.get("size"), entry.get("sha256"), what):
        if os.path.isdir(path):
            _remove_tree_quietly(path)
        return None, None
    return path, entry


def temporary_name(path):
    """A name beside ``path`` for writing it: this process's own, and recognisably a leftover if it dies."""
    return f"{path}.{os.getpid()}.tmp"


_LEFTOVER = re.compile(r"^(?:.*\.(\d+)\.tmp(?:\.\w+)?|gpuedu-build-(\d+)-\w+)$")


LEFTOVER_AGE_S = 15 * 60


def sweep_leftovers(folder, now=None):
    """Remove what processes killed while building left in the cache: temporary files and build folders whose
    process (by the pid in their name) is gone and that are older than a build takes (``LEFTOVER_AGE_S``: a
    process of another PID namespace sharing the folder is not seen as alive). Nothing else is touched."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    now = time.time() if now is None else now
    for entry in entries:
        m = _LEFTOVER.match(entry.name)
        if not m:
            continue
        pid = int(m.group(1) or m.group(2))
        try:
            old = now - entry.stat(follow_symlinks=False).st_mtime > LEFTOVER_AGE_S
        except OSError:
            continue
        if old and pid != os.getpid() and not _alive(pid):
            _remove_tree_quietly(entry.path)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:       # another user's process: alive
        return True
    return True


def remove_quietly(path):
    try:
        os.remove(path)
    except OSError:
        pass


def _remove_tree_quietly(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        remove_quietly(path)
