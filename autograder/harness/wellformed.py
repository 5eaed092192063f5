"""Any JSON a student hands in, and anything their kernel sends back, made into well-formed nbformat 4.

A hand-in is evidence, not a notebook we can trust to be one: its cells may be strings, its
sources numbers, its metadata anything, its version 5. Everything the grader does after this
module (assembling, checksums, nbformat reads and writes, feedback) may then assume nbformat 4.5,
so one malformed hand-in can neither crash a run nor print nbformat's warnings over the progress
bar. What could not be read is said in plain words: a refusal (the notebook is graded as not
handed in) or repairs (single cells left out, each named by its number in the student's notebook).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_raw_cell

from ..records import NotebookJSON

CELL_TYPES = ("code", "markdown", "raw")
OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")
_CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_NBGRADER_FLAGS = ("grade", "solution", "locked", "task")


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


def _nbgrader(meta: Any) -> dict | None:
    """The nbgrader metadata if it has nbgrader's shape, else None (the cell is then a plain cell)."""
    if not isinstance(meta, dict) or not isinstance(meta.get("grade_id", ""), str):
        return None
    if any(not isinstance(meta.get(k, False), bool) for k in _NBGRADER_FLAGS):
        return None
    points = meta.get("points", 0)
    if points is not None and (isinstance(points, bool) or not isinstance(points, (int, float))):
        return None
    keep = {k: meta[k] for k in ("grade_id", "points", "schema_version", *_NBGRADER_FLAGS) if k in meta}
    if not isinstance(keep.get("schema_version", 3), int):
        keep.pop("schema_version")
    return keep


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
    if "nbgrader" in meta_in:
        nbg = _nbgrader(meta_in["nbgrader"])
        if nbg is None:
            why = "has nbgrader metadata that nbgrader never writes (it ran as a plain cell)"
        else:
            metadata["nbgrader"] = nbg
    tags = meta_in.get("tags")
    if isinstance(tags, list) and all(isinstance(t, str) for t in tags):
        metadata["tags"] = list(tags)
    make = {"code": new_code_cell, "markdown": new_markdown_cell, "raw": new_raw_cell}[raw["cell_type"]]
    cell = make(_text(raw.get("source", "")), metadata=metadata)
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
    repairs: list[str] = []
    if data.get("nbformat") != 4:
        repairs.append(f"it says nbformat {data.get('nbformat')!r}; it was read as nbformat 4")
    ids: set[str] = set()
    clean = []
    for number, raw in enumerate(cells, 1):
        cell, why = _cell(raw, number, ids)
        clean.append(cell)
        if why:
            repairs.append(f"cell {number} {why}" + ("" if "plain cell" in why else "; it was left out"))
    nb = new_notebook(cells=clean)
    return Cleaned(dict(_plain(nb)), "", tuple(repairs))


def _plain(value: Any) -> Any:
    """NotebookNode (dict subclass) trees as plain dicts and lists, so records stay JSON."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _mime_value(mime: str, value: Any) -> Any:
    """A MIME bundle entry as nbformat allows it (JSON types any JSON, others text), else None."""
    if mime == "application/json" or mime.endswith("+json"):
        return value
    return _text(value)


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
                             "text": text})
            continue
        if kind == "error":
            tb = out.get("traceback")
            kept.append({"output_type": "error", "ename": str(out.get("ename", "")), "evalue": str(out.get("evalue", "")),
                         "traceback": [t for t in tb if isinstance(t, str)] if isinstance(tb, list) else []})
            continue
        data = out.get("data") if isinstance(out.get("data"), dict) else {}
        bundle = {m: v for m, v in ((m, _mime_value(m, v)) for m, v in data.items() if isinstance(m, str))
                  if v is not None}
        if not bundle:
            continue
        meta = out.get("metadata") if isinstance(out.get("metadata"), dict) else {}
        new = {"output_type": kind, "data": bundle, "metadata": meta}
        if kind == "execute_result":
            count = out.get("execution_count")
            new["execution_count"] = count if isinstance(count, int) and not isinstance(count, bool) else None
        kept.append(new)
    return kept


__all__ = ["CELL_TYPES", "Cleaned", "OUTPUT_TYPES", "clean_notebook", "clean_outputs"]
