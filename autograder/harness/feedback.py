"""Each student's HTML report: per-test results in plain words, the outputs of the tests (check
tables with failure heatmaps, performance bars), and their kernels on a roofline beside cuBLAS.

Built from the grading result, never from the instructor's notebook, so no hidden test source
can appear: errors show only their name and message (tracebacks are dropped when grading),
and outputs the notebook produced are shown in a sandboxed frame that runs no scripts.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from gemmlab.figures import figure_png, png_img_tag

from ..records import SubmissionResult

_STATUS = {"passed": ("#e6f4ea", "passed"), "failed": ("#fce8e6", "failed"), "tampered": ("#fce8e6", "void"),
           "manual": ("#eef", "by hand"), "not_run": ("#f1f1f1", "not run")}


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


def perf_points(result: SubmissionResult) -> list[PerfPoint]:
    """The kernels timed in the graded cells, from the results gemmlab published there: each
    performance bar, and each bench_gemm run that was not already a bar's timing."""
    from gemmlab.bench import BenchResult
    from gemmlab.perfbar import PerfBarResult

    points = []
    for cell in result.cells:
        bars, benches = [], []
        for published in cell.results:
            try:
                if published.kind == "perf_bar":
                    bars.append(PerfBarResult.from_dict(published.data))
                elif published.kind == "bench":
                    benches.append(BenchResult.from_dict(published.data))
            except (KeyError, TypeError, ValueError):
                continue    # written by the student's process: a malformed record is left out
        timed_by_bars = [bar.bench for bar in bars]
        points += [_point(cell.grade_id, bar.bench) for bar in bars]
        points += [_point(f"{cell.grade_id}: {b.label}", b) for b in benches if b not in timed_by_bars]
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


def _output_html(out: dict) -> str:
    kind = out.get("output_type")
    if kind == "stream":
        return f"<pre>{html.escape(_text(out.get('text', '')))}</pre>"
    if kind == "error":
        return f"<pre class='err'>{html.escape(out.get('ename', ''))}: {html.escape(out.get('evalue', ''))}</pre>"
    data = out.get("data", {})
    if "text/html" in data:
        doc = _text(data["text/html"])
        return f"<iframe sandbox srcdoc=\"{html.escape(doc, quote=True)}\" style='width:100%;height:420px;border:0'></iframe>"
    if "image/png" in data:   # already base64 in the notebook
        return f"<img alt='output' src='data:image/png;base64,{html.escape(_text(data['image/png']).strip())}'/>"
    if "text/plain" in data:
        return f"<pre>{html.escape(_text(data['text/plain']))}</pre>"
    return ""


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def render(result: SubmissionResult) -> str:
    """The whole report as one self-contained HTML page."""
    rows, details = [], []
    for cell in result.cells:
        colour, word = _STATUS.get(cell.status, ("#fce8e6", cell.status.replace("_", " ")))
        score = "—" if cell.score is None else f"{cell.score:g}"
        rows.append(f"<tr style='background:{colour}'><td>{html.escape(cell.notebook)}</td>"
                    f"<td>{html.escape(cell.grade_id)}</td><td>{score} / {cell.points:g}</td>"
                    f"<td>{html.escape(word)}</td><td>{html.escape(cell.message)}</td></tr>")
        outs = "".join(_output_html(o) for o in cell.outputs)
        if outs:
            details.append(f"<details{' open' if cell.status != 'passed' else ''}><summary>"
                           f"{html.escape(cell.grade_id)}: what the test printed</summary>{outs}</details>")
    events = "".join(f"<li>{html.escape(e)}</li>" for e in result.events)
    png = roofline_png(perf_points(result))
    roof = f"<h2>Your kernels on the roofline</h2>{png_img_tag(png, 'roofline')}" if png else ""
    return f"""<!doctype html><html><head><meta charset='utf-8'>
<title>{html.escape(result.assignment)}: feedback for {html.escape(result.student)}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto}} td,th{{padding:4px 8px;text-align:left}}
pre{{background:#f7f7f7;padding:6px;overflow-x:auto}} pre.err{{color:#a00}}</style></head><body>
<h1>{html.escape(result.assignment)}: {result.score:g} / {result.max_score:g} points</h1>
<p>Student: {html.escape(result.student)} · attempt {html.escape(result.attempt)} ·
graded in {result.seconds:.0f} s</p>
{f'<h2>What happened while grading</h2><ul>{events}</ul>' if events else ''}
<h2>Tests</h2><table><tr><th>notebook</th><th>test</th><th>points</th><th>result</th><th>why</th></tr>
{''.join(rows)}</table>{roof}<h2>Test output</h2>{''.join(details)}</body></html>"""
