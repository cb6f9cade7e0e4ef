"""Turn a wrong result into what is wrong and the likely cause.

Each function looks at one kind of evidence and returns a ``Finding`` or None; ``compare`` applies
them from the most specific evidence (bytes written outside the buffer) to the least (values that
are simply wrong), so the hint names the first cause that explains what was seen.
"""
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import _canary


@dataclass
class Finding:
    kind: str                 # out_of_bounds, untouched, wrong_values, input_modified, ...
    summary: str              # what is wrong, with indices and values
    hint: str                 # the likely cause and what to change
    output: Optional[str] = None
    index: Optional[tuple] = None
    n_wrong: int = 0
    n_total: int = 0


def _fmt(value):
    value = np.asarray(value)
    if value.dtype.kind == "f":
        if np.isnan(value) and _canary.is_sentinel(value.reshape(1))[0]:
            return "(never written)"
        return f"{float(value):.6g}"
    return str(value.item())


def _index(flat_index, shape):
    idx = np.unravel_index(int(flat_index), shape)
    return tuple(int(i) for i in idx)


def _show_index(idx):
    return str(idx[0]) if len(idx) == 1 else "[" + ", ".join(str(i) for i in idx) + "]"


def out_of_bounds(name, before, past, size):
    if len(past):
        lo, hi = int(past.min()), int(past.max())
        where = f"index {lo}" if lo == hi else f"indices {lo}..{hi}"
        return Finding("out_of_bounds",
                       f"wrote {len(past)} element(s) past the end of `{name}` ({where}; it has {size})",
                       "the grid has more threads than elements, and the extra threads wrote anyway: "
                       "guard the write with a bounds check such as `if (i < n)` (in 2-D, check the row "
                       "and the column). On a real GPU such a write silently corrupts other data.",
                       output=name)
    lo, hi = int(before.min()), int(before.max())
    return Finding("out_of_bounds",
                   f"wrote {len(before)} element(s) before the start of `{name}` (indices {lo}..{hi})",
                   "a computed index was negative: check the index arithmetic (a subtraction, or "
                   "an int that overflowed).", output=name)


def _wrong_mask(expected, got, rtol, atol):
    if expected.dtype.kind in "fc":
        with np.errstate(invalid="ignore"):  # the sentinel is a signalling NaN
            exp = expected.astype(np.float64)
            val = got.astype(np.float64)
            return ~np.isclose(val, exp, rtol=rtol, atol=atol, equal_nan=False)
    return got != expected


def compare(name, expected, got, case, rtol, atol, block_threads, initial=None):
    """A Finding for the first problem with output ``name``, or None when it matches.

    ``initial`` is what the output held before the launch when it is updated in place; otherwise
    it started as sentinels, and an element still holding one was never written.
    """
    if got.shape != expected.shape:
        got = got.reshape(expected.shape)
    wrong = _wrong_mask(expected, got, rtol, atol)
    n_wrong = int(wrong.sum())
    if n_wrong == 0:
        return None
    total = expected.size
    if initial is None:
        untouched = _canary.is_sentinel(got) & ~_canary.is_sentinel(expected)
    else:
        before = _canary.bits(np.ascontiguousarray(initial, dtype=expected.dtype).reshape(-1))
        untouched = ((_canary.bits(got.reshape(-1)) == before)
                     & (_canary.bits(expected.reshape(-1)) != before)).reshape(expected.shape)
    flat_wrong = np.flatnonzero(wrong)
    first = int(flat_wrong[0])
    idx = _index(first, expected.shape)
    detail = (f"`{name}`: {n_wrong} of {total} elements wrong; first bad index {_show_index(idx)}: "
              f"expected {_fmt(expected.reshape(-1)[first])}, got {_fmt(got.reshape(-1)[first])}")

    def finding(kind, hint):
        return Finding(kind, detail, hint, output=name, index=idx, n_wrong=n_wrong, n_total=total)

    n_untouched = int(untouched.sum())
    if n_untouched == total:
        return finding("untouched", "the kernel never wrote this output (it still holds what it held "
                       "before the launch): is the write missing, does it "
                       "go to another parameter, or does every thread return before it?")
    if n_untouched == n_wrong:
        written = np.flatnonzero(~untouched.reshape(-1))
        if len(written) and written.max() < first and written.max() + 1 == len(written):
            if len(written) <= block_threads:
                return finding("untouched", f"only the first {len(written)} elements were written, one "
                               "block's worth: every block wrote the same elements. The global index "
                               "must include the block: `blockIdx.x * blockDim.x + threadIdx.x`.")
            return finding("untouched", f"elements from {len(written)} on were never written: the "
                           "threads do not cover the whole array (check the index arithmetic, or a "
                           "guard that stops too early, e.g. `i < n - 1`).")
        return finding("untouched", f"{n_untouched} elements were never written while others were: "
                       "the index skips elements (e.g. a stride or a factor in the index) or a "
                       "guard excludes them.")
    shift = _shift(expected, got)
    if shift:
        return finding("wrong_index", f"got[i] equals expected[i{shift:+d}]: the index is off by "
                       f"{abs(shift)} (check `+ 1`/`- 1` in the index and the guard).")
    flat = wrong.reshape(-1)
    if expected.ndim == 1 and total > block_threads:
        tail_start = (total // block_threads) * block_threads
        if tail_start < total and not flat[:tail_start].any():
            return finding("tail", "only the last, partial block is wrong: check how the kernel handles "
                           "threads near `n` (the bounds guard and any index past it).")
        place = flat_wrong % block_threads
        if block_threads > 2 and np.all((place == 0) | (place == block_threads - 1)):
            return finding("block_edges", "only elements at the first or last thread of a block are "
                           "wrong: they need a value held by a neighbouring thread. Check the "
                           "`__syncthreads()` between writing shared memory and reading a neighbour's "
                           "slot, and the elements a block needs from beyond its edges (the halo).")
    return finding("wrong_values", "the values differ from the NumPy spec: compare your arithmetic "
                   "with the spec above, element by element, on a small case.")


def _shift(expected, got):
    """+1/-1 when got is expected shifted by one along the flat order (beyond a lucky element)."""
    exp = expected.reshape(-1)
    val = got.reshape(-1)
    if exp.size < 4:
        return 0
    for shift in (1, -1):
        if shift == 1:
            a, b = val[:-1], exp[1:]
        else:
            a, b = val[1:], exp[:-1]
        if exp.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                same = np.isclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-5, atol=1e-6)
        else:
            same = a == b
        if same.mean() > 0.9:
            return shift
    return 0


# What each thread of a hazard did, by its kind (racecheck names the earlier access first).
_RACE_VERBS = {"read-after-write": ("wrote", "read"), "write-after-read": ("read", "wrote"),
               "write-after-write": ("wrote", "wrote"),
               # the first access is a cp.async that no wait of its thread had landed yet
               "read-before-wait": ("began copying (cp.async) to", "read"),
               "write-before-wait": ("began copying (cp.async) to", "wrote")}


def _xyz(v):
    return str(v[0]) if not any(v[1:]) else "(" + ", ".join(str(c) for c in v) + ")"


def _line(access):
    where = access.get("line") or "?"
    name, _, number = where.rpartition(":")
    return f"line {number}" if name == "exercise.cu" else where


def race(hazards):
    """A Finding for the races ``gpuedu.racecheck()`` found (a list of its hazard dicts)."""
    h = hazards[0]
    first, second = h["first"], h["second"]
    did_first, did_second = _RACE_VERBS.get(h["kind"], ("touched", "touched"))
    same_block = first["block"] == second["block"]
    summary = (f"a {h['kind']} race on {h['space']} memory (found by gpuedu.racecheck()): thread "
               f"{_xyz(first['thread'])} of block {_xyz(first['block'])} {did_first} an address at "
               f"{_line(first)}, then thread {_xyz(second['thread'])} of "
               f"{'the same block' if same_block else 'block ' + _xyz(second['block'])} {did_second} it "
               f"at {_line(second)}, with nothing ordering the two")
    # Two threads writing one address from one line: an update (`++`, `+=`) that is not atomic.
    lost_updates = any(x["kind"] == "write-after-write" and x["first"]["line"] == x["second"]["line"]
                       for x in hazards)
    in_flight = h["kind"] in ("read-before-wait", "write-before-wait")
    if in_flight:
        hint = (f"the copy of {_line(first)} had not landed: a cp.async's bytes are in shared memory only after a "
                f"wait of the thread that issued it covers its group. Before {_line(second)}, wait for it "
                f"(cp.async.wait_group N, or __pipeline_wait_prior(N)), then __syncthreads(), so that every "
                f"thread's copies are there for every thread.")
    elif lost_updates:
        hint = ("two threads update one address with a plain read-modify-write (`++`, `+=`): on a GPU "
                "they interleave and one update is lost. The emulator runs them one after the other, so "
                "the values come out right here, but not on a GPU. Make the update atomic, e.g. "
                "atomicAdd(&bins[b], 1u).")
    elif not same_block:
        hint = ("threads of different blocks touch one address, and no barrier orders blocks: make the "
                "update atomic (atomicAdd), or give each block its own place to write.")
    else:
        hint = (f"put __syncthreads() between {_line(first)} and {_line(second)}, where every thread "
                f"of the block reaches it: a thread must not read (or overwrite) a slot before the "
                f"thread that writes (or reads) it is done.")
    return Finding("race", summary, hint)
