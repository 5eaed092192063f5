"""The module paths gemmlab had before its modules went into stage folders, kept working.

Notebooks, students' own cells and their saved work import ``gemmlab.banks``, ``from gemmlab import draw``
or ``gemmlab.runtime.device``; those modules now live in :mod:`gemmlab.seeing`, :mod:`gemmlab.running` and
the other stage packages. :class:`MovedFinder` answers an old path with the module at its new one (the very
same module object, so a patch or an ``isinstance`` through either path sees one module).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Callable

#: Old module path -> where the module is now. A package's entry covers its submodules too.
MOVED: dict[str, str] = {
    "gemmlab.compilation": "gemmlab.compiling",
    "gemmlab.runtime": "gemmlab.running",
    **{f"gemmlab.{name}": f"gemmlab.compiling.{name}" for name in (
        "ahead", "cache", "compiler", "diagnostics", "ptx", "sass", "resources", "signature", "toolchain")},
    **{f"gemmlab.{name}": f"gemmlab.running.{name}" for name in ("kernel", "gpu", "isolate", "proctime")},
    **{f"gemmlab.{name}": f"gemmlab.checking.{name}" for name in (
        "check", "copy_check", "integrity", "thread_shares", "cexpr", "cfunction", "library_watch", "report")},
    **{f"gemmlab.{name}": f"gemmlab.timing.{name}" for name in (
        "bench", "steady_timing", "clock_sampler", "speed_of_light", "spread", "timing_lock", "perfbar", "ceilings",
        "roofline", "roofline_math", "leaderboard_draw")},
    **{f"gemmlab.{name}": f"gemmlab.seeing.{name}" for name in ("banks", "draw", "widgets", "figures", "checklist")},
    **{f"gemmlab.{name}": f"gemmlab.notebook.{name}" for name in (
        "nbhelpers", "magic", "ipython", "headless", "doctor")},
}


def new_path(name: str) -> str | None:
    """Where the module once at ``name`` is now, or None when it did not move."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return None


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module at its new one."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module ran once, under its new path."""


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old module paths of :data:`MOVED` (installed once by ``import gemmlab``)."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        new = new_path(fullname) if fullname.startswith("gemmlab.") else None
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def submodules_on_use(package: str) -> Callable[[str], ModuleType]:
    """A stage package's ``__getattr__``: its submodules imported on first use, so that
    ``gemmlab.timing.bench.time_cuda`` works after only ``import gemmlab``, as ``gemmlab.bench.time_cuda`` did."""

    def __getattr__(name: str) -> ModuleType:
        if name.startswith("_") or importlib.util.find_spec(f"{package}.{name}") is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return importlib.import_module(f"{package}.{name}")

    return __getattr__


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedFinder())


__all__ = ["MOVED", "MovedFinder", "install", "new_path", "submodules_on_use"]
