"""Runs a learner's Python function for ``FunctionExercise.check(..., isolated=True)``, in a process of its own.

    python -I _function_child.py   (standard input: {"source": ..., "function": NAME, "calls": [kwargs, ...]})

It imports nothing of gpuedu.  Each call's keyword arguments arrive as a Python literal; each result goes back as
its ``repr`` (for the message), the same value as a literal of plain Python types (for the comparison), and its
type's name, or as the exception the call raised.  Only these strings leave the process: the checker compares
them with values it computed itself, so nothing the function defines, patches or returns can change how it is
compared.  Standard output is kept for the answer; what the function prints goes to standard error.
"""
import ast
import json
import os
import sys
import traceback

FILENAME = "<your function>"


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
    of {"value": returned}, {"error": message}, or one {"load_error": message} or {"missing": True}.  Both ways
    of checking use it: in the checker's process, and here in a process of its own."""
    namespace = {"__name__": "learner"}
    try:
        exec(compile(ast.parse(source), FILENAME, "exec"), namespace)
    except Exception as e:       # the learner's module-level code raised
        return [{"load_error": f"running your source raised {type(e).__name__}: {e}"}]
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
            results.append({"error": f"your function raised {type(e).__name__}: {e}{where}"})
            break
    return results


def main():
    request = json.loads(sys.stdin.read())
    answer = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    results = run_calls(request["source"], request["function"], [ast.literal_eval(c) for c in request["calls"]])
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
