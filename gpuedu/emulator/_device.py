"""The emulated device's identity and limits (CUDA-like; see the device attributes)."""

NAME = "gpuedu CPU emulator"
COMPUTE_CAPABILITY = (8, 0)   # the feature level the prelude implements (warp intrinsics, fp16, wmma)
WARP_SIZE = 32
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIM = (1024, 1024, 64)
MAX_GRID_DIM = (2**31 - 1, 65535, 65535)
MAX_SHARED_MEMORY_PER_BLOCK = 48 * 1024          # static + dynamic without opt-in
MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 96 * 1024    # dynamic, after raising the function attribute
TOTAL_CONSTANT_MEMORY = 64 * 1024
MAX_REGISTERS_PER_BLOCK = 65536
MULTIPROCESSOR_COUNT = 1   # blocks run one at a time
CLOCK_RATE_KHZ = 1_000_000
L2_CACHE_SIZE = 0
