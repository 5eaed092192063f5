"""Where each cell of the course's notebooks runs when graded, decided from the instructor's notebooks alone (CPU)."""
from __future__ import annotations

import nbformat
import pytest

from tests.support import ROOT

from autograder.cell_metadata import grade_id, judged_launches
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
    ("04_mma", {"build_simt_dsl", "build_tile_dsl"}, set()),
    ("04b_tiled_mma", {"build_cta_dsl"}, set()),
    ("05_global_gemm", {"build_dsl", "dsl_step_facts"}, {"perf_measure_slow"}),
    ("06_pipelining", {"gemm06_dsl_launch", "build_dsl", "bank_report_real"}, {"build_cpp"}),
    ("07_hopper", {"build_one_tile", "build_pipelined", "hopper_ws_launch", "build_ws", "build_bw", "build_bw_gemm"},
     set()),
    ("09_capstone", set(), set()),
])
def test_cells_that_build_dsl_kernels_run_in_the_students_kernel_and_bars_in_the_judge(assignment, student, judge):
    from autograder.cell_metadata import display_only

    on_student, on_judge = one_side_cells(_notebook(assignment))
    assert student <= on_student and judge <= on_judge and not on_student & on_judge
    shown = {grade_id(c) for c in _notebook(assignment).cells if display_only(c)}
    assert not shown & (on_student | on_judge), "a display-only cell runs in neither kernel"
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


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_cell_that_runs_in_the_judge_alone_defines_nothing_the_students_kernel_reads_later(assignment: str) -> None:
    """A ``judge_only`` cell (05's C++ builds) does not run in the student's kernel when graded: no cell that runs
    there after it (answer cells, cells that build DSL kernels, cells that run in both) may read what it defines."""
    from autograder.cell_metadata import display_only, is_answer, is_graded, judge_only
    from autograder.harness.routing import used_names

    nb = _notebook(assignment)
    on_student, on_judge = one_side_cells(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, cell in enumerate(code):
        if not judge_only(cell):
            continue
        assert grade_id(cell) in on_judge and not is_graded(cell) and not is_answer(cell)
        names = {n for n in defined_names(cell.source, imports=True) if not n.startswith("_")}
        for later in code[i + 1:]:
            runs_in_student = is_answer(later) or grade_id(later) in on_student or not (
                is_graded(later) or grade_id(later) in on_judge or display_only(later))
            assert not (runs_in_student and names & used_names(later.source)), (
                f"{assignment}: {grade_id(cell)} runs in the judge alone, but {grade_id(later) or 'a cell'}, which "
                f"runs in the student's kernel, reads {sorted(names & used_names(later.source))}")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_cell_the_grader_skips_defines_and_changes_nothing_another_cell_reads(assignment: str) -> None:
    """A ``display_only`` cell runs in neither kernel when graded. So it defines no public name (imports included:
    a student's later cell might use one) and changes no object of the notebook's (item or attribute assignment,
    a mutating method, ``global``, in the cell or in a notebook function it calls): a later cell could read it."""
    from autograder.cell_metadata import display_only, is_answer, is_graded
    from autograder.harness.routing import changes_outside

    nb = _notebook(assignment)
    for cell in nb.cells:
        if cell.cell_type != "code" or not display_only(cell):
            continue
        where = f"{assignment}, {grade_id(cell)}"
        assert grade_id(cell) and not is_graded(cell) and not is_answer(cell), where
        public = [n for n in defined_names(cell.source, imports=True) if not n.startswith("_")]
        assert not public, f"{where} is display-only but defines {public}"
        assert not changes_outside(nb, cell), f"{where} is display-only but changes {sorted(changes_outside(nb, cell))}"


@pytest.mark.parametrize("source, changed", [
    ("LADDER['x'] = 1", {"LADDER"}),
    ("results.append(3)\nd = {}\nd['k'] = 1", {"results"}),
    ("cfg.stages += 1", {"cfg"}),
    ("def f():\n    global N\n    N = 2\nf()", {"N"}),
    ("_t = {}\nfor _k in range(3):\n    _t[_k] = _k\nprint(_t)", set()),
    ("measure('a', fn)", {"LADDER"}),           # through the notebook's function it calls
    ("print(sorted(x for x in range(3)))", set()),
    ("setattr(cfg, 'stages', 3)", {"cfg"}),
    ("for LADDER['k'] in range(2):\n    pass", {"LADDER"}),
])
def test_changes_outside_finds_what_a_cell_changes_without_defining_it(source: str, changed: set[str]) -> None:
    from autograder.harness.routing import changes_outside

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("LADDER = {}\ndef measure(label, fn):\n    r = fn()\n    LADDER[label] = r\n"),
        nbformat.v4.new_code_cell(source)])
    assert changes_outside(nb, nb.cells[1]) == changed
