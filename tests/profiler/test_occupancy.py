"""Theoretical occupancy, against cases worked out by hand with the occupancy calculator's rules."""
import numpy as np
import pytest

from gpuedu.profiler.gpus import get_gpu
from gpuedu.profiler.occupancy import theoretical_occupancy


# (gpu, threads, registers, shared) -> (blocks per SM, active warps, percent, limiter), by hand:
CASES = [
    # H100: 8 warps a block; 32 regs -> 1024 a warp, 16 warps a quarter, 64 an SM: 8 blocks either
    # way, so warps and registers tie at 100% (the tie is reported as warps).
    (("H100", 256, 32, 0), (8, 64, 100.0, "warps")),
    # 128 regs -> 4096 a warp, 4 warps a quarter, 16 an SM: 2 blocks of 8 warps.
    (("H100", 256, 128, 0), (2, 16, 25.0, "registers")),
    (("H100", 256, 64, 0), (4, 32, 50.0, "registers")),
    # 33 regs -> 1056, rounded up to 1280 a warp: 12 warps a quarter, 48 an SM, 6 blocks (75%);
    # without the rounding it would be 15 a quarter and 7 blocks (87.5%).
    (("H100", 256, 33, 0), (6, 48, 75.0, "registers")),
    # One-warp blocks: the 32-blocks-per-SM cap bites first.
    (("H100", 32, 16, 0), (32, 32, 50.0, "blocks")),
    # 48 KB + 1 KB reserved = 50,176 B a block; 233,472 // 50,176 = 4 blocks.
    (("H100", 256, 32, 48 * 1024), (4, 32, 50.0, "shared memory")),
    # The largest block allowed: 227 KB + 1 KB fills the SM's 228 KB.
    (("H100", 256, 32, 227 * 1024), (1, 8, 12.5, "shared memory")),
    # A100: 64 KB + 1 KB = 66,560 B; 167,936 // 66,560 = 2 blocks.
    (("A100", 256, 32, 64 * 1024), (2, 16, 25.0, "shared memory")),
    # T4 reserves nothing: 65,536 // 20,480 = 3 blocks of 8 warps of 32.
    (("T4", 256, 0, 20 * 1024), (3, 24, 75.0, "shared memory")),
    # T4 holds 32 warps: one 1024-thread block fills it.
    (("T4", 1024, 32, 0), (1, 32, 100.0, "warps")),
    # RTX A6000 holds 48 warps: a 32-warp block leaves 16 slots no second block fits in.
    (("A6000", 1024, 32, 0), (1, 32, 200 / 3, "warps")),
    (("A6000", 512, 32, 0), (3, 48, 100.0, "warps")),
    # 48 threads still take two whole warps.
    (("H100", 48, 0, 0), (32, 64, 100.0, "warps")),
    # Shared memory in CUDA's units (cudaOccSMemAllocationGranularity): 128 bytes on 8.x and 9.x, 256 on 7.x.
    # 20,000 + 1,024 = 21,024 B, 21,120 in 128-byte units: 233,472 // 21,120 = 11 blocks (256-byte units: 21,248,
    # 10 blocks); 24 registers (768 a warp, 21 warps a quarter) and 2-warp blocks allow 42 and 32.
    (("H100", 64, 24, 20000), (11, 22, 34.375, "shared memory")),
    (("H200", 64, 24, 20000), (11, 22, 34.375, "shared memory")),
    # A100: 14,100 + 1,024 = 15,124 B, 15,232 in 128-byte units: 167,936 // 15,232 = 11 (256-byte units: 10).
    (("A100", 64, 0, 14100), (11, 22, 34.375, "shared memory")),
    # T4 (7.5) keeps 256-byte units: 9,300 B take 9,472, 65,536 // 9,472 = 6 (128-byte units would give 7).
    (("T4", 32, 0, 9300), (6, 6, 18.75, "shared memory")),
]


@pytest.mark.parametrize("args, expected", CASES, ids=[f"{a[0]}-{a[1]}t-{a[2]}r-{a[3]}B" for a, _ in CASES])
def test_hand_worked_cases(args, expected):
    occ = theoretical_occupancy(*args)
    assert (occ.blocks_per_sm, occ.active_warps_per_sm, occ.limiter) == (expected[0], expected[1], expected[3])
    assert occ.percent == pytest.approx(expected[2])
    assert occ.max_warps_per_sm == get_gpu(args[0]).max_warps_per_sm


def test_limits_show_what_each_resource_allows():
    occ = theoretical_occupancy("H100", 256, 32, 0)
    assert occ.limits == {"warps": 8, "blocks": 32, "registers": 8, "shared memory": 228}


def test_accepts_a_gpu_object_and_numpy_integers():
    occ = theoretical_occupancy(get_gpu("H100"), np.int64(256), np.int32(128), np.int64(0))
    assert (occ.gpu, occ.percent) == ("H100 SXM", 25.0)


def test_str_says_how_many_warps_and_why():
    text = str(theoretical_occupancy("H100", 256, 128, 0))
    assert text == ("H100 SXM: 25% theoretical occupancy (16 of 64 warps per SM: 2 blocks of "
                    "256 threads), limited by registers")


@pytest.mark.parametrize("args, words", [
    (("H100", 0, 32, 0), "at least 1"),
    (("H100", 1025, 32, 0), "1024 a block may have"),
    (("H100", 256, 256, 0), "255"),
    (("H100", 256, -1, 0), "negative"),
    (("H100", 256, 32, 227 * 1024 + 1), "cudaFuncAttributeMaxDynamicSharedMemorySize"),
    (("T4", 256, 32, 64 * 1024 + 1), "65,536"),
    # 1024 threads x 65 registers: 2304 a warp x 32 warps > 65,536.
    (("H100", 1024, 65, 0), "cannot launch"),
    # 25 warps x 2560: fits the file as a whole (64,000) but a quarter holds only 6 such warps.
    (("H100", 800, 80, 0), "__launch_bounds__"),
])
def test_bad_input_says_what_is_wrong_and_what_to_do(args, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        theoretical_occupancy(*args)


def test_non_integer_counts_are_a_type_error():
    with pytest.raises(TypeError, match="threads_per_block"):
        theoretical_occupancy("H100", 256.0, 32, 0)


def test_the_allocation_units_are_cudas_per_compute_capability():
    # cuda_occupancy.h: shared memory in 256-byte units on 7.x and 128 on 8.x and 9.x; registers in 256 a warp on all
    for name, unit in (("T4", 256), ("A100", 128), ("A6000", 128), ("H100", 128), ("H200", 128)):
        gpu = get_gpu(name)
        assert gpu.shared_allocation_unit == unit, name
        assert gpu.register_allocation_unit == 256 and gpu.register_allocation_granularity == "warp", name
        assert "cudaOccSMemAllocationGranularity" in gpu.sources["shared_allocation_unit"]
