"""The capstone leaderboard: rank the class by the speed their autograded notebooks recorded.

Notebook ``09_capstone``'s speed test (grade_id ``test_capstone_speed_slow``) prints one line
``GEMMLAB-CAPSTONE-RECORD {json}`` with the device, the four timed ratios to cuBLAS (4096³ and
8192³, fp16 and bf16 inputs), the score S (their geometric mean) and the student's one-line
description. This reads that line from every autograded notebook, only from that cell's own
output, checks that the correctness test (``test_capstone_correct_slow``) passed, and ranks:

1. correct submissions with a record, by S (highest first);
2. then every other submission, with the reason (incorrect, speed test failed, no record);
3. then students who were not autograded or handed nothing in (``--roster`` lists them).

Before any aggregate, each run's time is floored at its speed of light on the record's GPU
(:mod:`gemmlab.timing.speed_of_light`: the tensor cores' peak at the highest clock; the record's own
``peak_tflops`` where it carries one, else the GPU's entry in ``KNOWN_GPUS``): a ratio above
``peak / cuBLAS`` cannot be a measurement, so a run faster than the speed of light (beyond the timer's
slack) fails the entry with that reason, and one just at it counts as at it. Records from GPUs without
a known bound rank unfloored, and say so. A leaderboard run whose shapes were drawn from a secret
(:mod:`gemmlab.timing.leaderboard_draw`) records each run's ``nominal`` size; runs are grouped by it (by the
nearest of SIZES where a record has none).

Each run's ratio shows its interval where the record carries one (``ratio_low``/``ratio_high``,
from ``bench_gemm``'s rounds), and S its range: S computed from the four lows and from the four
highs, which holds S whenever each run's interval holds its ratio (docs/TIMING.md). A ranked
entry whose S range overlaps the one ranked just above it is marked "within noise of" that
student: the order of the two is not settled by this measurement.

    python -m autograder.reports.leaderboard                          # markdown table of this course
    python -m autograder.reports.leaderboard --format csv
    python -m autograder.reports.leaderboard --out leaderboard/       # leaderboard.md, .csv and .png
    python -m autograder.reports.leaderboard --course DIR --autograded DIR/autograder/autograded

Works with notebooks autograded by ``python -m autograder`` and by plain ``nbgrader autograde``
(both keep cell outputs). Under ``python -m autograder`` the speed test runs in the grader's judge,
where no student Python runs, and only that cell's output is read; under plain ``nbgrader autograde``
it runs in the student's process, which could print a forged record: review the top entries' code
before announcing them.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gemmlab.timing.speed_of_light import faster_than_light, known_rates

from ..cell_metadata import grade_id

ASSIGNMENT = "09_capstone"
PREFIX = "GEMMLAB-CAPSTONE-RECORD "
SPEED_CELL = "test_capstone_speed_slow"
CORRECT_CELL = "test_capstone_correct_slow"
BUILD_CELL = "test_capstone_builds"
SIZES = (4096, 8192)
DTYPES = ("float16", "bfloat16")


@dataclass
class Entry:
    """One student's line on the leaderboard."""

    student: str
    status: str                       # ranked, failed, not graded, no submission
    reason: str = ""
    correct: bool | None = None       # None: unknown (the test did not run)
    score: float | None = None        # S: geometric mean of the ratios
    ratios: dict = field(default_factory=dict)   # {(size, dtype): ratio}
    intervals: dict = field(default_factory=dict)  # {(size, dtype): (low, high)}, where recorded
    device: str = ""
    description: str = ""
    points: float | None = None
    rank: int | None = None
    unfloored: bool = False           # ranked without a speed-of-light bound (a GPU not in KNOWN_GPUS)

    def ratio_at(self, size: int) -> float | None:
        """Geometric mean over the dtypes recorded at ``size`` (None if none was)."""
        values = [v for (s, _), v in self.ratios.items() if s == size]
        return _geomean(values) if values else None

    def range_at(self, size: int) -> tuple[float, float] | None:
        """The geometric means of the lows and of the highs at ``size`` (None unless every ratio there has one)."""
        keys = [k for k in self.ratios if k[0] == size]
        return _range([self.intervals.get(k) for k in keys]) if keys else None

    @property
    def score_range(self) -> tuple[float, float] | None:
        """S from the four lows and from the four highs (None unless every ratio has an interval)."""
        return _range([self.intervals.get(k) for k in self.ratios]) if self.ratios else None


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _range(intervals: list) -> tuple[float, float] | None:
    if not intervals or any(i is None for i in intervals):
        return None
    return _geomean([lo for lo, _ in intervals]), _geomean([hi for _, hi in intervals])


# ----------------------------------------------------------------------------- reading notebooks
def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _error(cell: dict) -> str | None:
    """'Name: first line of the message' of the cell's error output, or None."""
    for out in cell.get("outputs") or []:
        if out.get("output_type") == "error":
            first = _text(out.get("evalue")).strip().splitlines()
            return f"{out.get('ename', 'Error')}: {first[0] if first else '(no message)'}"
    return None


def _stdout(cell: dict) -> str:
    return "".join(_text(o.get("text")) for o in cell.get("outputs") or []
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")


def parse_record(cell: dict) -> dict | None:
    """The last well-formed record line in the cell's stdout, as a dict (None if there is none)."""
    found = None
    for line in _stdout(cell).splitlines():
        if not line.startswith(PREFIX):
            continue
        try:
            data = json.loads(line[len(PREFIX):])
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("runs"), list):
            found = data
    return found


def nominal_size(run: dict) -> int:
    """The nominal size a run stands for: its ``nominal`` field, else the size in SIZES nearest to the
    cube root of its M·N·K (raises KeyError, TypeError or ValueError for a malformed run)."""
    if "nominal" in run:
        return int(run["nominal"])
    M, N, K = (int(v) for v in run["shape"][:3])
    if min(M, N, K) <= 0:
        raise ValueError("a shape of positive sizes")
    volume = (M * N * K) ** (1 / 3)
    return min(SIZES, key=lambda s: abs(math.log(volume / s)))


def _runs(record: dict) -> dict:
    """{(nominal size, dtype): run} of the well-formed runs with a positive, finite ratio."""
    out = {}
    for run in record.get("runs", []):
        try:
            key, ratio = (nominal_size(run), str(run["dtype"])), float(run["ratio"])
        except (KeyError, TypeError, ValueError, IndexError, OverflowError):
            continue
        if ratio > 0 and math.isfinite(ratio):
            out[key] = run
    return out


def ratios_of(record: dict) -> dict:
    """{(nominal size, dtype): ratio} as recorded (before the speed-of-light floor: :func:`light_caps`)."""
    return {key: float(run["ratio"]) for key, run in _runs(record).items()}


def intervals_of(record: dict) -> dict:
    """{(size, dtype): (low, high)} for the runs whose record holds a sound interval around its ratio."""
    out = {}
    for key, run in _runs(record).items():
        try:
            ratio, low, high = float(run["ratio"]), float(run["ratio_low"]), float(run["ratio_high"])
        except (KeyError, TypeError, ValueError):
            continue
        if 0 < low <= ratio <= high and math.isfinite(high):
            out[key] = (low, high)
    return out


def light_caps(record: dict, device: str) -> dict:
    """{(size, dtype): (cap, light_ms)}: the highest ratio a run can honestly reach (cuBLAS's time over the
    run's speed of light, i.e. the GPU's peak TFLOPS over cuBLAS's) and that speed of light (ms), from the
    run's ``peak_tflops``, else the GPU's entry in ``KNOWN_GPUS``. Runs without a bound (unknown GPU, no
    cuBLAS TFLOPS) are left out."""
    rates = known_rates(device)
    out = {}
    for key, run in _runs(record).items():
        try:
            peak = float(run["peak_tflops"]) if run.get("peak_tflops") else (rates.tensor_tflops if rates else None)
            cublas = float(run["cublas_tflops"])
            M, N, K = (int(v) for v in run["shape"][:3])
        except (KeyError, TypeError, ValueError):
            continue
        if peak and cublas > 0 and math.isfinite(peak) and math.isfinite(cublas):
            out[key] = (peak / cublas, 2.0 * M * N * K / (peak * 1e12) * 1e3)
    return out


def floor_at_light(entry: "Entry", caps: dict) -> str:
    """Apply the speed-of-light floor to ``entry``'s ratios (and intervals) in place; the reason to fail the
    entry when a run was faster than light, else ''."""
    for key, ratio in sorted(entry.ratios.items()):
        if key not in caps:
            continue
        cap, light_ms = caps[key]
        # The run's time is cap/ratio of its speed of light (cuBLAS's time cancels).
        if faster_than_light(light_ms * cap / ratio, light_ms):
            return (f"faster than the speed of light: {key[0]}³ {key[1]} at {ratio:.3f}× cuBLAS, where "
                    f"{entry.device or 'this GPU'} allows at most {cap:.3f}× (its tensor peak): refused")
        entry.ratios[key] = min(ratio, cap)
        if key in entry.intervals:
            low, high = entry.intervals[key]
            entry.intervals[key] = (min(low, cap), min(high, cap))
    return ""


def _one_line(text: str, limit: int = 90) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def entry_from_notebook(student: str, path: Path) -> Entry:
    """Read one autograded capstone notebook."""
    try:
        nb = json.loads(Path(path).read_text())
        cells = {grade_id(c): c for c in nb.get("cells", []) if grade_id(c)}
    except (OSError, ValueError, AttributeError) as exc:
        return Entry(student, "failed", f"unreadable autograded notebook ({type(exc).__name__})")
    speed, correct_cell = cells.get(SPEED_CELL), cells.get(CORRECT_CELL)
    if speed is None or correct_cell is None:
        return Entry(student, "failed", "the autograded notebook has no capstone tests (another assignment?)")
    correct_error = _error(correct_cell)
    ran = bool(correct_cell.get("outputs")) and "No GPU" not in _stdout(correct_cell)
    correct = None if not ran else correct_error is None
    entry = Entry(student, "failed", correct=correct)
    record = parse_record(speed)
    light_reason = ""
    if record is not None:
        entry.ratios = ratios_of(record)
        entry.intervals = intervals_of(record)
        entry.device = _one_line(record.get("device", ""), 60)
        entry.description = _one_line(record.get("description", ""))
        try:
            entry.points = float(record.get("points"))
        except (TypeError, ValueError):
            entry.points = None
        caps = light_caps(record, entry.device)
        light_reason = floor_at_light(entry, caps)
        entry.unfloored = any(key not in caps for key in entry.ratios)
        if entry.ratios and not light_reason:
            entry.score = _geomean(list(entry.ratios.values()))
    speed_error = _error(speed)
    build_error = _error(cells.get(BUILD_CELL, {}))
    if build_error is not None:
        entry.reason = "did not build: " + build_error
    elif correct is None:
        entry.reason = ("graded without a GPU: correctness and speed were not measured"
                        if "No GPU" in _stdout(correct_cell) else "the correctness test did not run")
    elif not correct:
        entry.reason = "incorrect: " + correct_error
    elif speed_error is not None:
        entry.reason = "speed test failed: " + speed_error
    elif light_reason:
        entry.reason = light_reason
    elif record is None:
        entry.reason = ("no speed record (graded without a GPU?)" if "No GPU" in _stdout(speed)
                        else "no speed record in the speed test's output")
    elif entry.score is None:
        entry.reason = "the speed record holds no ratios"
    else:
        missing = [f"{s}³ {d}" for s in SIZES for d in DTYPES if (s, d) not in entry.ratios]
        entry.status = "ranked"
        notes = [("missing " + ", ".join(missing)) if missing else "",
                 f"not floored: no speed-of-light bound known for {entry.device or 'its GPU'}" if entry.unfloored else ""]
        entry.reason = "; ".join(n for n in notes if n)
    entry.reason = _one_line(entry.reason, 120)
    return entry


# ----------------------------------------------------------------------------- the class
def collect(course: Path, assignment: str = ASSIGNMENT, autograded: Path | None = None,
            submitted: Path | None = None, roster: list[str] | None = None) -> list[Entry]:
    """Every student's entry, ranked (see the module docstring)."""
    course = Path(course)
    autograded = Path(autograded) if autograded else course / "autograder" / "autograded"
    submitted = Path(submitted) if submitted else course / "autograder" / "submitted"
    graded = {p.name for p in autograded.iterdir() if (p / assignment).is_dir()} if autograded.is_dir() else set()
    handed = {p.name for p in submitted.iterdir() if (p / assignment).is_dir()} if submitted.is_dir() else set()
    students = sorted(graded | handed | set(roster or []))
    entries = []
    for student in students:
        if student in graded:
            notebooks = sorted((autograded / student / assignment).glob("*.ipynb"))
            if notebooks:
                entries.append(entry_from_notebook(student, notebooks[0]))
                continue
        if student in handed:
            entries.append(Entry(student, "not graded", "handed in but not autograded (run autograde)"))
        else:
            entries.append(Entry(student, "no submission", "nothing handed in"))
    return rank(entries)


_ORDER = {"ranked": 0, "failed": 1, "not graded": 2, "no submission": 3}


def rank(entries: list[Entry]) -> list[Entry]:
    """Ranked entries first by S (highest first; ties share a rank), then the rest by status and name."""
    def key(e: Entry):
        return (_ORDER.get(e.status, 9), -(e.score or 0.0) if e.status == "ranked" else 0.0, e.student)

    out = sorted(entries, key=key)
    place, last = 0, None
    for i, e in enumerate(out):
        if e.status != "ranked":
            e.rank = None
            continue
        if last is None or round(e.score, 3) != round(last, 3):
            place = i + 1
        e.rank, last = place, e.score
    above = None
    for e in out:
        if e.status != "ranked":
            continue
        if above is not None and _overlap(e.score_range, above.score_range):
            note = f"within noise of {above.student}"
            e.reason = f"{note}; {e.reason}" if e.reason else note
        above = e
    return out


def _overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]


# ----------------------------------------------------------------------------- output
COLUMNS = ["rank", "student", "S", "S range", "4096³", "8192³", *[f"{s}³ {d}" for s in SIZES for d in DTYPES],
           "points", "correct", "device", "description", "note"]


def _fmt(value, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _span(interval: tuple[float, float] | None) -> str:
    return "" if interval is None else f"{interval[0]:.3f}–{interval[1]:.3f}"


def _with_interval(value: float | None, interval: tuple[float, float] | None) -> str:
    """'0.972 (0.965–0.979)', or the bare ratio where no interval was recorded."""
    if value is None:
        return ""
    return _fmt(value) + (f" ({_span(interval)})" if interval is not None else "")


def rows(entries: list[Entry]) -> list[list[str]]:
    out = []
    for e in entries:
        correct = {True: "yes", False: "no", None: ""}[e.correct]
        note = e.reason if e.status in ("ranked", "failed") else f"{e.status}: {e.reason}"
        out.append([str(e.rank) if e.rank else "-", e.student, _fmt(e.score), _span(e.score_range),
                    _with_interval(e.ratio_at(4096), e.range_at(4096)),
                    _with_interval(e.ratio_at(8192), e.range_at(8192)),
                    *[_with_interval(e.ratios.get((s, d)), e.intervals.get((s, d))) for s in SIZES for d in DTYPES],
                    "" if e.points is None else f"{e.points:g}", correct, e.device, e.description, note])
    return out


def markdown(entries: list[Entry]) -> str:
    def cell(x: str) -> str:
        return x.replace("|", "\\|")

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell(x) for x in r) + " |" for r in rows(entries)]
    devices = sorted({e.device for e in entries if e.status == "ranked" and e.device})
    if len(devices) > 1:
        lines.append("")
        lines.append(f"Note: ratios were measured on {len(devices)} different GPUs ({', '.join(devices)}); "
                     "a ratio to cuBLAS travels between GPUs better than TFLOPS, but not perfectly.")
    if any(e.score_range for e in entries):
        lines.append("")
        lines.append("In brackets: each ratio's interval from its timing rounds; S range: S from the lower and "
                     "from the upper ends. Entries whose ranges overlap are within noise of each other.")
    return "\n".join(lines) + "\n"


def to_csv(entries: list[Entry]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(COLUMNS)
    w.writerows(rows(entries))
    return buf.getvalue()


def chart(entries: list[Entry], path: Path, title: str = "Capstone leaderboard") -> Path:
    """Bar chart: per student the ratio to cuBLAS at 4096³ and 8192³ (geometric mean over fp16 and
    bf16), ranked order top to bottom, the 1.0× cuBLAS line, failed entries labelled with their reason."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    shown = list(entries)
    n = max(len(shown), 1)
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.42 * n))
    top = max([v for e in shown for v in (e.ratio_at(4096), e.ratio_at(8192)) if v] + [1.0])
    height = 0.38
    for i, e in enumerate(shown):
        y = n - 1 - i
        for j, (size, colour) in enumerate(((4096, "tab:blue"), (8192, "tab:orange"))):
            v = e.ratio_at(size)
            if v is not None:
                span = e.range_at(size)
                xerr = [[v - span[0]], [span[1] - v]] if span else None
                ax.barh(y + (0.5 - j) * height, v, height=height, color=colour, xerr=xerr, capsize=2,
                        alpha=1.0 if e.status == "ranked" else 0.35)
        x = max(e.ratio_at(4096) or 0, e.ratio_at(8192) or 0) + 0.01 * top
        if e.status == "ranked":
            ax.text(x, y, f"S = {e.score:.3f}", va="center", fontsize=8)
        else:
            why = e.reason if e.status == "failed" else f"{e.status}: {e.reason}"
            ax.text(x, y, _one_line(why, 70), va="center", fontsize=8, color="tab:red")
    ax.axvline(1.0, color="black", lw=1.5)
    ax.text(1.0, n - 0.35, " cuBLAS", fontsize=8, va="bottom")
    labels = [f"{e.rank}. {e.student}" if e.rank else f"–  {e.student}" for e in shown]
    ax.set_yticks([n - 1 - i for i in range(len(shown))], labels, fontsize=8)
    ax.set_ylim(-0.7, n - 0.1 + 0.4)
    ax.set_xlim(0, top * 1.18)
    ax.set_xlabel("ratio to cuBLAS, same run (geometric mean of fp16 and bf16; whiskers: the timing intervals)")
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color="tab:blue", label="4096³"), Patch(color="tab:orange", label="8192³")],
              loc="upper right", fontsize=8)
    devices = sorted({e.device for e in shown if e.device})
    ax.set_title(title + (f" ({', '.join(devices)})" if devices else ""), fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autograder.reports.leaderboard", description=__doc__.splitlines()[0])
    p.add_argument("--course", type=Path, default=Path(__file__).resolve().parent.parent,
                   help="course root (default: this repository)")
    p.add_argument("--assignment", default=ASSIGNMENT)
    p.add_argument("--autograded", type=Path, help="folder of <student>/<assignment>/*.ipynb "
                                                    "(default: COURSE/autograder/autograded)")
    p.add_argument("--submitted", type=Path, help="default: COURSE/autograder/submitted")
    p.add_argument("--roster", type=Path, help="file with one student id a line: those without a submission are listed too")
    p.add_argument("--format", choices=("md", "csv"), default="md", help="what to print (default md)")
    p.add_argument("--out", type=Path, help="also write leaderboard.md, leaderboard.csv and leaderboard.png here")
    p.add_argument("--chart", type=Path, help="write the chart to this file")
    args = p.parse_args(argv)
    roster = None
    if args.roster:
        roster = [s.strip() for s in args.roster.read_text().splitlines() if s.strip() and not s.startswith("#")]
    entries = collect(args.course, args.assignment, args.autograded, args.submitted, roster)
    if not entries:
        print(f"no submissions of {args.assignment} found under {args.course}", file=sys.stderr)
        return 1
    print(markdown(entries) if args.format == "md" else to_csv(entries), end="")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "leaderboard.md").write_text(markdown(entries))
        (args.out / "leaderboard.csv").write_text(to_csv(entries))
        chart(entries, args.out / "leaderboard.png")
        print(f"wrote {args.out / 'leaderboard.md'}, .csv and .png", file=sys.stderr)
    if args.chart:
        chart(entries, args.chart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
