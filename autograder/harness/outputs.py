"""A graded cell's outputs, made fit for the record and the student's feedback.

Three jobs:

- take out the gemmlab results the kernel published as data (``gemmlab.checking.report``), which become
  typed records instead of outputs (:func:`take_published`);
- turn what the student's process sent into a closed, plain form (:func:`for_feedback`): text,
  error name and message, and pictures that decode as PNG or JPEG and are re-encoded here. No
  HTML, SVG, script or undecodable bytes survive it, so nothing a student prints can run or be
  styled in the feedback page;
- say which cells' outputs may be shown at all (:func:`reached_by_hidden_tests`). Once a hidden
  test has run in the student's process, anything that process produces may carry the hidden
  code in some encoding (re-indented, base64, reversed, drawn into a picture), and no detector
  catches every encoding. The wall is therefore by position, not by content: feedback shows
  nothing from the student's process for those cells, only the grader's own verdict and the
  instructor's messages (:func:`visible_messages`).

:func:`hidden_lines` and :func:`withhold` remain as a detector for what the grader records (the
results file is the instructor's); they are not what keeps hidden code out of feedback.
"""
from __future__ import annotations

import ast
import base64
import binascii
import copy
import io
from typing import Any

import nbformat

from gemmlab.checking.report import KINDS, RESULT_MIME

from ..cell_metadata import grade_id, is_graded
from ..records import NotebookJSON, PublishedResult

WITHHELD = "[withheld: it quoted hidden test code]"
#: The delimiter nbgrader strips hidden tests by (its ``begin_test_delimiter``).
HIDDEN_BEGIN = "BEGIN HIDDEN TESTS"
HIDDEN_END = "END HIDDEN TESTS"

#: Picture formats feedback accepts from a notebook, and its limits for one picture.
IMAGE_MIMES = ("image/png", "image/jpeg")
MAX_IMAGE_BYTES = 4_000_000       #: encoded, as the notebook holds it
MAX_IMAGE_PIXELS = 4096 * 4096    #: width × height, checked before decoding the pixels
MAX_IMAGE_SIDE = 8192

LEFT_OUT_HTML = "[an HTML, SVG or script output was left out: feedback shows text and pictures only]"
LEFT_OUT_IMAGE = "[a picture was left out: it did not decode as a PNG or JPEG within the size limits]"
LEFT_OUT_MORE = "[further output left out]"


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


# --------------------------------------------------------------------------- where hidden tests reach
def _source(cell: Any) -> str:
    src = cell.get("source", "") if isinstance(cell, dict) else ""
    if isinstance(src, list):
        return "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def has_hidden_tests(cell: Any) -> bool:
    """Whether a cell holds hidden tests (nbgrader's delimiter anywhere in its source)."""
    return HIDDEN_BEGIN in _source(cell).upper()


def reached_by_hidden_tests(nb: NotebookJSON | nbformat.NotebookNode) -> set[str]:
    """The grade_ids of the cells that ran after the student's process may have seen a hidden test:
    every cell from the first one holding hidden tests on, in the order the notebook ran.

    The student's code runs in the same process as the tests (and, with a separate judge, still
    receives the hidden tests' arguments), so from that point on its output can carry hidden code."""
    reached, seen = set(), False
    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
        seen = seen or has_hidden_tests(cell)
        if seen and isinstance(cell, dict) and grade_id(cell):
            reached.add(grade_id(cell))
    return reached


def visible_messages(cell: Any) -> set[str]:
    """The string literals of a test cell's visible part (before its hidden tests): the instructor's
    messages that the student has seen already, such as ``assert x == 9, 'square(3) should be 9'``.

    A failing test's error is shown by matching it against these, so what appears comes from the
    instructor's source; the student's process only picks which of them."""
    visible = _source(cell)
    at = visible.upper().find(HIDDEN_BEGIN)
    if at >= 0:
        visible = visible[:visible.rfind("\n", 0, at) + 1]
    try:
        tree = ast.parse(visible)
    except (SyntaxError, ValueError):
        return set()
    return {node.value.strip() for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip()}


# --------------------------------------------------------------------------- outputs in plain form
def reencode_image(data: Any) -> bytes | None:
    """A picture from a notebook (base64 PNG or JPEG) decoded and written again as PNG by the grader,
    or None when it is not one, is too large, or does not decode. What comes back holds only
    pixels: no text chunks, no metadata, nothing a browser could read as markup."""
    text = "".join(data) if isinstance(data, list) and all(isinstance(s, str) for s in data) else data
    if not isinstance(text, str) or len(text) > MAX_IMAGE_BYTES * 4 // 3 + 16:
        return None
    try:
        raw = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        return None
    from PIL import Image

    try:
        with Image.open(io.BytesIO(raw), formats=["PNG", "JPEG"]) as img:
            width, height = img.size
            if width * height > MAX_IMAGE_PIXELS or max(width, height) > MAX_IMAGE_SIDE or min(width, height) < 1:
                return None
            img.load()
            pixels = img.convert("RGBA" if "A" in img.getbands() or img.mode == "P" else "RGB")
    except Exception:  # noqa: BLE001 - any failure to decode means it is not shown
        return None
    out = io.BytesIO()
    pixels.save(out, format="PNG")
    return out.getvalue()


def _plain(value: Any) -> str:
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return value if isinstance(value, str) else ""


def _note(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text + "\n"}


def plain_output(out: Any) -> dict | None:
    """One output in the closed form feedback renders, or None when nothing of it can be shown:

    - ``stream``: ``name`` and ``text``;
    - ``error``: ``ename`` and ``evalue`` (no traceback: it shows the test's source);
    - ``display_data`` / ``execute_result``: ``data`` with only ``image/png`` (re-encoded by
      :func:`reencode_image`) or only ``text/plain``. HTML, SVG, JavaScript, LaTeX, Markdown and
      JSON are left out (with a note when nothing else was offered)."""
    if not isinstance(out, dict):
        return None
    kind = out.get("output_type")
    if kind == "stream":
        name = out.get("name") if out.get("name") in ("stdout", "stderr") else "stdout"
        return {"output_type": "stream", "name": name, "text": _plain(out.get("text"))}
    if kind == "error":
        return {"output_type": "error", "ename": _plain(out.get("ename")), "evalue": _plain(out.get("evalue")),
                "traceback": []}
    if kind not in ("display_data", "execute_result"):
        return None
    data = out.get("data") if isinstance(out.get("data"), dict) else {}
    for mime in IMAGE_MIMES:
        if mime in data:
            png = reencode_image(data[mime])
            if png is not None:
                return {"output_type": "display_data", "data": {"image/png": base64.b64encode(png).decode("ascii")}}
    if "text/plain" in data:
        return {"output_type": "display_data", "data": {"text/plain": _plain(data["text/plain"])}}
    if any(m in data for m in IMAGE_MIMES):
        return _note(LEFT_OUT_IMAGE)
    return _note(LEFT_OUT_HTML) if data else None


def for_feedback(outputs: list[dict], hidden: list[str] = (), limit: int = 1_500_000) -> list[dict]:
    """Outputs in the plain form of :func:`plain_output`, at most ``limit`` characters in all, each
    one that quotes a line of ``hidden`` (see :func:`hidden_lines`) replaced by a note."""
    kept, size = [], 0
    for original in outputs if isinstance(outputs, (list, tuple)) else []:
        out = plain_output(copy.deepcopy(original))
        if out is None:
            continue
        text = "\n".join(_strings(out))
        text += "\n" + text.replace("\\'", "'").replace('\\"', '"')   # quoted through a repr
        if any(line in text for line in hidden):
            out = _note("[output withheld: it quoted hidden test code]")
        size += len(str(out))
        if size > limit:
            kept.append(_note(LEFT_OUT_MORE))
            break
        kept.append(out)
    return kept


# --------------------------------------------------------------------------- the detector (records)
def hidden_lines(nb: nbformat.NotebookNode) -> list[str]:
    """Substantial lines of the hidden tests in ``nb``, for :func:`withhold` in the grader's records."""
    lines, inside = [], False
    for cell in nb.cells:
        for line in cell.source.splitlines() if is_graded(cell) else []:
            if HIDDEN_BEGIN in line:
                inside = True
            elif HIDDEN_END in line:
                inside = False
            elif inside and len(line.strip()) >= 12:
                lines.append(line.strip())
    return lines


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
