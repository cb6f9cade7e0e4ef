"""Runs a learner's Python function for ``FunctionExercise.check``, in a process of its own.

    python -I _function_child.py   (standard input: {"source": ..., "function": NAME, "calls": [kwargs, ...],
                                    "exercise": ID, "package_dirs": [gpuedu's folder, ...]})

It imports nothing of gpuedu, and the learner's code may not either: a function exercise is answered by the
learner's own arithmetic, and gpuedu holds the answer (each exercise's reference in ``gpuedu.exercises``, and
the profiler's calculators, such as the occupancy calculator ``13.resident_blocks`` is checked against).  Before
the learner's source runs, ``Guard`` is installed, in three layers, each of which refuses on its own:

- a finder first on ``sys.meta_path`` refuses every module of gpuedu (``import``, ``from ... import``,
  ``__import__``, ``importlib.import_module``, ``importlib.util.find_spec``, ``importlib.reload``);
- ``sys.modules`` holds, under the name of every module of gpuedu, a stand-in whose every attribute is refused,
  so that ``sys.modules["gpuedu.exercises.lesson14"]`` or an ``import`` that finds it there says why;
- an audit hook (``sys.addaudithook``: it cannot be removed, and this process ends when the calls do) refuses what
  gets round the first two: an ``import`` statement after the finder is taken out of ``sys.meta_path``, opening
  any file inside gpuedu's folders (reading a module's source or its ``.pyc`` to load it by hand; a symbolic link
  is followed first, and a hard link to such a file is refused), starting another program (which could import
  gpuedu freely) and ctypes (which could call the C library's ``open``).

Each call's keyword arguments arrive as a Python literal; each result goes back as its ``repr`` (for the
message), the same value as a literal of plain Python types (for the comparison), and its type's name, or as the
exception the call raised.  Only these strings leave the process: the checker compares them with values it
computed itself, so nothing the function defines, patches or returns can change how it is compared.  Standard
output is kept for the answer; what the function prints goes to standard error.
"""
import ast
import importlib.util
import json
import os
import sys
import traceback
import types

FILENAME = "<your function>"
PACKAGE = "gpuedu"

# Starting another program, or reaching the C library through ctypes, would get round the guard.
_PROGRAM_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                             "os.startfile", "pty.spawn"})


class RefusedImport(ImportError):
    """What the learner's code meets when it reaches for gpuedu."""


class RefusedAccess(PermissionError):
    """What the learner's code meets when it reads gpuedu's files, starts a program or uses ctypes."""


def _why(exercise):
    return (f"a function exercise is answered by your own arithmetic, so while {exercise} runs your function, "
            f"gpuedu (the exercises' references, the profiler's calculators) is out of its reach; compute the "
            f"answer from the arguments and the constants the exercise's text gives")


def refused(exception):
    """True when ``exception``, or one it was raised from or during, is the guard's refusal."""
    seen = set()
    while exception is not None and id(exception) not in seen:
        if isinstance(exception, (RefusedImport, RefusedAccess)):
            return True
        seen.add(id(exception))
        exception = exception.__cause__ or exception.__context__
    return False


def _is_gpuedu(name):
    return isinstance(name, str) and (name == PACKAGE or name.startswith(PACKAGE + "."))


def _module_names(folder):
    """The dotted names of gpuedu's modules and packages under ``folder`` (gpuedu's own folder)."""
    names = {PACKAGE}
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d.isidentifier() and not d.startswith("__")]
        rel = os.path.relpath(root, folder)
        package = PACKAGE if rel == os.curdir else ".".join([PACKAGE, *rel.split(os.sep)])
        names.add(package)
        names.update(f"{package}.{f[:-3]}" for f in files
                     if f.endswith(".py") and f[:-3].isidentifier() and f != "__init__.py")
    return names


class _StandIn(types.ModuleType):
    """What ``sys.modules`` holds under a gpuedu module's name while the learner's code runs."""

    def __getattr__(self, attribute):
        what = f"imported {self.__name__}" if attribute.startswith("__") else \
            f"reached for {self.__name__}.{attribute}"
        raise RefusedImport(f"your function {what}: {_why(self.__exercise)}", name=self.__name__)


class Guard:
    """Keeps gpuedu out of the learner's reach in this process; ``install()`` once, before the learner's code."""

    def __init__(self, exercise, package_dirs=()):
        self.exercise = exercise
        dirs = list(package_dirs)
        try:      # the gpuedu that this Python would import (found, not imported)
            spec = importlib.util.find_spec(PACKAGE)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            dirs.extend(spec.submodule_search_locations)
        self.dirs = sorted({os.path.realpath(d) for d in dirs if os.path.isdir(d)})
        self.installed = False

    # -- the finder on sys.meta_path
    def find_spec(self, name, path=None, target=None):
        if _is_gpuedu(name):
            raise RefusedImport(f"your function imported {name}: {_why(self.exercise)}", name=name)
        return None

    def invalidate_caches(self):
        pass

    # -- the audit hook
    def _inside(self, path):
        if isinstance(path, int):
            return False
        try:
            real = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        return any(real == d or real.startswith(d + os.sep) for d in self.dirs)

    def audit(self, event, args):
        if not self.installed:
            return
        if event == "import" and args and _is_gpuedu(args[0]):
            raise RefusedImport(f"your function imported {args[0]}: {_why(self.exercise)}", name=args[0])
        if event == "open" and args and self._inside(args[0]):
            raise RefusedAccess(f"your function opened {os.fsdecode(args[0])}, a file of gpuedu: "
                                f"{_why(self.exercise)}")
        if event in ("os.link", "os.rename", "os.symlink") and args and self._inside(args[0]):
            raise RefusedAccess(f"your function tried {event} on {os.fsdecode(args[0])}, a file of gpuedu: "
                                f"{_why(self.exercise)}")
        if event in _PROGRAM_EVENTS or event.split(".")[0] == "ctypes":
            what = "used ctypes" if event.startswith("ctypes") else f"started another program ({event})"
            raise RefusedAccess(f"your function {what}, which a function exercise may not: {_why(self.exercise)}")

    def install(self):
        """Take gpuedu out of ``sys.modules``, put the stand-ins there, and start refusing.  ctypes is imported
        first: NumPy imports it, and its import opens the C library, which the guard refuses afterwards."""
        import ctypes  # noqa: F401
        for name in [n for n in sys.modules if _is_gpuedu(n)]:
            del sys.modules[name]
        names = set()
        for folder in self.dirs:
            names |= _module_names(folder)
        for name in names:
            stand_in = _StandIn(name)
            stand_in._StandIn__exercise = self.exercise
            sys.modules[name] = stand_in
        sys.meta_path.insert(0, self)
        sys.addaudithook(self.audit)
        self.installed = True


def plain(value, depth=0):
    """``value`` as plain Python (numbers, strings, None, lists, tuples, dicts of them); TypeError otherwise."""
    if depth > 20:
        raise TypeError("nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if hasattr(value, "item") and hasattr(value, "dtype") and getattr(value, "shape", None) == ():
        return plain(value.item(), depth + 1)               # a NumPy scalar
    if hasattr(value, "tolist") and hasattr(value, "dtype"):
        return plain(value.tolist(), depth + 1)             # a NumPy array
    if isinstance(value, (list, tuple)):
        items = [plain(v, depth + 1) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {plain(k, depth + 1): plain(v, depth + 1) for k, v in value.items()}
    raise TypeError(f"a {type(value).__name__} is not a plain value")


def run_calls(source, function, calls):
    """Run the learner's ``source``, then ``function(**kwargs)`` for each of ``calls`` until one raises: a list
    of {"value": returned}, {"error": message}, or one {"load_error": message} or {"missing": True}; an error
    that the guard raised carries "refused": True."""
    namespace = {"__name__": "learner"}
    try:
        exec(compile(ast.parse(source), FILENAME, "exec"), namespace)
    except Exception as e:       # the learner's module-level code raised
        entry = {"load_error": f"running your source raised {type(e).__name__}: {e}"}
        return [dict(entry, refused=True) if refused(e) else entry]
    fn = namespace.get(function)
    if not callable(fn):
        return [{"missing": True}]
    results = []
    for kwargs in calls:
        try:
            results.append({"value": fn(**kwargs)})
        except Exception as e:
            frame = traceback.extract_tb(e.__traceback__)[-1]
            where = f" (line {frame.lineno} of your function)" if frame.filename == FILENAME else ""
            entry = {"error": f"your function raised {type(e).__name__}: {e}{where}"}
            results.append(dict(entry, refused=True) if refused(e) else entry)
            break
    return results


def main():
    request = json.loads(sys.stdin.read())
    answer = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    calls = [ast.literal_eval(c) for c in request["calls"]]
    Guard(str(request.get("exercise", "this exercise")), request.get("package_dirs", ())).install()
    results = run_calls(request["source"], request["function"], calls)
    for entry in results:
        if "value" in entry:
            got = entry.pop("value")
            entry.update({"repr": repr(got)[:2000], "type": type(got).__name__})
            try:
                entry["value"] = repr(plain(got))
            except (TypeError, ValueError, RecursionError) as e:
                entry["unplain"] = str(e)
    data = json.dumps(results).encode()
    view = memoryview(data)
    while view:
        view = view[os.write(answer, view):]


if __name__ == "__main__":
    main()
