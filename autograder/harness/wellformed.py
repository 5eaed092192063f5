"""Any JSON a student hands in, and anything their kernel sends back, made into well-formed nbformat 4.

A hand-in is evidence, not a notebook we can trust to be one: its cells may be strings, its
sources numbers, its metadata anything, its version 5. Everything the grader does after this
module (assembling, checksums, nbformat reads and writes, feedback) may then assume nbformat 4.5,
so one malformed hand-in can neither crash a run nor print nbformat's warnings over the progress
bar. What could not be read is said in plain words: a refusal (the notebook is graded as not
handed in) or repairs (single cells left out, each named by its number in the student's notebook).

Every value kept is bounded before anything uses it, and each refusal names its limit: the number of
cells (:data:`MAX_CELLS`), nbgrader metadata (a ``grade_id`` of at most :data:`MAX_ID_CHARS`, finite
``points`` from 0 to :data:`MAX_POINTS`, ``grade: true`` only with points: 10**400 points or a graded
cell without points once failed the honest answers of a hand-in), tags (distinct, at most
:data:`MAX_TAGS` of :data:`MAX_ID_CHARS`: repeated tags failed nbformat's validation), the nesting of
JSON outputs (:data:`MAX_OUTPUT_DEPTH`), and characters no file can hold (lone surrogates, made
U+FFFD by :func:`autograder.records.writable`).
"""
from __future__ import annotations

import re
import math
from dataclasses import dataclass
from typing import Any

from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_raw_cell

from ..cell_metadata import GRADE, GRADE_ID, NBGRADER, NBGRADER_FLAGS, POINTS, SCHEMA_VERSION, TAGS
from ..records import NotebookJSON, writable

CELL_TYPES = ("code", "markdown", "raw")
#: Most cells a hand-in may have (the course's notebooks have under 300).
MAX_CELLS = 5000
#: Longest grade_id or tag kept (nbgrader's are short names).
MAX_ID_CHARS = 200
#: Most tags a cell keeps.
MAX_TAGS = 64
#: Largest number of points a cell may claim (points of the cells that run are the instructor's anyway).
MAX_POINTS = 1e6
#: Deepest nesting of a JSON output (``application/json`` or ``*+json``) kept.
MAX_OUTPUT_DEPTH = 32
#: Longest error message kept of an output (the start says what went wrong).
MAX_EVALUE_CHARS = 20_000


def _short(value: Any, limit: int) -> str:
    text = str(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[:limit] + " [...]"
OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")
_CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Cleaned:
    """A hand-in as the grader reads it: ``notebook`` (None when refused), why it was refused, and
    which cells were left out (the student's cell numbers, 1-based, stay as handed in)."""

    notebook: NotebookJSON | None
    refused: str = ""
    repairs: tuple[str, ...] = ()


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(value), "a number")


def _text(source: Any) -> str | None:
    """A cell's source as text (nbformat allows a string or a list of strings), None if it is neither."""
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    return None


def _points(value: Any) -> bool:
    """Whether ``value`` is a number of points nbgrader could have written: finite, from 0 to MAX_POINTS."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, int):
        return 0 <= value <= MAX_POINTS
    return math.isfinite(value) and 0 <= value <= MAX_POINTS


def _nbgrader(meta: Any) -> dict | None:
    """The nbgrader metadata if it has nbgrader's shape within bounds, else None (the cell is then a plain cell)."""
    if not isinstance(meta, dict) or not isinstance(meta.get(GRADE_ID, ""), str):
        return None
    if len(meta.get(GRADE_ID, "")) > MAX_ID_CHARS:
        return None
    if any(not isinstance(meta.get(k, False), bool) for k in NBGRADER_FLAGS):
        return None
    points = meta.get(POINTS, 0)
    if points is not None and not _points(points):
        return None
    if meta.get(GRADE) is True and not _points(meta.get(POINTS)):
        return None                     # nbgrader never writes a graded cell without its points
    keep = {k: meta[k] for k in (GRADE_ID, POINTS, SCHEMA_VERSION, *NBGRADER_FLAGS) if k in meta}
    version = keep.get(SCHEMA_VERSION, 3)
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= 100:
        keep.pop(SCHEMA_VERSION, None)
    return keep


def _tags(tags: Any) -> list[str] | None:
    """The cell's tags, each once, if they are a list of short strings (else None: the tags are left out)."""
    if not isinstance(tags, list) or len(tags) > MAX_TAGS * 4 or not all(isinstance(t, str) for t in tags):
        return None
    distinct = list(dict.fromkeys(tags))
    if len(distinct) > MAX_TAGS or any(len(t) > MAX_ID_CHARS or not t for t in distinct):
        return None
    return distinct


def _cell(raw: Any, number: int, ids: set[str]) -> tuple[dict, str]:
    """``(cell, why it was left out or '')``; a left-out cell becomes an empty raw cell so that the
    numbers of the cells after it stay the student's."""
    cell_id = raw.get("id") if isinstance(raw, dict) else None
    if not (isinstance(cell_id, str) and _CELL_ID.match(cell_id)) or cell_id in ids:
        cell_id = f"handin-cell-{number}"
    ids.add(cell_id)
    why = ""
    if not isinstance(raw, dict):
        why = f"is not a cell ({_kind(raw)})"
    elif raw.get("cell_type") not in CELL_TYPES:
        why = "has no known cell_type"
    elif _text(raw.get("source", "")) is None:
        why = f"has a source that is not text ({_kind(raw.get('source'))})"
    if why:
        cell = new_raw_cell("")
        cell["id"] = cell_id
        return cell, why
    meta_in = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    metadata: dict = {}
    if NBGRADER in meta_in:
        nbg = _nbgrader(meta_in[NBGRADER])
        if nbg is None:
            why = ("has nbgrader metadata that nbgrader never writes (a grade_id is text of at most "
                   f"{MAX_ID_CHARS} characters, points a number from 0 to {MAX_POINTS:,.0f}, and a graded cell has "
                   "points); it ran as a plain cell")
        else:
            metadata[NBGRADER] = nbg
    if TAGS in meta_in:
        tags = _tags(meta_in[TAGS])
        if tags is not None:
            metadata[TAGS] = tags
        elif not why:
            why = (f"has tags that are not distinct short names (at most {MAX_TAGS} of {MAX_ID_CHARS} characters); "
                   "they were left out")
    make = {"code": new_code_cell, "markdown": new_markdown_cell, "raw": new_raw_cell}[raw["cell_type"]]
    cell = make(writable(_text(raw.get("source", ""))), metadata=writable(metadata))
    cell["id"] = cell_id
    return cell, why


def clean_notebook(data: Any) -> Cleaned:
    """``data`` (any JSON value) as an nbformat 4.5 notebook of the student's cells, or refused."""
    if not isinstance(data, dict):
        return Cleaned(None, f"it is JSON but not a notebook ({_kind(data)}, where a notebook is an object "
                             "with a list of cells)")
    cells = data.get("cells")
    if not isinstance(cells, list):
        old = " (an nbformat 3 notebook: open it in JupyterLab and save it again)" if "worksheets" in data else ""
        return Cleaned(None, f"it is JSON but not a notebook: it has no list of cells{old}")
    if len(cells) > MAX_CELLS:
        return Cleaned(None, f"it has {len(cells):,} cells; the grader reads notebooks of at most {MAX_CELLS:,}")
    repairs: list[str] = []
    if data.get("nbformat") != 4:
        version = data.get("nbformat")
        shown = repr(version) if isinstance(version, (int, str, type(None))) and len(repr(version)) <= 20 else "?"
        repairs.append(f"it says nbformat {shown}; it was read as nbformat 4")
    ids: set[str] = set()
    clean = []
    for number, raw in enumerate(cells, 1):
        cell, why = _cell(raw, number, ids)
        clean.append(cell)
        if why:
            left = "plain cell" in why or "were left out" in why
            repairs.append(f"cell {number} {why}" + ("" if left else "; it was left out"))
    nb = new_notebook(cells=clean)
    return Cleaned(dict(_plain(nb)), "", tuple(repairs))


def _plain(value: Any) -> Any:
    """NotebookNode (dict subclass) trees as plain dicts and lists, so records stay JSON."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _depth(value: Any, stop: int) -> int:
    """How deeply ``value`` nests lists and dicts, counted without recursion (giving up past ``stop``)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > stop:
                break
            todo.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


def _mime_value(mime: str, value: Any) -> Any:
    """A MIME bundle entry as nbformat allows it (JSON types any JSON within MAX_OUTPUT_DEPTH, others text),
    else None."""
    if mime == "application/json" or mime.endswith("+json"):
        return writable(value) if _depth(value, MAX_OUTPUT_DEPTH) <= MAX_OUTPUT_DEPTH else None
    text = _text(value)
    return None if text is None else writable(text)


def clean_outputs(outputs: list) -> list[dict]:
    """A cell's outputs as the kernel sent them, keeping only well-formed nbformat 4 outputs (a
    display of ``{'text/plain': 5}`` keeps nothing of that entry)."""
    kept: list[dict] = []
    for out in outputs if isinstance(outputs, list) else []:
        if not isinstance(out, dict) or out.get("output_type") not in OUTPUT_TYPES:
            continue
        kind = out["output_type"]
        if kind == "stream":
            text = _text(out.get("text"))
            if text is not None:
                kept.append({"output_type": "stream", "name": "stderr" if out.get("name") == "stderr" else "stdout",
                             "text": writable(text)})
            continue
        if kind == "error":
            tb = out.get("traceback")
            kept.append({"output_type": "error", "ename": writable(_short(out.get("ename", ""), MAX_ID_CHARS)),
                         "evalue": writable(_short(out.get("evalue", ""), MAX_EVALUE_CHARS)),
                         "traceback": [writable(t) for t in tb if isinstance(t, str)] if isinstance(tb, list) else []})
            continue
        data = out.get("data") if isinstance(out.get("data"), dict) else {}
        bundle = {writable(m): v for m, v in ((m, _mime_value(m, v)) for m, v in data.items() if isinstance(m, str))
                  if v is not None}
        if not bundle:
            continue
        meta = out.get("metadata") if isinstance(out.get("metadata"), dict) else {}
        meta = writable(meta) if _depth(meta, MAX_OUTPUT_DEPTH) <= MAX_OUTPUT_DEPTH else {}
        new = {"output_type": kind, "data": bundle, "metadata": meta}
        if kind == "execute_result":
            count = out.get("execution_count")
            new["execution_count"] = count if isinstance(count, int) and not isinstance(count, bool) else None
        kept.append(new)
    return kept


__all__ = ["CELL_TYPES", "Cleaned", "MAX_CELLS", "MAX_ID_CHARS", "MAX_OUTPUT_DEPTH", "MAX_POINTS", "MAX_TAGS",
           "OUTPUT_TYPES", "clean_notebook", "clean_outputs"]
