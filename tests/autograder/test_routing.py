"""Where each cell of the course's notebooks runs when graded, decided from the instructor's notebooks alone (CPU)."""
from __future__ import annotations

import nbformat
import pytest

from tests.support import ROOT

from autograder.harness.assemble import grade_id, judged_launches
from autograder.harness.routing import defined_names, dsl_dependencies, one_side_cells


def _notebook(assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)


def test_names_bound_inside_blocks_are_a_cells_names() -> None:
    source = ("x = 1\ntry:\n    k = build()\nexcept Exception:\n    pass\nelse:\n    counts = report(k)\n"
              "if flag:\n    for i in range(3):\n        y = i\ndef f():\n    inner = 2\n")
    assert defined_names(source) == ["x", "k", "counts", "y", "f"]   # not the function's own names


def test_a_cells_temporaries_carry_no_dsl_dependency() -> None:
    """07 builds its kernels into ``_k``; a later test's loop variable ``_k`` is not a DSL answer."""
    deps = dsl_dependencies(_notebook("07_hopper"))
    assert deps["test_ring_waits"] == frozenset() and "ws_kernel" in deps["test_ws_slow"]


@pytest.mark.parametrize("assignment, student, judge", [
    ("01_layouts_and_partitioning", {"build_copy_dsl"}, set()),
    ("02_tiled_copy", {"build_dsl"}, set()),
    ("04_mma", {"build_simt_dsl", "build_tile_dsl", "build_cta_dsl"}, set()),
    ("05_global_gemm", {"build_dsl"}, {"perf_measure_slow"}),
    ("06_pipelining", {"gemm06_dsl_launch", "build_dsl", "bench_more", "bank_report_real"}, set()),
    ("07_hopper", {"build_one_tile", "build_pipelined", "hopper_ws_launch", "build_ws", "bench_steps", "build_bw",
                   "build_bw_gemm"}, set()),
    ("09_capstone", {"self_check", "self_speed"}, set()),
])
def test_cells_that_build_dsl_kernels_run_in_the_students_kernel_and_bars_in_the_judge(assignment, student, judge):
    on_student, on_judge = one_side_cells(_notebook(assignment))
    assert student <= on_student and judge <= on_judge and not on_student & on_judge
    judged = {grade_id(c) for c in _notebook(assignment).cells if judged_launches(c)}
    assert judged and not judged & (on_student | on_judge), "tests are placed by their own mark"



ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if (p / f"{p.name}.ipynb").is_file())


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_test_of_a_dsl_answer_is_judged(assignment: str) -> None:
    """No test of the course runs in the student's kernel: each one that uses a CuTe DSL answer is marked
    ``judged`` (tools/mark_gpu_cells.py), so its launches are recorded and replayed and its kernels' PTX is
    asked for through handles."""
    nb = _notebook(assignment)
    marked = {grade_id(c) for c in nb.cells if judged_launches(c)}
    unjudged = sorted(gid for gid, deps in dsl_dependencies(nb).items() if deps and gid not in marked)
    assert not unjudged, f"{assignment}: tests of DSL answers not marked judged: {unjudged}"
