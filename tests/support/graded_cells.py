"""A solutions notebook's cells run by grade_id in a plain namespace, an answer cell replaced.

Why: every exercise's tests must fail the plausible wrong answers. The wrong-answer tests
(``tests/course/test_wrong_answers_*.py``) put a wrong answer in place of the solution cell and
assert that the notebook's own test cell, visible and hidden tests together, rejects it; the same
run with the solution must pass, so a test cell that fails everything is caught too.
"""
from __future__ import annotations

import random
from pathlib import Path

import nbformat

from tests.support import ROOT
from autograder.cell_metadata import grade_id

HIDDEN = "### BEGIN HIDDEN TESTS"


def notebook_path(assignment: str) -> Path:
    return ROOT / "solutions" / assignment / f"{assignment}.ipynb"


def cells_by_grade_id(assignment: str) -> dict[str, str]:
    """grade_id -> source of every cell of the solutions notebook that has one."""
    return _by_grade_id(notebook_path(assignment))


def release_cells(assignment: str) -> dict[str, str]:
    """grade_id -> source of every cell of the student release (course/) that has one: what an untouched
    hand-in holds, the placeholders of every answer cell."""
    return _by_grade_id(ROOT / "course" / assignment / f"{assignment}.ipynb")


def _by_grade_id(path: Path) -> dict[str, str]:
    nb = nbformat.read(path, as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if grade_id(c)}


def python(cell_source: str) -> str:
    """A code cell as plain Python: IPython's ``%magic`` and ``!shell`` lines left out."""
    return "\n".join(line for line in cell_source.splitlines() if not line.lstrip().startswith(("%", "!")))


def visible_part(cell_source: str) -> str:
    """What the student's copy of a test cell runs: everything before the hidden tests."""
    return cell_source.split(HIDDEN)[0]


def run_cells(assignment: str, grade_ids: list[str], replace: dict[str, str] | None = None,
              seed: int = 0, namespace: dict | None = None, folder: Path | None = None) -> dict:
    """Run the cells ``grade_ids`` in order in one namespace (a fresh one, or ``namespace`` to go
    on from earlier cells) and return it.

    ``replace`` maps a grade_id to the source to run in that cell's place (a wrong answer, or a
    test cell's visible part); Python's ``random`` is seeded so random hidden tests repeat.
    ``folder``: each cell is written to a file there first and compiled from it, as the CuTe DSL
    needs (it reads its functions' source).
    """
    cells = cells_by_grade_id(assignment)
    replace = replace or {}
    missing = [gid for gid in [*grade_ids, *replace] if gid not in cells]
    assert not missing, f"{assignment} has no cells with grade_id {missing}: the notebook changed, update the test"
    random.seed(seed)
    ns = namespace if namespace is not None else {"__name__": f"notebook_{assignment}"}
    for gid in grade_ids:
        source, name = python(replace.get(gid, cells[gid])), f"<{assignment}:{gid}>"
        if folder is not None:
            path = folder / f"{assignment}_{gid}.py"
            path.write_text(source)
            name = str(path)
        exec(compile(source, name, "exec"), ns)
    return ns
