"""The cell-metadata readers: what the instructor's tools write reads back, and metadata of the wrong
shape (a hand-in is untrusted) reads as "not set" instead of raising."""
from __future__ import annotations

import pytest

from autograder import cell_metadata as cm


def _cell(nbgrader=None, gemmlab=None, tags=None) -> dict:
    metadata = {}
    for key, value in ((cm.NBGRADER, nbgrader), (cm.GEMMLAB, gemmlab), (cm.TAGS, tags)):
        if value is not None:
            metadata[key] = value
    return {"cell_type": "code", "source": "", "metadata": metadata}


def test_readers_read_what_the_tools_write() -> None:
    cell = _cell({cm.GRADE_ID: "test_x", cm.GRADE: True, cm.POINTS: 2.5},
                 {cm.NEEDS_GPU: True, cm.NEEDS_ARCH: "sm_90", cm.JUDGED: True,
                  cm.FLAG: [{"pattern": "torch.mm", "why": "a library GEMM"}]},
                 [cm.kernel_tag("gemm05_cpp"), "other"])
    assert cm.grade_id(cell) == "test_x" and cm.points(cell) == 2.5 and cm.is_graded(cell)
    assert not cm.is_answer(cell)
    assert cm.needs_gpu(cell) and cm.needs_arch(cell) == "sm_90" and cm.judged_launches(cell)
    assert not cm.judge_only(cell) and not cm.display_only(cell)
    assert cm.answer_flags(cell) == [("torch.mm", "a library GEMM")]
    assert cm.tags(cell) == ["kernel:gemm05_cpp", "other"]
    assert cm.notebook_needs_gpu({"cells": [_cell(), cell]})
    assert not cm.notebook_needs_gpu({"cells": [_cell(gemmlab={cm.NEEDS_GPU: True})]}), "ungraded: not a GPU test"


def test_an_answer_is_a_solution_cell_that_is_not_locked() -> None:
    assert cm.is_answer(_cell({cm.SOLUTION: True}))
    assert not cm.is_answer(_cell({cm.SOLUTION: True, cm.LOCKED: True}))


@pytest.mark.parametrize("cell", [
    {"metadata": None}, {"metadata": []}, {},
    _cell(nbgrader=["grade_id"], gemmlab="needs_gpu", tags="kernel:x"),
    _cell({cm.GRADE_ID: 7, cm.POINTS: "9", cm.GRADE: 0}, {cm.NEEDS_GPU: "yes", cm.NEEDS_ARCH: 90, cm.FLAG: "x",
                                                        cm.DISPLAY_ONLY: 1}, [3, None]),
])
def test_metadata_of_the_wrong_shape_reads_as_not_set(cell: dict) -> None:
    assert cm.grade_id(cell) == "" and cm.points(cell) == 0.0 and not cm.is_graded(cell) and not cm.is_answer(cell)
    assert not cm.needs_gpu(cell) and cm.needs_arch(cell) == "" and not cm.display_only(cell)
    assert cm.answer_flags(cell) == [] and cm.tags(cell) == []
