"""The course's ladders counted at two sizes and carried to a third: exact where the counts are powers of the size."""
import math

import numpy as np
import pytest

import gpuedu
from gpuedu import ops
from gpuedu.profiler import catalogue, profile
from gpuedu.profiler.gpus import get_gpu
from gpuedu.profiler.time_model import HOST_LAUNCH_S, timeline


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
    from gpuedu.ops import conv, fp16
    assert listed["conv2d"] == conv.VERSIONS                   # version 3's three launches summed
    assert listed["reduce pass"] == ops.REDUCE_VERSIONS[:-1]   # version 7 finishes with atomics in one launch
    assert listed["dense layer"] == (1,)                       # lesson 05's fused forward GEMM
    # lessons 07 and 08: FP16 storage on the CUDA cores, then the tensor cores; 5's 128 x 256 tile needs 512^3;
    # 6-10's PTX tensor-core instructions are not counted by the emulator (catalogue.FP16_VERSIONS says so)
    assert listed["fp16 matmul"] == tuple(v for v in fp16.GEMM_VERSIONS if v <= 4)
    assert listed["wmma_matmul"] == (1,)
    lessons = {f.name: f.lesson for f in catalogue.course_families()}
    assert lessons == {"relu": "01", "transpose": "02", "reduce pass": "03", "softmax rows": "03", "conv2d": "11",
                       "matmul": "04", "dense layer": "05", "fp16 matmul": "07", "wmma_matmul": "08"}


def test_the_tensor_core_versions_are_modelled_on_the_tensor_cores(emulator):
    from gpuedu.ops import fp16
    fam = family("fp16 matmul")
    assert [fam.pipe(v) for v in fam.versions] == ["tensor" if v in fp16.TENSOR_VERSIONS else "fp32"
                                                   for v in fam.versions]
    assert fam.pipe(4) == "tensor" and fam.pipe(3) == "fp32"
    assert family("wmma_matmul").pipe(1) == "tensor"
    assert family("matmul").pipe(7) == "fp32"


def test_summed_metrics_add_counts_and_keep_unknowns_unknown():
    a = {"dram__bytes_read.sum": 10, "x.sum": None, "launch__registers_per_thread": 32}
    b = {"dram__bytes_read.sum": 5, "x.sum": 3, "launch__registers_per_thread": 64}
    assert catalogue._summed([a]) == a
    assert catalogue._summed([a, b]) == {"dram__bytes_read.sum": 15, "x.sum": None}


@pytest.mark.slow
def test_a_version_of_three_launches_is_its_launches_on_the_host_s_timeline(emulator):
    conv2d = family("conv2d")
    three = catalogue.Family("conv2d", (3,), conv2d.sizes, conv2d.target, conv2d.make, conv2d.run, conv2d.flops,
                             conv2d.size_label, conv2d.flops_note, conv2d.lesson, flops_kernel=conv2d.flops_kernel)
    (row,) = catalogue.rows("H100", [three])
    assert row["launches"] == 3
    assert row["kernel"] == "conv_im2col + matmul_kernel5 + conv_bias_act_nkpq"
    small, large, _ = catalogue.count(three)[3]
    bigs = catalogue.at_size(three, small, large)
    flops = three.flops(three.target)
    preds = [b.predict("H100", flops=flops if b.name == "matmul_kernel5" else None) for b in bigs]
    assert row["modelled_seconds"] == pytest.approx(timeline(preds))
    assert row["modelled_seconds"] >= HOST_LAUNCH_S + sum(p.seconds for p in preds)
    assert row["limiter"] == " + ".join(p.limiter for p in preds)
    assert row["dram_bytes"] == sum(b.metrics["dram__bytes_read.sum"] + b.metrics["dram__bytes_write.sum"] for b in bigs)
    # im2col writes the lowered matrix (9x the input for a 3x3 filter) and the GEMM reads it back: all of it from
    # DRAM, since L2 is empty when a launch starts; of im2col's writes, DRAM sees by the launch's end only what the
    # H100's 50 MB L2 cannot hold (the matrix is larger), the rest being written back after it
    lowered = 4 * 8 * 9 * three.target * 28 * 28
    im2col, gemm, _ = bigs
    assert lowered > get_gpu("H100").l2_bytes
    assert gemm.metrics["dram__bytes_read.sum"] > 0.99 * lowered
    assert 0 < im2col.metrics["dram__bytes_write.sum"] < lowered - get_gpu("H100").l2_bytes + 4 * 8 * three.target * 28 * 28
    assert row["dram_bytes"] > lowered + im2col.metrics["dram__bytes_write.sum"]


@pytest.mark.slow
def test_two_counted_sizes_predict_a_third_exactly_grids_included(emulator):
    relu = family("relu")
    counted = catalogue.count(relu)
    third = 1 << 22
    x = gpuedu.setup(verbose=False).gpuarray.to_gpu(np.ones(third, np.float32))
    for v, (small, large, plain) in counted.items():
        (predicted,) = catalogue.at_size(relu, small, large, third)
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


@pytest.mark.slow
def test_convolution_counts_are_carried_as_a_plus_b_batch_and_move_at_least_the_input(emulator):
    # The filters stay fixed as the batch grows: each count is a + b n, which a power of n would miss (it put
    # version 1's DRAM reads below the input's own bytes). Counted at 8 and 16 images, carried to 32, against 32
    # counted.
    conv2d = family("conv2d")
    small, large, _ = catalogue.count(conv2d)[1]
    rng = np.random.default_rng(0)
    with profile() as prof:
        conv2d.run(conv2d.make(32, rng), 1)
    (carried,) = catalogue.at_size(conv2d, small, large, 32)
    (counted,) = prof.kernels
    assert carried.metrics == counted.metrics and carried.grid == counted.grid
    (big,) = catalogue.at_size(conv2d, small, large)
    read, _ = big.dram_bytes()
    assert read >= conv2d.target * 8 * 28 * 28 * 4
