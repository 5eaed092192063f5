"""gemmlab.layout's modules form layers: no module imports one that imports it back."""
from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import gemmlab.layout

PACKAGE = Path(gemmlab.layout.__file__).parent


def _sibling_imports(path: Path) -> set[str]:
    """Names of the sibling modules a layout module imports, anywhere in its body."""
    siblings = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(a.name for a in node.names)
    return found & siblings


def test_layout_modules_have_no_import_cycle():
    graph = {p.stem: _sibling_imports(p) for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert {"algebra", "swizzle", "evaluate"} <= graph.keys()
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"import cycle in gemmlab.layout: {' -> '.join(exc.args[1])}") from None
    assert order.index("swizzle") < order.index("algebra")


def test_no_layout_module_reaches_into_a_siblings_private_names():
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 1:
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{path.name} imports private {private} from .{node.module}"
