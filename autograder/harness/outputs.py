"""A graded cell's outputs, made fit for the record and the student's feedback.

Two jobs: take out the gemmlab results the kernel published as data (``gemmlab.report``), which
become typed records instead of outputs; and withhold anything that would show hidden test
source (tracebacks, outputs quoting a hidden line) or flood the report.
"""
from __future__ import annotations

import copy
from typing import Any

import nbformat

from gemmlab.report import KINDS, RESULT_MIME

from ..records import PublishedResult
from .assemble import is_graded

WITHHELD = "[withheld: it quoted hidden test code]"


def take_published(outputs: list[dict]) -> tuple[list[dict], list[PublishedResult]]:
    """``(outputs without published results, the published results)``.

    An output carrying :data:`RESULT_MIME` is a published result; one whose payload is not a known
    kind with a dict of data (the student's process can send anything) is dropped, not kept."""
    kept: list[dict] = []
    found: list[PublishedResult] = []
    for out in outputs:
        data = out.get("data") if isinstance(out, dict) else None
        if not isinstance(data, dict) or RESULT_MIME not in data:
            kept.append(out)
            continue
        value = data[RESULT_MIME]
        if isinstance(value, dict) and value.get("kind") in KINDS and isinstance(value.get("data"), dict):
            found.append(PublishedResult(value["kind"], value["data"]))
    return kept, found


def hidden_lines(nb: nbformat.NotebookNode) -> list[str]:
    """Substantial lines of the hidden tests in ``nb`` (what feedback must never show)."""
    lines, inside = [], False
    for cell in nb.cells:
        for line in cell.source.splitlines() if is_graded(cell) else []:
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END HIDDEN TESTS" in line:
                inside = False
            elif inside and len(line.strip()) >= 12:
                lines.append(line.strip())
    return lines


def for_feedback(outputs: list[dict], hidden: list[str] = (), limit: int = 1_500_000) -> list[dict]:
    """Outputs fit for feedback: errors as name and message only (a traceback shows test source),
    and any output that quotes a hidden test (e.g. printed from the kernel's history) withheld."""
    kept, size = [], 0
    for out in outputs:
        out = copy.deepcopy(dict(out))
        if out.get("output_type") == "error":
            out["traceback"] = []
        text = "\n".join(_strings(out))
        text += "\n" + text.replace("\\'", "'").replace('\\"', '"')   # quoted through a repr
        if any(line in text for line in hidden):
            out = {"output_type": "stream", "name": "stdout",
                   "text": "[output withheld: it quoted hidden test code]\n"}
        size += len(str(out))
        if size > limit:
            kept.append({"output_type": "stream", "name": "stdout", "text": "[further output left out]\n"})
            break
        kept.append(out)
    return kept


def withhold(text: str, hidden: list[str]) -> str:
    """``text``, or a note in its place when it quotes a hidden test line."""
    return WITHHELD if any(line in text for line in hidden) else text


def _strings(value: Any) -> list[str]:
    """Every string inside an output (text, data of every MIME type, error name and message)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return ["".join(value)] if all(isinstance(v, str) for v in value) else [s for v in value for s in _strings(v)]
    return []
