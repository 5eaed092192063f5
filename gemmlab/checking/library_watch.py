"""Which libraries' Python code ran while a function was called: "work it out without the library", checked.

Why: an exercise that asks a student to write by hand what a library already does (01's ``crd2idx``,
against pycute and ``gemmlab.layout``) is graded by comparing the student's results with the library's,
so a call into the library passes. What the function *did* can be checked where its source cannot be
trusted to tell: the call runs under a profile hook (``sys.setprofile``, and ``threading.setprofile`` for
threads it starts) that notes every function entered whose code lives in one of the named libraries, by
any name, alias or helper it was reached through. A copy of a library's code pasted into the answer cannot
be told from the student's own and is not caught; a hook removed during the call is reported.

In grading, the student's function runs in the student's kernel: the judge asks for a watched call
(:meth:`gemmlab.answers.stand_ins.Answer.watched`), and this module runs it there.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

#: Most library names one watch may name, and the most functions it reports.
MAX_LIBRARIES = 8
MAX_REPORTED = 5


@dataclass(frozen=True)
class Watched:
    """What one watched call returned, and what it ran of the watched libraries."""

    result: Any
    entered: tuple[str, ...] = ()        # "library: module.function" of the first functions entered, each once
    hook_removed: bool = False           # the call replaced or removed the profile hook: nothing can be said

    @property
    def clean(self) -> bool:
        """No watched library's code ran, as far as the hook saw, and the hook stayed in place."""
        return not self.entered and not self.hook_removed

    def to_dict(self) -> dict[str, Any]:
        return {"entered": list(self.entered), "hook_removed": self.hook_removed}


def library_roots(libraries: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Where each library's code lives (its package folder, or its module file), found without importing it."""
    if isinstance(libraries, str) or not 0 < len(libraries) <= MAX_LIBRARIES:
        raise ValueError(f"name 1 to {MAX_LIBRARIES} libraries to watch, as a list of module names")
    roots: dict[str, tuple[str, ...]] = {}
    for name in libraries:
        if not isinstance(name, str) or not name.replace(".", "").replace("_", "").isalnum():
            raise ValueError(f"a library to watch is a module name such as 'pycute', not {name!r:.60}")
        module = sys.modules.get(name)
        spec = getattr(module, "__spec__", None) if module is not None else None
        if spec is None:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
        if spec is None:
            roots[name] = ()                         # not installed: nothing of it can run
            continue
        folders = tuple(os.path.join(os.path.realpath(p), "") for p in (spec.submodule_search_locations or ()))
        roots[name] = folders or ((os.path.realpath(spec.origin),) if spec.origin else ())
    return roots


def watched_call(fn: Callable[..., Any], args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None, *,
                 libraries: Sequence[str]) -> Watched:
    """``fn(*args, **kwargs)``, noting which of ``libraries``' functions it entered. Exceptions of ``fn`` propagate
    (the hook is removed first)."""
    roots = library_roots(libraries)
    prefixes = [(name, root) for name, paths in roots.items() for root in paths]
    real: dict[str, str] = {}
    entered: list[str] = []
    seen: set[str] = set()

    def library_of(filename: str) -> str | None:
        path = real.get(filename)
        if path is None:
            path = real[filename] = os.path.realpath(filename) if filename and not filename.startswith("<") else filename
        for name, root in prefixes:
            if path == root or (root.endswith(os.sep) and path.startswith(root)):
                return name
        return None

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or len(entered) >= MAX_REPORTED:
            return
        code = frame.f_code
        name = library_of(code.co_filename)
        if name is not None:
            what = f"{name}: {frame.f_globals.get('__name__', '?')}.{getattr(code, 'co_qualname', code.co_name)}"
            if what not in seen:
                seen.add(what)
                entered.append(what)

    before, before_threads = sys.getprofile(), threading.getprofile()
    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        result = fn(*args, **(kwargs or {}))
    finally:
        removed = sys.getprofile() is not hook
        sys.setprofile(before)
        threading.setprofile(before_threads)
    return Watched(result, tuple(entered), removed)


__all__ = ["MAX_LIBRARIES", "Watched", "library_roots", "watched_call"]
