"""The ``gpuedu`` command: ``gpuedu doctor``, ``gpuedu course``, ``gpuedu lessons``, ``gpuedu classroom``,
``gpuedu grade``, ``gpuedu backend``, ``gpuedu bench``,
``gpuedu gpu-check``, ``gpuedu profile``."""
import argparse
import sys


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:   # gpuedu.bench parses its own options
        from .. import bench
        return bench.main(argv[1:])
    from .._version import __version__
    parser = argparse.ArgumentParser(prog="gpuedu", description="GPU programming for deep learning, from first principles.")
    parser.add_argument("--version", action="version", version=f"gpuedu {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("doctor", help="report what this machine has for the course and what to do about what it lacks")
    from . import course
    course.build_parser(commands.add_parser("course", help="run every lesson headless and report on each"))
    course.build_lessons_parser(commands.add_parser("lessons", help="copy the lesson notebooks into a folder, "
                                                                    "ready to open in Jupyter"))
    from . import classroom
    classroom.build_parser(commands.add_parser("classroom", help="write student notebooks (exercise outputs cleared) "
                                                                 "and solution notebooks for a workshop"))
    classroom.build_grade_parser(commands.add_parser("grade", help="run submitted notebooks and write each "
                                                                   "exercise's verdict per student to a CSV"))
    commands.add_parser("backend", help="print the backend the lessons will get, and why")
    commands.add_parser("bench", help="measure gpuedu's kernels against the memory roof, cuBLAS, PyTorch and NumPy "
                                      "(gpuedu bench --help)")
    from . import gpu_check
    gpu_check.build_parser(commands.add_parser(
        "gpu-check", help="on a GPU machine: doctor, the gpu tests, the test suite, every lesson and the bench, "
                          "recorded in benchmarks/results/<device>-checks.json"))
    from ..profiler import command as profile_command
    profile_command.build_parser(commands.add_parser(
        "profile", help="run a script and print each kernel launch's counters, like ncu (on the emulator: "
                        "counted; with --gpu NAME also a modelled time)"))
    args = parser.parse_args(argv)

    if args.command == "doctor":
        from . import doctor
        return doctor.main()
    if args.command == "course":
        return course.run(args)
    if args.command == "lessons":
        return course.lessons_command(args)
    if args.command == "classroom":
        return classroom.classroom_command(args)
    if args.command == "grade":
        return classroom.grade_command(args)
    if args.command == "profile":
        return profile_command.run(args)
    if args.command == "gpu-check":
        return gpu_check.run(args, argv[1:])
    if args.command == "backend":
        from .. import backend
        try:
            chosen = backend.setup()
        except (backend.BackendError, ValueError) as e:
            print(f"gpuedu: {e}", file=sys.stderr)
            return 1
        return 0 if chosen.usable else 1
    parser.print_help()
    return 2
