"""The course notebooks use only gemmlab's public names: no ``_private`` module or name, and
every name taken from a gemmlab module is one it exports (its ``__all__``, where it has one).
A notebook that reaches inside the toolkit breaks whenever the toolkit is reorganised."""
from __future__ import annotations

import ast
import importlib
import importlib.util
import types

import nbformat
import pytest

from tests.support import ROOT

NOTEBOOKS = sorted((ROOT / "solutions").glob("*/*.ipynb"))


def _code(cell_source: str) -> ast.Module:
    """A code cell as Python: IPython's ``%magic`` and ``!shell`` lines left out."""
    lines = [line for line in cell_source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return ast.parse("\n".join(lines))


def _is_public(module: types.ModuleType, name: str) -> bool:
    """``name`` is exported by ``module``: in its ``__all__`` (where it has one) or a public submodule."""
    if name.startswith("_"):
        return False
    exported = getattr(module, "__all__", None)
    if exported is None or name in exported:
        return True
    spec = getattr(module, "__spec__", None)
    return bool(spec and spec.submodule_search_locations) and importlib.util.find_spec(
        f"{module.__name__}.{name}") is not None


def private_uses(source: str) -> list[str]:
    """Every gemmlab name ``source`` uses that is not public, as ``module.name``."""
    tree = _code(source)
    modules: dict[str, types.ModuleType] = {}   # local name -> the gemmlab module it is bound to
    found: list[str] = []

    def take(module: types.ModuleType, name: str, local: str) -> None:
        if not _is_public(module, name):
            found.append(f"{module.__name__}.{name}")
            return
        value = getattr(module, name, None)
        if value is None:
            value = importlib.import_module(f"{module.__name__}.{name}")
        if isinstance(value, types.ModuleType):
            modules[local] = value

    def submodule(parts: list[str]) -> types.ModuleType:
        module = importlib.import_module("gemmlab")
        for part in parts[1:]:
            if not _is_public(module, part):
                found.append(f"{module.__name__}.{part}")
            module = importlib.import_module(f"{module.__name__}.{part}")
        return module

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] != "gemmlab":
                    continue
                module = submodule(parts)
                modules[alias.asname or "gemmlab"] = module if alias.asname else importlib.import_module("gemmlab")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "gemmlab":
            module = submodule(node.module.split("."))
            for alias in node.names:
                take(module, alias.name, alias.asname or alias.name)
    def resolve(expr: ast.expr) -> types.ModuleType | None:
        """The gemmlab module ``expr`` names (``L``, ``gemmlab.layout.atoms``), or None."""
        if isinstance(expr, ast.Name):
            return modules.get(expr.id)
        if isinstance(expr, ast.Attribute):
            module = resolve(expr.value)
            if module is None:
                return None
            value = getattr(module, expr.attr, None)
            if value is None and hasattr(module, "__path__") and importlib.util.find_spec(f"{module.__name__}.{expr.attr}") is not None:
                value = importlib.import_module(f"{module.__name__}.{expr.attr}")
            return value if isinstance(value, types.ModuleType) else None
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            module = resolve(node.value)
            if module is not None and not _is_public(module, node.attr):
                found.append(f"{module.__name__}.{node.attr}")
    return found


def test_the_check_finds_private_names() -> None:
    assert private_uses("import gemmlab\ngemmlab.compiling.compiler._compile_key(1)") == [
        "gemmlab.compiling.compiler._compile_key"]
    assert private_uses("from gemmlab.layout import _ModuleType") == ["gemmlab.layout._ModuleType"]
    assert private_uses("from gemmlab import layout as L\nL.atoms.gmma_c_layout(16)") == []
    assert private_uses("from gemmlab import nbhelpers as nbh\nnbh.Fn") == ["gemmlab.notebook.nbhelpers.Fn"]
    assert private_uses("%%time\nfrom gemmlab import layout as L\nL.make_layout((2, 2))") == []
    assert private_uses("import gemmlab.layout as gl\ngl.tiled_mma._tv(1)") == ["gemmlab.layout.tiled_mma._tv"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.parent.name for p in NOTEBOOKS])
def test_notebook_uses_only_public_gemmlab_names(path) -> None:
    nb = nbformat.read(path, as_version=4)
    private = {name: index for index, cell in enumerate(nb.cells) if cell.cell_type == "code"
               for name in private_uses(cell.source)}
    assert not private, f"{path.parent.name} uses non-public gemmlab names (name: cell index): {private}"
