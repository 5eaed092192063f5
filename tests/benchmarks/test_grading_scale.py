"""The grading scale benchmark (benchmarks/grading.py --only scale) runs end to end without a GPU:
two submissions of the tiny course (the second hostile), graded on "one GPU" and then "two" (GPU indices
that a machine without GPUs treats as workers without one), through the local workers and through a
local Ray cluster, and it reports the speed-up and whether every grade equals the first run's."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from autograder.harness import sandbox as sb
from tests.support import grading_fixtures as gf

if TYPE_CHECKING:
    from gemmlab.results import BenchResult

ROOT = Path(__file__).resolve().parents[2]
needs_bwrap = pytest.mark.skipif(bool(sb.check_bwrap()) and os.environ.get("GEMMLAB_CI") != "1",
                                 reason=f"no usable bubblewrap: {sb.check_bwrap()}")


@needs_bwrap
def test_scale_benchmark_grades_the_same_on_one_and_two_workers_locally_and_on_ray(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="pip install -e '.[grade]' (scripts/test.sh does)")
    course = gf.make_course(tmp_path / "course")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "GEMMLAB_HIDE_GPU": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "grading.py"), "--only", "scale",
                           "--students", "2", "--hostile-every", "2", "--gpus", "0,1", "--course-root", str(course),
                           "--cell-timeout", "10", "--answer-cell-timeout", "5", "--pace-iterations", "100000"],
                          capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    for mode in ("gpus", "ray"):
        assert f"{mode}: speed-up 1 → 2 GPUs" in out, out[-4000:]
        # why the speed-up is what it is, from the same run: work that grew, and the host's own pace
        assert f"{mode}: worker-seconds " in out and "perfectly packed, the speed-up would be" in out, out[-4000:]
        assert f"{mode}: one core's pace before the runs " in out, out[-4000:]
    # three later runs, each compared with the first: the hostile hand-in's grade included
    assert out.count("equal to gpus, 1 GPU's: yes, all 2") == 3, out[-4000:]
    graded = [line for line in out.splitlines() if line.strip().startswith("graded s00")]
    assert len(graded) == 4 * 2, graded
    honest = {line.split(":")[1].split(" in ")[0].strip() for line in graded if "s001/" not in line}
    hostile = {line.split(":")[1].split(" in ")[0].strip() for line in graded if "s001/" in line}
    assert hostile, graded          # the hostile hand-in was graded in every run, not dropped
    assert honest == {"6/6"}, honest


def _timed(center: float, spread: float, rounds: int = 12) -> "BenchResult":
    """A capstone timing at 4096³ fp16 whose per-round ratios lie evenly in center ± spread."""
    from gemmlab.results import BenchResult

    ratios = tuple(center - spread + 2 * spread * i / (rounds - 1) for i in range(rounds))
    return BenchResult(shape=(4096, 4096, 4096), convention="nt", dtype="float16", out_dtype="float16", ms=1.0,
                       tflops=1.0, cublas_ms=1.0, cublas_tflops=1.0, ratio=center, device="NVIDIA H100 80GB HBM3",
                       reps=10, label="capstone", rounds=rounds, round_ratios=ratios)


def test_two_solo_runs_pooled_hold_the_drift_between_runs_and_a_real_slowdown_still_shows() -> None:
    import grading
    from gemmlab.timing.spread import LEVEL

    key = ((4096, 4096, 4096), "float16")
    before, after = {key: _timed(1.000, 0.002)}, {key: _timed(1.010, 0.002)}
    # the two solo runs drifted 1 % apart: the control says so
    rows, n, beyond = grading.noise_rows("solo after", {"solo": after}, before, LEVEL)
    assert (n, beyond) == (1, 1) and "faster" in rows[0][-1], rows
    pooled = grading.pooled_timings(before, after)[key]
    assert len(pooled.round_ratios) == 24 and pooled.ratio_low < 1.005 < pooled.ratio_high
    # a graded timing between the two solo runs is beyond the first run's noise alone, within the pooled runs'
    between = {"s000": {key: _timed(1.005, 0.002)}}
    assert grading.noise_rows("graded", between, before, LEVEL)[2] == 1
    rows, n, beyond = grading.noise_rows("graded", between, {key: pooled}, LEVEL)
    assert (n, beyond) == (1, 0) and rows[0][-1] == "within noise", rows
    # a worker slowed 5 % by its neighbour is still caught
    rows, n, beyond = grading.noise_rows("graded", {"s001": {key: _timed(0.950, 0.002)}}, {key: pooled}, LEVEL)
    assert (n, beyond) == (1, 1) and "slower" in rows[0][-1], rows


def test_solo_runs_without_rounds_are_reported_not_compared() -> None:
    import dataclasses

    import grading
    from gemmlab.timing.spread import LEVEL

    key = ((4096, 4096, 4096), "float16")
    bare = dataclasses.replace(_timed(1.0, 0.002), rounds=0, round_ratios=())
    pooled = grading.pooled_timings({key: bare}, {key: dataclasses.replace(bare)})
    rows, n, beyond = grading.noise_rows("graded", {"s000": {key: _timed(1.0, 0.002)}}, pooled, LEVEL)
    assert (n, beyond) == (0, 0) and rows[0][-1].startswith("not comparable"), rows


def test_packing_bound_is_the_work_spread_over_every_worker() -> None:
    import grading

    assert grading.packing(600.0, 6, 120.0) == (100.0, 100.0 / 120.0)
    bound, efficiency = grading.packing(1200.0, 12, 100.0)
    assert bound == 100.0 and efficiency == 1.0
    assert grading.packing(10.0, 0, 0.0) == (10.0, 0.0)      # no workers or no time: no division by zero


def test_cpu_pace_times_a_fresh_interpreter_and_says_when_it_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    import usage

    took = usage.cpu_pace(iterations=20_000, repeats=3)
    assert took is not None and 0 < took < 30
    more = usage.cpu_pace(iterations=2_000_000, repeats=1)
    assert more is not None and more > took          # the loop's length, not a constant, sets the time
    monkeypatch.setattr(usage.sys, "executable", "/nonexistent/python")
    assert usage.cpu_pace(iterations=10, repeats=1) is None
