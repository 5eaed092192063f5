"""Notebook 01's graded CPU tests reject plausible wrong answers (and accept right ones).

Each wrong answer replaces the solution cell; the notebook's own test cell (visible + hidden
tests) must fail on it, and the likeliest ones must already fail the visible tests. The copy
kernel's test runs only on a GPU (tests/tools/test_release.py runs the solutions there).
"""
from __future__ import annotations

import pytest

from tests.support.graded_cells import cells_by_grade_id, run_cells, visible_part

NB = "01_layouts_and_partitioning"
CRD_CELLS = ["setup", "crd2idx_solution", "test_crd2idx"]
OWNED_CELLS = ["setup", "owned_solution", "test_owned"]

_SIZE = '''
def _size(s):
    if not isinstance(s, tuple):
        return s
    n = 1
    for x in s:
        n *= _size(x)
    return n
'''

WRONG_CRD2IDX = {
    # Handles a nested mode one level deep only: fails on three levels.
    "two levels only": _SIZE + '''
def crd2idx(coord, shape, stride):
    if isinstance(coord, int):
        parts = []
        for s in shape:
            parts.append(coord % _size(s)); coord //= _size(s)
        coord = tuple(parts)
    total = 0
    for c, s, d in zip(coord, shape, stride):
        if isinstance(s, tuple):
            if isinstance(c, int):
                sub = []
                for x in s:
                    sub.append(c % x); c //= x
                c = tuple(sub)
            total += sum(ci * di for ci, di in zip(c, d))
        else:
            total += c * d
    return total
''',
    # Splits an integer row-major (the rightmost mode fastest).
    "row-major integer split": _SIZE + '''
def crd2idx(coord, shape, stride):
    if isinstance(shape, tuple):
        if isinstance(coord, int):
            parts = []
            for s in reversed(shape):
                parts.append(coord % _size(s)); coord //= _size(s)
            coord = tuple(reversed(parts))
        return sum(crd2idx(c, s, d) for c, s, d in zip(coord, shape, stride))
    return coord * stride
''',
    # Splits an integer over the top-level modes only, then treats a nested mode's part as compact.
    "integer split at the top level only": _SIZE + '''
def crd2idx(coord, shape, stride):
    if isinstance(coord, int):
        parts = []
        for s in shape:
            parts.append(coord % _size(s)); coord //= _size(s)
        coord = tuple(parts)
    def walk(c, s, d):
        if isinstance(s, tuple):
            if isinstance(c, int):
                return c * min(_flat(d))
            return sum(walk(ci, si, di) for ci, si, di in zip(c, s, d))
        return c * d
    return sum(walk(c, s, d) for c, s, d in zip(coord, shape, stride))

def _flat(t):
    return [y for x in t for y in _flat(x)] if isinstance(t, tuple) else [t]
''',
    # The size of a nested mode taken as its number of sub-modes.
    "size as the number of sub-modes": '''
def crd2idx(coord, shape, stride):
    if isinstance(shape, tuple):
        if isinstance(coord, int):
            parts = []
            for s in shape:
                n = len(s) if isinstance(s, tuple) else s
                parts.append(coord % n); coord //= n
            coord = tuple(parts)
        return sum(crd2idx(c, s, d) for c, s, d in zip(coord, shape, stride))
    return coord * stride
''',
    # Ignores the strides: the index of a compact column-major layout.
    "compact column-major, strides ignored": _SIZE + '''
def crd2idx(coord, shape, stride):
    def flat(c, s):
        if isinstance(s, tuple):
            if isinstance(c, int):
                return c
            idx, mult = 0, 1
            for ci, si in zip(c, s):
                idx += flat(ci, si) * mult; mult *= _size(si)
            return idx
        return c
    return flat(coord, shape)
''',
    # Recursion written out by hand to a fixed depth: shapes three levels deep, like the visible
    # tests', but not four, like the hidden tests'.
    "three levels only": _SIZE + '''
def _split(c, s):
    parts = []
    for x in s:
        parts.append(c % _size(x)); c //= _size(x)
    return tuple(parts)

def _level3(c, s, d):
    if isinstance(s, tuple):
        c = _split(c, s) if isinstance(c, int) else c
        return sum(ci * di for ci, di in zip(c, d))
    return c * d

def _level2(c, s, d):
    if isinstance(s, tuple):
        c = _split(c, s) if isinstance(c, int) else c
        return sum(_level3(ci, si, di) for ci, si, di in zip(c, s, d))
    return c * d

def crd2idx(coord, shape, stride):
    if isinstance(shape, tuple):
        coord = _split(coord, shape) if isinstance(coord, int) else coord
        return sum(_level2(c, s, d) for c, s, d in zip(coord, shape, stride))
    return coord * stride
''',
    # An object that compares equal to everything.
    "always-equal object": '''
class _Any:
    def __eq__(self, other):
        return True
    __hash__ = None

def crd2idx(coord, shape, stride):
    return _Any()
''',
    # An int subclass that compares equal to everything.
    "always-equal int": '''
class _AnyInt(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__

def crd2idx(coord, shape, stride):
    return _AnyInt(0)
''',
}
VISIBLY_WRONG_CRD = tuple(name for name in WRONG_CRD2IDX if name != "three levels only")


def test_hidden_crd2idx_tests_go_deeper_than_the_visible_ones() -> None:
    visible = visible_part(cells_by_grade_id(NB)["test_crd2idx"])
    wrong = {"crd2idx_solution": WRONG_CRD2IDX["three levels only"]}
    run_cells(NB, CRD_CELLS, replace={**wrong, "test_crd2idx": visible})
    with pytest.raises((AssertionError, TypeError)):
        run_cells(NB, CRD_CELLS, replace=wrong)


@pytest.mark.parametrize("name", WRONG_CRD2IDX)
def test_crd2idx_rejects(name: str) -> None:
    with pytest.raises((AssertionError, TypeError, IndexError, ValueError)):
        run_cells(NB, CRD_CELLS, replace={"crd2idx_solution": WRONG_CRD2IDX[name]})


@pytest.mark.parametrize("name", VISIBLY_WRONG_CRD)
def test_crd2idx_visible_tests_reject(name: str) -> None:
    visible = visible_part(cells_by_grade_id(NB)["test_crd2idx"])
    with pytest.raises((AssertionError, TypeError, IndexError, ValueError)):
        run_cells(NB, CRD_CELLS, replace={"crd2idx_solution": WRONG_CRD2IDX[name], "test_crd2idx": visible})


@pytest.mark.parametrize("seed", range(3))
def test_crd2idx_solution_passes_and_a_flattening_answer_fails(seed: int) -> None:
    """A flattening answer handles congruent and whole-integer coordinates, but not an integer that
    stands for a nested mode (``Z((i, (1, 1)))`` in section 3), which CuTe and the task allow."""
    run_cells(NB, CRD_CELLS, seed=seed)
    flattening = '''
def _flat(t):
    return [y for x in t for y in _flat(x)] if isinstance(t, tuple) else [t]

def crd2idx(coord, shape, stride):
    shapes, strides = _flat(shape), _flat(stride)
    if isinstance(coord, int):
        coords = []
        for s in shapes:
            coords.append(coord % s); coord //= s
    else:
        coords = _flat(coord)
    return sum(c * d for c, d in zip(coords, strides))
'''
    visible = visible_part(cells_by_grade_id(NB)["test_crd2idx"])
    with pytest.raises(AssertionError, match=r"crd2idx\(\(5, 3\)"):
        run_cells(NB, CRD_CELLS, replace={"crd2idx_solution": flattening, "test_crd2idx": visible}, seed=seed)


WRONG_OWNED = {
    # The thread's stencil position read column-major.
    "column-major stencil position": '''
def owned_by(t, thr_shape, tile_shape):
    R, C = thr_shape
    r0, c0 = t % R, t // R
    return sorted((r, c) for r in range(r0, tile_shape[0], R) for c in range(c0, tile_shape[1], C))
''',
    # A contiguous block per thread instead of one element per stencil repeat.
    "contiguous block": '''
def owned_by(t, thr_shape, tile_shape):
    R, C = thr_shape
    h, w = tile_shape[0] // R, tile_shape[1] // C
    r0, c0 = (t // C) * h, (t % C) * w
    return sorted((r, c) for r in range(r0, r0 + h) for c in range(c0, c0 + w))
''',
    # Steps by the number of repeats instead of the stencil size.
    "steps by the repeat count": '''
def owned_by(t, thr_shape, tile_shape):
    R, C = thr_shape
    sr, sc = tile_shape[0] // R, tile_shape[1] // C
    return sorted((r, c) for r in range(t // C, tile_shape[0], sr) for c in range(t % C, tile_shape[1], sc))
''',
    # (column, row) pairs.
    "coordinates swapped": '''
def owned_by(t, thr_shape, tile_shape):
    R, C = thr_shape
    return sorted((c, r) for r in range(t // C, tile_shape[0], R) for c in range(t % C, tile_shape[1], C))
''',
    # Only the first stencil repeat.
    "one element": '''
def owned_by(t, thr_shape, tile_shape):
    return [(t // thr_shape[1], t % thr_shape[1])]
''',
    "nothing": '''
def owned_by(t, thr_shape, tile_shape):
    return None
''',
}


@pytest.mark.parametrize("name", WRONG_OWNED)
def test_owned_by_visible_tests_reject(name: str) -> None:
    visible = visible_part(cells_by_grade_id(NB)["test_owned"])
    with pytest.raises(AssertionError, match="owned_by"):
        run_cells(NB, OWNED_CELLS, replace={"owned_solution": WRONG_OWNED[name], "test_owned": visible})


def test_owned_by_solution_and_an_unsorted_answer_pass() -> None:
    run_cells(NB, OWNED_CELLS)
    unsorted = '''
def owned_by(t, thr_shape, tile_shape):
    R, C = thr_shape
    return [(r, c) for c in range(t % C, tile_shape[1], C) for r in range(t // C, tile_shape[0], R)]
'''
    run_cells(NB, OWNED_CELLS, replace={"owned_solution": unsorted})
