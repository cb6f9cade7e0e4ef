"""The package's floors, as ARCHITECTURE.md lists them: a part of gpuedu imports only parts on its own floor or
below, and no parts import each other round in a cycle. Lazy (function-level) imports count: they are arrows
too. The emulator's own two layers are checked in tests/emulator/test_layers.py."""
import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "gpuedu")


def floors(text=None):
    """{part: floor} from the fenced block under ARCHITECTURE.md's "The floors" heading."""
    if text is None:
        with open(os.path.join(ROOT, "ARCHITECTURE.md"), encoding="utf-8") as f:
            text = f.read()
    section = text.split("## The floors", 1)[1]
    block = section.split("```", 2)[1]
    found = {}
    for line in block.splitlines():
        match = re.match(r"\s*(\d+)\s+(.+)$", line)
        if match:
            for part in match.group(2).split(","):
                found[part.strip()] = int(match.group(1))
    return found


def part_of(module):
    """The part of gpuedu a dotted module name belongs to: ``gpuedu.nn.layers`` -> ``nn``, ``gpuedu`` -> ``__init__``."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def imports_of(source, module, is_package):
    """The gpuedu modules ``source`` (the module ``module``) imports, relative imports resolved."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module.split(".") if node.module else []
            if node.level:
                base = package[:len(package) - node.level + 1] + base
            base = ".".join(base)
            # `from gpuedu import nn` imports gpuedu.nn; `from gpuedu.nn import layers` imports gpuedu.nn(.layers)
            names = [f"{base}.{a.name}" if base == "gpuedu" else base for a in node.names]
        else:
            continue
        yield from (n for n in names if n == "gpuedu" or n.startswith("gpuedu."))


def arrows():
    """{(from part, to part): an example 'file: module'} over every .py file of the package."""
    found = {}
    for dirpath, _, names in os.walk(PACKAGE):
        for name in names:
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
            is_package = rel[-1] == "__init__"
            module = ".".join(rel[:-1] if is_package else rel)
            with open(path, encoding="utf-8") as f:
                source = f.read()
            for target in imports_of(source, module, is_package):
                a, b = part_of(module), part_of(target)
                if a != b:
                    found.setdefault((a, b), f"{os.path.relpath(path, ROOT)}: {target}")
    return found


def parts():
    return {n[:-3] if n.endswith(".py") else n for n in os.listdir(PACKAGE)
            if (n.endswith(".py") or os.path.isfile(os.path.join(PACKAGE, n, "__init__.py")))}


def test_every_part_of_the_package_has_a_floor():
    assert parts() - set(floors()) == set(), "add it to ARCHITECTURE.md's floors"
    assert set(floors()) - parts() == set(), "ARCHITECTURE.md names a part the package no longer has"


def test_no_part_imports_a_part_on_a_higher_floor():
    level = floors()
    upward = sorted(f"{a} (floor {level[a]}) -> {b} (floor {level[b]}), e.g. {where}"
                    for (a, b), where in arrows().items() if level.get(b, -1) > level.get(a, -1))
    assert upward == []


def test_nothing_in_the_package_imports_its_face():
    assert sorted(where for (a, b), where in arrows().items() if b == "__init__") == []


def test_no_import_cycles_between_parts():
    graph = {}
    for a, b in arrows():
        graph.setdefault(a, set()).add(b)

    def reaches(start, goal, seen):
        return any(dep == goal or (dep not in seen and reaches(dep, goal, seen | {dep}))
                   for dep in graph.get(start, ()))
    assert sorted((a, b) for a in graph for b in graph[a] if reaches(b, a, {b})) == []


def test_the_reading_resolves_relative_lazy_and_package_imports():
    source = "from .. import launch as L\ndef f():\n    from ..profiler.session import profile\nfrom gpuedu import nn\n"
    assert set(imports_of(source, "gpuedu.ops.matmul", False)) == {
        "gpuedu.launch", "gpuedu.profiler.session", "gpuedu.nn"}
    assert set(imports_of("from .layers import Dense\n", "gpuedu.nn", True)) == {"gpuedu.nn.layers"}
    assert part_of("gpuedu.nn.layers") == "nn" and part_of("gpuedu") == "__init__"
    table = "## The floors\n\n```\n2   nn, train\n1   launch\n```\n"
    assert floors(table) == {"nn": 2, "train": 2, "launch": 1}
