"""01's "work it out without the library" rule, graded: the test runs in the judge, the student's function in the
student's kernel under the library watch, and the watch's report crosses back (gemmlab.checking.library_watch).

Hand-ins are built from the course's notebook 01: the release with Exercises 1 and 2 answered, the copy
kernels left as released (nothing to compile). Needs bubblewrap, like test_grading.py.
"""
from __future__ import annotations

import copy

import pytest

pytest.importorskip("nbgrader", reason="the grader needs nbgrader (tools/wheelhouse.py --profile gpu-grade)")
from autograder.harness.runner import grade_submission  # noqa: E402
from autograder.records import GradeJob, NotebookParts  # noqa: E402
from tests.autograder.test_grading import needs_bwrap  # noqa: E402
from tests.support import grading_fixtures as gf  # noqa: E402
from autograder.cell_metadata import grade_id  # noqa: E402

ASSIGNMENT = "01_layouts_and_partitioning"

#: Exercise 1 through an alias of pycute's crd2idx, bound when the cell runs; Exercise 2 by the student's own arithmetic.
LIBRARY_CRD2IDX = "from pycute import crd2idx as _lib\n\ndef crd2idx(coord, shape, stride):\n    return _lib(coord, shape, stride)\n"
OWN_OWNED_BY = ("def owned_by(t, thr_shape, tile_shape):\n    R, C = thr_shape\n"
                "    return [(r, c) for r in range(t // C, tile_shape[0], R) for c in range(t % C, tile_shape[1], C)]\n")


def _hand_in(release: dict, answers: dict[str, str]) -> dict:
    """The release with ``answers`` (grade_id -> source) in its answer cells."""
    nb = copy.deepcopy(release)
    for cell in nb["cells"]:
        gid = grade_id(cell)
        if gid in answers:
            cell["source"] = answers[gid]
    return nb


@needs_bwrap
def test_a_library_call_in_the_students_kernel_fails_the_judged_test() -> None:
    name, source, release = gf.course_parts(ASSIGNMENT)
    nb = _hand_in(release, {"crd2idx_solution": LIBRARY_CRD2IDX, "owned_solution": OWN_OWNED_BY})
    result = grade_submission(GradeJob("ann", ASSIGNMENT, "t", {name: NotebookParts(source, release, nb)}))
    cells = {c.grade_id: c for c in result.cells}
    assert cells["test_crd2idx"].judged and cells["test_owned"].judged
    assert cells["test_crd2idx"].status == "failed", cells["test_crd2idx"]
    assert "ran code of pycute or gemmlab.layout" in cells["test_crd2idx"].message, cells["test_crd2idx"].message
    assert cells["test_owned"].status == "passed" and cells["test_owned"].score == cells["test_owned"].points, \
        cells["test_owned"]
