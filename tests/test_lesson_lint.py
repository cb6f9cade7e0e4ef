"""The course's rules that a program can check, read from the stored lessons.

1. **Size.** Every lesson has 20 to 50 cells: fewer is a lesson without its skeleton (what you will learn, why,
   pseudocode, kernel, launcher, check, timing, summary, exercises), more is two lessons in one.

2. **Summary and exercises.** Checked in tests/test_notebooks.py (test_lesson_ends_with_summary_and_exercises).

3. **Every GPU figure says what it is.** The project's honesty rule: a figure is counted (exact, from the
   emulator's counters), modelled (the GPU time model or napkin math, with its assumptions), measured (on which
   machine, when), or quoted with its source. What is checked, in each markdown cell:

   - *A unit* is a sentence of prose (of a paragraph, a list item, a heading or a quote, split after ``.``, ``!``
     or ``?`` before a capital letter, a bracket, a quote or a formula), a table row, or an image's text. Fenced code and inline code are left out
     (their numbers are code, not claims), and LaTeX is read as text (``4\\,\\mu s`` is 4 µs).
   - *A unit names a GPU* when it says GPU or GPUs, or a model: H100, H200, A100, A6000, V100, T4, L4, L40,
     RTX/GTX/Titan ..., MI300 ...
   - *A figure* is a number with a unit of time (ns, µs, us, ms, s, and the words), of rate (GB/s, TB/s,
     GFLOP/s, TFLOP/s, images/s, samples/s), of clock (MHz, GHz), of power or energy (W, J), a percentage, or a
     factor (``30×``, ``2.8x``; not ``4096 x 4096``). Sizes (MB, KB) and counts (132 SMs) are not figures of the
     rule.
   - *A label* is one of the rule's words in the unit itself, or, for a table row, in its table's header or in
     the paragraph just before or after the table (its caption): ``counted``/``counter(s)``; ``modelled``
     (``modeled``, ``the model's``, ``the/a/time model``), ``predicted``, ``theoretical``; ``measured``
     (``measurement``), ``timed``; or a source: ``quoted``, ``published``, ``datasheet``, ``spec``, a link, a
     citation (``et al.``, ``(Name 2017)``), or one of the course's seeds (``seed 003``).

   A unit that names a GPU and holds a figure must hold a label. A unit with a figure but no GPU (the emulator's
   own timings) is outside the rule; so is a GPU named with no figure. Labelling the sentence, not the paragraph,
   is deliberate: a reader quotes sentences.

4. **A GPU figure called measured is in a record.** A measured figure is quoted from a record committed under
   ``benchmarks/results/``, never typed from memory. In a unit (as above) that names a GPU and is labelled
   measured (``measured``, ``measurement``, ``timed``; for a table row, in its header or caption) and nothing else
   (no model, datasheet or quote, which would make it a comparison), each figure of time, rate, clock, power or energy (not a percentage or a factor, which
   are worked out from two figures) must be a number some record holds: any number of any ``.json`` or ``.csv``
   file there, at the figure's printed precision (4,127 GB/s is a record's 4126.6 or 4127.3), in the same unit or
   one a power of 1,000 away (a record in seconds for a figure in µs, in GB/s for TB/s).
"""
import bisect
import glob
import json
import os
import re

import nbformat
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LESSONS = sorted(glob.glob(os.path.join(REPO, "lessons", "[0-9][0-9]_*.ipynb")))
MIN_CELLS, MAX_CELLS = 20, 50

GPU = re.compile(r"\b(?:GPUs?|[HA]\d{2,3}|A[1-9]\d{3}|V100|P100|K80|T4|L4|L40S?|RTX(?:\s+[A-Z]?\d{3,4})?"
                 r"|GTX\s+\d{3,4}|Titan|MI\d{3}X?)\b")
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
_UNIT = (r"(?:ns|[µu]s|ms|s|nanoseconds?|microseconds?|milliseconds?|seconds?|[GTMP]B/s|[kGTPM]?FLOP/s|"
         r"[GTPM]?FLOPS|images/s|samples/s|[GM]Hz|W|J|%)")
FIGURE = re.compile(rf"(?<![\w.]){_NUMBER}(?:\s*(?:-|–|to)\s*{_NUMBER})?\s*{_UNIT}(?![\w/])"   # 4.3 TB/s, 2-3 ms
                    rf"|(?<![\w.]){_NUMBER}\s*[×x](?![\w(]|\s*[\d(])")                           # 30×, not 4096 x 4096
LABEL = re.compile(r"(?i:\bcounted\b|\bcounters?\b"
                   r"|\bmodell?ed\b|\bmodel's\b|\b(?:the|a|time) model\b|\bpredicted\b|\btheoretical\b"
                   r"|\bmeasured\b|\bmeasurements?\b|\btimed\b"
                   r"|\bquoted\b|\bpublished\b|\bdata ?sheets?\b|\bspecs?\b|\bspecifications?\b|\bseed \d{3}\b)"
                   r"|\]\(https?://|\bet al\.|\([A-Z][a-z][\w-]*(?: and [A-Z][a-z][\w-]*)?,? (?:19|20)\d\d\)")

# After these a full stop does not end a sentence.
_ABBREVIATIONS = ("e.g.", "i.e.", "vs.", "et al.", "cf.", "Fig.", "approx.")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(*\[\"“$])")


def plain(text):
    """Markdown and LaTeX read as text: code dropped, ``\\mu s`` as µs, ``\\times`` as ×, braces and $ gone."""
    text = re.sub(r"`[^`\n]*`", " ", text)
    for latex, same in (("\\mu", "µ"), ("\\times", "×"), ("\\,", " "), ("\\;", " "), ("\\ ", " "), ("~", " ")):
        text = text.replace(latex, same)
    text = re.sub(r"\\(?:text|mathrm|mathbf|operatorname)\s*\{([^}]*)\}", r"\1", text)
    text = re.sub(r"[${}]", "", text)
    return re.sub(r"µ\s+s\b", "µs", text)


def sentences(paragraph):
    """A paragraph split into sentences, not after an abbreviation or inside a number."""
    parts, start = [], 0
    for match in _SENTENCE_END.finditer(paragraph):
        before = paragraph[start:match.start()]
        if before.endswith(_ABBREVIATIONS):
            continue
        parts.append(before)
        start = match.end()
    parts.append(paragraph[start:])
    return [p.strip() for p in parts if p.strip()]


def units(markdown):
    """``(text, scope)`` for each sentence, table row and image text of a markdown cell: ``scope`` is where
    its label may be (the sentence itself; for a table row also the header and the caption)."""
    markdown = re.sub(r"^\s*(```|~~~).*?^\s*\1[^\n]*$", "", markdown, flags=re.S | re.M)   # fenced code
    found, images = [], re.findall(r"!\[([^\]]*)\]\([^)]*\)", markdown)
    markdown = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", markdown)
    found += [(alt, alt) for alt in images if alt.strip()]
    blocks, lines = [], []          # ("table" or "text", lines), in order

    def close():
        if lines:
            blocks.append(("table" if lines[0].startswith("|") else "text", lines[:]))
            lines.clear()

    for raw in markdown.splitlines():
        line = re.sub(r"^(?:\s*>)+\s?", "", raw).strip()         # a quote reads as its text
        table = line.startswith("|")
        if not line or re.match(r"^(?:#+\s|[-*+]\s|\d+[.)]\s)", line) or (lines and table != lines[0].startswith("|")):
            close()
        if line:
            lines.append(line)
    close()
    for k, (kind, block) in enumerate(blocks):
        if kind == "text":
            found += [(s, s) for s in sentences(" ".join(block))]
            continue
        neighbours = [" ".join(b) for i, (kd, b) in enumerate(blocks) if kd == "text" and abs(i - k) == 1]
        caption = " ".join([block[0]] + neighbours)
        rows = [r for r in block[1:] if not re.fullmatch(r"[|:\-\s]+", r)]
        found += [(row, row + " " + caption) for row in rows]
    return found


def unlabelled_gpu_figures(markdown):
    """The units of a markdown cell that name a GPU, hold a figure and say nowhere what the figure is."""
    return [text for text, scope in units(markdown)
            if GPU.search(plain(text)) and FIGURE.search(plain(text)) and not LABEL.search(plain(scope))]


MEASURED = re.compile(r"(?i)\bmeasured\b|\bmeasurements?\b|\btimed\b")
OTHER_LABEL = re.compile(r"(?i:\bmodell?ed\b|\bmodel's\b|\b(?:the|a|time) model\b|\bpredicted\b|\btheoretical\b"
                         r"|\bquoted\b|\bpublished\b|\bdata ?sheets?\b|\bspecs?\b|\bspecifications?\b|\bseed \d{3}\b"
                         r"|\bcounted\b)|\]\(https?://|\bet al\.")
RECORDED_FIGURE = re.compile(rf"(?<![\w.])({_NUMBER})\s*(?:ns|[µu]s|ms|s|nanoseconds?|microseconds?|milliseconds?|"
                             rf"seconds?|[GTMP]B/s|[kGTPM]?FLOP/s|[GTPM]?FLOPS|images/s|samples/s|[GM]Hz|W|J)(?![\w/])")
RESULTS = os.path.join(REPO, "benchmarks", "results")


def record_numbers(folder=RESULTS):
    """Every number the records in ``folder`` hold (JSON values and the numbers in their strings, CSV cells),
    as a sorted list of absolute values."""
    found = []

    def walk(value):
        if isinstance(value, bool):
            return
        if isinstance(value, (int, float)):
            if value == value and abs(value) != float("inf"):
                found.append(abs(float(value)))
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str):
            found.extend(float(m.replace(",", "")) for m in re.findall(r"\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?", value))

    for path in sorted(glob.glob(os.path.join(folder, "*.json")) + glob.glob(os.path.join(folder, "*.csv"))):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if path.endswith(".json"):
            walk(json.loads(text))
        else:
            walk(text)
    return sorted(set(found))


def held_by_records(figure, numbers):
    """Whether the printed number ``figure`` (``"4,127"``, ``"36.9"``) is one of ``numbers`` at its precision, in
    the same unit or one a power of 1,000 away."""
    value = float(figure.replace(",", ""))
    decimals = len(figure.split(".")[1]) if "." in figure else 0
    half = 0.5 * 10 ** -decimals
    for scale in (1.0, 1e3, 1e-3, 1e6, 1e-6, 1e9, 1e-9, 1e12, 1e-12):
        lo, hi = (value - half) / scale, (value + half) / scale
        i = bisect.bisect_left(numbers, min(lo, hi))
        if i < len(numbers) and numbers[i] <= max(lo, hi):
            return True
    return False


def unrecorded_measured_gpu_figures(markdown, numbers):
    """The figures of a markdown cell called measured on a GPU that no record holds: ``(figure, unit text)``."""
    found = []
    for text, scope in units(markdown):
        t, labels = plain(text), plain(scope)      # a table row's label is in its header or caption
        if GPU.search(t) and MEASURED.search(labels) and not OTHER_LABEL.search(labels):
            found += [(m.group(0), text) for m in RECORDED_FIGURE.finditer(t) if not held_by_records(m.group(1), numbers)]
    return found


def lesson_ids():
    return [os.path.basename(p) for p in LESSONS]


@pytest.fixture(params=LESSONS, ids=lesson_ids())
def lesson(request):
    return os.path.basename(request.param), nbformat.read(request.param, as_version=4)


def test_every_lesson_has_20_to_50_cells(lesson):
    name, nb = lesson
    assert MIN_CELLS <= len(nb.cells) <= MAX_CELLS, (
        f"lessons/{name} has {len(nb.cells)} cells; a lesson has {MIN_CELLS} to {MAX_CELLS}: "
        + ("give it the course's skeleton (why, pseudocode, kernel, launcher, check, timing, summary, exercises)"
           if len(nb.cells) < MIN_CELLS else "split it into two lessons at a section boundary"))


def test_every_gpu_figure_says_whether_it_is_counted_modelled_measured_or_quoted(lesson):
    name, nb = lesson
    found = [(i, text) for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
             for text in unlabelled_gpu_figures(cell.source)]
    assert not found, (
        f"lessons/{name}: {len(found)} sentence(s) give a GPU figure without saying what it is:\n"
        + "\n".join(f"  cell {i} (markdown, counting every cell from 0): {text!r}" for i, text in found)
        + "\nSay it in that sentence (or, for a table row, in its header or caption): counted (the emulator's "
          "counters), modelled (the GPU model or napkin math, with its assumptions), measured (on which machine, "
          "when), or quoted with its source (a link, 'published', 'datasheet', 'spec', a citation such as "
          "'(Goyal et al. 2017)'). The rule and its words: tests/test_lesson_lint.py's docstring.")


@pytest.fixture(scope="module")
def recorded():
    return record_numbers()


def test_every_gpu_figure_called_measured_is_held_by_a_record(lesson, recorded):
    name, nb = lesson
    found = [(i, figure, text) for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
             for figure, text in unrecorded_measured_gpu_figures(cell.source, recorded)]
    assert not found, (
        f"lessons/{name}: {len(found)} GPU figure(s) called measured that no record under benchmarks/results/ "
        f"holds:\n" + "\n".join(f"  cell {i}: {figure} in {text!r}" for i, figure, text in found)
        + "\nQuote the figure from a committed record (and name it), or say what it is if it was not measured "
          "(modelled, quoted with its source).")


# ---- the rule on examples, so that it stays as precise as its docstring says -----------------------------------

NUMBERS = sorted([4126.6, 0.0000473, 36.87, 213.7])


@pytest.mark.parametrize("markdown", [
    "An H200 copied 4,300 GB/s (measured on 2026-11-26).",            # typed, not the record's 4,127
    "The kernel took 48 µs on an H100, measured.",
    "| GPU | measured TFLOP/s |\n|---|---|\n| H200 | 37.9 TFLOP/s |",   # a row, and no record near 37.9
])
def test_the_record_rule_flags_a_measured_gpu_figure_no_record_holds(markdown):
    assert len(unrecorded_measured_gpu_figures(markdown, NUMBERS)) == 1, units(markdown)


@pytest.mark.parametrize("markdown", [
    "An H200 copied 4,127 GB/s (measured on 2026-11-26).",            # the record's 4126.6 at its precision
    "An H200 copied 4.13 TB/s, measured.",                             # a power of 1,000 away, rounded
    "On the H200 the copy took 47.3 µs (measured).",                  # a record in seconds
    "WMMA v1 reached 36.9 TFLOP/s on an H200 and v2 213.7 TFLOP/s (measured).",
    "On an H200 it is 5.8× faster (measured).",                        # a factor: worked out from two figures
    "An H200 has 4.8 TB/s from its datasheet, not measured.",          # a comparison with a quoted figure
    "The model's 56 TFLOP/s for an H100 is not what was measured.",     # a modelled figure beside the word
    "The emulator measured 12.5 ms.",                                  # no GPU
])
def test_the_record_rule_accepts_recorded_figures_and_what_it_does_not_judge(markdown):
    assert unrecorded_measured_gpu_figures(markdown, NUMBERS) == [], units(markdown)


def test_the_records_numbers_are_read_from_json_values_strings_and_csv(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"x": [1.5, {"y": "took 2,048.25 s"}], "ok": True, "n": None}))
    (tmp_path / "b.csv").write_text("kernel,us\nk,3.75e-2\n")
    assert record_numbers(str(tmp_path)) == [0.0375, 1.5, 2048.25]      # True and None are no numbers


@pytest.mark.parametrize("markdown", [
    "An H200 copies about 4.3 TB/s between buffers.",
    "On a GPU the epoch costs about 2-3 ms.",
    "Napkin math for an H200: $t_0 \\approx 12 \\times 4\\,\\mu s \\approx 50\\,\\mu s$.",
    "A GPU is 100× faster per byte.",
    "> boost clocks are about 1.41 GHz (A100) and 1.98 GHz (H100).",
    "- the RTX 4090 draws 450 W.",
    "| GPU | copy |\n|---|---|\n| H100 | 3.3 TB/s |",
    "This counts. On an H200 the copy takes 47 µs.",
])
def test_the_rule_flags_an_unlabelled_gpu_figure(markdown):
    assert len(unlabelled_gpu_figures(markdown)) == 1, units(markdown)


@pytest.mark.parametrize("markdown", [
    "An H200 copied 4,127 GB/s (measured on 2026-11-26).",
    "On an H100 the kernel is modelled at 56 TFLOP/s.",
    "The model charges a launch 3 µs on an H100.",
    "An H200 has 4.8 TB/s of HBM3e, from its datasheet.",
    "Boehm measured 93.7% of cuBLAS on an A6000.",
    "Linear scaling ($\\eta \\propto B$, Goyal et al. 2017) held to 8,192 images on 256 GPUs in 60 minutes.",
    "Published figures for an H100 [NVIDIA](https://www.nvidia.com/h100): 989 TFLOP/s.",
    "Seed 000 claims: a GPU clocks at 1.5-3 GHz.",
    "The emulator ran 45.7 ms an epoch.",                       # a figure, but no GPU
    "A GPU has thousands of threads and 132 SMs.",              # a GPU, but no figure of the rule
    "A 4096 x 4096 matrix on a GPU, 64 x 16 tiles.",             # dimensions, not factors
    "```\nH100: 3 us per launch\n```",                           # code, not a claim
    "The H100 profile reads `predict(\"H100\")` and 3 `us`.",  # inline code
    "Measured on a GPU:\n\n| version | GB/s |\n|---|---|\n| v1 | 414 |",   # a table's caption labels its rows
    "| GPU (quoted from datasheets) | copy |\n|---|---|\n| H100 | 3.3 TB/s |",
    "An H100 is e.g. 3× faster here, as measured.",
])
def test_the_rule_accepts_a_labelled_figure_and_what_is_no_gpu_figure(markdown):
    assert unlabelled_gpu_figures(markdown) == [], units(markdown)


def test_sentences_split_after_a_full_stop_but_not_after_an_abbreviation_or_in_a_number():
    assert sentences("It ran 1.5 ms, e.g. on an H100. Then it stopped.") == ["It ran 1.5 ms, e.g. on an H100.",
                                                                            "Then it stopped."]
