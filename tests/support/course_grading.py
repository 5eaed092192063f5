"""A course notebook graded through the real grader (nbgrader in the sandbox, tests in the judge), its hand-in
built from the solutions' answers with some answer cells replaced or left as the release's placeholders.

Why: a test cell that passes when run by itself may still fail where it counts, in the judge, which holds
only handles to what the student's kernel built (a DSL kernel's image, never its PTX text). Tests that grade
a notebook end to end share this instead of each assembling a hand-in.
"""
from __future__ import annotations

from typing import Iterable

from tests.support import grading_fixtures as gf
from autograder.cell_metadata import grade_id


def grade(assignment: str, replace: dict[str, str] | None = None, placeholders: Iterable[str] = (),
          gpu: str | None = None) -> dict:
    """grade_id -> the grader's CellResult for a hand-in of ``assignment``: the solutions' answers, those in
    ``replace`` (grade_id -> source) put in their place, those in ``placeholders`` left as released. ``gpu``: the
    worker's GPU (a CUDA_VISIBLE_DEVICES value), None for a worker without one."""
    from autograder.harness.runner import grade_submission
    from autograder.records import GradeJob, NotebookParts

    name, source, release = gf.course_parts(assignment)
    nb = gf.solved(source, release)
    released = {grade_id(c): c["source"] for c in release["cells"]}
    replace = replace or {}
    unknown = [g for g in [*replace, *placeholders] if g not in released]
    assert not unknown, f"{assignment} has no cells {unknown}: the notebook changed, update the test"
    for cell in nb["cells"]:
        gid = grade_id(cell)
        if gid in placeholders:
            cell["source"] = released[gid]
        if gid in replace:
            cell["source"] = replace[gid]
    job = GradeJob("student", assignment, "t", {name: NotebookParts(source, release, nb)}, gpu=gpu)
    return {c.grade_id: c for c in grade_submission(job).cells}


def bwrap_missing() -> str:
    """Why the grader's sandbox cannot run here ('' when it can, or on CI, where it must)."""
    import os

    from autograder.harness import sandbox

    why = sandbox.check_bwrap()
    return "" if os.environ.get("GEMMLAB_CI") == "1" else (why or "")


__all__ = ["bwrap_missing", "grade"]
