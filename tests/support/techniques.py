"""Kernels built from the course's own solution cells, edited into the wrong answers a student writes, for the
technique checks' tests; and the check lists docs/TECHNIQUES.md proposes for each exercise.

Every wrong answer is a text edit of the solution source read from solutions/*.ipynb at test time
(:func:`edit` insists that the text it replaces is there exactly once), so when the course changes, the
wrong answers change with it or the test says which edit no longer applies.
"""
from __future__ import annotations

import sys
from typing import Any

from tests.support import ROOT

if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))

import solution_cells  # noqa: E402

from gemmlab import techniques as T  # noqa: E402


def edit(source: str, old: str, new: str, count: int = 1) -> str:
    """``source`` with ``old`` replaced by ``new``; ``old`` must occur exactly ``count`` times."""
    found = source.count(old)
    assert found == count, f"the solution no longer holds {old!r} {count} time(s) (found {found}): update the edit"
    return source.replace(old, new)


def source(assignment: str, tag: str) -> str:
    """The solution source of a kernel cell (its parts joined), by tag."""
    return solution_cells.cell_source(assignment, tag)


def namespace(assignment: str, tags: list[str], replace: dict[str, str] | None = None) -> dict[str, Any]:
    """The namespace of the solution cells ``tags`` (each run from a file), some replaced by edited sources."""
    return solution_cells.load_namespace(assignment, tags, replace)


def cell(assignment: str, grade_id: str) -> str:
    """The source of a solutions-notebook cell, by grade_id (for cells without a kernel tag)."""
    from tests.support.graded_cells import cells_by_grade_id

    return cells_by_grade_id(assignment)[grade_id]


def run_sources(label: str, sources: list[str]) -> dict[str, Any]:
    """A fresh namespace with ``sources`` run in order, each from a file of its own (the CuTe DSL reads its
    functions' source with inspect)."""
    ns: dict[str, Any] = {"__name__": f"techniques_{label}"}
    exec("import gemmlab, torch", ns)
    folder = solution_cells.cell_folder(label)
    for index, text in enumerate(sources):
        path = folder / f"cell{index}.py"
        path.write_text(text)
        exec(compile(text, str(path), "exec"), ns)
    return ns


def dsl_examples(*shapes: tuple[int, ...], dtype: Any = None) -> list[Any]:
    """CPU stand-ins to compile DSL kernels for (no GPU needed)."""
    import torch

    return [torch.empty(s, dtype=dtype or torch.float16) for s in shapes]


def failures(report: T.TechniqueReport) -> dict[str, str]:
    """Failed checks of a report: check name (without arguments) -> message."""
    return {f.check.split("(")[0]: f.message for _, f in report.findings if not f.passed}


# --------------------------------------------------------------------------- the proposed check lists

def pipeline_checks(stages: int) -> list[T.Check]:
    """06 Exercise 2 and 08 Exercise 4 (a cp.async ring of ``stages`` slots feeding ldmatrix and mma.sync)."""
    return [T.copies("global", "shared", by="cp.async", bytes=16, where="main_loop", only=True), T.commits_per_stage(),
            T.waits_in_main_loop(pending=stages - 2), T.pipelined(in_flight=stages - 1),
            T.no_global_loads_outside_copies()]


GEMM06 = [T.fragments_by("ldmatrix", operands="AB", x=4), T.stores("global", bytes=16, where="epilogue"),
          T.mma("m16n8k16", where="main_loop", only=True)]

#: 02 Exercise 2's THROUGH_SHARED (the notebook's list; tests/course/test_techniques_02_04_05.py checks they agree).
COPY02 = [T.copies("global", "shared", by="cp.async", bytes=16, only=True), T.copies_land_before_reads(pending=0),
          T.copies("shared", "global", by="registers", bytes=16, only=True),
          T.no_global_loads_outside_copies(where="anywhere"), T.coalesced(copies_only=True)]
#: 01 Exercise 3's COPY_TECHNIQUES.
COPY01 = [T.coalesced(), T.loads("global", count=8), T.stores("global", count=16)]

SMEM08 = [T.copies("global", "shared", by="registers", where="main_loop"), T.no_global_loads_outside_copies()]
WMMA08 = [T.copies("global", "shared", by="registers", bytes=16, where="main_loop"),
          T.fragments_by("shared", operands="AB"), T.no_global_loads_outside_copies(), T.mma("m16n8k16")]

GEMM05 = [T.copies("global", "shared", by="cp.async", bytes=16, where="main_loop"),
          T.fragments_by("ldmatrix", operands="AB", x=4), T.no_global_loads_outside_copies(),
          T.mma("m16n8k16", where="main_loop", only=True)]

WS07 = [T.releases_after_wgmma_wait(in_flight=1, overlap=True), T.mma("wgmma", count=4, where="main_loop"),
        T.instructions("tma.store"), T.instructions("tma.load", detail="multicast"),
        T.instructions("setmaxnreg", count=2)]
BW_TILE07 = [T.mma("tcgen05", count=4), T.accumulates_after_first(), T.mma_per_k_block(4), T.commits_once_per_warp(),
             T.ring_waits(1)]
PIPE07 = [T.instructions("tma.load", at_least=2), T.instructions("mbarrier.wait", at_least=2),
          T.mma("wgmma", count=8, where="main_loop", only=True), T.releases_after_wgmma_wait(in_flight=0),
          T.arrives_once_per_warp()]


def bw_gemm07(stages: int, k_tiles: int) -> list[T.Check]:
    """07 Exercises 8 and 9 (the Blackwell K loop and the TMEM read-out), for ``k_tiles`` k-tiles."""
    return [T.mma("tcgen05", count=4 * k_tiles), T.accumulates_after_first(), T.mma_per_k_block(4),
            T.commits_once_per_warp(), T.ring_waits(stages), T.tmem_allocated(128), T.tmem_read_out(4)]


__all__ = ["BW_TILE07", "COPY01", "COPY02", "GEMM05", "GEMM06", "PIPE07", "SMEM08", "WMMA08", "WS07", "bw_gemm07",
           "cell", "dsl_examples", "run_sources", "edit", "failures", "namespace", "pipeline_checks", "source"]
