"""The leaderboard shows each timing's interval: per-run intervals from the capstone's record line,
S's range, "within noise of" between neighbours whose ranges overlap, whiskers on the chart; records
without intervals (written before bench_gemm had rounds) still rank as before."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from autograder.reports import leaderboard as lb
from tests.autograder.capstone_records import graded_notebook

RUNS = [(n, d) for n in lb.SIZES for d in lb.DTYPES]
DEVICE = "NVIDIA H100 80GB HBM3"      # a GPU whose speed of light the leaderboard knows


def _record(ratios: list[float], width: float | None) -> str:
    runs = []
    for (n, d), r in zip(RUNS, ratios):
        run = {"shape": [n, n, n], "dtype": d, "ratio": r, "tflops": 700 * r, "cublas_tflops": 700.0}
        if width is not None:
            run.update(ratio_low=r - width, ratio_high=r + width, rounds=12)
        runs.append(run)
    score = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    return lb.PREFIX + json.dumps({"version": 1, "device": DEVICE, "score": score, "points": 3,
                                   "description": "d", "runs": runs}) + "\n"


@pytest.fixture()
def course(tmp_path: Path) -> Path:
    graded_notebook(tmp_path, "ann", _record([1.00, 0.99, 1.01, 1.02], 0.006))
    graded_notebook(tmp_path, "ben", _record([0.995, 0.985, 1.005, 1.015], 0.006))    # 0.5 % behind ann: noise
    graded_notebook(tmp_path, "cat", _record([0.90, 0.90, 0.92, 0.92], 0.004))        # clearly behind ben
    graded_notebook(tmp_path, "dan", _record([0.80, 0.80, 0.80, 0.80], None))         # an old record: no intervals
    return tmp_path


def test_intervals_ranges_and_within_noise(course: Path) -> None:
    by = {e.student: e for e in lb.collect(course)}
    assert [e.student for e in lb.collect(course)] == ["ann", "ben", "cat", "dan"]
    ann, ben, cat, dan = (by[s] for s in ("ann", "ben", "cat", "dan"))
    assert ann.intervals[(4096, "float16")] == pytest.approx((0.994, 1.006))
    low, high = ann.score_range
    assert low < ann.score < high and low == pytest.approx(math.exp(sum(math.log(r - 0.006)
                                                                      for r in (1.0, 0.99, 1.01, 1.02)) / 4))
    assert ben.reason == "within noise of ann" and "within noise" not in ann.reason
    assert "within noise" not in cat.reason, "cat's range lies below ben's"
    assert dan.score_range is None and dan.intervals == {} and dan.rank == 4 and "within noise" not in dan.reason


def test_table_and_chart_show_the_intervals(course: Path) -> None:
    entries = lb.collect(course)
    table = lb.markdown(entries)
    header = table.splitlines()[0]
    assert header.startswith("| rank | student | S | S range |")
    ann_row = next(line for line in table.splitlines() if "| ann |" in line)
    assert "| 1.000 (0.994–1.006) |" in ann_row and "0.994" in ann_row
    dan_row = next(line for line in table.splitlines() if "| dan |" in line)
    assert "| 0.800 |" in dan_row and "(" not in dan_row.split("|")[5]
    assert "overlap are within noise" in table
    rows = lb.rows(entries)
    assert rows[1][lb.COLUMNS.index("note")] == "within noise of ann"
    png = lb.chart(entries, course / "board.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_interval_that_does_not_hold_its_ratio_is_ignored(tmp_path: Path) -> None:
    record = json.loads(_record([1.0, 1.0, 1.0, 1.0], 0.01)[len(lb.PREFIX):])
    record["runs"][0].update(ratio_low=1.2, ratio_high=1.3)                  # forged or garbled
    record["runs"][1]["ratio_low"] = "x"
    assert set(lb.intervals_of(record)) == {(8192, "float16"), (8192, "bfloat16")}
    graded_notebook(tmp_path, "eve", lb.PREFIX + json.dumps(record) + "\n")
    (e,) = lb.collect(tmp_path)
    assert e.score_range is None and e.range_at(8192) == pytest.approx((0.99, 1.01))
