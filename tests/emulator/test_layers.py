"""The emulator's two layers: PyCUDA-named modules on top of a core that imports none of them, and no cycles."""
import ast
import os

import gpuedu.emulator
from gpuedu import backend

FOLDER = os.path.dirname(gpuedu.emulator.__file__)
# Built on compiler.build: the profiler's instrumented twins sit beside the compiler, not below it; hooks is
# the public face of the core for the tools built on the emulator.
BESIDE_THE_FACADE = {"_instrument", "hooks"}


def _imports():
    """{module: set of sibling modules it imports}, lazy (function-level) imports included."""
    graph = {}
    for name in os.listdir(FOLDER):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(FOLDER, name), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
        graph[name[:-3]] = deps
    return graph


def test_no_import_cycles():
    graph = _imports()

    def reaches(start, goal, seen):
        for dep in graph.get(start, ()):
            if dep == goal or (dep not in seen and reaches(dep, goal, seen | {dep})):
                return True
        return False
    cycles = sorted((a, b) for a in graph for b in graph[a] if b in graph and reaches(b, a, {b}))
    assert cycles == []


def test_the_core_imports_nothing_pycuda_names():
    graph = _imports()
    facade = set(backend.PYCUDA_MODULES) & set(graph)
    assert {"driver", "compiler", "gpuarray", "elementwise", "tools"} <= facade
    core = {name for name in graph if name not in facade and name not in BESIDE_THE_FACADE and name != "__init__"}
    assert all(name.startswith("_") for name in core), "a core module without a leading underscore looks like " \
                                                       "part of PyCUDA's API"
    leaks = {name: sorted(graph[name] & facade) for name in core if graph[name] & facade}
    assert leaks == {}


def test_pycudas_direction_between_the_named_modules():
    graph = _imports()
    assert "tools" in graph["elementwise"] and "elementwise" not in graph["tools"]   # tools below elementwise
    assert "driver" not in graph["_module"] and "compiler" not in graph["_module"]
