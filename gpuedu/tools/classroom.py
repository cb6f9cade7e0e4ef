"""Classroom tools: student and solution notebooks from the lessons, and grading of submitted notebooks.

``build(dest)`` writes ``dest/student/`` (every lesson, the exercise cells' outputs cleared, ready to hand out)
and ``dest/solutions/`` (the same lessons with each exercise's stub replaced by its reference solution).
``grade(notebooks, out_csv)`` computes every verdict itself.  For each submitted notebook:

1. the notebook runs in a sandbox (``gpuedu.tools.sandbox``: a private scratch copy, no network, none of the
   grader's files, limits on time, memory, processes and output), errors allowed (one broken cell does not hide
   the other exercises), with each ``exercises.check("ID", ...)`` call in a cell's source turned into a call of a
   recorder that keeps, as text, what the call was given: the kernel's source, the function's, the program's;
2. each exercise that a cell checks (``exercises.check("ID", ...)`` in its source) is then checked again from
   that text, in a fresh sandboxed process that imports gpuedu from the installation (``python -I``);
3. one CSV row per student and exercise: ``passed``, ``not yet`` (the check's message and hint) or ``error``
   (the exception, a limit that stopped the notebook or the check, a crash, or a check that never ran), and
   whether it ran in the sandbox.

Nothing the notebook prints, patches or redefines reaches the CSV: not a printed PASSED line, not a replaced
``exercises.check``.  It works the same on the emulator and on a GPU: the checks run on the backend at hand.
"""
import copy
import csv
import json
import os
import re
import secrets
import sys

from . import sandbox as sandboxing

# a cell that checks an exercise; the grading worker's recorder replaces exactly these calls
CHECK_CALL = re.compile(r"""(?<![\w.])(?:gpuedu\.)?exercises\.check\(\s*["']([0-9]{2}\.[a-z0-9_]+)["']""")
VERDICT = re.compile(r"^(PASSED|NOT YET) ([0-9]{2}\.[a-z0-9_]+)\b")
FIELDS = ("student", "notebook", "exercise", "result", "message", "hint", "sandbox")


def _checked_ids(cell):
    return CHECK_CALL.findall(cell.source) if cell.cell_type == "code" else []


def _stub_cells(nb):
    """{cell index: [exercise, ...]} for cells holding an exercise's stub or calling its check."""
    from .. import exercises
    found = {}
    ids = {i for c in nb.cells for i in _checked_ids(c)}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for ex_id in ids:
            ex = exercises.get(ex_id)
            if ex.stub.strip() in cell.source or ex_id in _checked_ids(cell):
                found.setdefault(index, []).append(ex)
    return found


def _clear(cell):
    cell.outputs = []
    cell.execution_count = None


def student_notebook(nb):
    """A copy with the outputs of every exercise cell cleared (the stubs stay, to be filled in)."""
    out = copy.deepcopy(nb)
    for index in _stub_cells(out):
        _clear(out.cells[index])
    return out


def solution_notebook(nb):
    """A copy with each exercise's stub replaced by its reference solution, outputs of those cells cleared."""
    out = copy.deepcopy(nb)
    for index, exs in _stub_cells(out).items():
        cell = out.cells[index]
        for ex in exs:
            if ex.stub.strip() in cell.source:
                cell.source = cell.source.replace(ex.stub.strip(), ex.solution.strip())
        _clear(cell)
    return out


def build(dest, lessons_folder=None):
    """Write ``dest/student`` and ``dest/solutions``; returns the lesson file names written."""
    import nbformat

    from .course import LESSON_PATTERN, packaged_lessons
    source = lessons_folder or packaged_lessons()
    if source is None or not os.path.isdir(source):
        raise FileNotFoundError(f"no lessons folder at {source!r}: pass --lessons DIR")
    names = sorted(n for n in os.listdir(source) if LESSON_PATTERN.match(n))
    if not names:
        raise FileNotFoundError(f"no NN_topic.ipynb lessons in {source}")
    for kind, make in (("student", student_notebook), ("solutions", solution_notebook)):
        os.makedirs(os.path.join(dest, kind), exist_ok=True)
        for name in names:
            nb = nbformat.read(os.path.join(source, name), as_version=4)
            nbformat.write(make(nb), os.path.join(dest, kind, name))
    return names


def _message(line, verb, ex_id):
    """The check's message: what follows "VERB id (its title): " (titles may hold colons of their own)."""
    from .. import exercises
    try:
        title = exercises.get(ex_id).title
    except KeyError:
        title = ""
    for prefix in (f"{verb} {ex_id} ({title}): ", f"{verb} {ex_id}: "):
        if line.startswith(prefix):
            return line[len(prefix):]
    return line.split(": ", 1)[1] if ": " in line else ""


def _report_row(report):
    """(message, hint) of a check's report, read as the notebook shows it."""
    lines = report.splitlines()
    head = lines[0].strip() if lines else ""
    m = VERDICT.match(head)
    message = _message(head, m.group(1), m.group(2)) if m else head
    hint = next((l.strip()[len("hint:"):].strip() for l in lines[1:] if l.strip().startswith("hint:")), "")
    return message, hint


def _token_line(outcome, token):
    """The JSON the worker answered with (the line that starts with the token), or None."""
    for line in outcome.stdout.splitlines():
        if line.startswith(token + " "):
            try:
                return json.loads(line[len(token) + 1:])
            except ValueError:
                return None
    return None


def _stopped(outcome, limits, what):
    """Why a sandboxed run gave no answer: a limit, a crash, or the worker's own last words."""
    if outcome.stopped:
        return f"{what} was stopped by {limits.describe(outcome.stopped)}"
    if outcome.crashed:
        return f"{what} crashed ({outcome.crashed})"
    tail = outcome.stderr.strip().splitlines()[-1:] or [f"exit status {outcome.returncode}"]
    return f"{what} ended without an answer ({tail[0][:300]})"


def _worker(request, limits, sandbox, files=(), hide=()):
    """Run the grading worker on ``request``: (its JSON answer or None, the sandbox's Outcome)."""
    token = secrets.token_hex(16)
    argv = [sys.executable, "-I", "-m", "gpuedu.tools._grade_worker"]
    stdin = (token + "\n" + json.dumps(request) + "\n").encode()
    outcome = sandboxing.run(argv, limits, files=files, stdin=stdin, sandbox=sandbox, hide=hide)
    return _token_line(outcome, token), outcome


def _limits(options, seconds):
    return sandboxing.Limits(seconds=seconds, memory=int(options.get("memory", 4) * sandboxing.GIB),
                             processes=int(options.get("processes", 256)),
                             output=int(options.get("output", 8) * sandboxing.MIB))


def check_answer(ex_id, entry, timeout=600, sandbox=True, hide=(), **options):
    """(result, message, hint) of one recorded answer, checked by a fresh worker from the installed gpuedu."""
    limits = _limits(options, timeout + 60)
    request = {"exercise": ex_id, **{k: entry[k] for k in ("answer", "not_text") if k in entry}}
    answer, outcome = _worker(request, limits, sandbox, hide=hide)
    if not isinstance(answer, dict) or not isinstance(answer.get("report"), str):
        return "error", _stopped(outcome, limits, "the check of this answer"), ""
    message, hint = _report_row(answer["report"])
    return ("passed" if answer.get("passed") is True else "not yet"), message, hint


def grade_one(path, timeout=600, sandbox=True, hide=(), **options):
    """Grade one submitted notebook: run it in a sandbox to collect what each ``exercises.check`` call was
    given, then check each answer in a fresh sandboxed process.  Returns its rows."""
    import nbformat
    student = os.path.splitext(os.path.basename(path))[0]
    name = os.path.basename(path)
    mode = "bubblewrap" if sandbox else "none (--no-sandbox)"

    def row(exercise, result, message, hint=""):
        return {"student": student, "notebook": name, "exercise": exercise, "result": result, "message": message,
                "hint": hint, "sandbox": mode}
    try:
        with open(path, "rb") as f:
            data = f.read()
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    except (OSError, ValueError, UnicodeDecodeError, KeyError, AttributeError, TypeError) as e:
        return [row("", "error", f"not a notebook that can be read ({type(e).__name__}: {str(e)[:300]})",
                    "hand in the .ipynb file that Jupyter saved")]
    checked = {}            # exercise id -> the indices of the cells that call its check
    for index, cell in enumerate(nb.cells):
        for ex_id in _checked_ids(cell):
            checked.setdefault(ex_id, []).append(index)
    if not checked:
        return [row("", "error", "no exercises.check(...) call in this notebook")]
    cells = sum(c.cell_type == "code" for c in nb.cells)
    limits = _limits(options, timeout * (cells + 1) + 60)
    request = {"notebook": "submission.ipynb", "timeout": timeout, "output": limits.output}
    ran, outcome = _worker(request, limits, sandbox, files={"submission.ipynb": data}, hide=hide)
    if not isinstance(ran, dict):
        ran = {"answers": {}, "errors": {}, "stopped": _stopped(outcome, limits, "the notebook")}
    answers = ran.get("answers") if isinstance(ran.get("answers"), dict) else {}
    errors = ran.get("errors") if isinstance(ran.get("errors"), dict) else {}
    stopped = ran.get("stopped") if isinstance(ran.get("stopped"), str) else None
    rows = []
    for ex_id, indices in checked.items():
        entry = answers.get(ex_id)
        if isinstance(entry, dict) and ("answer" in entry or "not_text" in entry):
            rows.append(row(ex_id, *check_answer(ex_id, entry, timeout, sandbox, hide, **options)))
            continue
        error = next((errors[str(i)] for i in indices if isinstance(errors.get(str(i)), str)), None)
        if error is not None:
            if error.startswith("CellTimeoutError: "):
                rows.append(row(ex_id, "error", error[len("CellTimeoutError: "):], "the cell was stopped before the check"))
            else:
                rows.append(row(ex_id, "error", _memory_note(error[:1000], options), "the cell raised before the check"))
        else:
            rows.append(row(ex_id, "error", stopped or "the check did not run", "an earlier cell failed or timed out"))
    return rows


class GradingUnavailable(RuntimeError):
    """The grader's own processes cannot start here; the message says why and what to do."""


def _check_isolated_import():
    """The worker runs as ``python -I`` (no current folder, no $PYTHONPATH, no user site-packages), so that a
    submission cannot put a gpuedu of its own first on the path: gpuedu must import that way."""
    import subprocess
    done = subprocess.run([sys.executable, "-I", "-c", "import gpuedu.tools._grade_worker"], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise GradingUnavailable(f"{sys.executable} -I cannot import gpuedu ({last}): the grader's checks run that "
                                 f"way, away from the current folder, $PYTHONPATH and user site-packages. Install "
                                 f"gpuedu into this Python's environment (a virtual environment: python -m venv, "
                                 f"then pip install gpuedu), not with pip --user or through $PYTHONPATH")


def _memory_note(error, options):
    """A cell's error, and the limit when it is a MemoryError (the sandbox's limit, not the machine's memory)."""
    if error.startswith("MemoryError"):
        return f"{error.rstrip(': ')} (the memory limit is {options.get('memory', 4):g} GiB)"
    return error


def grade(paths, out_csv, timeout=600, sandbox=True, **options):
    """Grade every notebook, write the CSV, return the rows.  ``sandbox``: run each submission in a sandbox
    (``gpuedu.tools.sandbox``); raises ``SandboxUnavailable`` when none can be made."""
    if sandbox:
        ok, why = sandboxing.available()
        if not ok:
            raise sandboxing.SandboxUnavailable(why)
    _check_isolated_import()
    # what a submission must not see, should a system folder hold it: every submission's folder, the CSV's
    hide = sorted({os.path.dirname(os.path.abspath(p)) for p in paths} | {os.path.dirname(os.path.abspath(out_csv))}
                  | {os.path.expanduser("~"), os.getcwd()})
    rows = []
    for path in paths:
        rows.extend(grade_one(path, timeout, sandbox, hide, **options))
    with open(out_csv, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


def build_parser(parser):
    parser.add_argument("dest", help="folder for student/ and solutions/ notebooks")
    parser.add_argument("--lessons", default=None, help="lessons folder (default: the lessons that came with gpuedu)")
    return parser


def build_grade_parser(parser):
    parser.add_argument("notebooks", nargs="+", help="submitted notebooks, one per student (the file name names them)")
    parser.add_argument("--out", default="results.csv", help="CSV file to write (default results.csv)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one cell, or one check, may run "
                                                                   "(default 600)")
    parser.add_argument("--memory", type=float, default=4, help="GiB of memory a submission may use (default 4)")
    parser.add_argument("--processes", type=int, default=256, help="processes a submission may run at once "
                                                                   "(default 256)")
    parser.add_argument("--output", type=float, default=8, help="MiB a submission may print (default 8)")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="grade without the sandbox (bubblewrap): the submissions run as you, with your files; "
                             "each row of the CSV says so")
    return parser


def classroom_command(args):
    try:
        names = build(args.dest, args.lessons)
    except FileNotFoundError as e:
        print(f"gpuedu classroom: {e}", file=sys.stderr)
        return 2
    print(f"wrote {len(names)} student notebooks to {os.path.join(args.dest, 'student')} and their solutions to "
          f"{os.path.join(args.dest, 'solutions')}")
    return 0


def grade_command(args):
    missing = [p for p in args.notebooks if not os.path.isfile(p)]
    if missing:
        print(f"gpuedu grade: no such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    for name, value in (("--timeout", args.timeout), ("--memory", args.memory), ("--processes", args.processes),
                        ("--output", args.output)):
        if not value > 0:
            print(f"gpuedu grade: {name} must be more than 0, got {value:g}", file=sys.stderr)
            return 2
    try:
        rows = grade(args.notebooks, args.out, args.timeout, sandbox=not args.no_sandbox, memory=args.memory,
                     processes=args.processes, output=args.output)
    except GradingUnavailable as e:
        print(f"gpuedu grade: nothing was graded: {e}", file=sys.stderr)
        return 2
    except sandboxing.SandboxUnavailable as e:
        print(f"gpuedu grade: no sandbox can be made on this machine, so nothing was graded: {e}.\n"
              f"A submission is code a student wrote, and without the sandbox it runs as you, with your files. "
              f"To grade anyway, pass --no-sandbox (the CSV records it on every row).", file=sys.stderr)
        return 2
    if args.no_sandbox:
        print("gpuedu grade: graded without the sandbox (--no-sandbox): the submissions ran as you", file=sys.stderr)
    passed = sum(r["result"] == "passed" for r in rows)
    for r in rows:
        print(f"{r['student']:20s} {r['exercise']:24s} {r['result']}" + (f": {r['message']}" if r["message"] else ""))
    print(f"{passed} of {len(rows)} passed; written to {args.out}")
    return 0


# ---- planning a workshop -----------------------------------------------------------------------------------

WORDS_PER_MINUTE = 150        # technical prose, read with care
MINUTES_PER_CODE_CELL = 1.5   # run it, read its output, change something
MINUTES_PER_EXERCISE = 15     # write, check, fix, check again


def estimate_minutes(nb):
    """A learner's time for one lesson by a stated rule (not a measurement): reading + running + exercises."""
    words = sum(len(c.source.split()) for c in nb.cells if c.cell_type == "markdown")
    code = sum(c.cell_type == "code" for c in nb.cells)
    checks = sum(len(_checked_ids(c)) for c in nb.cells)
    return round(words / WORDS_PER_MINUTE + code * MINUTES_PER_CODE_CELL + checks * MINUTES_PER_EXERCISE)
