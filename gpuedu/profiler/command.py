"""``gpuedu profile script.py [args]``: run a script and print one row per kernel launch, as ``ncu`` does.

On the emulator the rows hold the counters (exact) and the compiler's figures; ``--gpu NAME``
adds each launch's modelled time on that GPU (a model, labelled so). On a real GPU the
command prints the ``ncu`` command line that measures the same metrics there, then runs the
script with each launch timed by CUDA events.
"""
import argparse
import os
import runpy
import sys
import traceback


def build_parser(parser):
    parser.add_argument("--racecheck", action="store_true",
                        help="also look for races between threads (like compute-sanitizer --tool racecheck)")
    parser.add_argument("--arch", default=None, help="architecture for nvcc's registers and occupancy "
                                                       "(default: the GPU's, sm_90 without --gpu)")
    parser.add_argument("--gpu", default=None, help="the GPU whose L2 and occupancy rules the figures follow, "
                                                    "with each launch's modelled time on it (e.g. H200)")
    parser.add_argument("--csv", default=None, metavar="FILE",
                        help="also write every launch's figures to FILE, one row each, as ncu --csv lays them out "
                             "(benchmarks/ncu_compare.py compares the two)")
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    return parser


def run(args):
    from .. import backend as _backend
    from . import metrics
    from .report import modelled_times
    from .session import device_sm, profile
    script = args.script
    if not os.path.isfile(script):
        print(f"gpuedu profile: no such script: {script}", file=sys.stderr)
        return 2
    backend = _backend.setup()
    if backend.name != "cpu":
        print("gpuedu profile: on this GPU the counters come from Nsight Compute; measure them with:\n  "
              + metrics.ncu_command(" ".join([script] + list(args.args)), sm=device_sm()), flush=True)
    if args.csv and not os.path.isdir(os.path.dirname(os.path.abspath(args.csv))):
        print(f"gpuedu profile: --csv {args.csv}: no such folder; make it first, or name a file in an existing one",
              file=sys.stderr)
        return 2
    if args.gpu:
        from .gpus import get_gpu
        try:
            get_gpu(args.gpu)
        except ValueError as exc:
            print(f"gpuedu profile: {exc}", file=sys.stderr)
            return 2
    saved_argv = sys.argv
    sys.argv = [script] + list(args.args)
    status = 0
    try:
        prof = profile(racecheck=args.racecheck, arch=args.arch, gpu=args.gpu)
    except ValueError as exc:
        sys.argv = saved_argv
        print(f"gpuedu profile: {exc}", file=sys.stderr)
        return 2
    try:
        with prof:
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # the script failed: still report what it launched
        traceback.print_exc()
        status = 1
    finally:
        sys.argv = saved_argv
    print(f"\n==PROF== gpuedu profile: {len(prof.kernels)} kernel launch{'es' if len(prof.kernels) != 1 else ''} "
          f"in {script}")
    print(prof)
    if args.gpu and backend.name == "cpu":
        print(modelled_times(prof, args.gpu))
    if args.csv:
        try:
            rows = prof.write_csv(args.csv)
        except OSError as exc:
            print(f"gpuedu profile: could not write {args.csv}: {exc}", file=sys.stderr)
            return status or 2
        print(f"==PROF== {rows} figures of {len(prof.kernels)} launches written to {args.csv}")
    if args.racecheck and prof.hazards:
        status = status or 1
    return status
