"""Lessons pose exercises but never show their solutions, and their stub cells match the registry."""
import glob
import json
import os
import re

import pytest

from gpuedu import exercises

LESSONS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "lessons")


def _squash(text):
    return re.sub(r"\s+", "", text)


def _notebook_text(lesson):
    paths = glob.glob(os.path.join(LESSONS, f"{lesson}_*.ipynb"))
    if not paths:
        return None
    with open(paths[0], encoding="utf-8") as f:
        nb = json.load(f)
    return "\n".join("".join(cell["source"]) for cell in nb["cells"])


def _exercise_ids():
    exercises._load_all()
    return sorted(exercises._registry)


@pytest.mark.parametrize("exercise_id", _exercise_ids())
def test_no_lesson_shows_a_solution(exercise_id):
    ex = exercises.get(exercise_id)
    body = _squash(ex.solution)
    for path in glob.glob(os.path.join(LESSONS, "*.ipynb")):
        with open(path, encoding="utf-8") as f:
            nb = json.load(f)
        for cell in nb["cells"]:
            assert body not in _squash("".join(cell["source"])), \
                f"{os.path.basename(path)} shows the solution of {exercise_id}"


@pytest.mark.parametrize("exercise_id", [i for i in _exercise_ids() if i[:2] in ("01", "02")])
def test_lesson_stub_cells_are_the_registered_stubs(exercise_id):
    text = _notebook_text(exercise_id[:2])
    assert text is not None, f"no notebook for lesson {exercise_id[:2]}"
    ex = exercises.get(exercise_id)
    assert _squash(ex.stub) in _squash(text), f"the lesson's stub for {exercise_id} differs from the registry's"
    assert f'exercises.check("{exercise_id}"' in text
