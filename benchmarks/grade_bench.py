"""What the grading sandbox changes, measured: the verdicts (none should change) and the time (at most 20 % more).

    python benchmarks/grade_bench.py [--submissions 30] [--lesson 01] [--out FILE]

1. Verdicts.  For every exercise of the course, its reference solution (an honest right answer) and its stub (an
   honest wrong one) are checked twice: the way a notebook shows it (``exercises.check`` in this process, its
   report read as a CSV row) and the way ``gpuedu grade`` now does (``classroom.check_answer``: a fresh
   ``python -I`` in the sandbox).  Each pair of rows (result, message, hint) must be equal.
2. Time.  ``--submissions`` copies of one lesson, half its solution notebook and half its student notebook (the
   lesson as a learner hands it in: every cell run, the exercises right or not), each graded by
   ``classroom.grade_one`` with and without the sandbox, the two alternating (with, without, with, ...), so that
   what drifts on the machine falls on both.  The record keeps every submission's seconds.

Both ways use a private kernel cache per process (the sandbox's rule), so the difference is the sandbox's own.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)


def verdicts():
    from gpuedu import exercises
    from gpuedu.tools import classroom
    ids = _quiet_ids()
    rows = []
    for ex_id in ids:
        ex = exercises.get(ex_id)
        for kind, source in (("solution", ex.solution), ("stub", ex.stub)):
            here = exercises.check(ex_id, source, verbose=False)
            want = ("passed" if here.passed else "not yet",) + classroom._report_row(here.report())
            start = time.perf_counter()
            got = classroom.check_answer(ex_id, {"answer": source}, timeout=600)
            rows.append({"exercise": ex_id, "answer": kind, "notebook": list(want), "grader": list(got),
                         "same": list(want) == list(got), "seconds": round(time.perf_counter() - start, 2)})
            print(f"{ex_id:28s} {kind:8s} {got[0]:8s} {'same' if rows[-1]['same'] else 'DIFFERENT'}", flush=True)
    return rows


def _quiet_ids():
    import contextlib
    import io

    from gpuedu import exercises
    with contextlib.redirect_stdout(io.StringIO()):
        return exercises.list()


def timing(n, lesson):
    from gpuedu.tools import classroom
    folder = tempfile.mkdtemp(prefix="gpuedu-grade-bench-")
    try:
        kit = os.path.join(folder, "kit")
        names = classroom.build(kit, os.path.join(REPO, "lessons"))
        name = next(x for x in names if x.startswith(lesson + "_"))
        paths = []
        for i in range(n):
            kind = "solutions" if i % 2 == 0 else "student"
            path = os.path.join(folder, f"student{i:02d}.ipynb")
            shutil.copyfile(os.path.join(kit, kind, name), path)
            paths.append(path)
        runs = []
        for i, path in enumerate(paths):
            for sandboxed in ((True, False) if i % 2 == 0 else (False, True)):
                start = time.perf_counter()
                rows = classroom.grade_one(path, timeout=600, sandbox=sandboxed)
                seconds = time.perf_counter() - start
                runs.append({"submission": os.path.basename(path), "sandbox": sandboxed, "seconds": round(seconds, 2),
                             "results": [r["result"] for r in rows]})
                print(f"{os.path.basename(path)} sandbox={sandboxed!s:5s} {seconds:6.1f} s "
                      f"{[r['result'] for r in rows]}", flush=True)
        return name, runs
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=30)
    parser.add_argument("--lesson", default="01")
    parser.add_argument("--skip-verdicts", action="store_true")
    parser.add_argument("--out", default=os.path.join(HERE, "results", f"cpu-grading-{platform.machine()}.json"))
    args = parser.parse_args(argv)
    os.environ.setdefault("GPUEDU_BACKEND", "cpu")
    from gpuedu.tools import sandbox
    ok, why = sandbox.available()
    if not ok:
        print(f"grade_bench: no sandbox here: {why}", file=sys.stderr)
        return 2
    record = {"what": "gpuedu grade with and without its sandbox (bubblewrap): verdicts and seconds per submission",
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "machine": {"cpu": _cpu(), "cores": os.cpu_count(), "os": platform.platform(),
                          "python": platform.python_version(),
                          "bwrap": subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout.strip()},
              "backend": "cpu (the emulator)"}
    if not args.skip_verdicts:
        rows = verdicts()
        record["verdicts"] = {"answers": len(rows), "same": sum(r["same"] for r in rows), "rows": rows}
    lesson, runs = timing(args.submissions, args.lesson)
    with_s = [r["seconds"] for r in runs if r["sandbox"]]
    without_s = [r["seconds"] for r in runs if not r["sandbox"]]
    same = all(a["results"] == b["results"] for a, b in zip([r for r in runs if r["sandbox"]],
                                                            [r for r in runs if not r["sandbox"]]))
    record["timing"] = {"lesson": lesson, "submissions": args.submissions, "runs": runs,
                        "mean_seconds_sandbox": round(statistics.mean(with_s), 2),
                        "mean_seconds_no_sandbox": round(statistics.mean(without_s), 2),
                        "overhead": round(sum(with_s) / sum(without_s) - 1, 4),
                        "same_results_both_ways": same}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    t = record["timing"]
    print(f"{t['submissions']} submissions of {lesson}: {t['mean_seconds_sandbox']} s each in the sandbox, "
          f"{t['mean_seconds_no_sandbox']} s without: overhead {t['overhead']:.1%}; results the same both ways: {same}")
    if "verdicts" in record:
        print(f"verdicts: {record['verdicts']['same']} of {record['verdicts']['answers']} the same as in a notebook")
    print(f"written to {args.out}")
    return 0


def _cpu():
    try:
        with open("/proc/cpuinfo") as f:
            return next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


if __name__ == "__main__":
    sys.exit(main())
