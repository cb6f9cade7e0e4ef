"""The Hopper GEMMs (``ops.fp16.matmul`` versions 11-13, wgmma_gemm.cu: TMA, wgmma, mbarriers, sm_90a) against
float64 sums of their float16 inputs: every rung at sizes that are and are not multiples of its tiles (TMA's zero
fill at the edges of A and B, C's edges guarded or clipped by the TMA store), K of more slices than the ring has
stages (its parities wrap), alpha, FP16 and FP32 outputs; a rerun gives the same bits; small integers give the
exact product; the counted wgmma instructions are what the tiles say; the refusals (a transpose, rows a tensor map
cannot describe, a GPU that is not sm_90) say what to use instead."""
import numpy as np
import pytest

import gpuedu
from gpuedu.ops import fp16
from gpuedu.profiler import metrics
from gemm_helpers import assert_close_to_exact

backend = gpuedu.setup(verbose=False)

HOPPER_VERSIONS = sorted(fp16.HOPPER_GEMMS)      # 11, 12, 13
SHAPES = [(64, 64, 64), (130, 200, 72), (256, 128, 192), (8, 8, 8)]


def operands(m, n, k, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16))


def test_the_ladder_lists_the_hopper_rungs_as_tensor_core_versions():
    assert HOPPER_VERSIONS == [11, 12, 13]
    assert set(HOPPER_VERSIONS) <= set(fp16.TENSOR_VERSIONS) and set(HOPPER_VERSIONS) <= set(fp16.GEMM_VERSIONS)
    assert set(HOPPER_VERSIONS) <= set(fp16.PLAIN_LAYOUT_VERSIONS)
    assert "TMA" in fp16.GEMM_VERSIONS[11] and "producer" in fp16.GEMM_VERSIONS[12]
    assert "persistent" in fp16.GEMM_VERSIONS[13] and "TMA store" in fp16.GEMM_VERSIONS[13]
    assert fp16.HOPPER_GEMMS[11] == ((128, 128), 128) and fp16.HOPPER_GEMMS[12] == ((128, 256), 384)
    # what an H200 holds (227 KB a block): 4 stages of each, version 13 with its staging tiles just under it
    assert fp16.hopper_shared_bytes(13, 4) <= 232448 < fp16.hopper_shared_bytes(13, 4) + 4096


@pytest.mark.parametrize("version", HOPPER_VERSIONS)
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_every_rung_matches_the_exact_sums(m, n, k, version):
    a, b = operands(m, n, k, seed=m + n + k)
    assert_close_to_exact(fp16.matmul(a, b, version=version).get(), a, b, 1.0, np.float16)


@pytest.mark.parametrize("version", HOPPER_VERSIONS)
@pytest.mark.parametrize("out_dtype, alpha", [(np.float32, 1.0), (np.float32, -0.5), (np.float16, 0.25)])
def test_every_rung_scales_by_alpha_into_either_output(out_dtype, alpha, version):
    a, b = operands(70, 136, 320, seed=3)      # K = 320: 5 slices, more than any ring's stages: parities wrap
    got = fp16.matmul(a, b, alpha=alpha, out_dtype=out_dtype, version=version).get()
    assert_close_to_exact(got, a, b, alpha, out_dtype)


@pytest.mark.parametrize("version", HOPPER_VERSIONS)
def test_a_rerun_gives_the_same_bits(version):
    a, b = operands(130, 200, 72, seed=5)
    first = fp16.matmul(a, b, out_dtype=np.float32, version=version).get()
    assert np.array_equal(first.view(np.uint32), fp16.matmul(a, b, out_dtype=np.float32, version=version).get()
                          .view(np.uint32))


@pytest.mark.parametrize("version", HOPPER_VERSIONS)
def test_small_integers_give_the_exact_product(version):
    # every product and partial sum is an integer below 2^24: exact in FP32 whatever the order of the sums, so a
    # wrong swizzle, descriptor or fragment layout shows as a wrong number, not as rounding
    rng = np.random.default_rng(9)
    a = rng.integers(-3, 4, (136, 96)).astype(np.float16)
    b = rng.integers(-3, 4, (96, 264)).astype(np.float16)
    got = fp16.matmul(a, b, out_dtype=np.float32, version=version).get()
    assert np.array_equal(got, a.astype(np.float32) @ b.astype(np.float32))


def _tiles(m, n, k, version):
    (bm, bn), _ = fp16.HOPPER_GEMMS[version]
    return -(-m // bm), -(-n // bn), -(-k // 64)


@pytest.mark.skipif(not backend.is_emulator, reason="the counts are the emulator's counters")
@pytest.mark.parametrize("version", HOPPER_VERSIONS)
@pytest.mark.parametrize("m, n, k", [(256, 256, 192), (130, 200, 72)])
def test_the_counted_wgmma_are_what_the_tiles_say(m, n, k, version):
    # per block and slice of 64 k: 2 x 4 wgmma (two 64-row halves of the 128-row tile, four k16 steps), of
    # m64n128k16 (11) or m64n256k16 (12, 13): 2 Mp Np Kp / (2 x 64 x N_tile x 16) with M, N, K padded to the
    # tiles; Nsight Compute's GMMA pipe counts each as an HGMMA of each of the warpgroup's 4 warps
    a, b = operands(m, n, k, seed=13)
    with gpuedu.profile() as prof:
        fp16.matmul(a, b, version=version).get()
    (rec,) = [r for r in prof.kernels if r.name == f"wgmma_gemm_kernel{version}"]
    tm, tn, tk = _tiles(m, n, k, version)
    wgmma = tm * tn * tk * 8
    (bm, bn), _ = fp16.HOPPER_GEMMS[version]
    assert wgmma == 2 * (tm * bm) * (tn * bn) * (tk * 64) // (2 * 64 * bn * 16)
    assert rec.metrics[metrics.TENSOR_GMMA] == 4 * wgmma
    assert rec.metrics[metrics.TENSOR_HMMA] == 0


@pytest.mark.parametrize("version", HOPPER_VERSIONS)
@pytest.mark.parametrize("transpose_a, transpose_b", [(True, False), (False, True), (True, True)])
def test_a_transpose_is_refused_naming_version_10(transpose_a, transpose_b, version):
    a, b = np.zeros((8, 8), np.float16), np.zeros((8, 8), np.float16)
    with pytest.raises(ValueError, match=rf"version {version} multiplies the plain layout only .*use version 10"):
        fp16.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b, version=version)


@pytest.mark.parametrize("version", HOPPER_VERSIONS)
@pytest.mark.parametrize("m, n, k, named", [(16, 16, 37, r"a is 16x37 float16: its rows are 74 bytes apart"),
                                            (16, 20, 16, r"b is 16x20 float16: its rows are 40 bytes apart")])
def test_rows_a_tensor_map_cannot_describe_are_refused_with_the_fix(m, n, k, named, version):
    a, b = operands(m, n, k, seed=1)
    with pytest.raises(ValueError, match=rf"version {version} copies tiles with TMA, and {named}, and a TMA tensor "
                                         r"map needs a multiple of 16 bytes .*Pad K and N to multiples of 8 .*"
                                         r"or use version 10"):
        fp16.matmul(a, b, version=version)


@pytest.mark.parametrize("version", HOPPER_VERSIONS)
def test_empty_products(version):
    a, b = operands(8, 16, 0, seed=1)
    assert np.array_equal(fp16.matmul(a, b, version=version).get(), np.zeros((8, 16), np.float16))
    assert fp16.matmul(np.zeros((0, 8), np.float16), np.zeros((8, 16), np.float16), version=version).shape == (0, 16)


def test_a_gpu_that_is_not_sm90_is_refused_with_what_to_use(monkeypatch):
    # sm_90a code runs on compute capability 9.0 alone: an A100 (and a Blackwell) is told which rung it runs
    if backend.is_emulator:
        monkeypatch.setattr(fp16.backend, "active", lambda: _Gpu())
    for cc, fallback in (((8, 0), 10), ((10, 0), 10), ((7, 5), 4)):
        monkeypatch.setitem(fp16._capability, fp16.backend.active().name, cc)
        with pytest.raises(ValueError, match=rf"version 12 runs Hopper's TMA and wgmma instructions, built for "
                                             rf"sm_90a, .* this one is sm_{cc[0]}{cc[1]}: use version {fallback}"):
            fp16._require_sm90a(12)


class _Gpu:
    """A stand-in for a real PyCUDA backend: only its name is read before the capability is."""
    name = "cuda"


@pytest.mark.parametrize("version", HOPPER_VERSIONS)
def test_the_stages_fit_the_device(version):
    limit = int(backend.driver.Context.get_device().get_attribute(
        backend.driver.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN))
    stages = fp16.hopper_stages(version)
    assert 1 <= stages <= fp16.HOPPER_MAX_STAGES[version]
    assert fp16.hopper_shared_bytes(version, stages) <= limit
    assert stages == fp16.HOPPER_MAX_STAGES[version] or fp16.hopper_shared_bytes(version, stages + 1) > limit
