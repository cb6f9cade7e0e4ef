"""The GPU table: published figures where NVIDIA publishes them, a stated source for every field."""
import dataclasses

import pytest

from gpuedu.profiler.gpus import GPU, GPUS, get_gpu


def test_every_field_of_every_gpu_names_its_source():
    fields = {f.name for f in dataclasses.fields(GPU)} - {"sources", "aliases"}
    for gpu in GPUS:
        assert set(gpu.sources) == fields, gpu.name
        assert all(text.strip() for text in gpu.sources.values()), gpu.name


def test_figures_without_a_published_source_say_they_are_assumptions():
    for name in ("T4", "H100 SXM", "H200 SXM", "RTX A6000"):
        assert get_gpu(name).sources["l2_bytes_per_clock"].startswith("assumption: ")
    assert "whitepaper" in get_gpu("A100").sources["l2_bytes_per_clock"]


@pytest.mark.parametrize("name, sms, clock, dram, fp32", [
    ("T4", 40, 1590, 320e9, 8.1e12),
    ("A100 SXM4 80GB", 108, 1410, 2039e9, 19.5e12),
    ("H100 SXM", 132, 1980, 3.35e12, 67e12),
    ("H200 SXM", 132, 1980, 4.8e12, 67e12),
    ("RTX A6000", 84, 1800, 768e9, 38.7e12),
])
def test_published_figures(name, sms, clock, dram, fp32):
    gpu = get_gpu(name)
    assert (gpu.sms, gpu.boost_clock_mhz, gpu.dram_bytes_per_s, gpu.fp32_flops) == (sms, clock, dram, fp32)


def test_fp32_peak_is_lanes_times_two_times_clock():
    # 64 FP32 lanes per SM on Turing and GA100, 128 on GA102 and Hopper; an FMA is two FLOPs.
    lanes = {"sm_75": 64, "sm_80": 64, "sm_86": 128, "sm_90": 128}
    for gpu in GPUS:
        assert gpu.sms * lanes[gpu.arch] * 2 * gpu.clock_hz == pytest.approx(gpu.fp32_flops, rel=0.01)


def test_shared_memory_and_thread_limits_per_architecture():
    h100, a100, t4, a6000 = (get_gpu(n) for n in ("H100", "A100", "T4", "A6000"))
    assert (h100.shared_per_sm, h100.shared_per_block_optin) == (228 * 1024, 227 * 1024)
    assert (a100.shared_per_sm, a100.shared_per_block_optin) == (164 * 1024, 163 * 1024)
    assert (t4.shared_per_sm, t4.shared_reserved_per_block, t4.max_threads_per_sm) == (64 * 1024, 0, 1024)
    assert (a6000.shared_per_sm, a6000.max_warps_per_sm) == (100 * 1024, 48)
    assert all(gpu.registers_per_sm == 65536 and gpu.warp_size == 32 for gpu in GPUS)


def test_h200_is_h100_with_faster_larger_memory_and_the_chip_s_whole_l2():
    h100, h200 = get_gpu("H100"), get_gpu("H200")
    assert dataclasses.replace(h200, name=h100.name, dram_bytes_per_s=h100.dram_bytes_per_s,
                               memory_bytes=h100.memory_bytes, l2_bytes=h100.l2_bytes, aliases=h100.aliases) == h100
    assert h200.memory_bytes == 141 * 10**9
    # 62,914,560 bytes as the H200 reported it (2026-11-26); the H100 SXM5 enables 50 MB of the chip's 60
    assert (h200.l2_bytes, h100.l2_bytes) == (60 * 2**20, 50 * 2**20)
    assert "62,914,560" in h200.sources["l2_bytes"]


def test_hopper_s_mma_sync_wait_is_the_h200_s_tile_sweep_and_other_gpus_have_none():
    # Two measured shapes that differ only in the warps' tiles (one block an SM, 8 waves at 4096^3): 8 more
    # mma_syncs a warp per 16-wide K step, 256 steps, at the model's 1,980 MHz.
    import json
    import os
    record = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "results",
                          "nvidia-h200-probe-tiles.json")
    with open(record) as f:
        rows = {r["kernel"]: r for r in json.load(f)["result"]["rows"]}
    h200 = get_gpu("H200")
    extra = {layout: (rows[f"tile_128x128x64_s4_w2x2_{layout}"]["seconds"]
                      - rows[f"tile_128x128x64_s4_w2x4_{layout}"]["seconds"]) * h200.clock_hz / (8 * 256 * 8)
             for layout in ("nn", "tn", "nt")}
    assert round(extra["nn"]) == h200.mma_sync_cycles == get_gpu("H100").mma_sync_cycles == 59
    assert 57 < min(extra.values()) and max(extra.values()) < 63
    # a figure fitted to two measured times, not itself a measurement: its source says so
    assert h200.sources["mma_sync_cycles"].startswith("fitted to two times measured on this GPU: 59 clocks")
    assert get_gpu("H100").sources["mma_sync_cycles"].startswith("assumption: as fitted on an H200")
    for name in ("T4", "A100", "A6000"):
        assert get_gpu(name).mma_sync_cycles is None
        assert get_gpu(name).sources["mma_sync_cycles"].startswith("not known")


def test_an_hmma_waits_half_a_wmma_mma_sync_as_an_assumption_and_only_where_that_is_known():
    # A WMMA mma_sync of 16 x 16 x 16 is two HMMA.16816 on sm_80 and later: no run times an HMMA alone.
    for gpu in GPUS:
        if gpu.mma_sync_cycles is None:
            assert gpu.hmma_cycles is None and gpu.sources["hmma_cycles"].startswith("not known")
        else:
            assert gpu.hmma_cycles == gpu.mma_sync_cycles / 2 == 29.5
            assert gpu.sources["hmma_cycles"].startswith("assumption: 29.5 clocks a warp per HMMA")
            assert "two HMMA.16816" in gpu.sources["hmma_cycles"]


def test_each_gpu_s_l2_is_the_published_size_with_its_source():
    sizes = {gpu.name: gpu.l2_bytes // 2**20 for gpu in GPUS}
    assert sizes == {"T4": 4, "A100 SXM4 80GB": 40, "RTX A6000": 6, "H100 SXM": 50, "H200 SXM": 60}
    for gpu in GPUS:
        assert f"{gpu.l2_bytes // 2**20} MB" in gpu.sources["l2_bytes"]


@pytest.mark.parametrize("alias, name", [
    ("h100", "H100 SXM"), ("H100 SXM", "H100 SXM"), ("h100-sxm5", "H100 SXM"),
    ("a6000", "RTX A6000"), ("RTX A6000", "RTX A6000"), ("a100", "A100 SXM4 80GB"),
    ("t4", "T4"), ("H200", "H200 SXM"),
])
def test_get_gpu_accepts_aliases_in_any_case(alias, name):
    assert get_gpu(alias).name == name


def test_get_gpu_passes_a_gpu_through():
    assert get_gpu(GPUS[0]) is GPUS[0]


def test_unknown_gpu_lists_the_known_ones():
    with pytest.raises(ValueError) as error:
        get_gpu("V100")
    assert "V100" in str(error.value)
    assert all(gpu.name in str(error.value) for gpu in GPUS)


def test_figures_cannot_be_changed_in_place():
    gpu = get_gpu("H100")
    with pytest.raises(dataclasses.FrozenInstanceError):
        gpu.sms = 1
    with pytest.raises(TypeError):
        gpu.sources["sms"] = "made up"
