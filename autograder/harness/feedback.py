"""Each student's HTML report: per-test results in plain words, the outputs of the tests (check
tables with failure heatmaps, performance bars), and their kernels on a roofline beside cuBLAS.

Built from the grading result, never from the instructor's notebook, so no hidden test source
can appear: errors show only their name and message (tracebacks are dropped when grading),
and outputs the notebook produced are shown in a sandboxed frame that runs no scripts.
"""
from __future__ import annotations

import base64
import html
import io
import re

_STATUS = {"passed": ("#e6f4ea", "passed"), "failed": ("#fce8e6", "failed"), "tampered": ("#fce8e6", "void"),
           "manual": ("#eef", "by hand"), "not_run": ("#f1f1f1", "not run")}

#: performance_bar's headline and BenchResult's text, as they appear in outputs.
_PERF = re.compile(r"performance bar (?:PASSED|FAILED): ([\d.]+)× cuBLAS \(bar [\d.]+×\) — ([\d.]+) vs ([\d.]+) "
                   r"TFLOPS at (\d+)×(\d+)×(\d+) (tn|nn) (\w+)")
_BENCH = re.compile(r"(.+?): (\d+)×(\d+)×(\d+) (tn|nn) (\w+)→(\w+) on .*\n\s+yours : +[\d.]+ ms +([\d.]+) TFLOPS\n"
                    r"\s+cuBLAS: +[\d.]+ ms +([\d.]+) TFLOPS")


def perf_points(result: dict) -> list[dict]:
    """Kernels timed in the graded cells: label, shape, convention, TFLOPS, cuBLAS TFLOPS, ratio."""
    points = []
    for cell in result["cells"]:
        for out in cell.get("outputs", []):
            texts = [out.get("text", "")] if out.get("output_type") == "stream" else \
                [out.get("data", {}).get("text/plain", "")]
            for text in texts:
                text = "".join(text) if isinstance(text, list) else text
                for m in _PERF.finditer(text):
                    ratio, tf, ctf, M, N, K, conv, _dt = m.groups()
                    points.append(dict(label=cell["grade_id"], shape=(int(M), int(N), int(K)), convention=conv,
                                       tflops=float(tf), cublas=float(ctf), ratio=float(ratio)))
                for m in _BENCH.finditer(text):
                    label, M, N, K, conv, _a, _b, tf, ctf = m.groups()
                    points.append(dict(label=f"{cell['grade_id']}: {label.strip()}", shape=(int(M), int(N), int(K)),
                                       convention=conv, tflops=float(tf), cublas=float(ctf),
                                       ratio=float(tf) / max(float(ctf), 1e-9)))
    return points


def roofline_png(points: list[dict]) -> str:
    """A roofline-style picture (TFLOPS against arithmetic intensity) as a base64 PNG; '' if no points."""
    if not points:
        return ""
    from matplotlib.figure import Figure

    from gemmlab.roofline_math import intensity_ideal

    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    for p in points:
        M, N, K = p["shape"]
        x = intensity_ideal(M, N, K, 2, 2, read_output=p["convention"] == "nn")
        ax.scatter([x], [p["tflops"]], color="tab:red", zorder=3)
        ax.scatter([x], [p["cublas"]], color="tab:gray", marker="_", s=400, zorder=2)
        ax.annotate(f"{p['label']}\n{p['ratio']:.2f}× cuBLAS", (x, p["tflops"]), fontsize=7,
                    textcoords="offset points", xytext=(6, -4))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flop/byte, ideal)")
    ax.set_ylabel("TFLOPS")
    ax.set_title("your kernels (red) and cuBLAS on the same GPU (grey bar)", fontsize=9)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return base64.b64encode(buf.getvalue()).decode()


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
    if "image/png" in data:
        return f"<img alt='output' src='data:image/png;base64,{_text(data['image/png']).strip()}'/>"
    if "text/plain" in data:
        return f"<pre>{html.escape(_text(data['text/plain']))}</pre>"
    return ""


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def render(result: dict) -> str:
    """The whole report as one self-contained HTML page."""
    rows, details = [], []
    for cell in result["cells"]:
        colour, word = _STATUS.get(cell["status"], ("#fce8e6", cell["status"].replace("_", " ")))
        score = "—" if cell["score"] is None else f"{cell['score']:g}"
        rows.append(f"<tr style='background:{colour}'><td>{html.escape(cell['notebook'])}</td>"
                    f"<td>{html.escape(cell['grade_id'])}</td><td>{score} / {cell['points']:g}</td>"
                    f"<td>{html.escape(word)}</td><td>{html.escape(cell['message'])}</td></tr>")
        outs = "".join(_output_html(o) for o in cell.get("outputs", []))
        if outs:
            details.append(f"<details{' open' if cell['status'] != 'passed' else ''}><summary>"
                           f"{html.escape(cell['grade_id'])}: what the test printed</summary>{outs}</details>")
    events = "".join(f"<li>{html.escape(e)}</li>" for e in result.get("events", []))
    png = roofline_png(perf_points(result))
    roof = f"<h2>Your kernels on the roofline</h2><img alt='roofline' src='data:image/png;base64,{png}'/>" if png else ""
    return f"""<!doctype html><html><head><meta charset='utf-8'>
<title>{html.escape(result['assignment'])}: feedback for {html.escape(result['student'])}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto}} td,th{{padding:4px 8px;text-align:left}}
pre{{background:#f7f7f7;padding:6px;overflow-x:auto}} pre.err{{color:#a00}}</style></head><body>
<h1>{html.escape(result['assignment'])}: {result['score']:g} / {result['max_score']:g} points</h1>
<p>Student: {html.escape(result['student'])} · attempt {html.escape(result['attempt'])} ·
graded in {result['seconds']:.0f} s</p>
{f'<h2>What happened while grading</h2><ul>{events}</ul>' if events else ''}
<h2>Tests</h2><table><tr><th>notebook</th><th>test</th><th>points</th><th>result</th><th>why</th></tr>
{''.join(rows)}</table>{roof}<h2>Test output</h2>{''.join(details)}</body></html>"""
