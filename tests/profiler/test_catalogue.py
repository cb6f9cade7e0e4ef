"""The course's ladders counted at two sizes and carried to a third: exact where the counts are powers of the size."""
import math

import numpy as np
import pytest

import gpuedu
from gpuedu import ops
from gpuedu.profiler import catalogue, profile


@pytest.fixture(scope="module")
def emulator():
    if gpuedu.setup(verbose=False).name != "cpu":
        pytest.skip("counting needs the emulator")


def family(name):
    return next(f for f in catalogue.course_families() if f.name == name)


def test_every_ladder_version_of_the_lessons_is_listed(emulator):
    listed = {f.name: f.versions for f in catalogue.course_families()}
    assert listed["relu"] == ops.ACTIVATION_VERSIONS
    assert listed["transpose"] == ops.TRANSPOSE_VERSIONS
    assert listed["softmax rows"] == ops.SOFTMAX_VERSIONS
    assert listed["matmul"] == ops.MATMUL_VERSIONS
    from gpuedu.ops import conv
    assert listed["conv2d"] == tuple(v for v in conv.VERSIONS if v != 3)   # version 3 is three launches
    assert listed["reduce pass"] == ops.REDUCE_VERSIONS[:-1]   # version 7 finishes with atomics in one launch


@pytest.mark.slow
def test_two_counted_sizes_predict_a_third_exactly_grids_included(emulator):
    relu = family("relu")
    counted = catalogue.count(relu)
    third = 1 << 22
    x = gpuedu.setup(verbose=False).gpuarray.to_gpu(np.ones(third, np.float32))
    for v, (small, large, plain) in counted.items():
        predicted = catalogue.at_size(relu, small, large, third)
        with profile() as prof:
            ops.relu(x, version=v)
        (direct,) = prof.kernels
        assert predicted.grid == direct.grid, v
        assert predicted.metrics == direct.metrics, v
        assert plain > 0


@pytest.mark.slow
def test_rows_label_and_order_the_figures(emulator):
    small = catalogue.Family("matmul", (1, 2), (32, 64), 1024, family("matmul").make, family("matmul").run,
                             lambda n: 2 * n ** 3, lambda n: f"{n}^3", "2 n^3")
    rows = catalogue.rows("H100", [small])
    assert [r["version"] for r in rows] == [1, 2]
    for r in rows:
        assert r["flops"] == 2 * 1024 ** 3 and r["size"] == "1024^3" and r["emulator_size"] == "64^3"
        assert r["modelled_gflops"] == pytest.approx(r["flops"] / r["modelled_seconds"] / 1e9)
        # two different 1024^2 inputs read once from DRAM; the 4 MB output stays in the H100's 50 MB L2 (12 MB
        # touched in all), so the launch writes nothing to DRAM by its end
        assert r["dram_bytes"] == 2 * 4 * 1024 ** 2
        assert math.isfinite(r["intensity"]) and r["limiter"]
    # coalesced loads (version 2) are modelled faster than the naive version
    assert rows[1]["modelled_seconds"] < rows[0]["modelled_seconds"]
