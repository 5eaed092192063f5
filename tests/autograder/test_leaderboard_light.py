"""The leaderboard floors every run at its speed of light before the geometric mean: one run timed near
zero cannot carry S, a run faster than light fails the entry with the reason, a GPU without a known
bound ranks but says so; runs on shapes drawn from a secret are grouped by their nominal size."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from autograder.reports import leaderboard as lb
from tests.autograder.capstone_records import graded_notebook
from gemmlab.timing.leaderboard_draw import draw_runs

H100 = "NVIDIA H100 80GB HBM3"          # peak 1,070.5 TFLOPS: with cuBLAS at 700, at most 1.529x cuBLAS


def _record(ratios: list[float], device: str = H100, shapes=None, extra: dict | None = None) -> str:
    keys = [(n, d) for n in lb.SIZES for d in lb.DTYPES]
    runs = []
    for i, ((n, d), r) in enumerate(zip(keys, ratios)):
        shape = list(shapes[i]) if shapes else [n, n, n]
        runs.append({"shape": shape, "dtype": d, "ratio": r, "tflops": 700 * r, "cublas_tflops": 700.0,
                     **(extra or {})})
    return lb.PREFIX + json.dumps({"device": device, "score": 1.0, "points": 3, "description": "d", "runs": runs})


def test_a_run_faster_than_light_fails_the_entry(tmp_path: Path) -> None:
    graded_notebook(tmp_path, "honest", _record([1.0, 1.0, 1.02, 1.02]))
    graded_notebook(tmp_path, "zero", _record([1.0, 1.0, 1.0, 500.0]))      # one shape "timed" near zero
    by = {e.student: e for e in lb.collect(tmp_path)}
    assert by["honest"].rank == 1 and by["honest"].reason == ""
    zero = by["zero"]
    assert zero.status == "failed" and zero.rank is None and zero.score is None
    assert zero.reason.startswith("faster than the speed of light: 8192³ bfloat16 at 500.000× cuBLAS, where "
                                  "NVIDIA H100 80GB HBM3 allows at most 1.529×")


def test_a_run_at_the_light_counts_as_at_it(tmp_path: Path) -> None:
    cap = 1070.53 / 700
    graded_notebook(tmp_path, "edge", _record([1.0, 1.0, 1.0, cap * 1.02]))  # within the timer's slack: floored, not refused
    (e,) = lb.collect(tmp_path)
    assert e.status == "ranked" and e.ratios[(8192, "bfloat16")] == pytest.approx(cap, rel=1e-4)
    assert e.score == pytest.approx(cap ** 0.25, rel=1e-4)


def test_intervals_are_floored_too(tmp_path: Path) -> None:
    record = json.loads(_record([1.0, 1.0, 1.0, 1.0])[len(lb.PREFIX):])
    cap = 1070.53 / 700
    record["runs"][3].update(ratio=cap * 1.01, ratio_low=cap * 0.99, ratio_high=cap * 1.05)
    graded_notebook(tmp_path, "x", lb.PREFIX + json.dumps(record))
    (e,) = lb.collect(tmp_path)
    low, high = e.intervals[(8192, "bfloat16")]
    assert low == pytest.approx(cap * 0.99) and high == pytest.approx(cap, rel=1e-4)


def test_an_unknown_gpu_ranks_unfloored_and_says_so_unless_the_record_carries_its_peak(tmp_path: Path) -> None:
    graded_notebook(tmp_path, "a", _record([1.0, 1.0, 1.0, 1.0], device="GPU X"))
    graded_notebook(tmp_path, "b", _record([1.0, 1.0, 1.0, 9.0], device="GPU Y", extra={"peak_tflops": 1000.0}))
    by = {e.student: e for e in lb.collect(tmp_path)}
    assert by["a"].status == "ranked" and by["a"].reason == "not floored: no speed-of-light bound known for GPU X"
    assert by["b"].status == "failed" and "allows at most 1.429×" in by["b"].reason


def test_runs_on_drawn_shapes_group_by_their_nominal_size(tmp_path: Path) -> None:
    drawn = draw_runs("secret of this run")
    shapes = [r.shape for r in drawn]
    graded_notebook(tmp_path, "n", _record([1.0, 0.99, 1.03, 1.02], shapes=shapes))   # no "nominal": the nearest size
    record = json.loads(_record([1.0, 0.99, 1.03, 1.02], shapes=shapes)[len(lb.PREFIX):])
    for run, d in zip(record["runs"], drawn):
        run["nominal"] = d.nominal
    graded_notebook(tmp_path, "m", lb.PREFIX + json.dumps(record))
    for e in lb.collect(tmp_path):
        assert e.status == "ranked" and set(e.ratios) == {(n, d) for n in lb.SIZES for d in lb.DTYPES}, e.reason
        assert e.score == pytest.approx(math.exp(sum(map(math.log, (1.0, 0.99, 1.03, 1.02))) / 4))
    assert lb.nominal_size({"shape": [4480, 3584, 4096]}) == 4096 and lb.nominal_size({"shape": [7296, 8192, 9216]}) == 8192
