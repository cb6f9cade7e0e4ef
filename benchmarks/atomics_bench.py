"""How the emulator's atomics are built on aarch64, measured: libgcc's outline helpers (the compilers' default),
load/store-exclusive loops inline, or LSE instructions inline (gpuedu.emulator.compiler.atomics_path picks).

    python benchmarks/atomics_bench.py [--rounds 3] [--where "..."] [--out FILE]

Each way is a fresh process that builds the kernels with its flags (GPUEDU_CXXFLAGS, each naming -march so that
the emulator's own choice does not decide) and times each launch, best of 5: a contended atomicAdd (2^20 threads
into 16 bins) and an uncontended one (2^20 threads, one address each), on int (a single instruction with LSE)
and on float (a compare-and-swap loop); a barrier reduction that ends in one float atomicAdd a block, and the
same reduction storing each block's sum instead (what the atomics add to it). The ways run alternately,
``--rounds`` times; each keeps its best round. aarch64 only. ``--where`` says what ran it (for example under
qemu-user), and goes into the record.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

WAYS = {
    "outline_helpers": "-march=armv8-a -moutline-atomics",
    "exclusive_loops": "-march=armv8-a -mno-outline-atomics",
    "lse_inline": "-march=armv8-a+lse",
}

KERNELS = r"""
__global__ void contended(const int* x, int* bins, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[x[i] % 16], 1);
}
__global__ void uncontended(const int* x, int* cells, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&cells[i], x[i]);
}
__global__ void contended_float(const float* x, float* bins, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[i % 16], x[i]);
}
__global__ void uncontended_float(const float* x, float* cells, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&cells[i], x[i]);
}
__device__ void block_sum(const float* x, float* out, bool atomic) {
  __shared__ float s[256];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 256 + t];
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (t < k) s[t] += s[t + k];
    __syncthreads();
  }
  if (t == 0) {
    if (atomic) atomicAdd(out, s[0]);
    else out[1 + blockIdx.x] = s[0];
  }
}
__global__ void reduce(const float* x, float* out) { block_sum(x, out, true); }
__global__ void reduce_store(const float* x, float* out) { block_sum(x, out, false); }
"""
N = 1 << 20


def child():
    """One way's timings, in ms (its flags come in GPUEDU_CXXFLAGS), as one JSON line."""
    import numpy as np
    import gpuedu
    gpuedu.setup("cpu", verbose=False)
    from gpuedu.emulator import driver as drv
    from gpuedu.emulator.compiler import SourceModule
    mod = SourceModule(KERNELS)
    x = drv.to_device(np.arange(N, dtype=np.int32))
    cells = drv.mem_alloc(4 * N)
    ones = drv.to_device(np.ones(N, np.float32))
    out = drv.mem_alloc(4 * (1 + N // 256))
    drv.memset_d32(out, 0, 1)
    block, grid = (256, 1, 1), (N // 256, 1)
    launches = {
        "contended_atomicadd_ms": lambda: mod.get_function("contended")(x, cells, np.int32(N), block=block, grid=grid),
        "uncontended_atomicadd_ms": lambda: mod.get_function("uncontended")(x, cells, np.int32(N), block=block,
                                                                             grid=grid),
        "contended_float_atomicadd_ms": lambda: mod.get_function("contended_float")(ones, cells, np.int32(N),
                                                                                     block=block, grid=grid),
        "uncontended_float_atomicadd_ms": lambda: mod.get_function("uncontended_float")(ones, cells, np.int32(N),
                                                                                         block=block, grid=grid),
        "barrier_reduction_ms": lambda: mod.get_function("reduce")(ones, out, block=block, grid=grid),
        "barrier_reduction_no_atomic_ms": lambda: mod.get_function("reduce_store")(ones, out, block=block, grid=grid),
    }
    best = {}
    for name, launch in launches.items():
        launch()                                    # the first launch maps the module's pages
        times = []
        for _ in range(5):
            start = time.perf_counter()
            launch()
            drv.Context.synchronize()
            times.append(time.perf_counter() - start)
        best[name] = min(times) * 1e3
    total = np.zeros(1, np.float32)
    drv.memcpy_dtoh(total, out)                     # 6 reductions of N ones: the kernels did their work
    if total[0] != 6 * N:
        raise SystemExit(f"the reduction summed {total[0]}, not {6 * N}: the atomics are wrong")
    print(json.dumps(best))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--where", default="", help="what ran it, for the record (e.g. qemu-user on x86-64)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                      "cpu-emulator-atomics-arm64.json"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child()
    if platform.machine() != "aarch64":
        parser.error(f"this compares aarch64's ways of building atomics; this machine is {platform.machine()}")
    rounds = {way: [] for way in WAYS}
    for _ in range(args.rounds):
        for way, flags in WAYS.items():
            env = dict(os.environ, GPUEDU_CXXFLAGS=flags)
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"], env=env,
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{way} ({flags}) failed:\n{done.stdout}{done.stderr}")
            rounds[way].append(json.loads(done.stdout.strip().splitlines()[-1]))
    best = {way: {k: min(r[k] for r in runs) for k in runs[0]} for way, runs in rounds.items()}
    record = {"when": time.strftime("%Y-%m-%d"), "machine": platform.machine(), "where": args.where,
              "python": platform.python_version(),
              "what": f"best of 5 launches, best of {args.rounds} alternating rounds, each way in a fresh process "
                      f"(benchmarks/atomics_bench.py); milliseconds a launch, lower is better",
              "flags": WAYS, "best_ms": best, "rounds": rounds}
    with open(args.out, "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    names = list(best[next(iter(best))])
    print(f"{'way':16s} " + " ".join(f"{n:>26s}" for n in names))
    for way, row in best.items():
        print(f"{way:16s} " + " ".join(f"{row[n]:26.2f}" for n in names))
    print(f"written to {args.out}")


if __name__ == "__main__":
    sys.exit(main())
