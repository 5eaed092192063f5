"""docs/DESIGN.md's rules, checked over the whole repository from its source (nothing imported, no GPU).

1. Every import respects the may-import table (docs/may_import.toml), lazy imports included.
2. No import cycle between modules, lazy (function-level) imports counted.
3. No module uses another module's ``_private`` name, tests included, except the short list of tests of a private
   helper in docs/may_import.toml.
4. Every module path held in a string (``-m gemmlab.x``, code sent into a kernel, mock targets) names a module
   that exists, and the name after it, if any, is defined there; so does every name such code imports.
"""
from __future__ import annotations

import ast
import tomllib
from collections import defaultdict, deque

import pytest

from tests.architecture.repository import FILE_SUFFIXES, MODULE_PATH, ROOT, Import, Repository

TABLE = ROOT / "docs" / "may_import.toml"
THIS_FILE = "tests/architecture/test_design_rules.py"
#: Where module paths in strings are looked for.
STRING_FOLDERS = ("gemmlab", "autograder", "pool", "classroom", "tools", "benchmarks", "tests")


@pytest.fixture(scope="module")
def repo() -> Repository:
    return Repository()


@pytest.fixture(scope="module")
def table() -> dict:
    return tomllib.loads(TABLE.read_text())


def part_of(module: str, parts: dict[str, list[str]]) -> str:
    """The longest part of the table that holds ``module``."""
    pieces = module.split(".")
    for cut in range(len(pieces), 0, -1):
        name = ".".join(pieces[:cut])
        if name in parts:
            return name
    raise AssertionError(f"{module} belongs to no part of {TABLE.relative_to(ROOT)}: add a row")


def within(module: str, entry: str) -> bool:
    return module == entry or module.startswith(entry + ".")


def test_the_table_names_only_parts_that_exist(repo: Repository, table: dict):
    """A row or an entry that names nothing is a table gone stale (a typo lets everything through)."""
    planned = set(table["planned"])
    names = set(repo.modules)
    stale = [entry for part, entries in table["parts"].items() for entry in [part, *entries]
             if entry not in planned and not any(within(m, entry) for m in names)]
    assert not stale, f"{TABLE.name} names parts that do not exist: {sorted(set(stale))}"


def test_every_import_respects_the_may_import_table(repo: Repository, table: dict):
    parts = table["parts"]
    everyone = table["everyone"]
    wrong = []
    for imp in repo.imports:
        source, target = part_of(imp.source, parts), part_of(imp.target, parts)
        if source == target or any(within(imp.target, e) for e in [*everyone, *parts[source]]):
            continue
        wrong.append(f"{imp.where()}: {imp.source} imports {imp.target} ({source} may not import {target})")
    assert not wrong, f"{len(wrong)} imports outside docs/may_import.toml:\n" + "\n".join(sorted(wrong))


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's components of more than one module (or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0

    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    found.append(component)
    return found


def shortest_path(graph: dict[str, set[str]], start: str, goal: str, allowed: set[str]) -> list[str]:
    previous = {start: start}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = [goal]
            while path[-1] != start:
                path.append(previous[path[-1]])
            return path[::-1]
        for child in sorted(graph.get(node, ())):
            if child in allowed and child not in previous:
                previous[child] = node
                queue.append(child)
    raise AssertionError(f"no path {start} -> {goal} inside its component")


def import_cycles(repo: Repository) -> list[str]:
    """Each cycle, one through every edge of each component, with the file:line of every edge."""
    graph: dict[str, set[str]] = defaultdict(set)
    where: dict[tuple[str, str], Import] = {}
    for imp in repo.imports:
        if imp.source != imp.target and not repo.modules[imp.source].name.startswith(imp.target + "."):
            graph[imp.source].add(imp.target)
            where.setdefault((imp.source, imp.target), imp)
    cycles: dict[frozenset, str] = {}
    for component in strongly_connected(graph):
        for source in sorted(component):
            for target in sorted(graph[source] & component):
                path = [source, *shortest_path(graph, target, source, component)]
                edges = list(zip(path, path[1:]))
                key = frozenset(edges)
                if key not in cycles:
                    cycles[key] = " -> ".join(path) + "\n" + "\n".join(
                        f"    {a} imports {b} at {where[a, b].where()}" for a, b in edges)
    return sorted(cycles.values())


def test_no_import_cycle_counting_lazy_imports(repo: Repository):
    """A module importing a package it lies in (``from gemmlab.dsl import x`` in ``gemmlab.dsl.core``) is not counted:
    Python has that package in hand before any of its modules runs."""
    cycles = import_cycles(repo)
    assert not cycles, f"{len(cycles)} import cycles (function-level imports count):\n" + "\n".join(cycles)


def private_reaches(repo: Repository) -> list[tuple[str, str, str]]:
    """(file:line, private name, module it belongs to) for each use of another module's ``_name``."""
    found = []
    imports_by_source: dict[str, list[Import]] = defaultdict(list)
    for imp in repo.imports:
        imports_by_source[imp.source].append(imp)
    for module in repo.modules.values():
        bound: dict[str, str] = {}          # local name -> repository module it stands for
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    local = alias.asname or alias.name.split(".")[0]
                    target = repo.canonical(alias.name if alias.asname else local)
                    if target:
                        bound[local] = target
        for imp in imports_by_source[module.name]:
            for name in imp.names:
                if name.startswith("_") and not name.startswith("__"):
                    found.append((imp.where(), name, imp.target))
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ImportFrom):
                base = repo.absolute(module, node.level, node.module) if node.level else node.module
                for alias in node.names:
                    sub = repo.canonical(f"{base}.{alias.name}")
                    if sub is not None:
                        bound[alias.asname or alias.name] = sub
                        parent = sub.rsplit(".", 1)[0]
                        if alias.name.startswith("_") and not alias.name.startswith("__") \
                                and not within(module.name, parent):
                            found.append((f"{module.file}:{node.lineno}", alias.name, parent))
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = dotted_module(node.value, bound, repo)
                if owner is not None and owner != module.name:
                    found.append((f"{module.file}:{node.lineno}", node.attr, owner))
            elif isinstance(node, ast.Call) and is_setattr(node) and len(node.args) >= 2:
                owner = dotted_module(node.args[0], bound, repo)
                name = node.args[1]
                if owner is not None and owner != module.name and isinstance(name, ast.Constant) \
                        and isinstance(name.value, str) and name.value.startswith("_") \
                        and not name.value.startswith("__"):
                    found.append((f"{module.file}:{node.lineno}", name.value, owner))
        for line, text in strings_of(module):
            for match in MODULE_PATH.finditer(text):
                resolved = repo.resolve(match.group(1))
                if resolved and resolved[1] and resolved[1][0].startswith("_") \
                        and not resolved[1][0].startswith("__") and resolved[0] != module.name:
                    found.append((f"{module.file}:{line}", resolved[1][0], resolved[0]))
    return sorted(set(found))


def is_setattr(call: ast.Call) -> bool:
    """``monkeypatch.setattr(module, "_name", ...)``, ``setattr(module, "_name", ...)``, ``patch.object(...)``."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in ("setattr", "getattr", "delattr", "object", "hasattr")


def dotted_module(node: ast.expr, bound: dict[str, str], repo: Repository) -> str | None:
    """The repository module an expression like ``m`` or ``gemmlab.x.y`` stands for, if it is one."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = dotted_module(node.value, bound, repo)
        return repo.canonical(f"{owner}.{node.attr}") if owner else None
    return None


def strings_of(module) -> list[tuple[int, str]]:
    return [(n.lineno, n.value) for n in ast.walk(module.tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_no_private_reach_into_another_module(repo: Repository, table: dict):
    allowed = {(entry["file"], entry["name"]) for entry in table["private_allowed"]}
    for entry in table["private_allowed"]:
        assert entry.get("reason"), f"{entry} in {TABLE.name} gives no reason"
    reaches = [r for r in private_reaches(repo) if (r[0].split(":")[0], r[1]) not in allowed]
    assert not reaches, f"{len(reaches)} uses of another module's private names:\n" + "\n".join(
        f"{where}: {name} of {owner}" for where, name, owner in reaches)


def where_file(module) -> str:
    return module.file


def module_paths_in_strings(repo: Repository, allowed: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """(file:line, path) for each dotted module path in a string literal that names nothing.

    ``pool.NAME`` counts only where NAME is one of pool's modules: ``pool`` is also what code calls a pool object.
    """
    broken = []
    for module, line, text in repo.strings(STRING_FOLDERS):
        if module.file == THIS_FILE:
            continue        # MINI_REPOSITORY below: a repository broken on purpose, as strings
        for match in MODULE_PATH.finditer(text):
            path = match.group(1)
            if path.rsplit(".", 1)[-1] in FILE_SUFFIXES:
                continue
            if path.startswith("pool.") and repo.canonical(".".join(path.split(".")[:2])) is None:
                continue
            resolved = repo.resolve(path)
            if resolved and resolved[1] and (where_file(module), resolved[1][-1]) in allowed:
                continue
            if resolved is None or not repo.attribute_exists(*resolved):
                broken.append((f"{module.file}:{line}", path))
        broken += [(f"{module.file}:{line}", path) for path in names_code_imports(repo, text)]
    return sorted(set(broken))


def names_code_imports(repo: Repository, text: str) -> list[str]:
    """In a string that is Python source (code sent into a kernel), each ``from m import name`` and
    ``__import__('m', fromlist=['name'])`` whose name is not defined in repository module ``m``."""
    if "import" not in text:
        return []
    try:
        tree = ast.parse(text.replace("{", "").replace("}", ""))   # an f-string's fields left out
    except SyntaxError:
        return []
    wanted: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            wanted += [(node.module, alias.name) for alias in node.names if alias.name != "*"]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__" \
                and node.args and isinstance(node.args[0], ast.Constant):
            for keyword in node.keywords:
                if keyword.arg == "fromlist" and isinstance(keyword.value, (ast.List, ast.Tuple)):
                    wanted += [(node.args[0].value, item.value) for item in keyword.value.elts
                               if isinstance(item, ast.Constant) and isinstance(item.value, str) and item.value]
    missing = []
    for module, name in wanted:
        found = repo.canonical(module) if isinstance(module, str) else None
        if found is not None and not repo.attribute_exists(found, [name]):
            missing.append(f"{module}.{name}")
    return missing


def test_every_module_path_in_a_string_is_importable(repo: Repository, table: dict):
    broken = module_paths_in_strings(repo, {(e["file"], e["name"]) for e in table["private_allowed"]})
    assert not broken, f"{len(broken)} module paths in strings that name nothing:\n" + "\n".join(
        f"{where}: {path}" for where, path in broken)


MINI_REPOSITORY = {
    "gemmlab/__init__.py": '_LAZY = {"thing": ("gemmlab.a", "thing")}\n',
    "gemmlab/moved.py": 'MOVED = {"gemmlab.old": "gemmlab.a"}\n',
    "gemmlab/a.py": (
        "import importlib\n"
        "from . import b\n"                                         # relative
        "def thing():\n"
        "    from gemmlab.c import helper\n"                       # lazy
        "    return importlib.import_module('gemmlab.d'), helper\n"  # literal dynamic
        "SPAWN = ['python', '-m', 'gemmlab.nothing_here']\n"       # a module path that names nothing
        "_secret = 1\n"
        "BOOT = \"__import__('gemmlab.c', fromlist=['gone']).gone()\"\n"),          # code sent into a kernel
    "gemmlab/b.py": "def f():\n    return __import__('gemmlab.old')\n",   # old path, back to a: a cycle
    "gemmlab/c.py": "def helper():\n    pass\n",
    "gemmlab/d.py": "",
    "tests/__init__.py": "",
    "tests/test_x.py": ("import gemmlab.a as a\nfrom gemmlab.a import _secret\n"
                        "def test(monkeypatch):\n    monkeypatch.setattr(a, '_secret', 2)\n    a._secret\n"),
}


def test_the_checks_find_what_they_are_meant_to(tmp_path):
    """The reader on a repository made for it: each kind of import and of breach is seen, with its line."""
    for name, text in MINI_REPOSITORY.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    mini = Repository(tmp_path)
    edges = {(i.source, i.target, i.line) for i in mini.imports}
    assert {("gemmlab.a", "gemmlab.b", 2), ("gemmlab.a", "gemmlab.c", 4), ("gemmlab.a", "gemmlab.d", 5),
            ("gemmlab.b", "gemmlab.a", 2)} <= edges
    assert mini.canonical("gemmlab.old") == "gemmlab.a" and mini.canonical("gemmlab.thing") is None
    cycles = import_cycles(mini)
    assert len(cycles) == 1 and "gemmlab/a.py:2" in cycles[0] and "gemmlab/b.py:2" in cycles[0]
    reaches = {(where, name) for where, name, _ in private_reaches(mini)}
    assert reaches == {("tests/test_x.py:2", "_secret"), ("tests/test_x.py:4", "_secret"),
                       ("tests/test_x.py:5", "_secret")}
    assert module_paths_in_strings(mini, set()) == [("gemmlab/a.py:6", "gemmlab.nothing_here"),
                                                    ("gemmlab/a.py:8", "gemmlab.c.gone")]
    assert not MODULE_PATH.search("application/vnd.gemmlab.result+json")
    assert not MODULE_PATH.search("see gemmlab/judge/plain.py")


def reachable(repo: Repository, start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others (lazy imports included)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in repo.imports:
        graph[imp.source].add(imp.target)
    seen, todo = set(), [start]
    while todo:
        for child in graph[todo.pop()] - seen:
            seen.add(child)
            todo.append(child)
    return seen


def test_layout_layers_run_one_way(repo: Repository):
    """gemmlab.layout is layered errors -> printing -> evaluate -> swizzle -> algebra -> ...: a lower layer never
    reaches a higher one (so pycute's algebra can be explained on top of the evaluator, never inside it)."""
    assert "gemmlab.layout.algebra" not in reachable(repo, "gemmlab.layout.swizzle")
    assert "gemmlab.layout.swizzle" not in reachable(repo, "gemmlab.layout.evaluate")
