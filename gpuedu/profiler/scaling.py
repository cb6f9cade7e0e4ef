"""From counts you can afford to count to the size a GPU runs: each count as a power of the size.

The emulator counts exactly, but a 4096 x 4096 x 4096 GEMM is 137 GFLOP: far too long to run thread by
thread. For a kernel whose every count grows as a power of the problem size n (a GEMM's loads in the K
loop as n**3, its stores and the bytes it touches as n**2, its warps as n**2), two sizes that can run
give each power, and the counts at any size follow:

    small, large = records at n = 128 and n = 256
    big = extrapolate(small, large, 128, 256, 4096, grid=(32, 32))

Exact when each count really is c * n**p at both sizes (no partial tiles: choose sizes the tiles divide);
``big.exponents`` shows the power found for each count, so the napkin math is on the page.
"""
import math

from .session import KernelRecord


def extrapolate(small, large, size_small, size_large, size, grid):
    """A KernelRecord with the counts ``small`` (at ``size_small``) and ``large`` (at ``size_large``) imply at
    ``size``, launched with ``grid``. Counts that are zero at either size are carried over from ``large``."""
    if small._counts is None or large._counts is None:
        raise ValueError(f"kernel '{large.name}' has no counts to extrapolate ({large._reason or small._reason})")
    if small.name != large.name or small.block != large.block:
        raise ValueError(f"extrapolate needs two launches of one kernel with one block shape; got '{small.name}' "
                         f"{small.block} and '{large.name}' {large.block}")
    if not 0 < size_small < size_large:
        raise ValueError(f"the sizes must grow: got {size_small} then {size_large}")
    step = math.log(size_large / size_small)
    counts, exponents = {}, {}
    # The L2 model's per-GPU DRAM counts do not grow as a power of the size (a footprint that outgrows L2
    # starts writing back): they are left out, and the DRAM model works from the footprint at ``size``
    # (metrics.dram_bytes).
    from gpuedu.emulator.hooks import L2_KEY_PREFIXES
    per_l2 = {key for c in (small._counts, large._counts) for key in c if key.startswith(L2_KEY_PREFIXES)}
    for key, c2 in large._counts.items():
        if key in per_l2:
            continue
        c1 = small._counts[key]
        p = math.log(c2 / c1) / step if c1 > 0 and c2 > 0 else 0.0
        exponents[key] = round(p, 3)
        counts[key] = int(round(c2 * (size / size_large) ** p))
    grid = tuple(int(g) for g in grid) + (1,) * (3 - len(tuple(grid)))
    record = KernelRecord(large.name, grid, large.block, large.shared_dynamic, counts=counts, source=large._source,
                          arch=large.arch, backend=large.backend, gpu=large.gpu, target=large._target)
    record.exponents = exponents
    return record


def extrapolate_polynomial(records, sizes, size):
    """A KernelRecord at ``size`` from launches of one kernel counted at several sizes: each count, and each grid
    dimension, as the polynomial in n of degree len(sizes) - 1 through the counted points.

    For kernels whose counts are sums of powers (attention stores an N x N matrix and reads N x d rows: c2 n**2
    + c1 n + c0), where one power through two sizes is not exact. Exact when each count is such a polynomial at
    every counted size (no partial tiles: choose sizes the tiles divide); a fourth size, counted, checks it.
    ``record.coefficients`` holds each count's (c0, c1, ...)."""
    records, sizes = list(records), [int(s) for s in sizes]
    if len(records) != len(sizes) or len(sizes) < 2:
        raise ValueError(f"extrapolate_polynomial needs one record per size and at least two sizes; got "
                         f"{len(records)} records for sizes {sizes}")
    if sorted(set(sizes)) != sizes or sizes[0] <= 0:
        raise ValueError(f"the sizes must be positive and grow: got {sizes}")
    first = records[0]
    for rec in records:
        if rec._counts is None:
            raise ValueError(f"kernel '{rec.name}' has no counts to extrapolate ({rec._reason})")
        if rec.name != first.name or rec.block != first.block:
            raise ValueError(f"extrapolate_polynomial needs launches of one kernel with one block shape; got "
                             f"'{first.name}' {first.block} and '{rec.name}' {rec.block}")
    scale = float(sizes[-1])
    vandermonde = [[(s / scale) ** k for k in range(len(sizes))] for s in sizes]

    def fit(values):
        coefficients = _solve(vandermonde, [float(v) for v in values])
        at = sum(c * (size / scale) ** k for k, c in enumerate(coefficients))
        return tuple(c / scale ** k for k, c in enumerate(coefficients)), max(0, int(round(at)))

    counts, coefficients = {}, {}
    # As in extrapolate: the L2 model's per-GPU DRAM counts are left out (they stop following the size once the
    # footprint outgrows L2), and the DRAM model works from the footprint at ``size``.
    from gpuedu.emulator.hooks import L2_KEY_PREFIXES
    for key in first._counts:
        if key.startswith(L2_KEY_PREFIXES):
            continue
        coefficients[key], counts[key] = fit([rec._counts[key] for rec in records])
    grid = tuple(max(1, fit([rec.grid[d] for rec in records])[1]) for d in range(3))
    last = records[-1]
    record = KernelRecord(last.name, grid, last.block, last.shared_dynamic, counts=counts, source=last._source,
                          arch=last.arch, backend=last.backend, gpu=last.gpu)
    record.coefficients = coefficients
    return record


def _solve(matrix, values):
    """x with matrix @ x = values, by Gaussian elimination with partial pivoting (a few unknowns)."""
    n = len(values)
    rows = [list(map(float, row)) + [float(v)] for row, v in zip(matrix, values)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(rows[r][col]))
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(n):
            if r != col:
                factor = rows[r][col] / rows[col][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col])]
    return [rows[i][n] / rows[i][i] for i in range(n)]
