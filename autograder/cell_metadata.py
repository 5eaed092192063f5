"""The words notebook cells carry for grading: nbgrader's metadata, gemmlab's, and the course's tags.

One place for every key, so the grader (:mod:`autograder.harness`), the tools that write the metadata
(``tools/mark_gpu_cells.py``, ``tools/solution_cells.py``) and the benchmarks cannot drift apart: a key
spelled differently in a tool would mark nothing, and the grader would pay a GPU test on a CPU worker.

- ``metadata.nbgrader``: nbgrader's own (``grade_id``, ``points`` and the ``grade``/``solution``/``locked``/``task``
  flags), written by the instructor's nbgrader create-assignment toolbar.
- ``metadata.gemmlab``: ours, written by ``tools/mark_gpu_cells.py`` from its lists: ``needs_gpu``,
  ``needs_arch``, ``judged``, ``judge_only``, ``display_only``, and ``flag`` (code an answer should not contain).
- ``metadata.tags``: ``kernel:NAME`` and ``kernel-part:NAME`` mark the solution cells that define a course
  kernel (tests and benchmarks run them, ``tools/solution_cells.py``).

The readers below take a cell as a dict (nbformat's nodes are dicts) and never raise on metadata of the
wrong shape: a hand-in is untrusted, so a malformed value reads as "not set".

Pure Python, no imports beyond the standard library: tools and nbgrader's config file import it too.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: ``metadata[NBGRADER]``: nbgrader's cell metadata.
NBGRADER = "nbgrader"
#: nbgrader's keys: the cell's name, its points, the metadata's schema version.
GRADE_ID, POINTS, SCHEMA_VERSION = "grade_id", "points", "schema_version"
#: nbgrader's flags (true/false): a graded test, an answer cell, a read-only cell, a manually graded task.
GRADE, SOLUTION, LOCKED, TASK = "grade", "solution", "locked", "task"
NBGRADER_FLAGS = (GRADE, SOLUTION, LOCKED, TASK)

#: ``metadata[TAGS]``: Jupyter's cell tags (a list of strings).
TAGS = "tags"
#: The tag nbclient skips by default, which a student could put on a test (the grader replaces it by a secret one).
SKIP_EXECUTION = "skip-execution"
#: Tag of the solution cell that defines course kernel NAME (``kernel:gemm05_cpp``), and of its other cells.
KERNEL_TAG, KERNEL_PART_TAG = "kernel:", "kernel-part:"

#: ``metadata[GEMMLAB]``: the course's grading metadata, written by ``tools/mark_gpu_cells.py``.
GEMMLAB = "gemmlab"
#: ``true``: a test whose points need the kernel to run on a GPU ("not graded: needs a GPU" elsewhere).
NEEDS_GPU = "needs_gpu"
#: ``"sm_90"``: a GPU test that needs that GPU family (compute-capability prefix).
NEEDS_ARCH = "needs_arch"
#: ``true``: a test of CuTe DSL kernels that only launches the student's functions, so it runs in the judge
#: (each launch recorded in the student's kernel and replayed).
JUDGED = "judged"
#: ``true``: in a notebook with judged tests, an instructor cell that runs in the judge alone, as nothing the
#: student's kernel runs later reads what it defines (05 compiles its C++ variants there).
JUDGE_ONLY = "judge_only"
#: ``true``: an instructor cell that only shows something (a timing table, an ncu measurement, a deadlock demo):
#: the grader runs it in neither kernel, as no grade can depend on it and it costs a worker GPU and CPU time.
DISPLAY_ONLY = "display_only"
#: ``[{"pattern": regex, "why": words}]``: code this answer cell should not contain (a library twin of what the
#: exercise asks for). Matches are flagged for the instructor, not penalised: a call cannot be told from a copy.
FLAG = "flag"
#: Every key of ``metadata[GEMMLAB]``.
GEMMLAB_KEYS = (NEEDS_GPU, NEEDS_ARCH, JUDGED, JUDGE_ONLY, DISPLAY_ONLY, FLAG)


def _section(cell: Mapping[str, Any], name: str) -> dict:
    """``cell.metadata[name]`` when it is a dict, else an empty dict."""
    metadata = cell.get("metadata")
    section = metadata.get(name) if isinstance(metadata, Mapping) else None
    return section if isinstance(section, dict) else {}


def nbgrader_meta(cell: Mapping[str, Any]) -> dict:
    """The cell's nbgrader metadata ({} when it has none)."""
    return _section(cell, NBGRADER)


def gemmlab_meta(cell: Mapping[str, Any]) -> dict:
    """The cell's gemmlab grading metadata ({} when it has none)."""
    return _section(cell, GEMMLAB)


def grade_id(cell: Mapping[str, Any]) -> str:
    """The cell's nbgrader name, '' for a plain cell."""
    value = nbgrader_meta(cell).get(GRADE_ID, "")
    return value if isinstance(value, str) else ""


def points(cell: Mapping[str, Any]) -> float:
    """The points nbgrader gives the cell (0 when unset)."""
    value = nbgrader_meta(cell).get(POINTS, 0)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def locked_content(cell: Mapping[str, Any]) -> tuple:
    """What nbgrader's checksum of a cell covers (``nbgrader.utils.compute_checksum``: the source, the cell type,
    the grade/solution/locked flags as nbgrader reads them, the grade_id and a test's points), as a tuple.

    Two cells are the same locked cell when these are equal (tags and other metadata are not part of it, as
    nbgrader's checksum ignores them). Compared directly, not hashed: the grading worker need not load nbgrader
    (0.7 s of CPU) for one md5, and no collision can make two different cells look alike. Never raises: points
    that are not a number compare by their ``repr``.
    """
    meta = nbgrader_meta(cell)
    grade, solution = meta.get(GRADE, False), meta.get(SOLUTION, False)
    locked = False if solution else True if grade else meta.get(LOCKED, False)
    value: Any = None
    if grade:
        value = meta.get(POINTS)
        try:
            value = str(float(value))
        except (TypeError, ValueError, OverflowError):
            value = ("not a number", repr(value))
    return (cell.get("source"), cell.get("cell_type"), str(grade), str(solution), str(locked),
            meta.get(GRADE_ID), value)


def is_answer(cell: Mapping[str, Any]) -> bool:
    """Whether the cell is one the student writes (nbgrader ``solution``, not locked)."""
    meta = nbgrader_meta(cell)
    return bool(meta.get(SOLUTION)) and not meta.get(LOCKED)


def is_graded(cell: Mapping[str, Any]) -> bool:
    """Whether the cell is an nbgrader test (``grade``)."""
    return bool(nbgrader_meta(cell).get(GRADE))


def tags(cell: Mapping[str, Any]) -> list[str]:
    """The cell's tags ([] when it has none or they are not a list of strings)."""
    metadata = cell.get("metadata")
    value = metadata.get(TAGS) if isinstance(metadata, Mapping) else None
    return [t for t in value if isinstance(t, str)] if isinstance(value, list) else []


def _true(cell: Mapping[str, Any], key: str) -> bool:
    return gemmlab_meta(cell).get(key) is True


def needs_gpu(cell: Mapping[str, Any]) -> bool:
    """Whether the instructor marked this cell as a test that is graded only on a GPU."""
    return _true(cell, NEEDS_GPU)


def needs_arch(cell: Mapping[str, Any]) -> str:
    """The GPU family (compute-capability prefix such as ``sm_90``) a GPU test needs, '' for any GPU."""
    value = gemmlab_meta(cell).get(NEEDS_ARCH, "")
    return value if isinstance(value, str) else ""


def judged_launches(cell: Mapping[str, Any]) -> bool:
    """Whether the instructor marked this test as one the judge runs although it uses CuTe DSL answers."""
    return _true(cell, JUDGED)


def judge_only(cell: Mapping[str, Any]) -> bool:
    """Whether the instructor marked this (non-test) cell to run in the judge alone when graded."""
    return _true(cell, JUDGE_ONLY)


def display_only(cell: Mapping[str, Any]) -> bool:
    """Whether the instructor marked this (non-test) cell as one the grader does not run."""
    return _true(cell, DISPLAY_ONLY)


def answer_flags(cell: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (pattern, why) pairs the instructor set on this (answer) cell."""
    entries = gemmlab_meta(cell).get(FLAG)
    return [(e["pattern"], e["why"]) for e in (entries if isinstance(entries, list) else [])
            if isinstance(e, dict) and isinstance(e.get("pattern"), str) and isinstance(e.get("why"), str)]


def notebook_needs_gpu(nb: Mapping[str, Any]) -> bool:
    """Whether any graded cell of the (instructor's) notebook needs a GPU."""
    cells: Iterable = nb.get("cells", [])
    return any(is_graded(c) and needs_gpu(c) for c in cells)


def kernel_tag(name: str) -> str:
    """The tag of the solution cell that defines course kernel ``name``."""
    return KERNEL_TAG + name


__all__ = ["DISPLAY_ONLY", "FLAG", "GEMMLAB", "GEMMLAB_KEYS", "GRADE", "GRADE_ID", "JUDGED", "JUDGE_ONLY",
           "KERNEL_PART_TAG", "KERNEL_TAG", "LOCKED", "NBGRADER", "NBGRADER_FLAGS", "NEEDS_ARCH", "NEEDS_GPU", "POINTS",
           "SCHEMA_VERSION", "SKIP_EXECUTION", "SOLUTION", "TAGS", "TASK", "answer_flags", "display_only",
           "gemmlab_meta", "grade_id", "is_answer", "is_graded", "judge_only", "judged_launches", "kernel_tag",
           "nbgrader_meta", "needs_arch", "needs_gpu", "notebook_needs_gpu", "points", "tags"]
