"""A solutions notebook's cells run from files in one namespace, and its graded cells run with answers swapped.

Why: notebooks 04 and 04b's wrong-answer tests run the notebook's own cells (the CuTe DSL reads its
functions' source, so each cell runs from a file of its own) and then a graded test cell, hidden tests
included, with a wrong answer in place of the student's, as the grader would.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from tests.support.graded_cells import cells_by_grade_id
from solution_cells import cell_folder


def run_cell(ns: dict, name: str, source: str, folder: Path) -> None:
    """Run ``source`` in ``ns`` from ``folder/<name>.py``."""
    path = folder / f"{name}.py"
    path.write_text(source)
    exec(compile(source, str(path), "exec"), ns)


def notebook_namespace(assignment: str, context: list[str]) -> tuple[dict, Callable[..., dict]]:
    """The namespace after the cells ``context`` (grade_ids, in order), and ``graded(test, **answers)``: run
    graded cell ``test`` in a copy of it with ``answers`` in place of the notebook's names (returns that copy)."""
    cells = cells_by_grade_id(assignment)
    folder = cell_folder(f"{assignment}-wrong")
    ns: dict[str, Any] = {"__name__": f"nb_{assignment}"}
    for name in context:
        run_cell(ns, name, cells[name], folder)

    def graded(test: str, **answers: Any) -> dict:
        local = dict(ns)
        local.update(answers)
        run_cell(local, test, cells[test], folder)
        return local

    return ns, graded


@contextmanager
def gpu_hidden() -> Iterator[None]:
    """gemmlab sees no GPU inside the block (for a module-scoped fixture; tests use conftest's ``no_gpu``)."""
    import pytest

    from gemmlab.running import gpu as gpu_module

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(gpu_module.HIDE_ENV, "1")
        gpu_module.refresh()
        yield
    gpu_module.refresh()
