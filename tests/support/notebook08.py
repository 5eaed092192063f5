"""Notebook 08's graded cells run as the grader runs them, in a plain namespace, an answer cell replaced.

Why: the wrong-answer tests of the raw-CUDA ladder (tests/course/test_wrong_answers_08.py, without a GPU) and
its GPU tests (tests/course/test_gpu_cuda_ladder.py) put a text edit of a solution cell in its place and run
the notebook's own graded cell, hidden tests included; every cell runs from a file of its own, as IPython
keeps cells, so a function's source can be read (``nbh.function_done``).
"""
from __future__ import annotations

import contextlib
import io
import random

from tests.support.graded_cells import cells_by_grade_id, python
from solution_cells import cell_folder

NB = "08_cuda_ladder"
BASE = ["setup", "launcher", "chart", "check_helpers"]
WMMA = BASE + ["wmma_common", "aligned_shapes"]
RING = WMMA + ["pipe_src", "ring_checks"]
#: graded cell -> the cells it runs after, in notebook order (the answer cells among them).
CONTEXT = {
    "test_naive_slow": BASE + ["naive_src"],
    "test_smem_slow": BASE + ["smem_src"],
    "test_wmma_slow": WMMA + ["wmma_src"],
    "test_dbuf_slow": RING,
    "test_row_addresses": ["setup", "row_addresses", "row_addresses_helpers"],
    "test_swizzle_slow": RING + ["swizzle_src", "swizzle_order_checks"],
    "test_swizzle_order": RING + ["swizzle_src", "swizzle_order_checks"],
    "test_swizzle_bug_rule": ["setup", "tutorial_order", "swizzle_bug_checks", "swizzle_bug_rule"],
    "test_swizzle_bug_fix": ["setup", "tutorial_order", "swizzle_bug_checks", "swizzle_bug_fix"],
    "test_any_slow": RING + ["swizzle_src", "any_src", "any_helpers"],
    "test_any_speed_slow": RING + ["swizzle_src", "any_src", "any_helpers", "any_bar_measure_slow"],
}
CELLS = cells_by_grade_id(NB)


def edit(grade_id: str, old: str, new: str) -> str:
    """The solution cell ``grade_id`` with ``old`` (there exactly once) replaced by ``new``."""
    source = CELLS[grade_id]
    assert source.count(old) == 1, f"{grade_id} no longer holds {old[:60]!r} once: update the wrong answer"
    return source.replace(old, new)


def graded(test: str, answers: dict[str, str] | None = None) -> str:
    """Run ``test`` after its context, answer cells replaced by ``answers``; return what it printed.
    An answer cell that raises (the release's Python placeholder) is run as nbgrader runs it: the error
    stays in that cell and the cells after it still run."""
    answers = answers or {}
    random.seed(0)
    ns: dict = {"__name__": "notebook_08"}
    out = io.StringIO()
    folder = cell_folder("08-wrong")

    def run(gid: str, source: str) -> None:
        path = folder / f"{gid}.py"      # from a file, as IPython keeps cells: inspect reads a function's source
        path.write_text(python(source))
        exec(compile(path.read_text(), str(path), "exec"), ns)

    with contextlib.redirect_stdout(out):
        for gid in CONTEXT[test]:
            try:
                run(gid, answers.get(gid, CELLS[gid]))
            except NotImplementedError:
                if gid not in answers:
                    raise
        run(test, CELLS[test])
    return out.getvalue()



#: Rung 4's K loop without a ring: one slot, loaded, waited for to the last group, then multiplied (C++ text).
ONE_SLOT_LOOP = """    for (int kt = 0; kt < k_tiles; ++kt) {
        load(sA, sB, kt);
        __pipeline_commit();
        __pipeline_wait_prior(0);
        __syncthreads();
        for (int kk = 0; kk < BK; kk += 16) {
            FragA a[FM];
            FragB b[FN];
            for (int i = 0; i < FM; ++i)
                wmma::load_matrix_sync(a[i], sA + (warp_m() * WM + 16 * i) * LDA_S + kk, LDA_S);
            for (int j = 0; j < FN; ++j)
                wmma::load_matrix_sync(b[j], sB + kk * LDB_S + warp_n() * WN + 16 * j, LDB_S);
            for (int i = 0; i < FM; ++i)
                for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
"""


def swizzle_body(new: str) -> str:
    """The rung-5 answer cell with the body of ``swizzled_tile`` (its solution region) replaced by ``new``."""
    source = CELLS["swizzle_src"]
    start = source.index("    // ### BEGIN SOLUTION\n") + len("    // ### BEGIN SOLUTION\n")
    return source[:start] + new + source[source.index("    // ### END SOLUTION"):]


__all__ = ["CELLS", "CONTEXT", "NB", "ONE_SLOT_LOOP", "edit", "graded", "swizzle_body"]
