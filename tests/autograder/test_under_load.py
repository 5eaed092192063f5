"""Grading and compiling on a machine made busy on purpose: the work and three CPU burners share one core
(4x oversubscription), and honest grades and sound compiles come out as on an idle machine.

Why: at load 10-35 on the 2-core CI machine the honest hand-in of the class test scored 3/6 instead of 6/6 and
sound CuTe compiles were stopped as compiles "without end": their limits counted the clock. Limits now count
work (autograder/harness/cellclock.py, gemmlab/compiling/worker.py); an endless loop is still stopped and
scored, only later on the clock.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("nbgrader", reason="the grader needs nbgrader (tools/wheelhouse.py --profile gpu-grade)")
from autograder.harness import sandbox as sb  # noqa: E402
from gemmlab.running import proctime  # noqa: E402
from gemmlab.compiling import worker  # noqa: E402
from gemmlab.compiling.compiler import compile_to  # noqa: E402
from tests.support import grading_fixtures as gf  # noqa: E402
from tests.support.busy import burners, one_core, pinned  # noqa: E402

needs_bwrap = pytest.mark.skipif(bool(sb.check_bwrap()) and os.environ.get("GEMMLAB_CI") != "1",
                                 reason=f"no usable bubblewrap: {sb.check_bwrap()}")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs /proc")]

#: A few seconds of NVRTC: 2^12 template instantiations.
SOUND = r"""
template <int N, int M> struct Tree { static constexpr int v = Tree<N - 1, 2 * M>::v + Tree<N - 1, 2 * M + 1>::v; };
template <int M> struct Tree<0, M> { static constexpr int v = 1; };
__global__ void sound(int* x) { x[0] = Tree<12, 0>::v; }
"""


def _compile_cpu_s(source: str, timeout: float | None = None) -> tuple[float, float]:
    """(compiler CPU seconds, wall seconds) of one uncached compile in a fresh worker."""
    worker.stop_all()
    t0 = time.monotonic()
    compile_to(source, "sound", arch="sm_90a", use_cache=False, timeout=timeout)
    wall = time.monotonic() - t0
    (pid,) = worker.pids()
    return proctime.cpu_seconds(pid), wall


def test_a_sound_compile_on_a_busy_core_is_not_stopped_by_the_clock() -> None:
    """Its limit is set above the CPU it needs but below the time it takes beside three burners: a clock limit
    would stop it; the CPU limit does not."""
    cpu, _ = _compile_cpu_s(SOUND + "// alone\n")
    limit = 2 * cpu + 0.5
    core = one_core()
    with pinned(core), burners(3, core):
        busy_cpu, wall = _compile_cpu_s(SOUND + "// beside burners\n", timeout=limit)
    worker.stop_all()
    assert busy_cpu < limit < wall, (cpu, busy_cpu, limit, wall)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[dict, dict]:
    """The tiny assignment's instructor notebook and student release (made by nbgrader)."""
    import json

    from autograder.course import Course

    root = gf.make_course(tmp_path_factory.mktemp("course"))
    Course(root).ensure_gradebook("tiny")
    source = json.loads((root / "solutions" / "tiny" / "tiny.ipynb").read_text())
    release = json.loads((root / "autograder" / "release" / "tiny" / "tiny.ipynb").read_text())
    return source, release


@needs_bwrap
def test_grades_beside_three_burners_on_one_core_are_the_idle_grades(tiny, tmp_path: Path) -> None:
    """The "loop" hand-in: honest answers, and a square() that never returns. Under 4x oversubscription the
    honest tests pass and the endless loop is stopped and scored, exactly the grade of an idle machine. The
    limits are tight (3 s): here the honest check_gemm test took 5.1 s on the clock for 1.1 s of work, so a
    limit that counted the clock failed it."""
    from autograder.harness.runner import grade_submission
    from autograder.records import GradeJob, Limits, NotebookParts

    source, release = tiny
    hand_in = gf.submission(nbformat.from_dict(release), "loop")
    job = GradeJob("loop", "tiny", "t", {"tiny.ipynb": NotebookParts(source, release, nbformat.from_dict(hand_in))},
                   Limits(cell_s=3.0, answer_cell_s=3.0, memory_bytes=int(1.5 * 2**30)), workdir=str(tmp_path))
    core = one_core()
    with pinned(core), burners(3, core):
        result = grade_submission(job)
    by_id = {c.grade_id: c for c in result.cells}
    assert result.score == gf.EXPECTED["loop"], [(c.grade_id, c.status, c.message) for c in result.cells]
    assert by_id["test_square"].status == "timeout" and "time limit of 3 s" in by_id["test_square"].message
    assert by_id["test_gemm"].status == "passed" and by_id["test_cube"].status == "passed", result.cells
    assert not result.not_graded, result.not_graded
