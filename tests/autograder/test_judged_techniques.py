"""Notebooks 05 and 06 graded through the real grader without a GPU: their tests read the CuTe DSL option's
technique from the machine code of the image the judge holds, never PTX text from the student's process.

The judged tests of 05 and 06 used to read a DSL kernel's PTX; in the judge a compiled kernel's ``.ptx`` raises (it
would be evidence of nothing), so the solution itself failed them. Here the hand-in is the course's own release with
the solutions' answers written in, option B (CuTe DSL) only: the worker is told it has a GPU, so the tests that need
one are graded; without one their GPU parts say NOT CHECKED and only the machine-code checks decide. The solution
scores full marks; the same hand-in with a main loop that is no pipeline (06) or a K loop without the barrier before
the next tile's copies (05) loses exactly the points of the tests that read the machine code. Needs bubblewrap.
"""
from __future__ import annotations

import pytest

from tests.support import grading_fixtures as gf

pytest.importorskip("nbgrader", reason="the grader needs nbgrader (tools/wheelhouse.py --profile gpu-grade)")
from autograder.harness import runner  # noqa: E402
from autograder.harness.runner import grade_submission  # noqa: E402
from autograder.records import GradeJob, NotebookParts  # noqa: E402
from tests.autograder.test_grading import needs_bwrap  # noqa: E402
from autograder.cell_metadata import grade_id, is_answer  # noqa: E402

pytestmark = [pytest.mark.slow, needs_bwrap]


def _dsl_hand_in(assignment: str, cpp_cells: tuple[str, ...], edits: dict[str, tuple[str, str]] | None = None):
    """(name, source, release, hand-in): the solutions' answers with option A's cells left as released (so no C++
    compile runs), and ``edits`` {answer cell: (old, new)} applied to the hand-in."""
    name, source, release = gf.course_parts(assignment)
    nb = gf.solved(source, release)
    released = {c["metadata"]["nbgrader"]["grade_id"]: c["source"] for c in release["cells"]
                if is_answer(c)}
    for cell in nb["cells"]:
        gid = grade_id(cell)
        if gid in cpp_cells:
            cell["source"] = released[gid]
        if gid in (edits or {}):
            old, new = edits[gid]
            text = "".join(cell["source"])
            assert text.count(old) == 1, f"{assignment}'s {gid} no longer holds {old!r}: update the edit"
            cell["source"] = text.replace(old, new)
    return name, source, release, nb


def _grade(monkeypatch, assignment: str, hand_in) -> dict:
    monkeypatch.setattr(runner, "missing_gpu", lambda gpu: "")      # GPU tests are graded; no GPU runs them
    monkeypatch.setattr(runner, "gpu_arch", lambda gpu: "sm_90")
    name, source, release, nb = hand_in
    result = grade_submission(GradeJob("techniques", assignment, "t", {name: NotebookParts(source, release, nb)}))
    return {c.grade_id: c for c in result.cells}


def _summary(cells: dict) -> list:
    return [(g, c.status, c.judged, c.message[:300]) for g, c in cells.items()]


NB06_CPP = ("gemm06_cpp",)
LOOP_WAIT_06 = ("                cute.arch.cp_async_wait_group(STAGES - 2)\n                cute.arch.sync_threads()",
                "                cute.arch.cp_async_wait_group(0)\n                cute.arch.sync_threads()")


def test_06_the_dsl_solution_passes_the_judged_technique_checks_and_a_wait_0_fails_them(monkeypatch) -> None:
    cells = _grade(monkeypatch, "06_pipelining", _dsl_hand_in("06_pipelining", NB06_CPP))
    assert all(c.status == "passed" for c in cells.values()), _summary(cells)
    assert cells["test_pipeline_kernel_slow"].judged and cells["test_performance_bar_slow"].judged

    wrong = _grade(monkeypatch, "06_pipelining",
                   _dsl_hand_in("06_pipelining", NB06_CPP, {"gemm06_dsl": LOOP_WAIT_06}))
    failed = {g for g, c in wrong.items() if c.status != "passed"}
    assert failed == {"test_pipeline_kernel_slow", "test_performance_bar_slow"}, _summary(wrong)
    assert "waits for every copy issued so far" in wrong["test_pipeline_kernel_slow"].evalue, _summary(wrong)


NB05_CPP = ("gemm_cpp_load_tile", "gemm_cpp", "gemm_cpp_first_tile", "gemm_cpp_k_loop")
NO_REFILL_BARRIER_05 = ("        mma_k_tile(cta)\n        cute.arch.sync_threads()                       # everyone is done "
                        "reading it\n", "        mma_k_tile(cta)\n")


def test_05_the_dsl_solution_passes_the_judged_technique_checks_and_a_k_loop_without_its_barrier_fails(
        monkeypatch) -> None:
    cells = _grade(monkeypatch, "05_global_gemm", _dsl_hand_in("05_global_gemm", NB05_CPP))
    assert all(c.status == "passed" for c in cells.values()), _summary(cells)
    assert all(cells[g].judged for g in ("test_tile_order", "test_copies_and_mma_slow", "test_one_k_tile_slow",
                                         "test_gemm_correct_slow", "test_perf_bar_slow"))

    wrong = _grade(monkeypatch, "05_global_gemm",
                   _dsl_hand_in("05_global_gemm", NB05_CPP, {"gemm_dsl": NO_REFILL_BARRIER_05}))
    failed = {g for g, c in wrong.items() if c.status != "passed"}
    assert failed == {"test_gemm_correct_slow"}, _summary(wrong)
    assert "no barrier since the last read of shared memory" in wrong["test_gemm_correct_slow"].evalue, _summary(wrong)
