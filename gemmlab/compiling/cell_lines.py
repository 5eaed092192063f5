"""Compiler line numbers turned into the notebook lines a student sees.

NVRTC counts lines from the start of the source string. In a notebook that string is a
triple-quoted literal inside a cell (``SRC = r\"\"\"`` then a newline, often below a comment, and
sometimes several cells' strings joined), so "kernel.cu:12" is rarely line 12 of anything on
screen. This module finds the cell whose string literal holds the failing line, newest cell
first (the definition the student ran last), and adds "line L of cell [n]" to each location of a
:class:`CompileError` message; ``[n]`` is the execution count JupyterLab prints beside the cell.
Outside IPython the message is left as it is.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Sequence

from gemmlab.errors import CompileError

__all__ = ["CellLine", "annotate", "cell_line", "cell_of_file", "notebook_cells"]

# A triple-quoted string literal with an optional prefix (r, b, u, rb ...; f-strings are skipped:
# their text is not the value).
_LITERAL = re.compile(r"(?<![\w'\"])(?P<prefix>[rRbBuU]{0,2})(?P<quote>\"\"\"|''')(?P<body>.*?)(?P=quote)", re.DOTALL)


@dataclass(frozen=True)
class CellLine:
    """Where a line of the compiled source is in the notebook: line ``line`` of cell ``cell``."""

    cell: str  # the label a student sees, e.g. "[7]"
    line: int

    def __str__(self) -> str:
        return f"line {self.line} of cell {self.cell}"


def _literals(cell: str) -> list[tuple[int, str]]:
    """(cell line where the literal's text starts, the literal's value) for each triple-quoted string
    whose value is its text: raw strings, and plain strings without backslashes."""
    found = []
    for match in _LITERAL.finditer(cell):
        body = match["body"]
        if "r" not in match["prefix"].lower() and "\\" in body:
            continue  # escapes make the value differ from the text: no safe line mapping
        if "\n" not in body:
            continue  # one-line strings are not kernel sources
        found.append((cell.count("\n", 0, match.start("body")) + 1, body))
    return found


def cell_line(source: str, line: int, cells: Sequence[tuple[str, str]]) -> CellLine | None:
    """The notebook line of ``line`` (1-based) of ``source``: ``cells`` are (label, cell text), newest
    first; the first cell with a string literal that holds that line of the source wins."""
    if line < 1:
        return None
    for label, text in cells:
        for first_line, body in _literals(text):
            start = source.find(body)
            while start >= 0:
                begins = source.count("\n", 0, start) + 1
                if begins <= line <= begins + body.count("\n"):
                    return CellLine(label, first_line + line - begins)
                start = source.find(body, start + 1)
    return None


def notebook_cells() -> list[tuple[str, str]]:
    """(label, raw text) of the cells this IPython session ran, newest first; [] outside IPython."""
    ipython_module = sys.modules.get("IPython")
    if ipython_module is None:
        return []
    shell = ipython_module.get_ipython()
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    if not history:
        return []
    return [(f"[{count}]", text) for count, text in reversed(list(enumerate(history))) if count and text]


def cell_of_file(filename: str) -> str | None:
    """The label "[n]" JupyterLab shows beside cell ``n``, for the file IPython compiled that cell into
    (``/tmp/ipykernel_…/….py`` under Jupyter); None for any other file, and outside IPython."""
    ipython_module = sys.modules.get("IPython")
    shell = ipython_module.get_ipython() if ipython_module is not None else None
    format_code_name = getattr(getattr(shell, "compile", None), "format_code_name", None)
    if format_code_name is None:
        return None
    named = format_code_name(filename)       # ("Cell", "In[12]") for a cell's file, else None
    if not named:
        return None
    match = re.fullmatch(r"In\[(\d+)\]", named[1])
    return f"[{match.group(1)}]" if match else None


def annotate(error: CompileError, source: str, program: str,
             cells: Sequence[tuple[str, str]] | None = None) -> CompileError:
    """``error`` with "line L of cell [n]" after each ``program:LINE[:COLUMN]`` that starts a line of its message
    (the same error when no line is found in a cell). ``cells`` defaults to this IPython session's."""
    cells = notebook_cells() if cells is None else cells
    if not cells:
        return error
    places: dict[int, CellLine | None] = {}

    def where(line: int) -> CellLine | None:
        if line not in places:
            places[line] = cell_line(source, line, cells)
        return places[line]

    def at_location(match: re.Match) -> str:
        found = where(int(match["line"]))
        return match[0] + (f" ({found})" if found else "")

    message = re.sub(rf"(?m)^{re.escape(program)}:(?P<line>\d+)(?::\d+)?", at_location, str(error))
    if message == str(error):
        return error
    annotated = CompileError(message, diagnostics=error.diagnostics, log=error.log)
    annotated.__cause__ = error.__cause__
    return annotated
