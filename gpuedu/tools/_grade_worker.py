"""What ``gpuedu grade`` runs inside the sandbox: ``python -I -m gpuedu.tools._grade_worker``.

Standard input: a line with a random token, then one JSON request.  The answer goes back on standard output as
one line, ``TOKEN {json}``; before anything of the submission runs, the process keeps its standard output for
itself (a private copy of the descriptor), points descriptor 1 at standard error (so nothing the submission
prints, from Python or from a kernel's ``printf``, lands beside the answer) and makes itself non-dumpable (so
no other process of the sandbox opens its descriptors or reads its memory through ``/proc``).  The token never
leaves this process: a line without it is not an answer.

Two requests:

- ``{"notebook": NAME, "timeout": SECONDS, "output": BYTES}``: execute the notebook in ``/scratch`` (errors
  allowed, SECONDS per cell) with each ``exercises.check("ID", ...)`` call in a cell's source turned into a
  call of a recorder, which writes what the call was given, as text, and checks nothing.  Answers ``{"answers": {id: {"answer": text} or {"not_text": type}},
  "errors": {cell index: "Name: value"}, "stopped": why or null}``.  What is recorded is data: the grader checks
  it again in a fresh process, so a notebook that lies here lies only about its own answers.
- ``{"exercise": ID, "answer": TEXT} or {"exercise": ID, "not_text": TYPE}``: run that exercise's check, from
  the installed gpuedu, on that text.  A Python answer runs in a process of its own, and only its return values
  come back.  Answers ``{"passed": bool, "report": the check's report}``.
"""
import json
import os
import re
import secrets
import sys

# Each call ``exercises.check("ID", ...)`` in a cell's source becomes a call of this recorder, under a name
# drawn afresh for every notebook: replacing ``exercises.check``, or anything else, does not stop it recording.
CHECK_CALL = re.compile(r"""(?<![\w.])(?:gpuedu\.)?exercises\.check\((?=\s*["'][0-9]{2}\.[a-z0-9_]+["'])""")
# What the notebook prints is counted in the kernel as it is written, so that a loop of prints stops at the
# output limit before the kernel's output buffers grow to the memory limit (the worker counts again what arrives).
OUTPUT_GUARD = """\
def _gpuedu_output_guard(limit, marker):
    import os, signal, sys
    printed = [0]

    class Guard:
        def __init__(self, stream):
            self._stream = stream

        def write(self, text):
            printed[0] += len(text)
            if printed[0] > limit:
                open(marker, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
            return self._stream.write(text)

        def __getattr__(self, name):
            return getattr(self._stream, name)
    sys.stdout, sys.stderr = Guard(sys.stdout), Guard(sys.stderr)

_gpuedu_output_guard({limit}, {marker!r})
del _gpuedu_output_guard
"""
RECORDER = """\
def {name}(exercise_id, source=None, *args, **kwargs):
    import json, os
    from gpuedu.exercises._result import CheckResult, Failure
    entry = {{"exercise": str(exercise_id)}}
    if isinstance(source, str):
        text = source
        if "\\n" not in source and source.strip().endswith(".py") and os.path.isfile(source.strip()):
            with open(source.strip()) as f:      # a %%writefile program: its text is the answer
                text = f.read()
        entry["answer"] = text
    else:
        entry["not_text"] = type(source).__name__
    with open({path!r}, "a") as f:
        f.write(json.dumps(entry) + "\\n")
    return CheckResult(str(exercise_id), failure=Failure(
        "grading", "recorded for grading: the grader checks this answer in a process of its own"))
"""
MAX_ANSWERS = 16 << 20     # bytes of recorded answers read back
TIMED_OUT = "CellTimeoutError"


def _private_stdout():
    """Keep descriptor 1 for the answer; everything else printed goes to standard error."""
    answer = os.dup(1)                  # not inherited by children (Python's descriptors are non-inheritable)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)   # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass
    return answer


def _answer(fd, token, payload):
    data = (token + " " + json.dumps(payload) + "\n").encode()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def run_notebook(request):
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from .course import _current_env_kernel_manager, shutdown
    path = os.path.join(os.getcwd(), os.path.basename(request["notebook"]))
    answers_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "gpuedu-answers.jsonl")
    nb = nbformat.read(path, as_version=4)
    name = f"_gpuedu_record_{secrets.token_hex(8)}"
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = CHECK_CALL.sub(name + "(", cell.source)
    limit = int(request.get("output", 8 << 20))
    marker = os.path.join(os.environ.get("TMPDIR", "/tmp"), "gpuedu-output-limit")
    nb.cells.insert(0, nbformat.v4.new_code_cell(RECORDER.format(name=name, path=answers_path) + "\n"
                                                 + OUTPUT_GUARD.format(limit=limit, marker=marker)))

    class Client(NotebookClient):
        """Keeps errors only, stops the notebook when its outputs pass ``limit`` bytes, and remembers the cells
        it interrupted for running past their time."""
        printed = 0
        overflow = False
        timed_out = set()

        async def _async_handle_timeout(self, timeout, cell=None):
            self.timed_out.add(id(cell))
            return await super()._async_handle_timeout(timeout, cell)

        def output(self, outs, msg, display_id, cell_index):
            self.printed += len(json.dumps(msg.get("content", {})))
            if self.printed > limit and not self.overflow:
                self.overflow = True
                pid = getattr(getattr(self.km, "provisioner", None), "pid", None)
                if pid:
                    os.kill(pid, 9)
            if msg["msg_type"] == "error":
                return super().output(outs, msg, display_id, cell_index)
            return None

    stopped = None
    sockets = os.path.join(os.environ.get("TMPDIR", "/tmp"), "kernel-sockets")
    os.makedirs(sockets, exist_ok=True)
    km = _current_env_kernel_manager(sockets)
    seconds = float(request["timeout"])
    # a cell past its time is interrupted and the next one runs (one slow cell does not hide the other
    # exercises); its error says so
    client = Client(nb, timeout=seconds, km=km, allow_errors=True, interrupt_on_timeout=True,
                    resources={"metadata": {"path": os.getcwd()}})
    try:
        client.execute(env=dict(os.environ))
    except CellTimeoutError:
        stopped = f"a cell ran longer than {seconds:g} s and was stopped"
    except DeadKernelError as e:
        stopped = f"the notebook's kernel died ({e})"
    finally:
        shutdown(km)
    if client.overflow or os.path.exists(marker):     # stopped here, or by the kernel's own guard
        stopped = f"the notebook printed more than {limit / (1 << 20):g} MiB (the output limit) and was stopped"
    answers = {}
    if os.path.isfile(answers_path):
        with open(answers_path, errors="replace") as f:
            text = f.read(MAX_ANSWERS)
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("exercise"), str):
                answers[entry["exercise"]] = {k: str(entry[k]) for k in ("answer", "not_text") if k in entry}
    errors = {}
    for index, cell in enumerate(nb.cells[1:]):
        if id(cell) in client.timed_out:
            errors[str(index)] = f"{TIMED_OUT}: the cell ran longer than {seconds:g} s and was stopped"
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                errors[str(index)] = f"{out.get('ename')}: {out.get('evalue')}"
                break
    return {"answers": answers, "errors": errors, "stopped": stopped}


def run_check(request):
    from .. import exercises
    answer = request.get("answer")
    if answer is None:     # the notebook passed something that is not text: the check says what it got
        answer = type(str(request.get("not_text", "object")), (), {})()
    result = exercises.check(request["exercise"], answer, seed=int(request.get("seed", 0)), verbose=False,
                             isolated=True)
    return {"passed": bool(result.passed), "report": result.report()}


def main():
    token = sys.stdin.readline().strip()
    request = json.loads(sys.stdin.readline())
    fd = _private_stdout()
    payload = run_notebook(request) if "notebook" in request else run_check(request)
    _answer(fd, token, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
