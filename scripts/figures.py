"""The course's diagrams, drawn as SVG from code, and put where the lessons and the site show them.

    python scripts/figures.py            # write docs/figures/*.svg and embed each in the lessons that show it
    python scripts/figures.py --check    # exit 1 (and say what) if a file or a lesson is out of step (a test runs this)

Each figure is a function returning SVG text. Numbers in a figure come from the library that the lessons use
(``gpuedu.profiler.gpus`` for an H100's sizes and bandwidths, ``gpuedu.profiler.occupancy`` for resident blocks),
so a figure cannot disagree with the lesson beside it. A lesson shows a figure through a markdown image
``![...](attachment:NAME.svg)``: the SVG travels inside the notebook as a cell attachment, so the lesson is
whole wherever it is opened (JupyterLab, Colab, a copy made by ``gpuedu lessons``); the site builder turns
attachments back into files.
"""
import base64
import glob
import json
import os
import sys
from html import escape

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gpuedu.profiler.gpus import get_gpu  # noqa: E402
from gpuedu.profiler.occupancy import theoretical_occupancy  # noqa: E402

FIGURES = os.path.join(ROOT, "docs", "figures")
LESSONS = os.path.join(ROOT, "lessons")

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
INK, MUTED, LINE = "#1f2933", "#616e7c", "#9aa5b1"
BLUE, BLUE_LIGHT = "#2563eb", "#dbe7fd"
GREEN, GREEN_LIGHT = "#15803d", "#dcf5e3"
ORANGE, ORANGE_LIGHT = "#c2410c", "#fde6d6"
GREY_LIGHT = "#eef1f4"


class Svg:
    """A few drawing calls that append SVG elements; ``str()`` gives the document."""

    def __init__(self, width, height, title):
        self.width, self.height, self.title = width, height, title
        self.parts = []

    def rect(self, x, y, w, h, fill="none", stroke=INK, width=1.0, rx=0, dash=None):
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" rx="{rx:g}" fill="{fill}" '
                          f'stroke="{stroke}" stroke-width="{width:g}"{extra}/>')

    def text(self, x, y, s, size=13, anchor="start", weight="normal", fill=INK, mono=False, italic=False):
        style = ' font-style="italic"' if italic else ""
        self.parts.append(f'<text x="{x:g}" y="{y:g}" font-size="{size:g}" text-anchor="{anchor}" '
                          f'font-weight="{weight}" fill="{fill}" font-family="{MONO if mono else FONT}"{style}>'
                          f'{escape(s)}</text>')

    def line(self, x1, y1, x2, y2, stroke=INK, width=1.2, arrow=False, dash=None):
        extra = ' marker-end="url(#arrow)"' if arrow else ""
        extra += f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<line x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" stroke="{stroke}" '
                          f'stroke-width="{width:g}"{extra}/>')

    def path(self, d, stroke=INK, width=1.2, arrow=False, fill="none", dash=None):
        extra = ' marker-end="url(#arrow)"' if arrow else ""
        extra += f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<path d="{d}" fill="{fill}" stroke="{stroke}" stroke-width="{width:g}"{extra}/>')

    def __str__(self):
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
                f'viewBox="0 0 {self.width} {self.height}" role="img" aria-label="{escape(self.title)}">\n'
                f'<title>{escape(self.title)}</title>\n'
                '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
                f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{INK}"/></marker></defs>\n'
                f'<rect width="{self.width}" height="{self.height}" fill="white"/>\n')
        return head + "\n".join(self.parts) + "\n</svg>\n"


def grid():
    """Lesson 01: a grid of blocks of threads, and the global index of every thread for n = 10, 4 per block."""
    s = Svg(800, 330, "Threads, blocks and a grid: each thread finds its element from blockIdx, blockDim and threadIdx")
    s.text(20, 28, "A launch: grid = 3 blocks, block = 4 threads, n = 10 elements", 15, weight="bold")
    cell, gap, x0, y0 = 46, 20, 110, 60
    for b in range(3):
        bx = x0 + b * (4 * cell + gap)
        s.rect(bx - 8, y0 - 8, 4 * cell + 16, 150, fill=BLUE_LIGHT if b != 1 else "#c7d8fb", stroke=BLUE, rx=8)
        s.text(bx + 2 * cell, y0 + 8, f"block {b}   (blockIdx.x = {b})", 12, "middle", "bold", BLUE)
        for t in range(4):
            i = b * 4 + t
            tx = bx + t * cell
            live = i < 10
            s.rect(tx + 3, y0 + 22, cell - 6, cell - 6, fill="white" if live else GREY_LIGHT,
                   stroke=INK if live else LINE, rx=4, dash=None if live else "3,3")
            s.text(tx + cell / 2, y0 + 46, str(t), 13, "middle", mono=True, fill=INK if live else MUTED)
            s.text(tx + cell / 2, y0 + 84, str(i), 13, "middle", "bold", INK if live else MUTED, mono=True)
            s.text(tx + cell / 2, y0 + 116, "y[i]" if live else "idle", 11, "middle",
                   fill=GREEN if live else MUTED, mono=True)
    s.text(x0 - 14, y0 + 46, "threadIdx.x", 12, "end", fill=MUTED, mono=True)
    s.text(x0 - 14, y0 + 84, "i", 12, "end", fill=MUTED, mono=True)
    s.text(x0 - 14, y0 + 116, "does", 12, "end", fill=MUTED)
    s.text(20, 240, "i = blockIdx.x * blockDim.x + threadIdx.x", 14, mono=True, weight="bold")
    s.text(20, 262, "e.g. block 1, thread 2:  i = 1 * 4 + 2 = 6", 13, mono=True, fill=MUTED)
    s.text(20, 292, "The grid is rounded up to ceil(10 / 4) = 3 blocks = 12 threads; threads 10 and 11 have no",
           13, fill=INK)
    s.text(20, 312, "element, so every kernel guards with  if (i < n).  Blocks run in any order, on any SM.", 13,
           fill=INK)
    return str(s)


def _bytes(n):
    for unit, size in (("GB", 2 ** 30), ("MB", 2 ** 20), ("KB", 2 ** 10)):
        if n >= size:
            return f"{n / size:.0f} {unit}"
    return f"{n} B"


def memory():
    """Lesson 02: where data lives, from a thread's registers to the host, sized for an H200 SXM."""
    from gpuedu.profiler import time_model
    gpu = get_gpu("H200")
    clock = gpu.boost_clock_mhz * 1e6
    levels = [  # name, who sees it, size, bandwidth over the whole GPU, latency (each with its source below)
        ("registers", "one thread (up to 255 each)", f"{_bytes(gpu.registers_per_sm * 4)} per SM", "", ""),
        ("shared memory / L1", "one block, on one SM", f"≤ {gpu.shared_per_sm // 1024} of 256 KB per SM",
         f"~{gpu.sms * 128 * clock / 1e12:.0f} TB/s", f"{time_model.SHARED_LATENCY_CYCLES} cycles (V100)"),
        ("L2 cache", "every SM", _bytes(gpu.l2_bytes), f"~{gpu.l2_bytes_per_clock * clock / 1e12:.0f} TB/s",
         f"{time_model.L2_LATENCY_CYCLES} cycles (V100)"),
        ("device memory (HBM3e)", "every SM, every kernel", f"{gpu.memory_bytes / 1e9:.0f} GB",
         f"{gpu.dram_bytes_per_s / 1e12:.1f} TB/s", f"{time_model.DRAM_LATENCY_S * 1e9:.0f} ns (model)"),
        ("host memory", "the CPU; PCIe 5.0 x16", "the host's RAM", "~50 GB/s a way", "t0: lesson 02"),
    ]
    s = Svg(860, 428, "The memory hierarchy of an H200: registers, shared memory and L1, L2, device memory, host memory")
    s.text(20, 28, "The memory hierarchy (H200 SXM): each level larger and slower than the one above", 15,
           weight="bold")
    columns = (("seen by", 300), ("size", 480), ("bandwidth", 630), ("latency", 730))
    for title, x in columns:
        s.text(x, 56, title, 12, fill=MUTED, weight="bold")
    fills = [GREEN_LIGHT, GREEN_LIGHT, BLUE_LIGHT, BLUE_LIGHT, ORANGE_LIGHT]
    strokes = [GREEN, GREEN, BLUE, BLUE, ORANGE]
    for k, (name, *cells) in enumerate(levels):
        y = 68 + k * 56
        width = 120 + k * 30
        s.rect(160 - width / 2, y, width, 40, fill=fills[k], stroke=strokes[k], rx=6)
        s.text(160, y + 25, name, 12.5, "middle", "bold")
        for (_, x), value in zip(columns, cells):
            s.text(x, y + 25, value, 11.5)
        if k:
            s.line(160, y - 16, 160, y, stroke=LINE)
    s.line(20, 340, 20, 80, stroke=MUTED, arrow=True)
    s.text(30, 362, "up: faster, smaller, closer to the thread", 11.5, fill=MUTED, italic=True)
    notes = ["Sizes: datasheet; 256 KB of L1 and shared memory per SM, of which up to 228 KB shared (H100 whitepaper);",
             "the L2 as the H200 reported it. Bandwidths: datasheet (HBM), modelled (L1: 128 B per clock per SM; L2: an",
             "assumption). Latencies: shared and L2 measured on a V100 (Jia et al. 2018), no H200 figure; DRAM: the time",
             "model's assumption under load. gpuedu.profiler.gpus and time_model hold these figures, each with its source."]
    for k, line in enumerate(notes):
        s.text(20, 382 + 14 * k, line, 10.5, fill=MUTED)
    return str(s)


def warps():
    """Lesson 03: a block is cut into warps of 32 lanes, and a divergent branch runs its paths one after the other."""
    s = Svg(780, 325, "Warps and SIMT: a warp runs one instruction for 32 lanes; a divergent branch runs both paths")
    s.text(20, 28, "A block of 64 threads is two warps; a warp issues one instruction for its 32 lanes", 15,
           weight="bold")
    lane_w, x0 = 10.5, 120
    for w in range(2):
        y = 48 + w * 34
        s.text(x0 - 10, y + 17, f"warp {w}", 12, "end", "bold", BLUE)
        for lane in range(32):
            s.rect(x0 + lane * lane_w, y, lane_w - 1.5, 22, fill=BLUE_LIGHT, stroke=BLUE, width=0.6, rx=2)
        s.text(x0 + 32 * lane_w + 10, y + 16, f"threads {32 * w}-{32 * w + 31}", 12, fill=MUTED)
    s.text(20, 150, "Inside warp 0:  if (threadIdx.x < 12) { A } else { B }", 13.5, mono=True, weight="bold")
    rows = [("A", lambda lane: lane < 12, GREEN, GREEN_LIGHT), ("B", lambda lane: lane >= 12, ORANGE, ORANGE_LIGHT),
            ("after", lambda lane: True, BLUE, BLUE_LIGHT)]
    for r, (name, active, stroke, fill) in enumerate(rows):
        y = 170 + r * 34
        s.text(x0 - 10, y + 16, f"step {r + 1}: {name}", 12, "end", "bold", stroke)
        for lane in range(32):
            on = active(lane)
            s.rect(x0 + lane * lane_w, y, lane_w - 1.5, 22, fill=fill if on else "white",
                   stroke=stroke if on else LINE, width=0.6, rx=2, dash=None if on else "2,2")
    s.text(x0 + 32 * lane_w + 10, 186, "lanes 12-31 masked: idle", 12, fill=MUTED)
    s.text(x0 + 32 * lane_w + 10, 220, "lanes 0-11 masked: idle", 12, fill=MUTED)
    s.text(x0 + 32 * lane_w + 10, 254, "paths reconverge", 12, fill=MUTED)
    s.line(20, 168, 20, 262, stroke=MUTED, arrow=True)
    s.text(26, 280, "time", 12, "middle", fill=MUTED)
    s.text(20, 312, "A branch that splits a warp costs the sum of both paths; one that splits only between warps "
                    "(if (warp < 1)) costs nothing extra.", 11.5, fill=INK)
    return str(s)


#: The example kernel of the occupancy figure and of lesson 13's section on it.
OCCUPANCY_EXAMPLE = dict(threads_per_block=256, registers_per_thread=64, shared_per_block=32 * 1024)


def occupancy():
    """Lesson 13: how many blocks of one kernel an SM holds, limit by limit, and which limit binds."""
    gpu = get_gpu("H100")
    occ = theoretical_occupancy(gpu, **OCCUPANCY_EXAMPLE)
    ex = OCCUPANCY_EXAMPLE
    s = Svg(820, 380, "Occupancy: the blocks one SM holds at once are the smallest of four limits")
    s.text(20, 28, f"Occupancy on an {gpu.name} SM", 15, weight="bold")
    s.text(20, 48, f"one kernel: {ex['threads_per_block']} threads per block, {ex['registers_per_thread']} registers "
                   f"per thread, {ex['shared_per_block'] // 1024} KB of shared memory per block", 13, fill=MUTED)
    limits = [
        ("warps", f"{gpu.max_warps_per_sm} warp slots; a block takes {ex['threads_per_block'] // 32}"),
        ("blocks", f"{gpu.max_blocks_per_sm} block slots"),
        ("registers", f"{gpu.registers_per_sm:,} registers; a block takes "
                      f"{ex['threads_per_block'] * ex['registers_per_thread']:,}"),
        ("shared memory", f"{gpu.shared_per_sm // 1024} KB; a block takes {ex['shared_per_block'] // 1024} KB + 1 KB "
                          "reserved"),
    ]
    bar_x, bar_w, most = 170, 420, max(occ.limits.values())
    for k, (name, why) in enumerate(limits):
        y = 74 + k * 56
        allowed = occ.limits[name]
        binding = name == occ.limiter
        s.text(bar_x - 12, y + 20, name, 13, "end", "bold", ORANGE if binding else INK)
        s.text(bar_x, y + 46, why, 11, fill=MUTED)
        shown = min(allowed, most)
        for b in range(shown):
            bw = bar_w / most
            s.rect(bar_x + b * bw, y + 4, bw - 2, 24, fill=ORANGE_LIGHT if binding else BLUE_LIGHT,
                   stroke=ORANGE if binding else BLUE, width=0.8, rx=2)
        s.text(bar_x + bar_w + 12, y + 21, f"{allowed} blocks" + ("  ← binds" if binding else ""), 13,
               weight="bold" if binding else "normal", fill=ORANGE if binding else INK)
    y = 74 + 4 * 56 + 10
    s.text(20, y + 14, f"Resident: {occ.blocks_per_sm} blocks = {occ.active_warps_per_sm} of {occ.max_warps_per_sm} "
                       f"warps = {occ.percent:.0f}% theoretical occupancy, limited by {occ.limiter}.", 13.5,
           weight="bold")
    s.text(20, y + 36, "Fewer registers per thread (__launch_bounds__, -maxrregcount) or less shared memory per block "
                       "would let more warps", 11.5, fill=MUTED)
    s.text(20, y + 52, "take turns hiding memory latency; the CUDA occupancy calculator's rules, as "
                       "gpuedu.profiler.occupancy applies them.", 11.5, fill=MUTED)
    return str(s)


def overlap():
    """Lesson 10: copies and kernels in one stream, and in two streams with double buffering."""
    s = Svg(900, 250, "Overlapping copies and compute with two streams and two device buffers")
    s.text(20, 28, "Three batches, copy time c, compute time k: one stream against two", 15, weight="bold")
    unit, x0 = 86, 150

    def box(x, y, w, label, fill, stroke):
        s.rect(x, y, w - 3, 30, fill=fill, stroke=stroke, rx=4)
        s.text(x + (w - 3) / 2, y + 20, label, 12, "middle", "bold", stroke)

    s.text(x0 - 12, 70, "one stream", 12.5, "end", "bold")
    for b in range(3):
        box(x0 + 2 * b * unit, 50, unit, f"copy {b}", ORANGE_LIGHT, ORANGE)
        box(x0 + (2 * b + 1) * unit, 50, unit, f"compute {b}", BLUE_LIGHT, BLUE)
    s.text(x0 + 6 * unit + 10, 70, "n(c + k)", 12.5, fill=MUTED, mono=True)
    s.text(x0 - 12, 126, "stream 1: copies", 12.5, "end", "bold")
    s.text(x0 - 12, 166, "stream 2: kernels", 12.5, "end", "bold")
    for b in range(3):
        box(x0 + b * unit, 106, unit, f"copy {b}", ORANGE_LIGHT, ORANGE)
        box(x0 + (b + 1) * unit, 146, unit, f"compute {b}", BLUE_LIGHT, BLUE)
        s.text(x0 + b * unit + unit / 2, 100, "buffer " + "AB"[b % 2], 10, "middle", fill=MUTED)
    for b in range(3):  # compute b waits for the event "copy b done"
        s.line(x0 + (b + 1) * unit - 2, 137, x0 + (b + 1) * unit + 6, 145, stroke=MUTED, arrow=True)
    s.text(x0 + 4 * unit + 10, 166, "c + (n - 1) max(c, k) + k", 12.5, fill=MUTED, mono=True)
    s.line(x0, 200, x0 + 6 * unit + 20, 200, stroke=MUTED, arrow=True)
    s.text(x0 + 6 * unit + 20, 216, "time", 12, "end", fill=MUTED)
    s.text(20, 238, "Arrows: compute on batch i waits for the event \"copy i done\"; a copy into a buffer waits for the "
                    "last kernel that read it.", 11.5)
    return str(s)


def amp():
    """Lesson 07: one mixed-precision training step, with FP32 master weights and loss scaling."""
    s = Svg(780, 300, "A mixed-precision training step: FP32 master weights, FP16 compute, loss scaling")
    s.text(20, 28, "Mixed-precision training: one step", 15, weight="bold")

    def node(x, y, w, label, sub, fill, stroke):
        s.rect(x, y, w, 52, fill=fill, stroke=stroke, rx=8)
        s.text(x + w / 2, y + 22, label, 12.5, "middle", "bold", stroke)
        s.text(x + w / 2, y + 40, sub, 10.5, "middle", fill=INK)

    node(20, 56, 150, "FP32 master W", "what the optimizer updates", GREEN_LIGHT, GREEN)
    node(230, 56, 150, "FP16 W", "re-rounded every step", ORANGE_LIGHT, ORANGE)
    node(440, 56, 150, "forward", "FP16 storage, FP32 sums", ORANGE_LIGHT, ORANGE)
    node(620, 56, 140, "loss × S", "softmax in FP32", GREEN_LIGHT, GREEN)
    node(620, 186, 140, "backward", "FP16, FP32 sums", ORANGE_LIGHT, ORANGE)
    node(380, 186, 190, "any Inf or NaN?", "yes: skip the step, S ← S / 2", BLUE_LIGHT, BLUE)
    node(20, 186, 300, "FP32 grad = FP16 grad / S", "then the optimizer step, in FP32", GREEN_LIGHT, GREEN)
    s.line(170, 82, 228, 82, arrow=True)
    s.text(199, 75, "round", 10.5, "middle", fill=MUTED)
    s.line(380, 82, 438, 82, arrow=True)
    s.line(590, 82, 618, 82, arrow=True)
    s.line(690, 108, 690, 184, arrow=True)
    s.line(620, 212, 572, 212, arrow=True)
    s.line(380, 212, 322, 212, arrow=True)
    s.text(351, 205, "no", 10.5, "middle", fill=MUTED)
    s.line(95, 186, 95, 110, arrow=True)
    s.text(103, 150, "update", 10.5, fill=MUTED)
    s.text(20, 266, "Green: FP32; orange: FP16. Sums stay in FP32 so small terms survive; S lifts tiny gradients out "
                    "of FP16's", 11.5)
    s.text(20, 284, "underflow; the FP32 master copy keeps updates smaller than half an FP16 step.", 11.5)
    return str(s)


#: Every figure: its file name (also its attachment name) and the function that draws it.
ALL = {"grid.svg": grid, "memory.svg": memory, "warps.svg": warps, "occupancy.svg": occupancy,
       "overlap.svg": overlap, "amp.svg": amp}


def render():
    return {name: draw() for name, draw in ALL.items()}


def attachment(svg_text):
    """A cell attachment, base64 as Jupyter stores pasted images, in the one-line list nbformat writes it as."""
    return {"image/svg+xml": [base64.b64encode(svg_text.encode()).decode()]}


def embed(nb, figures):
    """Give every markdown cell that shows ``attachment:NAME`` the current NAME as its attachment.

    Returns the names the notebook shows; raises ValueError for a name that is not a figure."""
    shown = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"])
        names = [n for n in ALL if f"(attachment:{n})" in source]
        unknown = [p.split(")")[0] for p in source.split("(attachment:")[1:] if p.split(")")[0] not in ALL]
        if unknown:
            raise ValueError(f"a markdown cell shows attachment:{unknown[0]}, which scripts/figures.py does not draw "
                             f"(it draws {', '.join(ALL)})")
        if names:
            cell["attachments"] = {n: attachment(figures[n]) for n in names}
            shown += names
        elif "attachments" in cell:
            del cell["attachments"]
    return shown


def _dump(nb):
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def main(argv):
    check = "--check" in argv
    figures = render()
    stale = []
    os.makedirs(FIGURES, exist_ok=True)
    for name, text in figures.items():
        path = os.path.join(FIGURES, name)
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old != text:
            stale.append(os.path.relpath(path, ROOT))
            if not check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
    for path in sorted(glob.glob(os.path.join(LESSONS, "[0-9][0-9]_*.ipynb"))):
        with open(path, encoding="utf-8") as f:
            old = f.read()
        nb = json.loads(old)
        embed(nb, figures)
        new = _dump(nb)
        if new != old:
            stale.append(os.path.relpath(path, ROOT))
            if not check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(new)
    if check and stale:
        print("out of step with scripts/figures.py (run python scripts/figures.py): " + ", ".join(stale))
        return 1
    if not check:
        print(f"{len(figures)} figures; rewrote: {', '.join(stale) or 'nothing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
