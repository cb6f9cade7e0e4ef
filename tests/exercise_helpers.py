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


def gpu_stand_in(monkeypatch):
    """Make the active backend read as a GPU ("cuda") that runs on the emulator's driver and compiler: a check then
    takes the GPU's path (values on the backend, the method judged on a separate emulator build)."""
    import types
    from gpuedu import backend
    active = backend.active()
    monkeypatch.setattr(backend, "active", lambda: types.SimpleNamespace(name="cuda", driver=active.driver,
                                                                         compiler=active.compiler))
