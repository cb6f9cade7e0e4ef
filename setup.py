"""Build hook: the lessons (``lessons/NN_topic.ipynb``) ship inside the wheel as ``gpuedu/lesson_notebooks``.

They live at the repository's top level, where learners open them; a wheel can only carry files inside the
package, so ``build_py`` copies them in.  Everything else is configured in pyproject.toml.
"""
import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithLessons(build_py):
    def run(self):
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        lessons = sorted(glob.glob(os.path.join(here, "lessons", "[0-9][0-9]_*.ipynb")))
        if not lessons:
            return          # building from a tree without lessons: nothing to ship
        target = os.path.join(self.build_lib, "gpuedu", "lesson_notebooks")
        # a build folder kept from an earlier build holds the lessons as they were named then: start it afresh,
        # or a renamed or removed lesson would ship beside its successor
        shutil.rmtree(target, ignore_errors=True)
        os.makedirs(target)
        for path in lessons:
            shutil.copy2(path, target)


setup(cmdclass={"build_py": BuildWithLessons})
