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


def test_locked_content_tells_cells_apart_exactly_where_nbgraders_checksum_does() -> None:
    """The grader compares a hand-in's locked cell with the release by ``locked_content`` instead of nbgrader's
    md5 (which it would load nbgrader for): over every combination of the fields the checksum covers, and
    fields it does not, two cells compare equal exactly when their checksums are equal."""
    import itertools

    nbformat = pytest.importorskip("nbformat")
    utils = pytest.importorskip("nbgrader.utils")
    cells = []
    for source, kind, grade, solution, locked, gid, points, tags in itertools.product(
            ("assert f(2) == 4", "assert f(2) == 5"), ("code", "markdown"), (True, False, 1), (False, True),
            (True, False), ("test_f", "test_g"), (2, 2.0, 3), ([], ["mine"])):
        meta = {cm.GRADE_ID: gid, cm.GRADE: grade, cm.SOLUTION: solution, cm.LOCKED: locked, cm.POINTS: points}
        cells.append(nbformat.from_dict({"cell_type": kind, "source": source,
                                         "metadata": {cm.NBGRADER: meta, cm.TAGS: tags}}))
    checksums = [utils.compute_checksum(c) for c in cells]
    contents = [cm.locked_content(c) for c in cells]
    pairs = list(itertools.combinations(range(len(cells)), 2))
    assert sum(checksums[i] == checksums[j] for i, j in pairs) > 0, \
        "some pairs differ only in what the checksum ignores (tags, a non-test's points)"
    for i, j in pairs:
        assert (contents[i] == contents[j]) == (checksums[i] == checksums[j]), (cells[i], cells[j])
    # a hand-in's points nbgrader's checksum cannot even read compare unequal, never raise
    odd = [nbformat.from_dict({"cell_type": "code", "source": "", "metadata": {cm.NBGRADER: {
        cm.GRADE_ID: "t", cm.GRADE: True, **({} if p is None else {cm.POINTS: p})}}}) for p in (None, 10 ** 400, "x")]
    assert len({cm.locked_content(c) for c in odd}) == 3
