"""What the exercise tests share: run a check quietly or with its printed report, and mutate a solution."""
from gpuedu import exercises


def check_quietly(exercise_id, source):
    """The CheckResult of ``source``, printing nothing."""
    return exercises.check(exercise_id, source, verbose=False)


def check_printed(exercise_id, source, capsys):
    """``(result, printed report)`` of ``source``, as a learner sees it in the notebook."""
    result = exercises.check(exercise_id, source)
    return result, capsys.readouterr().out


def mutate(source, old, new=""):
    """``source`` with the first ``old`` replaced: a plausible wrong kernel made from the solution."""
    assert old in source, f"the mutation target {old!r} is not in the solution"
    return source.replace(old, new, 1)
