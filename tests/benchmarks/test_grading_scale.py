"""The grading scale benchmark (benchmarks/grading.py --only scale) runs end to end without a GPU:
two submissions of the tiny course (the second hostile), graded on "one GPU" and then "two" (GPU indices
that a machine without GPUs treats as workers without one), through the local workers and through a
local Ray cluster, and it reports the speed-up and whether every grade equals the first run's."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.harness import sandbox as sb
from tests.support import grading_fixtures as gf

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
                           "--cell-timeout", "10"],
                          capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    for mode in ("gpus", "ray"):
        assert f"{mode}: speed-up 1 → 2 GPUs" in out, out[-4000:]
    # three later runs, each compared with the first: the hostile hand-in's grade included
    assert out.count("equal to gpus, 1 GPU's: yes, all 2") == 3, out[-4000:]
    graded = [line for line in out.splitlines() if line.strip().startswith("graded s00")]
    assert len(graded) == 4 * 2, graded
    honest = {line.split(":")[1].split(" in ")[0].strip() for line in graded if "s001/" not in line}
    hostile = {line.split(":")[1].split(" in ")[0].strip() for line in graded if "s001/" in line}
    assert hostile, graded          # the hostile hand-in was graded in every run, not dropped
    assert honest == {"6/6"}, honest
