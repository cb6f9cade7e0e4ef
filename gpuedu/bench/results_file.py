"""The results file (JSON) and the tables printed at the end of a run.

Top level of the file (``SCHEMA_VERSION`` 1):

    schema, schema_version   "gpuedu-bench", 1
    date                     ISO 8601, UTC, when the run started
    mode                     "quick" or "full"
    command                  the arguments the run was started with
    duration_s               wall time of the whole run
    machine                  device, versions, host, load (see environment.describe)
    timing                   clock, warm-up, repeats, flush size, statistics used
    figures                  list of figures (see records.py for their fields)
    targets                  list of targets with their status (see targets.py)
    notes                    what a reader must know to interpret the numbers
"""
import json
import math
import os

from .records import format_number

SCHEMA = "gpuedu-bench"
SCHEMA_VERSION = 1

FIGURE_KEYS = {"name", "group", "unit", "status", "median", "spread", "repeats", "sizes",
               "baselines", "ratios", "ratio"}
TARGET_KEYS = {"name", "description", "metric", "comparison", "goal", "figure", "baseline",
               "value", "status", "reason"}
TARGET_STATUSES = {"met", "missed", "not applicable", "unavailable"}


def write(results, path):
    """Write ``results`` to ``path`` (folders created), atomically: a reader never sees half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def load(path):
    """Read a results file and check its shape; a clear error says what is wrong with it."""
    try:
        with open(path, encoding="utf-8") as f:
            results = json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"no results file at {path}; run `gpuedu bench --out {path}` first") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); was the run interrupted?") from None
    problems = validate(results)
    if problems:
        raise ValueError(f"{path} is not a gpuedu bench results file:\n  " + "\n  ".join(problems))
    return results


def validate(results):
    """A list of what is wrong with ``results`` (empty when it has the expected shape and sane values)."""
    problems = []
    if not isinstance(results, dict):
        return [f"the top level must be an object, got {type(results).__name__}"]
    if results.get("schema") != SCHEMA:
        problems.append(f"schema is {results.get('schema')!r}, expected {SCHEMA!r}")
    if results.get("schema_version") != SCHEMA_VERSION:
        problems.append(f"schema_version is {results.get('schema_version')!r}, this gpuedu reads {SCHEMA_VERSION}")
    for key in ("date", "machine", "timing", "figures", "targets"):
        if key not in results:
            problems.append(f"missing top-level key {key!r}")
    for figure in results.get("figures", []):
        problems.extend(_figure_problems(figure))
    for target in results.get("targets", []):
        missing = TARGET_KEYS - set(target)
        if missing:
            problems.append(f"target {target.get('name')!r} lacks {sorted(missing)}")
        elif target["status"] not in TARGET_STATUSES:
            problems.append(f"target {target['name']!r} has status {target['status']!r}")
        elif target["status"] in ("not applicable", "unavailable") and not target["reason"]:
            problems.append(f"target {target['name']!r} is {target['status']} without a reason")
    return problems


def _figure_problems(figure):
    name = figure.get("name")
    missing = FIGURE_KEYS - set(figure)
    if missing:
        return [f"figure {name!r} lacks {sorted(missing)}"]
    out = []
    if figure["status"] == "ok":
        if not (_finite(figure["median"]) and figure["median"] > 0):
            out.append(f"figure {name!r} has median {figure['median']!r}; a measured figure must be positive")
        spread = figure["spread"] or {}
        if not (_finite(spread.get("iqr")) and spread["iqr"] >= 0):
            out.append(f"figure {name!r} has spread {spread!r}; the IQR must be >= 0")
        elif not spread["min"] <= spread["q1"] <= figure["median"] <= spread["q3"] <= spread["max"]:
            out.append(f"figure {name!r}: min <= q1 <= median <= q3 <= max does not hold")
        if not (isinstance(figure["repeats"], int) and figure["repeats"] >= 1):
            out.append(f"figure {name!r} has repeats {figure['repeats']!r}")
        for base, value in figure["ratios"].items():
            if value is not None and not (_finite(value) and value > 0):
                out.append(f"figure {name!r} has ratio {value!r} to {base!r}")
    elif figure["status"] == "skipped":
        if not figure.get("reason"):
            out.append(f"figure {name!r} is skipped without a reason")
        if figure["median"] is not None:
            out.append(f"figure {name!r} is skipped but has a median")
    else:
        out.append(f"figure {name!r} has status {figure['status']!r}; expected 'ok' or 'skipped'")
    return out


def _finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def figures_table(results):
    """The figures as a text table: name, median and unit, spread (IQR), headline ratio."""
    rows = [("figure", "median", "unit", "IQR", "ratio", "to")]
    for f in results["figures"]:
        if f["status"] == "ok":
            ratio = "-" if f["ratio"] is None else f"{f['ratio']:.3g}"
            base = f["baselines"][0] if f["baselines"] else ""
            rows.append((f["name"], format_number(f["median"]), f["unit"],
                         format_number(f["spread"]["iqr"]), ratio, base))
        else:
            rows.append((f["name"], "skipped", f["unit"], "", "", _shorten(f["reason"], 60)))
    return _render(rows)


def targets_table(results):
    """The targets as a text table: goal, value, status (and the reason when not compared)."""
    rows = [("target", "goal", "value", "status")]
    for t in results["targets"]:
        goal = f"{t['comparison']} {t['goal']:g}" + {"ratio": "x", "count": ""}.get(t["metric"], " us")
        value = "-" if t["value"] is None else f"{t['value']:.3g}"
        status = t["status"] if t["status"] in ("met", "missed") else f"{t['status']}: {_shorten(t['reason'], 70)}"
        rows.append((t["name"], goal, value, status))
    return _render(rows)


def _shorten(text, width):
    text = str(text or "")
    return text if len(text) <= width else text[: width - 1] + "…"


def _render(rows):
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for j, row in enumerate(rows):
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
