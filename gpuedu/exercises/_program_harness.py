"""Runs on every rank under mpiexec: import the learner's program and run an exercise's cases.

    mpiexec -n N python -m mpi4py _program_harness.py EXERCISE_ID LEARNER_FILE SEED TOKEN_FILE

Rank 0 prints one line, the token read from TOKEN_FILE and then JSON: {"ranks": [rank 0's case results, rank
1's, ...]}.  Before the learner's program is imported, every rank reads the token (rank 0 then deletes the file)
and keeps standard output for itself, pointing descriptor 1 at standard error: what the program prints cannot
pass for the harness's line.
"""
import os
import importlib.util
import json
import sys
import traceback

from mpi4py import MPI


def main():
    exercise_id, path, seed, token_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    from gpuedu import exercises
    ex = exercises.get(exercise_id)
    comm = MPI.COMM_WORLD
    with open(token_file) as f:
        token = f.read().strip()
    comm.Barrier()
    if comm.Get_rank() == 0:
        os.unlink(token_file)
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
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
        print(token, json.dumps({"ranks": [results]}), file=out, flush=True)
        if comm.Get_size() > 1:
            comm.Abort(1)
        return
    everyone = comm.gather(results, root=0)
    if comm.Get_rank() == 0:
        print(token, json.dumps({"ranks": everyone}), file=out, flush=True)


if __name__ == "__main__":
    main()
