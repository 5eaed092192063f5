"""Show gemmlab errors in IPython as one short red message instead of a traceback.

A student whose kernel fails to compile needs the diagnostic, not forty frames of
gemmlab and cuda-python internals. The full traceback stays one ``%tb`` away.
"""
from __future__ import annotations

import sys
from typing import Any

from gemmlab.errors import GemmlabError

_RED = "\x1b[31m"
_BOLD_RED = "\x1b[1;31m"
_RESET = "\x1b[0m"


def format_error(error: BaseException, color: bool = True) -> str:
    """``CompileError: <message>``, the class name in bold red."""
    name = type(error).__name__
    if not color:
        return f"{name}: {error}"
    return f"{_BOLD_RED}{name}{_RESET}: {_RED}{error}{_RESET}"


def _remember(etype: type, value: BaseException, tb: Any) -> None:
    """Where ``%tb`` (and pdb) look for the last exception."""
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb
    if hasattr(sys, "last_exc") or sys.version_info >= (3, 12):
        sys.last_exc = value


def short_error_handler(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> list[str]:
    """IPython custom exception hook: show the short form as the cell's error output.

    ``_showtraceback`` is the shell's own channel for errors: in a notebook it sends a
    real error message (so the cell is marked failed and graders see an error), in a
    terminal it prints. The handler's return value is ignored by IPython's run_code.
    """
    _remember(etype, value, tb)
    text = format_error(value, color=True)
    shell._showtraceback(etype, value, [text])
    return []


def install(ipython: Any) -> None:
    """Route :class:`GemmlabError` (and subclasses) through the short display in this shell."""
    ipython.set_custom_exc((GemmlabError,), short_error_handler)
