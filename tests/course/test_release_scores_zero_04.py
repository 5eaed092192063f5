"""The untouched releases of notebooks 04 and 04b score 0: every graded cell fails, as the grader runs it.

The release (course/) runs top to bottom in one namespace, without a GPU, each cell from a file of its own (the
CuTe DSL reads its functions' source); its graded cells are replaced by the instructor's (hidden tests included),
as nbgrader restores them. Every given cell must run (a student sees no traceback there before answering; an
answer cell's placeholder may raise), and every graded cell must raise: placeholders earn nothing, whatever a check
reads (values, C expressions, or a kernel's machine code, where no kernel was built).
"""
from __future__ import annotations

import os

import nbformat
import pytest

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")

from tests.support import ROOT  # noqa: E402
from tests.support.graded_cells import cells_by_grade_id, python  # noqa: E402
from autograder.cell_metadata import grade_id, is_answer, is_graded  # noqa: E402
from solution_cells import cell_folder  # noqa: E402


def _graded(cell) -> bool:
    return is_graded(cell) and cell.cell_type == "code"


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ["04_mma", "04b_tiled_mma"])
def test_every_graded_cell_fails_on_the_untouched_release(assignment: str, no_gpu, monkeypatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(ROOT / "course" / assignment)
    release = nbformat.read(ROOT / "course" / assignment / f"{assignment}.ipynb", as_version=4)
    instructor = cells_by_grade_id(assignment)
    folder = cell_folder(f"{assignment}-release")
    ns: dict = {"__name__": f"release_{assignment}"}
    graded, passed = [], []
    for index, cell in enumerate(release.cells):
        if cell.cell_type != "code":
            continue
        gid = grade_id(cell) or f"cell{index}"
        source = python(instructor[gid] if _graded(cell) else cell.source)
        path = folder / f"{index:02d}_{gid}.py"
        path.write_text(source)
        code = compile(source, str(path), "exec")
        if is_answer(cell):
            try:                              # a placeholder answer may raise (NotImplementedError): it is only the
                exec(code, ns)                # student's cell, which the grader runs with errors allowed
            except Exception:  # noqa: BLE001
                pass
            continue
        if not _graded(cell):
            exec(code, ns)                    # every given cell runs on the untouched release
            continue
        graded.append(gid)
        try:
            exec(code, dict(ns))
        except Exception:  # noqa: BLE001 - any failure is a 0 for that cell, which is what this test wants
            continue
        passed.append(gid)
    assert len(graded) >= 3 and not passed, f"graded cells that pass on the untouched release: {passed}"
