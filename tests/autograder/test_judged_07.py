"""Notebook 07 graded through the real grader on a worker without a GPU: its CuTe DSL kernels are compiled in the
student's kernel, and every test reads their techniques from the machine code of those images, which the judge
disassembles itself (it never reads PTX text from the student's process, which now raises there). The solution
passes every test; a hand-in that releases Exercise 6's slot right after ``commit_group()`` and commits Exercise 8's
accumulator barrier after every k-tile fails exactly those two tests on their technique checks, although a later
answer cell redefines the notebook's check helpers, patches ``gemmlab.techniques`` and forges every DSL kernel's PTX.
The worker is told it has a Hopper (as in test_judged_tests.py); without one, the run parts of the Hopper tests are
skipped, their machine-code checks are not. Needs bubblewrap, like test_grading.py."""
from __future__ import annotations

import pytest

pytest.importorskip("nbgrader", reason="the grader needs nbgrader (tools/wheelhouse.py --profile gpu-grade)")
from autograder.cell_metadata import grade_id  # noqa: E402
from autograder.harness import runner  # noqa: E402
from autograder.harness.runner import grade_submission  # noqa: E402
from autograder.records import GradeJob, NotebookParts  # noqa: E402
from tests.autograder.test_grading import needs_bwrap  # noqa: E402
from tests.support import grading_fixtures as gf  # noqa: E402

ASSIGNMENT = "07_hopper"
#: The tests whose technique checks read a DSL kernel's machine code (the interim break: they read PTX before).
MACHINE_CODE_TESTS = ("test_one_tile_slow", "test_pipelined_slow", "test_ws_slow", "test_bw_tile", "test_bw_kloop",
                      "test_bw_tmem")
WAIT1 = "                warpgroup.wait_group(1)                   # the previous k-tile's wgmmas are done\n"
ACC_FULL = "        with cute.arch.elect_one():\n            tcgen05.commit(empty + s)\n"
#: Appended to the last answer cell: what a hand-in could do in its own process to pass the old PTX-reading tests.
FORGERIES = """
bw_kloop_checks = lambda *args, **kwargs: []
first_wait_or_wgmma = lambda *args, **kwargs: None
import gemmlab.techniques as _T
_T.require = lambda *args, **kwargs: None
import gemmlab.dsl.core as _core
_core.DslKernel.ptx = property(lambda self: '.entry k() { wgmma.mma_async; tcgen05.mma; }')
"""


def _grade(monkeypatch, change=None) -> dict:
    monkeypatch.setattr(runner, "missing_gpu", lambda gpu: "")
    monkeypatch.setattr(runner, "gpu_arch", lambda gpu: "sm_90")
    name, source, release = gf.course_parts(ASSIGNMENT)
    nb = gf.solved(source, release)
    if change:
        change({grade_id(c): c for c in nb["cells"]})
    result = grade_submission(GradeJob("student", ASSIGNMENT, "t", {name: NotebookParts(source, release, nb)}))
    return {c.grade_id: c for c in result.cells}


def _edit(cell: dict, old: str, new: str) -> None:
    source = "".join(cell["source"])
    assert source.count(old) == 1, f"the solution no longer holds {old!r} once: update the edit"
    cell["source"] = source.replace(old, new)


@needs_bwrap
@pytest.mark.slow
def test_the_solution_passes_every_test_from_its_machine_code(monkeypatch) -> None:
    cells = _grade(monkeypatch)
    assert all(c.status == "passed" for c in cells.values()), [(c.grade_id, c.status, c.message[:300])
                                                               for c in cells.values() if c.status != "passed"]
    assert all(cells[g].judged for g in MACHINE_CODE_TESTS), [(g, cells[g].judged) for g in MACHINE_CODE_TESTS]
    assert "test_bw_many_ctas" not in cells and sum(c.points for c in cells.values()) == 30


@needs_bwrap
@pytest.mark.slow
def test_a_racy_release_and_an_early_accumulator_commit_fail_whatever_the_hand_in_forges(monkeypatch) -> None:
    def change(by_id: dict) -> None:
        _edit(by_id["hopper_ws"], WAIT1, "")
        _edit(by_id["hopper_bw_kloop"], ACC_FULL, ACC_FULL + ACC_FULL.replace("empty + s", "acc_full"))
        _edit(by_id["hopper_bw_grid"], "    return bx, by\n", "    return bx, by\n" + FORGERIES)

    cells = _grade(monkeypatch, change)
    failed = {g: c.message for g, c in cells.items() if c.status != "passed"}
    assert set(failed) == {"test_ws_slow", "test_bw_kloop"}, [(g, c.status, c.message[:300]) for g, c in cells.items()]
    # the grader's message is the error's first line (the checks' sentences follow it in the notebook; the CPU tests of
    # tests/course/test_wrong_answers_07.py read them): the technique checks of the judge's own reading failed
    assert failed["test_ws_slow"].startswith("TechniqueError: the capstone kernel (Exercise 6)"), failed
    assert failed["test_bw_kloop"].startswith("TechniqueError: bw_mma_loop (Exercise 8)"), failed
