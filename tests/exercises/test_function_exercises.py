"""Function exercises (gpuedu/exercises/_function.py, _function_child.py): the learner's function runs in a process
of its own, where every way to reach gpuedu's answer for the exercise (its reference, the profiler's calculator) is
refused with a message that says why; the value must be of the type the text promises; and the report never
claims more cases than were run."""
import os
import textwrap

import numpy as np
import pytest

import gpuedu
from gpuedu import exercises
from gpuedu.exercises import _function, _function_child

BYTES = "14.stored_bytes"
OCCUPANCY = "13.resident_blocks"
LESSON14 = os.path.join(os.path.dirname(os.path.abspath(gpuedu.__file__)), "exercises", "lesson14.py")
ARGS = "version, batch, seq, heads, head_dim"
KWARGS = "version=version, batch=batch, seq=seq, heads=heads, head_dim=head_dim"


def answer(body, header=""):
    """A stored_bytes whose body tries to reach the reference (``header``: module-level code before it)."""
    return textwrap.dedent(header) + f"def stored_bytes({ARGS}):\n" + textwrap.indent(textwrap.dedent(body), "    ")


# What a learner might try, to have gpuedu answer for them; each must be refused, in the notebook and when graded.
ATTEMPTS = {
    "from ... import, in the function": answer(
        f"from gpuedu.exercises.lesson14 import stored_bytes_reference\nreturn stored_bytes_reference({ARGS})\n"),
    "from ... import, at module level": "from gpuedu.exercises.lesson14 import stored_bytes_reference as stored_bytes\n",
    "import gpuedu.exercises, then get()": answer(
        f"import gpuedu.exercises\nreturn gpuedu.exercises.get('{BYTES}').reference({KWARGS})\n"),
    "from gpuedu import exercises": answer(
        f"from gpuedu import exercises\nreturn exercises.get('{BYTES}').reference({KWARGS})\n"),
    "importlib.import_module": answer(
        "import importlib\n"
        f"return importlib.import_module('gpuedu.exercises.lesson14').stored_bytes_reference({ARGS})\n"),
    "__import__": answer(
        f"m = __import__('gpuedu.exercises.lesson14', fromlist=['x'])\nreturn m.stored_bytes_reference({ARGS})\n"),
    "sys.modules": answer(
        f"import sys\nreturn sys.modules['gpuedu.exercises.lesson14'].stored_bytes_reference({ARGS})\n"),
    "importlib.reload of what sys.modules holds": answer(
        "import importlib, sys\n"
        f"return importlib.reload(sys.modules['gpuedu.exercises.lesson14']).stored_bytes_reference({ARGS})\n"),
    "the finder taken out and sys.modules emptied, then import": answer(
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != 'Guard']\n"
        "for name in [n for n in sys.modules if n.startswith('gpuedu')]:\n    del sys.modules[name]\n"
        f"from gpuedu.exercises.lesson14 import stored_bytes_reference\nreturn stored_bytes_reference({ARGS})\n"),
    "the finder taken out and sys.modules emptied, then importlib": answer(
        "import importlib, sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != 'Guard']\n"
        "for name in [n for n in sys.modules if n.startswith('gpuedu')]:\n    del sys.modules[name]\n"
        f"return importlib.import_module('gpuedu.exercises.lesson14').stored_bytes_reference({ARGS})\n"),
    "the source loaded by hand": answer(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('gpuedu.exercises.lesson14', {LESSON14!r})\n"
        "module = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\n"
        f"return module.stored_bytes_reference({ARGS})\n"),
    "the source read and executed": answer(
        f"text = open({LESSON14!r}).read()\n"
        "start = text.index('def stored_bytes_reference')\n"
        "namespace = {}\nexec(text[start:text.index('def stored_bytes_cases')], namespace)\n"
        f"return namespace['stored_bytes_reference']({ARGS})\n"),
    "the source read through a symbolic link": answer(
        "import os, tempfile\n"
        "link = os.path.join(tempfile.mkdtemp(), 'copy')\n"
        f"os.symlink(os.path.dirname({LESSON14!r}), link)\n"
        "text = open(os.path.join(link, 'lesson14.py')).read()\n"
        "return len(text)\n"),
    "another Python that imports gpuedu": answer(
        "import subprocess, sys\n"
        "code = 'from gpuedu.exercises.lesson14 import stored_bytes_reference as f; print(f(%d, %d, %d, %d, %d))'\n"
        f"return int(subprocess.check_output([sys.executable, '-c', code % ({ARGS})]))\n"),
    "os.system": answer("import os\nos.system('true')\nreturn 0\n"),
    "ctypes, to call the C library": answer(
        "import ctypes\nlibc = ctypes.CDLL(None)\nreturn int(libc.getpid() * 0)\n"),
}


@pytest.mark.parametrize("isolated", [False, True], ids=["notebook", "graded"])
@pytest.mark.parametrize("name", list(ATTEMPTS))
def test_every_way_to_the_reference_is_refused(name, isolated, capsys):
    result = exercises.check(BYTES, ATTEMPTS[name], verbose=False, isolated=isolated)
    assert not result and result.kind == "refused", result.report()
    assert "out of its reach" in result.failure.message and "own arithmetic" in result.failure.hint
    assert "gpuedu" in result.failure.message


def test_the_occupancy_calculator_is_refused_for_13_resident_blocks():
    source = ("def resident_blocks(threads, registers, shared):\n"
              "    from gpuedu.profiler.occupancy import theoretical_occupancy\n"
              "    return theoretical_occupancy('H100', threads, registers, shared).blocks_per_sm\n")
    result = exercises.check(OCCUPANCY, source, verbose=False)
    assert not result and result.kind == "refused"
    assert "gpuedu.profiler.occupancy" in result.failure.message and OCCUPANCY in result.failure.message


def test_a_refusal_caught_by_the_learner_is_only_a_wrong_value():
    source = answer("try:\n    from gpuedu.exercises import get\nexcept ImportError:\n    return 1\nreturn 2\n")
    result = exercises.check(BYTES, source, verbose=False)
    assert not result and result.kind == "wrong_values" and "returned 1" in result.failure.message


def test_numpy_and_the_standard_library_stay_usable():
    source = answer("import math\nimport numpy as np\n"
                    "out = int(np.int64(4) * batch * seq * heads * head_dim)\n"
                    "matrix = 4 * batch * heads * math.prod((seq, seq))\n"
                    "return {1: 2 * matrix + out, 2: matrix + out, 3: out + 4 * batch * heads * seq}[version]\n")
    result = exercises.check(BYTES, source, verbose=False)
    assert result, result.report()


def test_the_guard_names_the_modules_of_both_gpuedu_folders(tmp_path):
    package = os.path.dirname(os.path.abspath(gpuedu.__file__))
    names = _function_child._module_names(package)
    assert {"gpuedu", "gpuedu.exercises", "gpuedu.exercises.lesson14", "gpuedu.profiler.occupancy"} <= names
    assert not any("__pycache__" in n for n in names)
    guard = _function_child.Guard("14.stored_bytes", [package, str(tmp_path)])
    assert os.path.realpath(package) in guard.dirs and guard._inside(os.path.join(package, "exercises"))
    assert not guard._inside("/usr/lib/os.py") and not guard._inside(3)


# ---- the type the text promises ------------------------------------------------------------------------------

@pytest.mark.parametrize("returned, shown, words", [
    ("float(4 * batch * seq * heads * head_dim + 4 * batch * heads * seq * (2 * seq if version < 3 else 1))",
     "a float", "compute it with integers"),
    ("True", "a bool", "True and False are not numbers"),
    ("np.float64(1)", "a float64", "compute it with integers"),
    ("str(version)", "a str", "return an int"),
    ("None", "a NoneType", "ended without returning"),
])
def test_a_value_of_another_type_fails_and_says_so(returned, shown, words):
    source = "import numpy as np\n" + answer(f"return {returned}\n")
    result = exercises.check(BYTES, source, verbose=False)
    assert not result and result.kind == "wrong_type", result.report()
    assert f"{shown}: the exercise asks for an int" in result.failure.message, result.report()
    assert words in result.failure.hint


def test_a_float_with_the_right_value_fails_on_its_type():
    # version 1 of one head of 40 rows of 16: 2 x 4 x 40 x 40 + 4 x 40 x 16 = 15,360 bytes, returned as 15360.0
    source = answer("return 15360.0\n")
    result = exercises.check(BYTES, source, verbose=False)
    assert result.kind == "wrong_type" and "returned 15360.0, a float" in result.failure.message


def test_numpy_integers_are_ints():
    source = "import numpy as np\n" + answer(
        "problems = np.int64(batch * heads)\nout = 4 * batch * seq * heads * head_dim\n"
        "matrix = 4 * problems * seq * seq\n"
        "return {1: 2 * matrix + out, 2: matrix + out, 3: out + 4 * problems * seq}[version]\n")
    assert exercises.check(BYTES, source, verbose=False)


def test_none_is_an_answer_where_the_text_allows_it():
    ex = exercises.get("09.smallest_efficient_batch")
    assert ex.returns == ("int", "None")
    assert exercises.check(ex.id, ex.solution, verbose=False)
    never = "def smallest_efficient_batch(t0, t1, fraction, batch_sizes):\n    return None\n"
    result = exercises.check(ex.id, never, verbose=False)
    assert result.kind == "wrong_values" and "returned None" in result.failure.message


def test_returns_names_known_kinds():
    ex = exercises.get(BYTES)
    with pytest.raises(ValueError, match="returns names the kinds"):
        _function.FunctionExercise(id="99.x", title="", text="", function="f", cases=ex.cases,
                                   reference=ex.reference, stub="# FILL ME IN", solution="", returns=("integer",))


# ---- what the function prints, and the report ----------------------------------------------------------------

def test_what_the_function_prints_shows_in_the_notebook_but_not_when_graded(capsys):
    source = answer("print('thinking about', version)\nreturn 7\n")
    exercises.check(BYTES, source, verbose=False)
    assert "thinking about 1" in capsys.readouterr().out
    exercises.check(BYTES, source, verbose=False, isolated=True)
    assert "thinking about" not in capsys.readouterr().out


def test_a_stopped_check_says_it_stopped_at_the_first_wrong_case_of_all():
    total = len(list(exercises.get(BYTES).cases(np.random.default_rng(0))))
    # right for version 1 only: the second case (version 2) is the first wrong one
    source = answer("out = 4 * batch * seq * heads * head_dim\nreturn 2 * 4 * batch * heads * seq * seq + out\n")
    result = exercises.check(BYTES, source, verbose=False)
    report = result.report()
    assert result.total == total and len(result.cases) == 2
    assert f"stopped at the first wrong case of {total}: case 2, after 1 right ({total - 2} not run)" in report
    assert "cases right" not in report
    stub = exercises.check(BYTES, exercises.stub(BYTES), verbose=False).report()
    assert f"stopped at the first wrong case of {total}: case 1 ({total - 1} not run)" in stub
