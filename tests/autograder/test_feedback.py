"""The student's feedback page is rendered from trusted data only (CPU, no sandbox needed).

Records are built as the grader writes them, around the course's own notebooks (``solutions/``):
each graded cell of every notebook gets hostile outputs. Classes covered: HTML and script in
text/html, image/png holding HTML, image/svg+xml, oversized pictures, pictures carrying text
chunks, hidden-test source re-encoded (re-indented, without spaces, base64, reversed) in every
field the student's process fills, and fake score banners in outputs, errors and verdict messages.
"""
from __future__ import annotations

import base64
import html
import io
import json
import re
from pathlib import Path

import pytest

from tests.support import ROOT

pytest.importorskip("nbgrader", reason="the grader needs nbgrader (tools/wheelhouse.py --profile gpu-grade)")
from autograder.reports import feedback  # noqa: E402
from autograder.harness.outputs import (  # noqa: E402
    HIDDEN_BEGIN, HIDDEN_END, LEFT_OUT_HTML, LEFT_OUT_IMAGE, reached_by_hidden_tests, reencode_image,
    visible_messages)
from autograder.records import CellResult, PublishedResult, SubmissionResult  # noqa: E402
from autograder.cell_metadata import is_graded  # noqa: E402

NOTEBOOKS = sorted((ROOT / "solutions").glob("*/*.ipynb"))
FAKE = "10 / 10 points"
BANNER = f"<h1>tiny: {FAKE}</h1><script>alert(1)</script>"


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _graded(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if is_graded(c)]


def _gid(cell: dict) -> str:
    return cell["metadata"]["nbgrader"]["grade_id"]


def _hidden_lines(nb: dict) -> list[str]:
    """Distinctive lines of the notebook's hidden tests (long enough not to occur by chance)."""
    lines, inside = [], False
    for cell in nb["cells"]:
        for line in _source(cell).splitlines():
            if HIDDEN_BEGIN in line:
                inside = True
            elif HIDDEN_END in line:
                inside = False
            elif inside and len(line.strip()) >= 24:
                lines.append(line.strip())
    return lines


def _encodings(line: str) -> list[str]:
    return [line, "    " + line.replace(" ", "  "), line.replace(" ", ""), base64.b64encode(line.encode()).decode(),
            line[::-1]]


def _without_hidden(nb: dict) -> dict:
    """The notebook with its hidden tests cut out (an assignment whose tests are all visible)."""
    nb = json.loads(json.dumps(nb))
    for cell in nb["cells"]:
        cell["source"] = re.sub(rf"[^\n]*{HIDDEN_BEGIN}.*?{HIDDEN_END}[^\n]*\n?", "", _source(cell), flags=re.S)
    return nb


def _png(size: tuple[int, int] = (8, 6), text: str = "", mode: str = "RGB") -> bytes:
    from PIL import Image, PngImagePlugin

    info = PngImagePlugin.PngInfo()
    if text:
        info.add_text("Comment", text)
    buf = io.BytesIO()
    Image.new(mode, size).save(buf, format="PNG", pnginfo=info)
    return buf.getvalue()


def _noise_png() -> bytes:
    """A PNG whose pixel data is long and incompressible (cut short, it cannot decode)."""
    import random

    from PIL import Image

    buf = io.BytesIO()
    Image.frombytes("RGB", (32, 32), random.Random(0).randbytes(32 * 32 * 3)).save(buf, format="PNG")
    return buf.getvalue()


def _jpeg() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (200, 10, 10)).save(buf, format="JPEG")
    return buf.getvalue()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _check(message: str, fraction: list[list[float]]) -> PublishedResult:
    row = {"shape": [64, 64, 64], "passed": False, "rel_error": 1.0, "worst": None, "n_bad": 7, "guard_ok": True,
           "inputs_ok": True, "message": message, "n_unwritten": 0, "n_nonfinite": 0, "tile_fraction": fraction}
    return PublishedResult("check", {"rows": [row], "convention": "tn", "dtype": "float16", "out_dtype": "float16",
                                     "tile": [16, 16], "seed": 0, "device": message, "passed": False})


def _bench(label: str, ratio: float = 0.5) -> PublishedResult:
    return PublishedResult("bench", {"shape": [4096, 4096, 4096], "convention": "tn", "dtype": "float16",
                                     "out_dtype": "float16", "ms": 1.0, "tflops": 100.0 * ratio, "cublas_ms": 0.5,
                                     "cublas_tflops": 100.0, "ratio": ratio, "device": label, "reps": 5,
                                     "label": label})


def _record(name: str, nb: dict, make) -> SubmissionResult:
    """A record as the grader writes it: one CellResult per graded cell from ``make(cell)``."""
    cells = tuple(CellResult(name, _gid(c), float(c["metadata"]["nbgrader"].get("points", 0)), **make(c))
                  for c in _graded(nb))
    return SubmissionResult("ann", name.split(".")[0], "a1", cells, score=sum(c.score or 0 for c in cells),
                            max_score=sum(c.points for c in cells), seconds=12.0,
                            events=(f"{name}, planted: {BANNER}",), executed={name: nb})


def _outside_notebook_blocks(page: str) -> str:
    """The page without the boxes marked as the notebook's (student text inside them is escaped)."""
    return re.sub(r"<div class='notebook'>.*?</div></details>", "", page, flags=re.S)


def _grade_box(page: str) -> str:
    return re.search(r"<div class='grade'>(.*?)</div>", page, flags=re.S).group(1)


# --------------------------------------------------------------------------- which cells may show output
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_test_from_the_first_hidden_one_on_is_reached(path: Path) -> None:
    nb = json.loads(path.read_text())
    reached = reached_by_hidden_tests(nb)
    seen = False
    for cell in _graded(nb):
        seen = seen or HIDDEN_BEGIN in _source(cell)
        assert (_gid(cell) in reached) is seen, _gid(cell)
    assert not reached_by_hidden_tests(_without_hidden(nb))


# --------------------------------------------------------------------------- hidden source, any encoding
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_hidden_test_source_never_reaches_feedback_in_any_encoding(path: Path) -> None:
    nb = json.loads(path.read_text())
    hidden = _hidden_lines(nb)
    assert hidden, f"{path.name} has no hidden test lines to plant"
    planted = [e for line in hidden for e in _encodings(line)]
    text = "\n".join(planted)
    reached = reached_by_hidden_tests(nb)

    def hostile(cell: dict) -> dict:
        if _gid(cell) not in reached:   # the student's process has seen no hidden test yet
            return {"score": 1.0, "status": "passed", "message": "passed"}
        drawn = _b64(_png(text=text))
        return {"score": 0.0, "status": "failed", "message": f"AssertionError: {hidden[0]}", "ename": "AssertionError",
                "evalue": hidden[0], "outputs": (
                    {"output_type": "stream", "name": "stdout", "text": text},
                    {"output_type": "error", "ename": base64.b64encode(text.encode()).decode(), "evalue": text,
                     "traceback": [text]},
                    {"output_type": "display_data", "data": {"text/plain": text[::-1], "text/html": text}},
                    {"output_type": "execute_result", "data": {"image/png": drawn}, "metadata": {}}),
                "results": (_check(text, [[1.0]]), *[_bench(text) for _ in range(20)])}

    result = _record(path.name, nb, hostile)
    page = feedback.render(result)
    leaks = [e for e in planted if e in page or html.escape(e) in page]
    assert not leaks, f"hidden test code in feedback: {leaks[:3]}"
    assert page.count("<img") == 1, "only the grader's roofline is a picture"
    assert "wrong elements per output tile" not in page, "no heatmap drawn from a reached test's numbers"
    assert len(feedback.perf_points(result)) <= feedback.MAX_POINTS_PER_TEST * len(result.cells)
    assert {p.label.split(":")[0] for p in feedback.perf_points(result)} <= {c.grade_id for c in result.cells}
    assert feedback.NOT_SHOWN in page


def test_a_failed_hidden_test_shows_the_instructors_visible_message_only() -> None:
    found = [(path, cell, msg) for path in NOTEBOOKS for cell in _graded(json.loads(path.read_text()))
             for msg in sorted(visible_messages(cell)) if HIDDEN_BEGIN in _source(cell) and len(msg) > 20]
    assert found, "no course test has a visible message"
    path, cell, message = found[0]
    nb = json.loads(path.read_text())
    hidden = _hidden_lines(nb)[0]

    def failed(c: dict) -> dict:
        said = message if _gid(c) == _gid(cell) else hidden
        return {"score": 0.0, "status": "failed", "message": f"AssertionError: {said}", "ename": "AssertionError",
                "evalue": said}

    page = feedback.render(_record(path.name, nb, failed))
    assert html.escape(f"{feedback.FAILED}: {message}") in page
    assert hidden not in page and html.escape(hidden) not in page


def test_a_missing_technique_found_in_the_judge_is_shown_and_one_from_the_students_kernel_is_not() -> None:
    path = NOTEBOOKS[-1]
    nb = json.loads(path.read_text())
    sentence = "option A: your main loop waits for every copy before it computes (<wait 0>)"
    first = _gid(_graded(nb)[0])

    def failed(c: dict, judged: bool) -> dict:
        return {"score": 0.0, "status": "failed", "message": f"TechniqueError: {sentence}", "ename": "TechniqueError",
                "evalue": sentence if _gid(c) == first else "no technique here", "judged": judged}

    page = feedback.render(_record(path.name, nb, lambda c: failed(c, True)))
    assert html.escape(f"{feedback.FAILED}: {sentence}") in page and "<wait 0>" not in page
    page = feedback.render(_record(path.name, nb, lambda c: failed(c, False)))   # a test run in the student's kernel
    assert html.escape(sentence) not in page


# --------------------------------------------------------------------------- no notebook markup, no fake grades
def _planted_outputs() -> tuple[dict, ...]:
    return (
        {"output_type": "display_data", "data": {"text/html": BANNER, "text/plain": FAKE}},
        {"output_type": "display_data", "data": {"text/html": BANNER}},
        {"output_type": "display_data", "data": {"image/png": _b64(BANNER.encode())}},
        {"output_type": "display_data", "data": {"image/svg+xml": f"<svg><script>alert(1)</script>{FAKE}</svg>"}},
        {"output_type": "display_data", "data": {"application/javascript": "alert(1)"}},
        {"output_type": "display_data", "data": {"image/png": _b64(_png((4097, 4096), mode="1"))}},
        {"output_type": "display_data", "data": {"image/png": _b64(_png(text="<script>alert(2)</script>"))}},
        {"output_type": "display_data", "data": {"image/jpeg": _b64(_jpeg())}},
        {"output_type": "stream", "name": "stdout", "text": f"</pre></div><h1>{FAKE}</h1>"},
        {"output_type": "error", "ename": "AssertionError", "evalue": FAKE, "traceback": []},
    )


@pytest.mark.parametrize("path", NOTEBOOKS[:1] + NOTEBOOKS[-1:], ids=lambda p: p.stem)
def test_notebook_output_is_escaped_text_and_regrown_pictures_and_cannot_fake_the_grade(path: Path) -> None:
    nb = _without_hidden(json.loads(path.read_text()))
    statuses = ["failed", "tampered", "passed"]

    def hostile(cell: dict) -> dict:
        k = _graded(nb).index(cell)
        return {"score": 0.0, "status": statuses[k % 3], "message": FAKE, "ename": "AssertionError", "evalue": FAKE,
                "outputs": _planted_outputs(), "results": (_check(FAKE, [[0.5, 0.0], [1.0, 0.25]]),)}

    result = _record(path.name, nb, hostile)
    page = feedback.render(result)
    for markup in ("<script", "<svg", "<iframe", "alert(", "srcdoc"):
        assert markup not in page
    assert page.count("<h1") == 1 and f"0 / {result.max_score:g} points</h1>" in page
    assert FAKE not in _outside_notebook_blocks(page), "student text outside the boxes marked as the notebook's"
    assert FAKE not in _grade_box(page) and BANNER not in page and "planted" not in page
    assert FAKE in page, "the notebook's text is shown, escaped"
    assert LEFT_OUT_HTML in page and LEFT_OUT_IMAGE in page
    pictures = re.findall(r"<img alt='a picture from your notebook' src='data:image/png;base64,([^']+)'", page)
    assert len(pictures) == 2 * len(result.cells), "the PNG with a text chunk and the JPEG, once per test"
    for data in pictures:
        png = base64.b64decode(data)
        assert png.startswith(b"\x89PNG") and b"tEXt" not in png and b"script" not in png
    heatmaps = page.count("alt='wrong elements per output tile'")
    assert heatmaps == len(result.cells), "each published check is drawn by the grader"


# --------------------------------------------------------------------------- pictures
@pytest.mark.parametrize("data, shown", [
    (_b64(_png()), True),
    (_b64(_jpeg()), True),
    (_b64(_png(mode="P")), True),
    (list(_b64(_png())), True),
    (_b64(BANNER.encode()), False),
    (_b64(b"GIF89a" + b"\0" * 32), False),
    (_b64(f"<svg>{FAKE}</svg>".encode()), False),
    (_b64(_png((4097, 4096), mode="1")), False),
    (_b64(_png((9000, 1), mode="1")), False),
    (_b64(_noise_png()[:400]), False),
    ("not base64 at all!", False),
    ("A" * 6_000_000, False),
    (None, False),
])
def test_pictures_are_decoded_checked_and_written_again(data, shown: bool) -> None:
    png = reencode_image(data)
    assert (png is not None) is shown
    if shown:
        from PIL import Image

        assert png.startswith(b"\x89PNG") and b"tEXt" not in png
        Image.open(io.BytesIO(png)).load()


# --------------------------------------------------------------------------- what was not graded
def test_tests_that_were_not_graded_say_why_in_the_grade_box() -> None:
    path = ROOT / "solutions" / "05_global_gemm" / "05_global_gemm.ipynb"
    nb = json.loads(path.read_text())
    why = "not graded: this test needs a GPU, and this worker has none"

    def ungraded(c: dict) -> dict:
        return {"score": 0.0, "status": "needs_gpu", "message": why}

    record = _record(path.name, nb, ungraded)
    record = SubmissionResult(**{**record.__dict__, "not_graded": (f"{path.name}: tests need a GPU",)})
    box = _grade_box(feedback.render(record))
    assert html.escape(why) in box and "not graded" in box and "tests need a GPU" in box
