"""The repository's Python read as data, without importing any of it: modules, their imports, their strings.

What docs/DESIGN.md's rules are checked on (tests/architecture/test_design_rules.py). Every import counts,
wherever it stands (module level or inside a function, relative ones resolved), and so do
``importlib.import_module("literal")`` and ``__import__("literal")``. ``tools/`` and ``benchmarks/`` are folders
of scripts that import each other as top-level modules (pytest's ``pythonpath`` puts both folders on the path);
their modules are named ``tools.NAME`` and ``benchmarks.NAME`` here and a bare ``import NAME`` finds them.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Folders holding the repository's Python, package roots first.
PACKAGES = ("gemmlab", "autograder", "pool", "classroom", "tests")
SCRIPT_FOLDERS = ("tools", "benchmarks")


@dataclass(frozen=True)
class Import:
    """One import of a repository module: who imports what, and where."""

    source: str     # the importing module
    target: str     # the imported module (an attribute imported from a module counts as that module)
    file: str       # the importing file, relative to the repository's root
    line: int
    names: tuple[str, ...] = ()   # the names of ``from target import names`` that are not modules

    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Module:
    name: str
    file: str       # relative to the repository's root
    tree: ast.Module
    is_package: bool
    defined: set[str] = field(default_factory=set)   # names bound at module level


def module_name(relative: Path) -> str:
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _top_level_names(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level (including under ``if``/``try``), so ``module.name`` resolves."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    names.add(alias.asname or alias.name.split(".")[0])
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                for part in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(node, part, []):
                        visit(child.body if isinstance(child, ast.ExceptHandler) else [child])
    visit(tree.body)
    return names


class Repository:
    """Every Python module of the repository, parsed once."""

    def __init__(self, root: Path = ROOT) -> None:
        self.root = root
        self.modules: dict[str, Module] = {}
        files = [p for folder in PACKAGES + SCRIPT_FOLDERS for p in sorted((root / folder).rglob("*.py"))]
        for path in files:
            if any(part.startswith(".") or part == "__pycache__" for part in path.relative_to(root).parts):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            relative = path.relative_to(root)
            name = module_name(relative)
            self.modules[name] = Module(name, str(relative), tree, path.name == "__init__.py", _top_level_names(tree))
        self.script_names = {m.split(".", 1)[1]: m for m in self.modules
                             if m.split(".")[0] in SCRIPT_FOLDERS and m.count(".") == 1}
        self.lazy_names = self._lazy_names()

    # -- names -------------------------------------------------------------------------------------------------

    def _lazy_names(self) -> dict[str, str]:
        """``gemmlab``'s lazily served names (PEP 562 ``_LAZY``) -> the module that defines each."""
        served: dict[str, str] = {}
        for node in self.modules["gemmlab"].tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets):
                for key, value in zip(node.value.keys, node.value.values):
                    served[ast.literal_eval(key)] = ast.literal_eval(value)[0]
        return served

    @cached_property
    def moved(self) -> dict[str, str]:
        """``gemmlab.moved.MOVED`` read by running only that module (it imports nothing of the repository's)."""
        namespace: dict[str, object] = {"__name__": "gemmlab_moved_for_test"}
        source = (self.root / self.modules["gemmlab.moved"].file).read_text()
        exec(compile(source, "gemmlab/moved.py", "exec"), namespace)
        return dict(namespace["MOVED"])  # type: ignore[arg-type]

    def canonical(self, name: str) -> str | None:
        """The repository module a dotted name means (old paths through gemmlab.moved), or None if none."""
        first = name.split(".")[0]
        if first not in PACKAGES and first not in SCRIPT_FOLDERS:
            if first in self.script_names:
                name = self.script_names[first] + name[len(first):]
            else:
                return None
        if name in self.modules:
            return name
        for old, new in self.moved.items():
            if name == old or name.startswith(old + "."):
                name = new + name[len(old):]
                return name if name in self.modules else None
        return None

    def resolve(self, dotted: str) -> tuple[str, list[str]] | None:
        """Split ``a.b.c.attr`` into the longest module prefix and the attribute path after it."""
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            module = self.canonical(".".join(parts[:cut]))
            if module is not None:
                return module, parts[cut:]
        return None

    def attribute_exists(self, module: str, attributes: list[str]) -> bool:
        """Does ``module.attributes`` name something: a submodule or a top-level name, followed statically."""
        for i, attr in enumerate(attributes):
            sub = self.canonical(f"{module}.{attr}")
            if sub is not None:
                module = sub
                continue
            found = self.modules[module]
            if attr in found.defined or (module == "gemmlab" and attr in self.lazy_names):
                return True      # an attribute of a class or value beyond this is not followed
            if module != "gemmlab" and i == 0 and any(
                    isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in found.tree.body):
                return True      # a module that serves names on use (PEP 562) may have it; gemmlab's are known
            return False
        return True

    # -- imports -----------------------------------------------------------------------------------------------

    def absolute(self, module: Module, level: int, name: str | None) -> str:
        """The absolute name of a relative import's ``from .name`` (``level`` dots) in ``module``."""
        package = module.name.split(".")
        if not module.is_package:
            package = package[:-1]
        base = package[: len(package) - (level - 1)] if level > 1 else package
        return ".".join(base + ([name] if name else []))

    @cached_property
    def imports(self) -> list[Import]:
        found: list[Import] = []
        for module in self.modules.values():
            for node in ast.walk(module.tree):
                found.extend(self.imports_of(module, node))
        return found

    def imports_of(self, module: Module, node: ast.AST) -> list[Import]:
        """The repository modules one AST node imports (none for most nodes)."""
        def made(target: str | None, names: tuple[str, ...] = ()) -> list[Import]:
            canonical = self.canonical(target) if target else None
            if canonical is None:
                return []
            return [Import(module.name, canonical, module.file, node.lineno, names)]

        if isinstance(node, ast.Import):
            return [i for alias in node.names for i in made(alias.name)]
        if isinstance(node, ast.ImportFrom):
            base = self.absolute(module, node.level, node.module) if node.level else node.module
            result: list[Import] = []
            plain: list[str] = []
            for alias in node.names:
                sub = self.canonical(f"{base}.{alias.name}")
                if sub is not None:
                    result += [Import(module.name, sub, module.file, node.lineno)]
                elif base == "gemmlab" and alias.name in self.lazy_names:
                    result += made(self.lazy_names[alias.name], (alias.name,))
                else:
                    plain.append(alias.name)
            if plain or not result:
                result += made(base, tuple(plain))
            return result
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in ("import_module", "__import__"):
                return made(node.args[0].value)
        return []

    # -- strings -----------------------------------------------------------------------------------------------

    def strings(self, folders: tuple[str, ...]) -> list[tuple[Module, int, str]]:
        """Every string literal (docstrings included) of the modules under ``folders``, with its line."""
        found = []
        for module in self.modules.values():
            if module.name.split(".")[0] not in folders:
                continue
            for node in ast.walk(module.tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found.append((module, node.lineno, node.value))
        return found


#: A dotted path starting at a repository package, standing alone (not part of a file name, URL or MIME type).
MODULE_PATH = re.compile(
    r"(?<![\w./\-@])((?:gemmlab|autograder|pool|classroom)(?:\.[A-Za-z_]\w*)+)(?![\w/\-])(?!\.\w)")
FILE_SUFFIXES = {"json", "py", "toml", "md", "html", "csv", "txt", "ipynb", "cu", "h", "log", "sh", "yml", "yaml",
                 "png", "ncu-rep", "sock", "lock", "tmp", "db", "cfg", "ini"}
