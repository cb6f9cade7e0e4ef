"""Runs on every rank under mpiexec: import the learner's program and run an exercise's cases.

    mpiexec -n N python -m mpi4py _program_harness.py EXERCISE_ID LEARNER_FILE SEED

Rank 0 prints one JSON line: {"ranks": [rank 0's case results, rank 1's, ...]}.
"""
import importlib.util
import json
import sys
import traceback

from mpi4py import MPI


def main():
    exercise_id, path, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    from gpuedu import exercises
    ex = exercises.get(exercise_id)
    comm = MPI.COMM_WORLD
    spec = importlib.util.spec_from_file_location("learner", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    function = getattr(module, ex.function)
    try:
        results = ex.rank_cases(function, comm, seed)
    except Exception as e:   # the learner's function raised: report it on this rank as a failed case
        frame = traceback.extract_tb(e.__traceback__)[-1]
        where = f" (line {frame.lineno} of your program)" if frame.filename == path else ""
        results = [{"case": "the first case", "ok": False, "kind": "error",
                    "message": f"rank {comm.Get_rank()} raised {type(e).__name__}: {e}{where}",
                    "hint": "every rank must make the same sends and receives in the same order"}]
        # the other ranks may be waiting for this one: stop them all
        print(json.dumps({"ranks": [results]}), flush=True)
        if comm.Get_size() > 1:
            comm.Abort(1)
        return
    everyone = comm.gather(results, root=0)
    if comm.Get_rank() == 0:
        print(json.dumps({"ranks": everyone}), flush=True)


if __name__ == "__main__":
    main()
