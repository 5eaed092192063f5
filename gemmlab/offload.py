"""Where a check or a timing runs when this machine cannot: the class's GPU pool, once it registers itself.

Why a registration and not an import: :mod:`gemmlab.remote` builds the same result types the local checks do
and sends the judge's requests, so it imports them; if ``check_gemm`` imported ``gemmlab.remote`` back, the two
would be one knot. Instead the pool registers a *finder* here (:func:`register`, which ``gemmlab.remote`` calls
when it is imported, and so on ``gemmlab.connect``); ``check_gemm``, ``check_copy``, ``bench_copy`` and
``bench_gemm`` ask :func:`pool_for_work`. The environment's pool (``GEMMLAB_POOL``, set for every student of a
class's JupyterHub, who never calls ``connect``) is found the same way: ``import gemmlab`` registers a finder that
imports the pool package on first use (in ``gemmlab/__init__.py``).
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Protocol, Sequence

from gemmlab.checking.integrity import grading_mode


class WorkElsewhere(Protocol):
    """What runs a check or a timing on another machine's GPU (:class:`gemmlab.remote.Pool`)."""

    def check_gemm(self, fn: Callable[..., Any], convention: str, dtype: Any, out_dtype: Any,
                   shapes: Sequence[tuple[int, int, int]], alpha: float, beta: float, tile: tuple[int, int],
                   **options: Any) -> Any: ...

    def bench_gemm(self, fn: Callable[..., Any], shape: tuple[int, int, int], convention: str, dtype: Any,
                   out_dtype: Any, alpha: float, beta: float, label: str, **options: Any) -> Any: ...

    def check_copy(self, fn: Callable[..., Any], shapes: Sequence[tuple[int, int]], dtype: Any,
                   transpose: bool = False, who: bool = False, timeout_s: float | None = None) -> Any: ...

    def bench_copy(self, fn: Callable[..., Any], shape: tuple[int, int], dtype: Any, transpose: bool = False,
                   timeout_s: float | None = None) -> Any: ...


Finder = Callable[[], "WorkElsewhere | None"]

_LOCK = threading.Lock()
_finders: dict[str, Finder] = {}


def register(name: str, finder: Finder) -> None:
    """Let ``finder`` say where work goes (None: here); a second registration under ``name`` replaces the first."""
    with _LOCK:
        _finders[name] = finder


def unregister(name: str) -> None:
    """Forget the finder registered under ``name`` (nothing happens when there is none)."""
    with _LOCK:
        _finders.pop(name, None)


def registered() -> tuple[str, ...]:
    """The names finders are registered under, in the order they are asked."""
    with _LOCK:
        return tuple(_finders)


def pool_for_work() -> WorkElsewhere | None:
    """Where the check or timing asked for now runs: the first registered finder's answer that is not None, or
    None (this machine's GPU, or the error that it has none). The finders decide that a machine with a usable
    GPU keeps its work; the course's grader (``GEMMLAB_GRADING=1``) always does, whatever a hand-in registered,
    so a grade never comes from a stand-in a student put here."""
    if grading_mode():
        return None
    with _LOCK:
        finders = list(_finders.values())
    for finder in finders:
        elsewhere = finder()
        if elsewhere is not None:
            return elsewhere
    return None


__all__ = ["Finder", "WorkElsewhere", "pool_for_work", "register", "registered", "unregister"]
