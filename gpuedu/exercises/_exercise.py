"""What an exercise is: its text, NumPy spec, stub, launch rule, cases and hidden solution."""
import inspect
import re
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ..ops import ceil_div  # noqa: F401 - re-exported: exercise cases size their grids with it

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
    spec_text: str = field(default="", repr=False)

    def __post_init__(self):
        if not _ID.match(self.id):
            raise ValueError(f"exercise id {self.id!r} must look like '01.relu' (two-digit lesson, dot, "
                             f"lower-case name)")
        self.params = tuple(self.params)
        self.outputs = tuple(self.outputs)
        missing = [name for name in self.outputs if name not in self.params]
        if missing:
            raise ValueError(f"{self.id}: outputs {missing} are not kernel parameters {self.params}")
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
