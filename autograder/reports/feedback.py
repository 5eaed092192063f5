"""Each student's HTML report, rendered from trusted data only.

What the page is made of, and where each part comes from:

- the grade: the score, each test's name, points, verdict and the grader's own words for it, from
  the grading record (the numbers the gradebook holds), in a box of its own at the top;
- the instructor's message for a failed test: a string of the test's visible source that the
  error names (:func:`autograder.harness.outputs.visible_messages`), never the error text itself,
  except a missing technique's sentences (``TechniqueError``), which the test kernel computed itself from the
  machine code the judge runs (docs/TECHNIQUES.md);
- what the notebook printed and drew, and the check tables, heatmaps and kernel timings gemmlab
  published there: only for tests that ran before any hidden test could reach the student's
  process (:func:`autograder.harness.outputs.reached_by_hidden_tests`). Text is escaped into
  ``<pre>`` blocks, pictures are decoded and re-encoded as PNG by the grader, tables and pictures
  of published results are drawn here from their numbers, and all of it sits in boxes marked as
  the notebook's, apart from the grade. No HTML, SVG or script from a notebook reaches the page;
- the roofline: the timings of every test, drawn here and labelled by test name, at most
  :data:`MAX_POINTS_PER_TEST` a test (its numbers are the student's process's report until a
  trusted judge times kernels: a few coarse numbers per test, not text).

Hidden test code never appears: tests it ran in show only name, verdict, points and messages.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any

from gemmlab.seeing.figures import figure_img_tag, figure_png, png_img_tag

from ..cell_metadata import grade_id
from ..harness.outputs import for_feedback, reached_by_hidden_tests, visible_messages
from ..records import CellResult, PublishedResult, SubmissionResult

#: The grader's colour and word for each verdict.
STATUS = {"passed": ("#e6f4ea", "passed"), "failed": ("#fce8e6", "failed"), "tampered": ("#fce8e6", "void"),
          "manual": ("#eef", "by hand"), "not_run": ("#f1f1f1", "not run"), "timeout": ("#fce8e6", "time limit"),
          "died": ("#fce8e6", "kernel died"), "memory": ("#fce8e6", "memory limit"),
          "output_limit": ("#fce8e6", "output limit"), "needs_gpu": ("#f1f1f1", "not graded"),
          "refused": ("#f1f1f1", "not graded"), "grader_error": ("#f1f1f1", "not graded")}
#: Verdicts whose record message the grader writes from what it observed itself (limits, exit status).
GRADER_WORDS = ("manual", "not_run", "timeout", "died", "memory", "output_limit", "needs_gpu", "refused",
                "grader_error")
TAMPERED = "the notebook interfered with grading, so this test scores nothing (your instructor has the details)"
FAILED = "the test failed"
#: The error name of a missing technique (gemmlab.techniques.TechniqueError), and how much of its sentences is shown.
TECHNIQUE_ERROR = "TechniqueError"
MAX_TECHNIQUE_CHARS = 1500
NOT_SHOWN = ("What this test printed is not shown: it ran after hidden tests, so it could repeat them. "
             "The verdict and points above are all the feedback this test gives.")
#: Roofline points one test may add (the course's tests time at most 4 kernels each).
MAX_POINTS_PER_TEST = 8


@dataclass(frozen=True)
class PerfPoint:
    """One timed kernel of a graded cell, beside cuBLAS on the same problem and GPU."""

    label: str
    shape: tuple[int, int, int]
    convention: str
    intensity: float          #: ideal arithmetic intensity (flop/byte)
    tflops: float
    cublas_tflops: float
    ratio: float


def _point(label: str, bench: Any) -> PerfPoint:
    return PerfPoint(label, tuple(bench.shape), bench.convention, float(bench.intensity), float(bench.tflops),
                     float(bench.cublas_tflops), float(bench.ratio))


def _finite_positive(p: PerfPoint) -> bool:
    return all(math.isfinite(v) and v > 0 for v in (p.intensity, p.tflops, p.cublas_tflops)) and math.isfinite(p.ratio)


def _test_cells(result: SubmissionResult) -> dict[tuple[str, str], dict]:
    """(notebook, grade_id) → the instructor's test cell as it ran (from the record's notebooks)."""
    cells = {}
    for name, nb in result.executed.items():
        for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
            if isinstance(cell, dict) and grade_id(cell):
                cells[(name, grade_id(cell))] = cell
    return cells


def perf_points(result: SubmissionResult) -> list[PerfPoint]:
    """The kernels timed in the graded cells, from the results gemmlab published there: each
    performance bar, and each bench_gemm run that was not already a bar's timing. Labelled by the
    test's grade_id (the student's labels are not used), at most :data:`MAX_POINTS_PER_TEST` a test."""
    from gemmlab.results import BenchResult
    from gemmlab.timing.perfbar import PerfBarResult

    points = []
    for cell in result.cells:
        bars, benches = [], []
        for published in cell.results:
            try:
                if published.kind == "perf_bar":
                    bars.append(PerfBarResult.from_dict(published.data))
                elif published.kind == "bench":
                    benches.append(BenchResult.from_dict(published.data))
            except (KeyError, TypeError, ValueError, AttributeError):
                continue    # written by the student's process: a malformed record is left out
        timed_by_bars = [bar.bench for bar in bars]
        mine = [_point(cell.grade_id, bar.bench) for bar in bars]
        extra = [b for b in benches if b not in timed_by_bars]
        mine += [_point(f"{cell.grade_id}: timing {i + 1}", b) for i, b in enumerate(extra)]
        points += [p for p in mine if _finite_positive(p)][:MAX_POINTS_PER_TEST]
    return points


def roofline_png(points: list[PerfPoint]) -> bytes:
    """A roofline-style picture (TFLOPS against arithmetic intensity) as PNG bytes; b'' if no points."""
    if not points:
        return b""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    for p in points:
        ax.scatter([p.intensity], [p.tflops], color="tab:red", zorder=3)
        ax.scatter([p.intensity], [p.cublas_tflops], color="tab:gray", marker="_", s=400, zorder=2)
        ax.annotate(f"{p.label}\n{p.ratio:.2f}× cuBLAS", (p.intensity, p.tflops), fontsize=7,
                    textcoords="offset points", xytext=(6, -4))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flop/byte, ideal)")
    ax.set_ylabel("TFLOPS")
    ax.set_title("your kernels (red) and cuBLAS on the same GPU (grey bar)", fontsize=9)
    return figure_png(fig)


# --------------------------------------------------------------------------- the grade (trusted)
def _why(cell: CellResult, source: dict | None) -> str:
    """The grader's words for a verdict, or the instructor's message the error names."""
    if cell.status in GRADER_WORDS:
        return cell.message
    if cell.status == "tampered":
        return TAMPERED
    if cell.status == "failed" and cell.judged and cell.ename == TECHNIQUE_ERROR:
        # gemmlab.techniques' own sentences, computed in the test kernel from the machine code the judge runs: no
        # student Python produced them (a student's exception reaches the judge as an AnswerError), and they name
        # what the kernel lacks, which is what the student needs to hear.
        found = (cell.evalue or "").strip()
        return f"{FAILED}: {found[:MAX_TECHNIQUE_CHARS]}" if found else FAILED
    if cell.status == "failed" and source is not None:
        messages = visible_messages(source)
        said = (cell.evalue or "").strip().splitlines()
        said = said[0].strip() if said else ""
        if said in messages:
            return f"{FAILED}: {said}"
    return FAILED if cell.status == "failed" else ""


def _grade_rows(result: SubmissionResult, sources: dict[tuple[str, str], dict]) -> str:
    rows = []
    for cell in result.cells:
        colour, word = STATUS.get(cell.status, ("#fce8e6", "not graded"))
        score = "—" if cell.score is None else f"{cell.score:g}"
        why = _why(cell, sources.get((cell.notebook, cell.grade_id)))
        rows.append(f"<tr style='background:{colour}'><td>{html.escape(cell.notebook)}</td>"
                    f"<td>{html.escape(cell.grade_id)}</td><td>{score} / {cell.points:g}</td>"
                    f"<td>{html.escape(word)}</td><td>{html.escape(why)}</td></tr>")
    return "".join(rows)


# --------------------------------------------------------------------------- the notebook's (untrusted)
def _output_html(out: dict) -> str:
    """One output in :func:`~autograder.harness.outputs.plain_output`'s form, escaped."""
    kind = out.get("output_type")
    if kind == "stream":
        return f"<pre>{html.escape(out['text'])}</pre>"
    if kind == "error":
        return f"<pre class='err'>{html.escape(out['ename'])}: {html.escape(out['evalue'])}</pre>"
    data = out.get("data", {})
    if "image/png" in data:   # re-encoded by the grader; still a picture the notebook drew
        import base64

        return png_img_tag(base64.b64decode(data["image/png"]), "a picture from your notebook")
    if "text/plain" in data:
        return f"<pre>{html.escape(data['text/plain'])}</pre>"
    return ""


def _check_html(published: PublishedResult) -> str:
    """A published check drawn by the grader: its table (escaped) and its failure heatmap."""
    from gemmlab.results import CheckResult
    from gemmlab.errors import GemmlabError

    try:
        check = CheckResult.from_dict(published.data)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return ""
    picture = ""
    if not check.passed:
        try:
            picture = figure_img_tag(check.heatmap(), "wrong elements per output tile")
        except (GemmlabError, TypeError, ValueError, IndexError):
            picture = ""
    return f"<pre>{html.escape(str(check))}</pre>{picture}"


def _notebook_block(cell: CellResult, reached: bool) -> str:
    """What the test's cell printed and published, in a box marked as the notebook's."""
    if reached:
        shown = "" if not (cell.outputs or cell.results) else f"<p class='note'>{html.escape(NOT_SHOWN)}</p>"
    else:
        shown = "".join(_output_html(o) for o in for_feedback(list(cell.outputs)))
        shown += "".join(_check_html(r) for r in cell.results if r.kind == "check")
    if not shown:
        return ""
    return (f"<details{' open' if cell.status != 'passed' else ''}><summary>{html.escape(cell.grade_id)}: "
            f"what your notebook printed</summary><div class='notebook'><p class='from'>from your notebook, "
            f"as text: not part of the grade</p>{shown}</div></details>")


def _not_graded(result: SubmissionResult) -> str:
    """The grader's list of what it could not grade (a refused hand-in, a test that needs a GPU...)."""
    if not result.not_graded:
        return ""
    items = "".join(f"<li>{html.escape(why)}</li>" for why in result.not_graded)
    return f"<p><b>Not graded</b> (these points are not given):</p><ul>{items}</ul>"


def render(result: SubmissionResult) -> str:
    """The whole report as one self-contained HTML page (see the module docstring)."""
    sources = _test_cells(result)
    reached: set[tuple[str, str]] = set()
    for name, nb in result.executed.items():
        reached |= {(name, gid) for gid in reached_by_hidden_tests(nb)}
    details = []
    for cell in result.cells:
        key = (cell.notebook, cell.grade_id)
        # a test whose notebook the record lacks is treated as reached: nothing shows where it ran
        details.append(_notebook_block(cell, key in reached or key not in sources))
    png = roofline_png(perf_points(result))
    roof = f"<h2>Your kernels on the roofline</h2>{png_img_tag(png, 'roofline')}" if png else ""
    return f"""<!doctype html><html><head><meta charset='utf-8'>
<title>{html.escape(result.assignment)}: feedback for {html.escape(result.student)}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto}} td,th{{padding:4px 8px;text-align:left}}
pre{{background:#f7f7f7;padding:6px;overflow-x:auto;white-space:pre-wrap}} pre.err{{color:#a00}}
.grade{{border:3px solid #1a4d8f;background:#f2f6fc;padding:0 1em 1em}}
.notebook{{border:2px dashed #999;padding:4px 8px;margin:4px 0}} .from{{font-size:80%;color:#666;margin:0}}
.note{{color:#555}}</style></head><body>
<div class='grade'>
<h1>{html.escape(result.assignment)}: {result.score:g} / {result.max_score:g} points</h1>
<p>Student: {html.escape(result.student)} · attempt {html.escape(result.attempt)} ·
graded in {result.seconds:.0f} s</p>
<table><tr><th>notebook</th><th>test</th><th>points</th><th>result</th><th>why</th></tr>
{_grade_rows(result, sources)}</table>{_not_graded(result)}</div>{roof}
<h2>What your notebook printed</h2>
<p class='note'>Everything below comes from your notebook and is shown as text; your grade is the box at the top.</p>
{''.join(details)}</body></html>"""
