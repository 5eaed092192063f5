"""Build the notebook that is actually run from the instructor's source and the student's copy.

The student's notebook is evidence of their answers, nothing more. What runs is the
instructor's notebook (``solutions/``: locked cells, visible and hidden tests, metadata, order)
with only these parts taken from the student:

- the source of each answer cell (nbgrader ``solution: true``), matched by ``grade_id``; a
  missing answer cell runs as released (``# YOUR CODE HERE``);
- cells the student added (no nbgrader metadata in the release), kept after the instructor
  cell they followed, with every tag and metadata removed.

So test cells cannot be edited, deleted, moved, skipped (no ``skip-execution`` or other tag
survives) or re-pointed (a student cell claiming a test's ``grade_id`` or points is just an
extra cell), and solutions never leak in (answer cells come from the student or the release).
Every difference from the release in a locked cell is reported by grade_id, and every cell that
runs has a label for reports: its grade_id, or "your cell N" (its number in the student's notebook).

Which graded cells need a GPU is the instructor's source metadata (``metadata.gemmlab.needs_gpu``, see
:mod:`autograder.cell_metadata`; written by ``tools/mark_gpu_cells.py``), which no hand-in can change: test
cells come from the source.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import nbformat

from ..cell_metadata import TAGS, grade_id, is_answer, is_graded, locked_content

#: How reports name a cell the student added ("your cell 7": its number in the student's notebook).
STUDENT_LABEL = "your cell"


@dataclass
class Assembled:
    notebook: nbformat.NotebookNode
    tampered: list[str] = field(default_factory=list)   # plain-words notes on locked/test cells changed by the student
    added: int = 0                                       # student cells kept
    missing_answers: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)     # per cell of ``notebook``: how reports name it
    students: list[bool] = field(default_factory=list)  # per cell of ``notebook``: a cell the student added

    def is_students(self, index: int) -> bool:
        """Whether cell ``index`` of the notebook is one the student added (not the instructor's)."""
        return self.students[index]


def assemble(source: nbformat.NotebookNode, release: nbformat.NotebookNode,
             student: nbformat.NotebookNode | None) -> Assembled:
    """The notebook to grade (see the module docstring). ``student=None``: nothing handed in."""
    release_by_id = {grade_id(c): c for c in release.cells if grade_id(c)}
    source_ids = [grade_id(c) for c in source.cells if grade_id(c)]
    known = set(source_ids)
    answers: dict[str, str] = {}
    extras: dict[str, list] = {}      # instructor grade_id -> (student's cell number, cell) that followed it
    tampered: list[str] = []
    seen_locked: set[str] = set()
    last = ""
    for number, cell in enumerate(student.cells if student is not None else [], 1):
        gid = grade_id(cell)
        if gid in known and gid not in seen_locked and gid not in answers:
            rel = release_by_id.get(gid)
            if rel is not None and is_answer(rel):
                answers[gid] = cell.get("source", "")
                last = gid
                continue
            if rel is not None:
                seen_locked.add(gid)
                if locked_content(cell) != locked_content(rel):
                    tampered.append(f"locked cell {gid!r} was changed; the original ran instead")
                elif (cell.get("metadata", {}).get(TAGS) or []) != (rel.get("metadata", {}).get(TAGS) or []):
                    tampered.append(f"the tags of locked cell {gid!r} were changed; they were ignored")
                last = gid
                continue
        # a cell of the student's own (or a second copy of an instructor cell): kept, stripped
        if cell.get("cell_type") in ("code", "markdown"):
            if gid:
                tampered.append(f"a cell claiming grade_id {gid!r} was not the instructor's; it ran as a plain cell")
            extras.setdefault(last, []).append((number, cell))
    if student is not None:
        for gid in source_ids:
            rel = release_by_id.get(gid)
            if rel is not None and not is_answer(rel) and gid not in seen_locked and is_graded(rel):
                tampered.append(f"test cell {gid!r} was deleted; the original ran instead")
    cells = [_plain_copy(c) for _, c in extras.get("", [])]
    labels = [f"{STUDENT_LABEL} {n}" for n, _ in extras.get("", [])]
    missing = []
    for position, cell in enumerate(source.cells, 1):
        gid = grade_id(cell)
        labels.append(gid or f"the instructor's cell {position}")
        new = copy.deepcopy(cell)
        new["outputs"] = [] if new.get("cell_type") == "code" else new.get("outputs")
        if new.get("cell_type") == "code":
            new["execution_count"] = None
        if gid and is_answer(cell):
            if gid in answers:
                new["source"] = answers[gid]
            else:
                new["source"] = release_by_id[gid]["source"] if gid in release_by_id else ""
                missing.append(gid)
        cells.append(new)
        if gid:
            cells.extend(_plain_copy(c) for _, c in extras.get(gid, []))
            labels.extend(f"{STUDENT_LABEL} {n}" for n, _ in extras.get(gid, []))
    nb = copy.deepcopy(source)
    nb.cells = cells
    for c in nb.cells:
        if c.get("cell_type") != "code":
            c.pop("outputs", None)
            c.pop("execution_count", None)
    added = sum(len(v) for v in extras.values())
    students = [label.startswith(STUDENT_LABEL) for label in labels]
    return Assembled(nb, tampered, added, missing, labels, students)


def _plain_copy(cell):
    """A student's own code or markdown cell with its source only (no tags, no metadata)."""
    if cell.get("cell_type") == "code":
        return nbformat.v4.new_code_cell(cell.get("source", ""))
    return nbformat.v4.new_markdown_cell(cell.get("source", ""))
