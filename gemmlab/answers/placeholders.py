"""Is an exercise still its placeholder? For kernel source, a Python function, and an answer seen from the judge.

Why a module of its own: the notebook helpers refuse to compile or check a placeholder with a message that says
so, the student's kernel tells the judge whether each answer function is written (:mod:`.serving`), and in the
judge that answer is a stand-in (:mod:`.stand_ins`) that carries the student's kernel's verdict; all three read
one rule, here.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

from .stand_ins import Answer, DslAnswer

#: What nbgrader leaves in the student release where a solution was (the Python code stub).
STUB_MARK = "raise NotImplementedError()"


def source_done(source: str) -> bool:
    """False while kernel source (a C++ string) still contains the exercise placeholder."""
    return STUB_MARK not in source


def function_done(fn: Callable[..., Any]) -> bool:
    """False while a Python function's body is still the exercise placeholder."""
    if isinstance(fn, (Answer, DslAnswer)):   # in the judge: the student's kernel said whether it is done
        return fn.done
    fn = inspect.unwrap(getattr(fn, "__wrapped__", fn))
    try:
        return STUB_MARK not in inspect.getsource(fn)
    except (OSError, TypeError):  # no source to inspect: assume the student wrote it
        return True


__all__ = ["STUB_MARK", "function_done", "source_done"]
