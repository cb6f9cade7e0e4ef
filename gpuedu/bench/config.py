"""Problem sizes, repeats and warm-up for each mode (GPU or CPU emulator; full or --quick).

On a GPU the bandwidth working sets are at least four times the L2 (H200: 50 MB L2 -> 256 MiB),
so they measure device memory, and the GEMMs are at the sizes the targets are stated at (4096^3; the Hopper
FP16 rungs and cuBLAS also at 8192^3, fp16_gemm_large: a few GEMMs of milliseconds each).
On the CPU emulator every launch runs the kernel's threads on one host core, so sizes are chosen
to keep the whole run in minutes (full) or seconds (--quick); its figures are read as ratios to
NumPy measured in the same run.
"""

MIB = 1 << 20


def sizes_for(on_gpu, quick, l2_bytes):
    """A dict of sizes and counts for this mode; ``l2_bytes`` is the device's L2 (0 if unknown)."""
    if on_gpu:
        roof_bytes = max(256 * MIB, -(-4 * int(l2_bytes or 0) // MIB) * MIB)
        if quick:
            # Working sets stay above 4x L2 even here (a GPU streams them in microseconds).
            return dict(copy_bytes=roof_bytes, elementwise_n=roof_bytes // 4, reduce_n=roof_bytes // 4, matmul=1024,
                        fp16_gemm=1024, mlp_widths=[784, 1024, 1024, 10], mlp_batches=[128],
                        amp_widths=[784, 1024, 1024, 10], amp_batch=256, launches=500,
                        repeats=10, warmup=2, l2_bytes=l2_bytes)
        return dict(copy_bytes=roof_bytes, elementwise_n=roof_bytes // 4, reduce_n=roof_bytes // 4,
                    matmul=4096, fp16_gemm=4096, fp16_gemm_large=8192,
                    mlp_widths=[784, 1024, 1024, 10], mlp_batches=[128, 4096],
                    amp_widths=[784, 4096, 4096, 10], amp_batch=512, launches=2000,
                    repeats=20, warmup=3, l2_bytes=l2_bytes)
    if quick:
        return dict(copy_bytes=4 * MIB, elementwise_n=1 << 18, reduce_n=1 << 18, matmul=64,
                    fp16_gemm=64, mlp_widths=[784, 64, 64, 10], mlp_batches=[32],
                    amp_widths=[784, 64, 64, 10], amp_batch=32, launches=200,
                    repeats=5, warmup=1, l2_bytes=l2_bytes)
    # The reduction ladder's barriers and the WMMA GEMM's per-thread tiles are the emulator's slowest
    # kernels, hence their smaller sizes; the MLP is the GPU target's (about a second a step here).
    return dict(copy_bytes=64 * MIB, elementwise_n=1 << 22, reduce_n=1 << 20, matmul=256,
                fp16_gemm=128, mlp_widths=[784, 1024, 1024, 10], mlp_batches=[128],
                amp_widths=[784, 256, 256, 10], amp_batch=64, launches=1000,
                repeats=10, warmup=1, l2_bytes=l2_bytes)
