"""What an exercise is: its text, NumPy spec, stub, launch rule, cases and hidden solution."""
import inspect
import re
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ..launch import ceil_div  # noqa: F401 - re-exported: exercise cases size their grids with it
from ..profiler import metrics as _metrics

_ID = re.compile(r"^\d\d\.[a-z][a-z0-9_]*$")


@dataclass
class Case:
    """One run of the learner's kernel: named inputs, the launch shape, and a label for reports.

    ``inputs`` maps every kernel parameter that is not a pure output to a NumPy array (copied to
    the device) or a NumPy scalar (passed by value).  ``grid`` may have 2 or 3 entries.
    """

    label: str
    inputs: dict
    block: tuple
    grid: tuple
    shared: int = 0

    def describe(self):
        return f"{self.label} (block={tuple(self.block)}, grid={tuple(self.grid)})"


def global_reads(unit):
    """The counted metrics of every way a kernel reads memory off the chip, in ``unit`` ("requests" or "sectors"),
    for a Requirement that bounds reads: plain loads of global memory (device allocations and the module's
    ``__device__`` variables alike), atomics and reductions, which read what they change (an
    ``atomicAdd(&x[i], 0.0f)`` reads ``x[i]`` as surely as ``x[i]`` does), and loads of local memory: a thread's
    array indexed at run time, which nvcc keeps in DRAM (through L1 and L2), counted in the same requests and
    sectors. (``__constant__`` variables are read through the constant cache, which these metrics do not count.)"""
    unit = _unit(unit)
    return tuple(f"l1tex__t_{unit}_pipe_lsu_mem_global_op_{op}.sum" for op in ("ld", "atom", "red")) + (
        f"l1tex__t_{unit}_pipe_lsu_mem_local_op_ld.sum",)


def global_writes(unit):
    """The counted metrics of every way a kernel writes memory off the chip, in ``unit``: plain stores of global
    memory (``__device__`` variables included), atomics and reductions (an ``atomicExch`` is a store that also
    reads), and stores to local memory (a thread's array indexed at run time)."""
    unit = _unit(unit)
    return tuple(f"l1tex__t_{unit}_pipe_lsu_mem_global_op_{op}.sum" for op in ("st", "atom", "red")) + (
        f"l1tex__t_{unit}_pipe_lsu_mem_local_op_st.sum",)


def _unit(unit):
    if unit not in ("requests", "sectors"):
        raise ValueError(f"unit is 'requests' or 'sectors', got {unit!r}")
    return unit


@dataclass
class Requirement:
    """How the kernel must get its values, as one of Nsight Compute's counters shows it.

    Checked on the emulator only, once the values are right in every case: ``metric`` (a counted
    metric of ``gpuedu.profile()``, or a tuple of them added together, e.g. global ATOM and RED
    atomics; summed over the case's launches) must be at most
    ``at_most(case)`` or at least ``at_least(case)``.  ``hint`` says what the exercise asks for and how to get there: a
    string formatted with ``got`` and ``limit``, or ``(case, got, limit, metrics) -> str`` where
    ``metrics`` holds every counted metric of the case.
    """

    metric: str
    hint: object
    at_most: Optional[Callable] = None
    at_least: Optional[Callable] = None

    def __post_init__(self):
        if (self.at_most is None) == (self.at_least is None):
            raise ValueError(f"a Requirement on {self.label} needs exactly one of at_most and at_least")
        for name in self.names:
            if _metrics.kind(name) != "counted":   # a KeyError names the known metrics
                raise ValueError(f"{name} is {_metrics.kind(name)}, not counted: only counted "
                                 f"metrics are exact enough to fail a kernel on")

    @property
    def names(self):
        """The metrics whose sum is bounded."""
        return (self.metric,) if isinstance(self.metric, str) else tuple(self.metric)

    @property
    def label(self):
        return " + ".join(self.names)

    def judge(self, case, metrics):
        """None when the case's ``metrics`` keep the bound, else (what is wrong, the hint)."""
        got = sum(metrics[name] for name in self.names)
        limit = int((self.at_most or self.at_least)(case))
        if (got <= limit) if self.at_most else (got >= limit):
            return None
        bound = "at most" if self.at_most else "at least"
        message = (f"the values are right, but not the way this exercise asks: {self.label} = {got}, "
                   f"where {bound} {limit} is expected")
        hint = (self.hint(case, got, limit, metrics) if callable(self.hint)
                else self.hint.format(got=got, limit=limit))
        return message, hint


@dataclass
class Exercise:
    """A registered exercise.  See the package docstring for what each field means."""

    id: str
    title: str
    text: str
    kernel: str
    params: tuple
    outputs: tuple
    reference: Callable
    cases: Callable
    stub: str
    solution: str
    launch: str
    rtol: float = 0.0
    atol: float = 0.0
    races: bool = False
    diagnoses: tuple = ()
    run: Optional[Callable] = None
    options: tuple = ()
    no_extern_c: bool = False
    requirements: tuple = ()
    diagnose_small_outputs: bool = False
    workspaces: tuple = ()
    arch: Optional[str] = None
    spec_text: str = field(default="", repr=False)

    def __post_init__(self):
        if not _ID.match(self.id):
            raise ValueError(f"exercise id {self.id!r} must look like '01.relu' (two-digit lesson, dot, "
                             f"lower-case name)")
        self.params = tuple(self.params)
        self.outputs = tuple(self.outputs)
        self.requirements = tuple(self.requirements)
        if not all(isinstance(r, Requirement) for r in self.requirements):
            raise TypeError(f"{self.id}: requirements must be Requirement objects")
        missing = [name for name in self.outputs if name not in self.params]
        if missing:
            raise ValueError(f"{self.id}: outputs {missing} are not kernel parameters {self.params}")
        self.workspaces = tuple(self.workspaces)
        wrong = [name for name in self.workspaces if name not in self.params or name in self.outputs]
        if wrong:
            raise ValueError(f"{self.id}: workspaces {wrong} must be kernel parameters {self.params} that are not "
                             f"outputs (a workspace is scratch memory the kernel may write, never compared)")
        if "FILL ME IN" not in self.stub:
            raise ValueError(f"{self.id}: the stub must mark where the learner writes with "
                             f"'// FILL ME IN (roughly N lines)'")
        if not self.spec_text:
            try:
                self.spec_text = inspect.getsource(self.reference).rstrip()
            except (OSError, TypeError):
                self.spec_text = getattr(self.reference, "__doc__", "") or ""

    @property
    def lesson(self):
        return self.id[:2]

    def make_cases(self, seed=0):
        """The list of cases for this seed (the generator receives a seeded NumPy Generator)."""
        cases = list(self.cases(np.random.default_rng(seed)))
        if not cases:
            raise ValueError(f"{self.id}: the case generator returned no cases")
        return cases

    def expected(self, case):
        """The reference outputs for a case, as a dict name -> array."""
        result = self.reference(**{k: v for k, v in case.inputs.items()})
        if not isinstance(result, dict):
            if len(self.outputs) != 1:
                raise TypeError(f"{self.id}: the reference must return a dict for several outputs")
            result = {self.outputs[0]: result}
        return {name: np.asarray(result[name]) for name in self.outputs}


def sizes_1d(rng, block, large=100_000):
    """The standard 1-D sizes: 1, block, block + 1, a random size that is not a multiple of block,
    and a large one that is not either.  Returns (label, n) pairs."""
    odd = int(rng.integers(2, 8)) * block + int(rng.integers(1, block))
    big = large + int(rng.integers(1, block))
    if big % block == 0:
        big += 1
    return [("n = 1", 1), (f"n = block = {block}", block), (f"n = block + 1 = {block + 1}", block + 1),
            (f"n = {odd} (not a multiple of {block})", odd), (f"n = {big} (large)", big)]
