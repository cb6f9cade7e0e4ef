"""Ring all-reduce on real MPI processes: measured times against the alpha-beta model, several sizes and ranks.

    .venv/bin/python benchmarks/allreduce_bench.py [--quick] [--out benchmarks/results/cpu-mpich-allreduce.json]

For each rank count the script starts itself under ``mpiexec`` (MPICH from PyPI).  In that run it first
measures single messages between ranks 0 and 1 (ping-pong, half the round trip) at several sizes and fits
alpha (latency) and beta (bandwidth); then it times ``gpuedu.distributed.ring_allreduce`` and
``MPI.Allreduce`` on float32 buffers of each size (median of the repeats, a barrier before each).  The
model's time for the ring (2(N-1) alpha + 2(N-1)/N n / beta) comes from alpha and beta measured in the same
run, so the comparison is a ratio of two figures from one run: measured / modelled.

All figures are host timings of processes talking through shared memory on one machine; with more ranks
than cores the ranks take turns on the cores, which the model does not know.
"""
import argparse
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from gpuedu.distributed import cost  # noqa: E402

SIZES = (256, 4096, 65536, 1 << 20, 1 << 22)          # float32 elements: 1 KiB to 16 MiB
QUICK_SIZES = (256, 65536)
RANKS = (2, 3, 4)
QUICK_RANKS = (2,)
PING_SIZES = (8, 1 << 10, 1 << 14, 1 << 17, 1 << 20)   # bytes


def repeats_for(nbytes, quick):
    return 5 if quick else (50 if nbytes <= 1 << 16 else 10)


def timed(comm, fn, repeats):
    times = []
    for _ in range(repeats + 1):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    # every rank's time counts: the collective ends when the slowest rank is done
    slowest = comm.allreduce(float(np.median(times[1:])), op=max_op())
    return slowest


def max_op():
    from mpi4py import MPI
    return MPI.MAX


def ping_pong(comm, nbytes, repeats):
    """One-way time of an ``nbytes`` message between ranks 0 and 1 (half the median round trip)."""
    rank = comm.Get_rank()
    buf = np.zeros(max(nbytes, 1), np.uint8)[:nbytes]
    times = []
    for _ in range(repeats + 1):
        comm.Barrier()
        t0 = time.perf_counter()
        if rank == 0:
            comm.Send(buf, dest=1)
            comm.Recv(buf, source=1)
        elif rank == 1:
            comm.Recv(buf, source=0)
            comm.Send(buf, dest=0)
        times.append(time.perf_counter() - t0)
    return comm.bcast(float(np.median(times[1:])) / 2 if rank == 0 else None, root=0)


def rank_program(quick):
    from mpi4py import MPI

    from gpuedu.distributed import ring_allreduce
    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    pings = [ping_pong(comm, n, 20 if quick else 100) for n in PING_SIZES]
    rows = []
    for n in (QUICK_SIZES if quick else SIZES):
        buf = np.random.default_rng(comm.Get_rank()).standard_normal(n).astype(np.float32)
        out = np.empty_like(buf)
        reps = repeats_for(4 * n, quick)
        ring = timed(comm, lambda: ring_allreduce(comm, buf.copy(), check=False), reps)
        library = timed(comm, lambda: comm.Allreduce(buf, out), reps)
        copy = timed(comm, lambda: buf.copy(), reps)    # the ring's own copy of the input, timed alone
        rows.append({"elements": n, "bytes": 4 * n, "ring_seconds": max(ring - copy, 1e-9),
                     "mpi_allreduce_seconds": library})
    if comm.Get_rank() == 0:
        print(json.dumps({"ranks": size, "ping_bytes": list(PING_SIZES), "ping_seconds": pings, "rows": rows}),
              flush=True)


def summarise(run):
    """Add alpha, beta and the model's time, with measured/modelled ratios, to one rank count's run."""
    alpha, beta = cost.fit_alpha_beta(run["ping_bytes"], run["ping_seconds"])
    run["alpha_seconds"], run["beta_bytes_per_second"] = alpha, beta
    for row in run["rows"]:
        model = cost.ring_seconds(row["bytes"], run["ranks"], alpha, beta)
        row["modelled_ring_seconds"] = model
        row["measured_over_modelled"] = row["ring_seconds"] / model
        row["ring_bus_gbps"] = cost.bus_bandwidth(row["bytes"], run["ranks"], row["ring_seconds"]) / 1e9
        row["mpi_over_ring"] = row["mpi_allreduce_seconds"] / row["ring_seconds"]
    return run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two sizes, two ranks, few repeats (a smoke run)")
    parser.add_argument("--out", default=None, help="where to write the JSON results")
    parser.add_argument("--rank-program", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rank_program:
        rank_program(args.quick)
        return 0
    from gpuedu.distributed import mpi
    runs = []
    for ranks in (QUICK_RANKS if args.quick else RANKS):
        flags = ["--rank-program"] + (["--quick"] if args.quick else [])
        done = mpi.run(os.path.abspath(__file__), ranks, flags, timeout=600)
        run = summarise(json.loads(next(l for l in done.stdout.splitlines() if l.startswith("{"))))
        runs.append(run)
        print(f"{ranks} ranks: alpha {run['alpha_seconds'] * 1e6:.1f} us, beta {run['beta_bytes_per_second'] / 1e9:.2f} GB/s "
              f"(measured, ping-pong)")
        for row in run["rows"]:
            print(f"  {row['bytes']:>10,d} B  ring {row['ring_seconds'] * 1e3:9.3f} ms (measured)  "
                  f"model {row['modelled_ring_seconds'] * 1e3:9.3f} ms (modelled)  "
                  f"ratio {row['measured_over_modelled']:5.2f}  MPI.Allreduce {row['mpi_allreduce_seconds'] * 1e3:9.3f} ms")
    result = {"what": "ring all-reduce (gpuedu.distributed) vs the alpha-beta model and MPI.Allreduce, float32",
              "labels": {"ring_seconds": "measured", "mpi_allreduce_seconds": "measured",
                         "alpha_seconds": "measured (fitted to ping-pong)", "modelled_ring_seconds": "modelled"},
              "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                          "python": platform.python_version(), "mpi": mpi.mpi_flavour(mpi.find_mpiexec())},
              "date": time.strftime("%Y-%m-%d", time.gmtime()), "quick": args.quick, "runs": runs}
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
