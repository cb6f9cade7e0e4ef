"""The repository's scripts are not a package: tests load them by path."""
import importlib.util
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_script(name):
    spec = importlib.util.spec_from_file_location(f"scripts_{name}", os.path.join(REPO, "scripts", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def figures():
    return load_script("figures")


@pytest.fixture(scope="session")
def site():
    return load_script("site")


@pytest.fixture(scope="session")
def pycuda_suite():
    return load_script("pycuda_suite")


@pytest.fixture(scope="session")
def toolchains():
    return load_script("toolchains")


@pytest.fixture(scope="session")
def container():
    return load_script("container")
