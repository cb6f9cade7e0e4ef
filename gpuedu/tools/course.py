"""``gpuedu course``: run every lesson top to bottom, headless, and report on each.

Each notebook runs in a fresh Jupyter kernel of this Python (so it gets the same gpuedu and the
same backend rules as a learner), from the lessons folder, with nbclient.  The executed copies
and a report (Markdown and JSON: passed or failed, backend, seconds, the error) go to the
report folder; the lessons themselves are left untouched.  Exit code 1 when a lesson fails.
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time

REPOSITORY = "https://github.com/gpuedu/gpuedu"
LESSON_PATTERN = re.compile(r"^(\d\d)_[A-Za-z0-9_]+\.ipynb$")
BACKEND_LINE = re.compile(r"gpuedu: backend (cuda|cpu)\b")


def packaged_lessons():
    """The lessons that came with this install: ``gpuedu/lesson_notebooks`` in a wheel, or the checkout's
    ``lessons/`` beside the package (a clone, an editable install); None if neither holds any."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # gpuedu/, above gpuedu/tools/
    for folder in (os.path.join(package, "lesson_notebooks"), os.path.join(os.path.dirname(package), "lessons")):
        if os.path.isdir(folder) and any(LESSON_PATTERN.match(n) for n in os.listdir(folder)):
            return folder
    return None


def copy_lessons(dest, force=False):
    """Copy the lessons into ``dest`` (created if needed): ready to open in Jupyter.  A lesson already there is
    kept (it may hold your work) unless ``force``.  Returns (copied, kept) file names."""
    source = packaged_lessons()
    if source is None:
        raise FileNotFoundError("this gpuedu install carries no lessons; get them from the repository "
                                f"({REPOSITORY}) with git clone")
    os.makedirs(dest, exist_ok=True)
    copied, kept = [], []
    for name in sorted(n for n in os.listdir(source) if LESSON_PATTERN.match(n)):
        target = os.path.join(dest, name)
        if os.path.exists(target) and not force:
            kept.append(name)
            continue
        shutil.copyfile(os.path.join(source, name), target)
        copied.append(name)
    return copied, kept


def lessons_command(args):
    try:
        copied, kept = copy_lessons(args.dest, force=args.force)
    except (FileNotFoundError, OSError) as e:
        print(f"gpuedu lessons: {e}", file=sys.stderr)
        return 2
    print(f"copied {len(copied)} lessons to {os.path.abspath(args.dest)}")
    if kept:
        print(f"kept your copies of {len(kept)} (pass --force to replace them): {', '.join(kept)}")
    print(f"open them with: jupyter lab {args.dest}    or run them all: gpuedu course --lessons {args.dest}")
    return 0


def build_lessons_parser(parser):
    parser.add_argument("dest", help="folder to copy the lesson notebooks into (created if needed)")
    parser.add_argument("--force", action="store_true", help="replace lessons already in the folder")
    return parser


def find_lessons(folder, only=()):
    """Lesson notebooks (``NN_topic.ipynb``) in course order; ``only`` keeps those whose number or name is given."""
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"no lessons folder at {folder!r}; run from the repository root or pass --lessons DIR")
    names = sorted(n for n in os.listdir(folder) if LESSON_PATTERN.match(n))
    if only:
        wanted = {w.removesuffix(".ipynb") for w in only}
        names = [n for n in names if n[:2] in wanted or n.removesuffix(".ipynb") in wanted]
        if not names:
            raise ValueError(f"no lesson matches {', '.join(only)}; lesson numbers look like 00, 03")
    return [os.path.join(folder, n) for n in names]


def _current_env_kernel_manager(socket_folder):
    """A kernel manager that starts ipykernel with this very interpreter (not whatever 'python3' means), talking
    over Unix sockets in ``socket_folder`` (IPC: only this user can reach them, so ipykernel has no reason to warn
    that TCP without encryption lets others listen) where the platform has them, else over local TCP.  The
    asynchronous manager, which nbclient expects: with the blocking one a cell's time limit never fires."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    class ThisPythonSpecs(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                              display_name="gpuedu course", language="python", resource_dir="")

    sockets = {"transport": "ipc", "ip": os.path.join(socket_folder, "kernel")} if os.name == "posix" else {}
    return AsyncKernelManager(kernel_name="gpuedu-course", kernel_spec_manager=ThisPythonSpecs(), **sockets)


def shutdown(kernel_manager):
    """Stop the kernel of ``kernel_manager`` if it has one (now, not politely: it may be stuck in a cell)."""
    from jupyter_core.utils import run_sync
    if kernel_manager.has_kernel:
        run_sync(kernel_manager.shutdown_kernel)(now=True)


def backend_of(notebook):
    """The backend the notebook's first cell reported ('cuda'/'cpu'), or '?'."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            match = BACKEND_LINE.search(output.get("text", "") if output.get("output_type") == "stream" else "")
            if match:
                return match.group(1)
    return "?"


def _failing_cell(notebook):
    """(code cell number counted from 1, as a reader counts them; its execution count; the error), or Nones."""
    code_cells = (c for c in notebook.cells if c.cell_type == "code")
    for number, cell in enumerate(code_cells, start=1):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                return number, cell.get("execution_count"), f"{output.get('ename')}: {output.get('evalue')}"
    return None, None, None


def _without_progress(text):
    """``text`` without its transient lines: a line redrawn with carriage returns (a progress bar) is meant to
    be overwritten, so a stored notebook keeps none of it; other lines stay, CRLF line ends (a shell
    command's output) included."""
    protected = text.replace("\r\n", "\x00")
    chunks = re.split(r"(?<=[\n\x00])", protected)
    return "".join(c for c in chunks if "\r" not in c).replace("\x00", "\r\n")


def tidy_outputs(notebook):
    """Merge each cell's consecutive stream outputs and drop progress bars' redrawn lines, so a stored notebook
    keeps the lasting output (epoch lines, warnings) and no fragments of a bar."""
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        merged = []
        for output in cell.get("outputs", []):
            if (output.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream"
                    and merged[-1].get("name") == output.get("name")):
                merged[-1]["text"] += output["text"]
            else:
                merged.append(output)
        for output in merged:
            if output.get("output_type") == "stream" and "\r" in output["text"]:
                output["text"] = _without_progress(output["text"])
        cell.outputs = [o for o in merged if not (o.get("output_type") == "stream" and not o["text"].strip())]
    return notebook


def execute(notebook, folder, timeout, allow_errors=False):
    """Run ``notebook`` (in place) in a fresh kernel of this Python, from ``folder``, headless; the kernel is
    always shut down.  Raises nbclient's errors (a failing cell unless ``allow_errors``, a cell past
    ``timeout`` seconds, a dead kernel)."""
    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory(prefix="gpuedu-kernel-") as sockets:   # a short path: a socket's is limited
        kernel_manager = _current_env_kernel_manager(sockets)
        client = NotebookClient(notebook, timeout=timeout, km=kernel_manager, allow_errors=allow_errors,
                                resources={"metadata": {"path": os.path.abspath(folder)}})
        try:
            # headless: a progress bar has no one to show progress to, and would leave its redrawn fragments
            # in the stored outputs (TQDM_DISABLE is tqdm's own switch)
            client.execute(env=dict(os.environ, TQDM_DISABLE="1"))
        finally:
            # nbclient leaves a kernel it did not create running: stop it, or one kernel per lesson piles up.
            shutdown(kernel_manager)


def run_lesson(path, report_dir, timeout):
    """Execute one lesson; returns its report entry and writes the executed copy to ``report_dir``."""
    import nbformat
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    notebook = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    entry = {"lesson": os.path.basename(path), "status": "passed", "error": None, "cell": None,
             "execution_count": None}
    try:
        execute(notebook, os.path.dirname(os.path.abspath(path)), timeout)
    except (CellExecutionError, CellTimeoutError, DeadKernelError, RuntimeError) as e:
        entry["status"] = "failed"
        cell, count, error = _failing_cell(notebook)
        entry["cell"], entry["execution_count"] = cell, count
        entry["error"] = error or str(e).strip().splitlines()[-1]
    entry["seconds"] = round(time.perf_counter() - start, 1)
    entry["backend"] = backend_of(notebook)
    nbformat.write(tidy_outputs(notebook), os.path.join(report_dir, os.path.basename(path)))
    return entry


def _where(entry):
    """'code cell 3 (In [3]): ValueError: boom', or just the error when no cell failed (the kernel did not start)."""
    if entry["cell"] is None:
        return entry["error"]
    count = f" (In [{entry['execution_count']}])" if entry.get("execution_count") else ""
    return f"code cell {entry['cell']}{count}: {entry['error']}"


def run_facts(lessons_folder):
    """When and with what the course ran: UTC date, the checkout's commit, and the versions that matter
    (as ``machine.describe()`` has them)."""
    import subprocess

    from .. import machine
    described = machine.describe(devices=False)
    try:
        commit = subprocess.run(["git", "-C", os.path.abspath(lessons_folder), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        commit = ""
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit or "not a git checkout",
            "gpuedu": described["gpuedu"], "python": described["python"], "numpy": described["numpy"],
            "platform": described["host_platform"]}


def format_table(entries):
    lines = ["| lesson | result | backend | seconds | error |", "|---|---|---|---|---|"]
    for e in entries:
        error = "" if e["error"] is None else _where(e).replace("|", "\\|")
        lines.append(f"| {e['lesson']} | {e['status']} | {e['backend']} | {e['seconds']:.1f} | {error} |")
    return "\n".join(lines)


def build_parser(parser=None):
    parser = parser or argparse.ArgumentParser(prog="gpuedu course", description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="lesson numbers or names to run (default: all), e.g. 00 03")
    parser.add_argument("--lessons", default=None,
                        help="folder holding the NN_topic.ipynb lessons (default: ./lessons if there is one, else "
                             "the lessons that came with gpuedu, run from a copy in the report folder)")
    parser.add_argument("--report", default="course-report", help="folder for the report and executed copies")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds one cell may run")
    parser.add_argument("--store", action="store_true",
                        help="for maintainers: write each lesson that passed back in place with its new outputs "
                             "(run with GPUEDU_BACKEND=cpu: stored outputs are the emulator's)")
    return parser


def run(args):
    if args.lessons is None:
        if os.path.isdir("lessons"):
            args.lessons = "lessons"
        else:   # an install without a clone: run a copy, so the install stays as it came
            try:
                copy_lessons(os.path.join(args.report, "lessons"), force=True)
            except (FileNotFoundError, OSError) as e:
                print(f"gpuedu course: {e}", file=sys.stderr)
                return 2
            args.lessons = os.path.join(args.report, "lessons")
    try:
        lessons = find_lessons(args.lessons, args.only)
    except (FileNotFoundError, ValueError) as e:
        print(f"gpuedu course: {e}", file=sys.stderr)
        return 2
    if not lessons:
        print(f"gpuedu course: no NN_topic.ipynb lessons in {args.lessons}", file=sys.stderr)
        return 2
    os.makedirs(args.report, exist_ok=True)
    entries = []
    for path in lessons:
        print(f"running {os.path.basename(path)} ...", flush=True)
        entry = run_lesson(path, args.report, args.timeout)
        if args.store and entry["status"] == "passed":
            shutil.copyfile(os.path.join(args.report, os.path.basename(path)), path)
        print(f"  {entry['status']} on {entry['backend']} in {entry['seconds']:.1f} s"
              + (f": {_where(entry)}" if entry["error"] else ""), flush=True)
        entries.append(entry)
    failed = [e for e in entries if e["status"] != "passed"]
    table = format_table(entries)
    facts = run_facts(args.lessons)
    header = ", ".join(f"{k} {v}" for k, v in facts.items())
    with open(os.path.join(args.report, "report.md"), "w") as f:
        f.write(f"# Course run\n\n{header}\n\n{table}\n\n{len(entries) - len(failed)} of {len(entries)} lessons passed.\n")
    with open(os.path.join(args.report, "report.json"), "w") as f:
        json.dump({"run": facts, "lessons": entries, "passed": not failed}, f, indent=2)
    print("\n" + table)
    print(f"\n{len(entries) - len(failed)} of {len(entries)} lessons passed; report in "
          f"{os.path.join(args.report, 'report.md')}")
    return 1 if failed else 0


def main(argv=None):
    return run(build_parser().parse_args(argv))
