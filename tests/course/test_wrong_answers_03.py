"""Notebook 03's graded tests reject plausible wrong answers (and accept right ones).

Each wrong answer replaces the solution cell; the notebook's own test cell (visible + hidden
tests) must fail on it. The wrong answers students are most likely to hand in must already fail
the visible tests, so the student sees it before grading.
"""
from __future__ import annotations

import numpy as np
import pytest

from gemmlab.errors import GemmlabError

from tests.support.graded_cells import cells_by_grade_id, release_cells, run_cells, visible_part

NB = "03_swizzle_and_banks"
SWIZZLE_CELLS = ["setup", "swizzle_checker", "pick_swizzle", "test_pick_swizzle"]
INDEX_CELLS = ["setup", "transpose_kernel", "smem_index", "check_index_helper", "test_transpose"]


def _pick(body: str) -> str:
    return ("def pick_swizzle(rows, cols, elem_bytes=2):\n"
            "    c = (cols * elem_bytes // 16).bit_length() - 1      # log2(16-byte chunks per row)\n"
            f"    return {body}\n")


WRONG_SWIZZLES = {
    "the constant Swizzle<3,3,3>": "(3, 3, 3)",
    "S = log2(chunks per row), the <2,3,2> rule": "(min(3, c), 3, c)",
    "no swizzle": "(0, 3, 3)",
    "the byte-address swizzle <3,4,3> on element offsets": "(3, 4, 3)",
    "S counted in elements, not chunks": "(min(3, c), 3, max(3, c) + 3)",
    "the row count instead of the row length": "(min(3, (rows // 8).bit_length() - 1), 3, max(3, (rows // 8).bit_length() - 1))",
    "M too small for 16-byte chunks": "(min(3, c), 2, max(3, c))",
    "one bit too few": "(min(2, c), 3, max(3, c))",
}
#: Wrong answers the visible tests alone already reject.
VISIBLY_WRONG = ("the constant Swizzle<3,3,3>", "S = log2(chunks per row), the <2,3,2> rule", "no swizzle")


@pytest.mark.parametrize("name", WRONG_SWIZZLES)
def test_pick_swizzle_rejects(name: str) -> None:
    with pytest.raises(AssertionError, match="pick_swizzle"):
        run_cells(NB, SWIZZLE_CELLS, replace={"pick_swizzle": _pick(WRONG_SWIZZLES[name])})


@pytest.mark.parametrize("name", VISIBLY_WRONG)
def test_pick_swizzle_visible_tests_reject(name: str) -> None:
    visible = visible_part(cells_by_grade_id(NB)["test_pick_swizzle"])
    with pytest.raises(AssertionError, match="pick_swizzle"):
        run_cells(NB, SWIZZLE_CELLS, replace={"pick_swizzle": _pick(WRONG_SWIZZLES[name]),
                                              "test_pick_swizzle": visible})


@pytest.mark.parametrize("body", ["(min(3, c), 3, max(3, c))", "(3, 3, max(3, c))"])
def test_pick_swizzle_accepts_right_answers(body: str) -> None:
    run_cells(NB, SWIZZLE_CELLS, replace={"pick_swizzle": _pick(body)})


def test_pick_swizzle_hidden_tests_cover_every_tile() -> None:
    """All 20 tiles, not a sample: a rule wrong on one tile only still fails."""
    only_wrong_at = "(0, 3, 3) if (rows, cols) == (128, 16) else (min(3, c), 3, max(3, c))"
    with pytest.raises(AssertionError, match=r"pick_swizzle\(128, 16\)"):
        run_cells(NB, SWIZZLE_CELLS, replace={"pick_swizzle": _pick(only_wrong_at)})


WRONG_INDICES = {
    "(r) * 32 + (c)": "column reads",                         # the start: 31 conflicts per column read
    "(c) * 32 + (r)": "row writes",                           # column-major: the writes conflict instead
    "(r) * 33 + (c)": "one-to-one",                           # padding: reaches past 1023
    "(r) * 32 + ((c) - (r)) % 32": "one-to-one",              # a permutation in Python, not in C
    "(r) * 32 + ((c) ^ (r)) // 1": "comment",                 # Python's //, a comment in C
    "(r) * 32 + ((c) ^ ((r) >> 1))": "column reads",          # pairs of rows share banks
    "(r) * 32 + ((c) ^ (r)) % 16": "one-to-one",
    "(r) * 32 + abs((c) - (r))": "not allowed",
    "((c) ^ (r))": "one-to-one",                              # only 32 slots
}


@pytest.fixture
def index_ns(no_gpu: None) -> dict:
    """Notebook 03 up to the transpose test, with the solution's index (the cells before the test run)."""
    return run_cells(NB, INDEX_CELLS[:-1])


@pytest.mark.parametrize("index", WRONG_INDICES)
def test_smem_index_rejects(index: str, index_ns: dict) -> None:
    index_ns["SMEM_INDEX"] = index
    index_ns["transpose"] = object()      # as if it compiled: the index checks must fail on their own
    with pytest.raises((AssertionError, GemmlabError), match=WRONG_INDICES[index]):
        run_cells(NB, ["test_transpose"], namespace=index_ns)


def test_c_modulo_index_is_a_permutation_only_in_python() -> None:
    """The reason the check reads C: Python's % would call this index a permutation."""
    r, c = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    assert len(np.unique(r * 32 + (c - r) % 32)) == 1024


@pytest.mark.parametrize("index", ["(r) * 32 + ((c) ^ (r))", "(r) * 32 + (c) ^ (r)", "(r) * 32 + ((c) + (r)) % 32",
                                   "(r) * 32 + (((c) - (r)) & 31)", "(r) * 32 + ((c) - (r) + 32) % 32",
                                   "(c) * 32 + ((r) ^ (c))", "((r) << 5) | ((c) ^ (r))"])
def test_smem_index_accepts_right_answers(index: str, index_ns: dict) -> None:
    assert index_ns["check_index"](index) == {"st32": (32, 0), "ld32": (32, 0)}


def test_solution_passes_the_transpose_test_without_gpu(no_gpu: None) -> None:
    run_cells(NB, INDEX_CELLS[:-1] + ["build_transpose", "test_transpose"])


def test_solution_passes_the_swizzle_test() -> None:
    run_cells(NB, SWIZZLE_CELLS)


# ---------------------------------------------------------------- the untouched release scores 0

def test_the_release_pick_swizzle_fails_its_test() -> None:
    release = release_cells(NB)
    with pytest.raises(NotImplementedError):
        run_cells(NB, SWIZZLE_CELLS, replace={"pick_swizzle": release["pick_swizzle"]})


def test_the_release_index_fails_the_transpose_test(no_gpu: None) -> None:
    """The release's answer cell sets the row-major start, then raises; the grader goes on with the start."""
    release = release_cells(NB)
    ns = run_cells(NB, INDEX_CELLS[:2])
    with pytest.raises(NotImplementedError):
        run_cells(NB, ["smem_index"], replace={"smem_index": release["smem_index"]}, namespace=ns)
    ns["transpose"] = object()
    with pytest.raises(AssertionError, match="conflicts in the column reads"):
        run_cells(NB, ["check_index_helper", "test_transpose"], namespace=ns)
