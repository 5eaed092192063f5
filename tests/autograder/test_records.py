"""The grader's records survive the trip through JSON (result files, Ray) unchanged, and old result
files without published results still load."""
from __future__ import annotations

import json

from autograder.records import CellResult, GradeJob, Limits, NotebookParts, PublishedResult, SubmissionResult
from tests.support import ROOT
from autograder.cell_metadata import grade_id

NB = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _result() -> SubmissionResult:
    cell = CellResult("a.ipynb", "test_x", 2.0, 1.5, "passed", "passed", 0.25, outputs=({"output_type": "stream",
                      "name": "stdout", "text": "hi\n"},), results=(PublishedResult("bench", {"ratio": 0.5}),))
    manual = CellResult("a.ipynb", "essay", 1.0, None, "manual", "graded by hand")
    return SubmissionResult("ann", "a", "abc", (cell, manual), 1.5, 3.0, 12.5, ("restarted",), ("flag",),
                            {"a.ipynb": NB}, "local gpu 0")


def test_submission_result_round_trips_through_json() -> None:
    r = _result()
    assert SubmissionResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_result_files_written_before_published_results_still_load() -> None:
    data = _result().to_dict()
    for cell in data["cells"]:
        del cell["results"]
    assert all(c.results == () for c in SubmissionResult.from_dict(data).cells)


def test_grade_job_round_trips_and_is_placed_without_changing_the_original() -> None:
    job = GradeJob("ann", "a", "abc", {"a.ipynb": NotebookParts(NB, NB, None)}, Limits(cell_s=8), sandbox=False)
    assert GradeJob.from_dict(json.loads(json.dumps(job.to_dict()))) == job
    placed = job.on("1", "local gpu 1")
    assert (placed.gpu, placed.worker, job.gpu, job.worker) == ("1", "local gpu 1", None, "")


def test_limits_overrides_keep_field_types_and_skip_none() -> None:
    lim = Limits().with_overrides(cell_s=8, memory_bytes=1.5 * 2**30, output_bytes=None)
    assert lim.cell_s == 8.0 and isinstance(lim.cell_s, float)
    assert lim.memory_bytes == int(1.5 * 2**30) and isinstance(lim.memory_bytes, int)
    assert lim.output_bytes == Limits().output_bytes


def test_scan_flags_answers_that_call_a_library_twin_of_the_exercise() -> None:
    """An answer may call a library twin of what it was asked to write: the grader cannot tell a call
    from a copy, so the instructor is shown it (docs/THREAT_MODEL.md, Limits). The patterns live on
    the instructor's answer cells, so each notebook flags its own twins."""
    from autograder.cell_metadata import answer_flags
    from autograder.harness.runner import scan

    def cells(name: str) -> dict:
        nb = json.loads((ROOT / "solutions" / name / f"{name}.ipynb").read_text())
        return {grade_id(c): c for c in nb["cells"]}

    nb00, nb01 = cells("00_gpu_and_roofline"), cells("01_layouts_and_partitioning")
    naive = answer_flags(nb00["naive_solution"])
    assert scan("def my_naive_intensity(M, N, K):\n    return rm.naive_intensity(M, N, K)\n", naive)
    assert scan("from gemmlab import roofline_math as r\n", naive)
    assert not scan("".join(nb00["naive_solution"]["source"]), naive)      # the solution itself is clean
    crd = answer_flags(nb01["crd2idx_solution"])
    assert scan("def crd2idx(c, s, d):\n    return gl.Layout(s, d)(c)\n", crd)
    assert scan("import pycute\n", crd)
    assert not scan("".join(nb01["crd2idx_solution"]["source"]), crd)
    assert answer_flags({"metadata": {"gemmlab": {"flag": [{"pattern": 1}, "x"]}}}) == []   # malformed: ignored


def test_the_students_own_cells_get_the_answer_cell_limit() -> None:
    """An endless loop in an answer cell or a cell the student added ends after ``answer_cell_s``; the instructor's
    cells keep ``cell_s``, and those whose grade_id ends in _slow ``slow_cell_s``."""
    import nbformat

    from autograder.harness.runner import cell_timeout

    lim = Limits(cell_s=100, slow_cell_s=500, answer_cell_s=30)
    cell = lambda gid: nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {"grade_id": gid}})  # noqa: E731
    assert cell_timeout(cell("setup"), lim) == 100 and cell_timeout(cell("test_gemm_slow"), lim) == 500
    assert cell_timeout(cell("answer_slow"), lim, students=True) == 30
    assert Limits().answer_cell_s == 60 and Limits().with_overrides(answer_cell_s=5).answer_cell_s == 5.0
