"""Classroom tools: student and solution notebooks from the lessons, and grading of submitted notebooks.

``build(dest)`` writes ``dest/student/`` (every lesson, the exercise cells' outputs cleared, ready to hand out)
and ``dest/solutions/`` (the same lessons with each exercise's stub replaced by its reference solution).
``grade(notebooks, out_csv)`` executes each submitted notebook in a kernel process of its own, with a time
limit per cell and errors allowed (one broken cell does not hide the other exercises), reads the verdict of
every ``exercises.check(...)`` call from the cell outputs and writes one CSV row per student and exercise:
``passed``, ``not yet`` (with the check's message and hint) or ``error`` (the exception, a timeout, or a check
that never ran).  It works the same on the emulator and on a GPU: the checks run on the backend at hand.
"""
import copy
import csv
import os
import re
import sys

CHECK_CALL = re.compile(r"""exercises\.check\(\s*["']([0-9]{2}\.[a-z0-9_]+)["']""")
VERDICT = re.compile(r"^(PASSED|NOT YET) ([0-9]{2}\.[a-z0-9_]+)\b")
FIELDS = ("student", "notebook", "exercise", "result", "message", "hint")


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


def verdicts(nb):
    """{exercise id: (result, message, hint)} from an executed notebook's check cells."""
    found = {}
    for cell in nb.cells:
        ids = _checked_ids(cell)
        if not ids:
            continue
        text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        seen = {}
        lines = text.splitlines()
        for i, line in enumerate(lines):
            m = VERDICT.match(line.strip())
            if m and m.group(2) in ids:
                hint = ""
                for later in lines[i + 1:]:
                    if VERDICT.match(later.strip()):       # the next check's report: this one had no hint
                        break
                    if later.strip().startswith("hint:"):
                        hint = later.strip()[len("hint:"):].strip()
                        break
                seen[m.group(2)] = ("passed" if m.group(1) == "PASSED" else "not yet",
                                    _message(line.strip(), m.group(1), m.group(2)), hint)
        for ex_id in ids:
            if ex_id in seen:
                found[ex_id] = seen[ex_id]
            elif errors:
                e = errors[0]
                found[ex_id] = ("error", f"{e.get('ename')}: {e.get('evalue')}", "the cell raised before the check")
            else:
                found[ex_id] = ("error", "the check did not run", "an earlier cell failed or timed out")
    return found


def grade_one(path, timeout=600):
    """Execute one submitted notebook (its own kernel process) and return its rows."""
    import nbformat
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from .course import execute
    nb = nbformat.read(path, as_version=4)
    student = os.path.splitext(os.path.basename(path))[0]
    stopped = None
    try:     # errors allowed: one broken cell must not hide the other exercises
        execute(nb, os.path.dirname(os.path.abspath(path)), timeout, allow_errors=True)
    except CellTimeoutError:
        stopped = f"a cell ran longer than {timeout:g} s and was stopped"
    except DeadKernelError as e:
        stopped = f"the notebook's kernel died ({e})"
    rows = []
    for ex_id, (result, message, hint) in verdicts(nb).items():
        if result == "error" and stopped and message == "the check did not run":
            message = stopped
        rows.append({"student": student, "notebook": os.path.basename(path), "exercise": ex_id, "result": result,
                     "message": message, "hint": hint})
    if not rows:
        rows.append({"student": student, "notebook": os.path.basename(path), "exercise": "",
                     "result": "error", "message": stopped or "no exercises.check(...) call in this notebook",
                     "hint": ""})
    return rows


def grade(paths, out_csv, timeout=600):
    """Grade every notebook, write the CSV, return the rows."""
    rows = []
    for path in paths:
        rows.extend(grade_one(path, timeout))
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
    parser.add_argument("--timeout", type=float, default=600, help="seconds one cell may run (default 600)")
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
    rows = grade(args.notebooks, args.out, args.timeout)
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
