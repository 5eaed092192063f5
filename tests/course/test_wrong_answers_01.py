"""Notebook 01's graded CPU tests reject plausible wrong answers (and accept right ones).

Each wrong answer replaces the solution cell; the notebook's own test cell (visible + hidden
tests) must fail on it, and the likeliest ones must already fail the visible tests. Exercises 1
and 2 are worked out without the library: an answer that reaches pycute or gemmlab.layout by any
name fails. The untouched release scores 0. The copy kernel's test reads each built option's machine code with or
without a GPU (coalesced loads and stores; 8 loads and 16 stores per thread, one per element): each wrong kernel
below fails without a GPU with its mistake named, among them a hostile one that writes the who map the test expects
while it copies by contiguous blocks (correct, and uncoalesced); the copy itself and the who map are checked on a
GPU (the marked tests here, and tests/tools/test_release.py).
"""
from __future__ import annotations

import re

import pytest

from tests.support.graded_cells import cells_by_grade_id, release_cells, run_cells, visible_part

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
    # The library the exercise says not to use, reached in the ways a student might.
    "pycute.crd2idx": '''
import pycute

def crd2idx(coord, shape, stride):
    return pycute.crd2idx(coord, shape, stride)
''',
    "a gemmlab Layout evaluated": '''
def crd2idx(coord, shape, stride):
    return gl.Layout(shape, stride)(coord)
''',
    "an alias imported before the function": '''
from pycute import crd2idx as _library

def crd2idx(coord, shape, stride):
    return int(_library(coord, shape, stride))
''',
    "the library's function as the answer": '''
from gemmlab.layout import crd2idx
''',
    "its own sum with the library's size": '''
import gemmlab.layout as _gl

def crd2idx(coord, shape, stride):
    if isinstance(shape, tuple):
        if isinstance(coord, int):
            parts = []
            for s in shape:
                n = _gl.size(s)
                parts.append(coord % n); coord //= n
            coord = tuple(parts)
        return sum(crd2idx(c, s, d) for c, s, d in zip(coord, shape, stride))
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


LIBRARY_CHEATS = ("pycute.crd2idx", "a gemmlab Layout evaluated", "an alias imported before the function",
                  "the library's function as the answer", "its own sum with the library's size")


@pytest.mark.parametrize("name", LIBRARY_CHEATS)
def test_crd2idx_that_calls_the_library_is_told_so(name: str) -> None:
    with pytest.raises(AssertionError, match="ran code of pycute or gemmlab.layout"):
        run_cells(NB, CRD_CELLS, replace={"crd2idx_solution": WRONG_CRD2IDX[name]})


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
    # The function the exercise asks to predict, called.
    "local_partition called": '''
def owned_by(t, thr_shape, tile_shape):
    thr = gl.Layout(thr_shape, (thr_shape[1], 1))
    return gl.local_partition(gl.make_identity_tensor(tile_shape), thr, t).values().reshape(-1, 2).tolist()
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


def test_owned_by_that_calls_local_partition_is_told_so() -> None:
    with pytest.raises(AssertionError, match="ran code of pycute or gemmlab.layout"):
        run_cells(NB, OWNED_CELLS, replace={"owned_solution": WRONG_OWNED["local_partition called"]})


# ---------------------------------------------------------------- the untouched release scores 0

@pytest.mark.parametrize("answer, test", [("crd2idx_solution", "test_crd2idx"), ("owned_solution", "test_owned")])
def test_the_release_placeholder_fails_its_test(answer: str, test: str) -> None:
    from gemmlab.notebook.nbhelpers import ExerciseNotDone

    with pytest.raises(ExerciseNotDone, match="not written yet"):
        run_cells(NB, ["setup", answer, test], replace={answer: release_cells(NB)[answer]})


COPY_CELLS = ["setup", "copy_cpp_solution", "build_copy_cpp", "copy_dsl_solution", "copy_examples", "build_copy_dsl",
              "copy_helpers", "test_copy_kernel_slow"]


def test_the_release_copy_kernel_scores_0_without_a_gpu(no_gpu: None, tmp_path) -> None:
    release = release_cells(NB)
    placeholders = {gid: release[gid] for gid in ("copy_cpp_solution", "copy_dsl_solution")}
    with pytest.raises(AssertionError, match="Neither option A"):
        run_cells(NB, COPY_CELLS, replace=placeholders, folder=tmp_path)


def test_the_copy_kernels_number_tiles_as_the_course_does(no_gpu: None) -> None:
    """blockIdx.x counts tile rows (M), blockIdx.y tile columns (N), on a grid of (M/32, N/64): the C++ launcher,
    and the given lines students start from in both options (notebooks 02 and 04 number their CTAs the same way)."""
    import torch

    launched = {}
    fake = lambda *args, **kw: launched.update(kw)  # noqa: E731 - the compiled kernel, as the launcher calls it
    ns = run_cells(NB, ["setup", "copy_helpers"], namespace={"copy_cpp": fake, "copy_dsl": None, "torch": torch})
    S = torch.empty(96, 256)
    ns["run_copy"]("C++", S, S, S)
    assert launched["grid"] == (96 // 32, 256 // 64)
    release = release_cells(NB)
    assert "make_coord(blockIdx.x, blockIdx.y)" in release["copy_cpp_solution"]
    assert "bm, bn, _ = cute.arch.block_idx()" in release["copy_dsl_solution"]
    assert "cta_coord = (bm, bn)" in release["copy_dsl_solution"]
    assert "grid=(M // BM, N // BN, 1)" in release["copy_dsl_solution"]


# ---------------------------------------------------------------- Exercise 3's kernel, from its machine code

DSL = cells_by_grade_id(NB)["copy_dsl_solution"]
CPP = cells_by_grade_id(NB)["copy_cpp_solution"]
DSL_LOOP = ("    for i in cutlass.range_constexpr(cute.size(tTgS)):\n"
            "        tTgD[i] = tTgS[i]\n"
            "        tTgW[i] = tidx\n")
BLOCKS = "cute.local_tile({}, (4, 2), (tidx // 32, tidx % 32))"     # a thread's own contiguous 4 x 2 block


def _edit(source: str, *pairs: tuple[str, str]) -> str:
    for old, new in pairs:
        assert source.count(old) == 1, f"the solution no longer holds {old!r} once: update the wrong answer"
        source = source.replace(old, new)
    return source


#: DSL wrong answers (option A the release's placeholder) -> what the failure says.
WRONG_DSL_COPY = {
    "one element per thread": (_edit(DSL, (DSL_LOOP, "    tTgD[0] = tTgS[0]\n    tTgW[0] = tidx\n")),
                               "found 1 loads from global memory in your kernel"),
    "who not written": (_edit(DSL, ("        tTgW[i] = tidx\n", "")),
                        "found 8 stores to global memory in your kernel (STG.E) where 16 are expected"),
    "a contiguous block per thread (local_tile)": (_edit(DSL, *[(f"tTg{t} = cute.local_partition(g{t}, thr_layout, tidx)",
                                                                 f"tTg{t} = " + BLOCKS.format(f"g{t}")) for t in "SDW"]),
                                                   "touch 8 32-byte sectors where 4 would hold their bytes"),
    "threads numbered down the columns": (_edit(DSL, ("    gS = cute.local_tile(mS, (BM, BN), cta_coord)\n",
                                                      "    thr_layout = cute.make_layout((8, 32), stride=(1, 8))\n"
                                                      "    gS = cute.local_tile(mS, (BM, BN), cta_coord)\n")),
                                          "touch 8 32-byte sectors where 4 would hold their bytes"),
    # hostile: the who map the test expects, from local_partition, while the data moves by contiguous blocks: the
    # copy is right and the map is right, so only the machine code tells
    "who map as expected, data copied by blocks": (_edit(DSL, *[(f"tTg{t} = cute.local_partition(g{t}, thr_layout, tidx)",
                                                                 f"tTg{t} = " + BLOCKS.format(f"g{t}")) for t in "SD"]),
                                                   "touch 8 32-byte sectors where 4 would hold their bytes"),
}

#: C++ wrong answers (option B the placeholder): a compile of a few seconds each.
WRONG_CPP_COPY = {
    "who not written": (_edit(CPP, ("        tTgW(i) = threadIdx.x;\n", "")),
                        "found 8 stores to global memory in your kernel (STG.E) where 16 are expected"),
    "threads numbered down the columns": (_edit(CPP, ("Tensor tTgS = local_partition(gS, thr_layout, threadIdx.x);",
                                                      "Tensor tTgS = local_partition(gS, make_layout(make_shape(Int<8>{}, "
                                                      "Int<32>{})), threadIdx.x);")),
                                          "touch 8 32-byte sectors where 4 would hold their bytes"),
    "the loop kept rolled": (_edit(CPP, ("    CUTE_UNROLL\n", "    #pragma unroll 1\n")),
                             "sits in a loop the compiler kept"),
}


def _copy_test(folder, replace: dict[str, str]) -> None:
    run_cells(NB, COPY_CELLS, replace=replace, folder=folder)


def test_the_copy_kernels_pass_what_a_cpu_checks(no_gpu: None, tmp_path) -> None:
    _copy_test(tmp_path, {})


#: Each wrong kernel in its option's cell, the other option left as released; C++ ones cost a compile each.
WRONG_COPY = [pytest.param("copy_dsl_solution", WRONG_DSL_COPY[n], id=f"DSL: {n}") for n in WRONG_DSL_COPY] + [
    pytest.param("copy_cpp_solution", WRONG_CPP_COPY[n], id=f"C++: {n}", marks=pytest.mark.slow) for n in WRONG_CPP_COPY]


@pytest.mark.parametrize("cell, wrong", WRONG_COPY)
def test_a_wrong_copy_kernel_fails_without_a_gpu(no_gpu: None, tmp_path, cell: str, wrong: tuple[str, str]) -> None:
    source, says = wrong
    other = "copy_cpp_solution" if cell == "copy_dsl_solution" else "copy_dsl_solution"
    with pytest.raises(AssertionError, match=re.escape(says)):
        _copy_test(tmp_path, {cell: source, other: release_cells(NB)[other]})


@pytest.mark.gpu
def test_on_a_gpu_the_hostile_copy_is_correct_and_its_who_map_right_and_still_fails(tmp_path) -> None:
    """What the machine code adds: on a GPU this kernel's copy and who map are both what the test wants."""
    wrong, says = WRONG_DSL_COPY["who map as expected, data copied by blocks"]
    ns = run_cells(NB, COPY_CELLS[:-1], replace={"copy_dsl_solution": wrong, "copy_cpp_solution":
                                                 release_cells(NB)["copy_cpp_solution"]}, folder=tmp_path)
    result = ns["copy_check"]("DSL", [(96, 256)])
    assert result.passed, result
    import numpy as np

    assert np.array_equal(result.who((96, 256)), np.tile(ns["predicted_owner"](), (3, 4)))
    with pytest.raises(AssertionError, match=re.escape(says)):
        run_cells(NB, ["test_copy_kernel_slow"], namespace=ns)


@pytest.mark.gpu
def test_on_a_gpu_graded_both_copy_kernels_pass_in_the_judge() -> None:
    """Through the real grader on a GPU: the judge reads the machine code of its own C++ compile and of the DSL
    kernel's image, and replays the DSL kernel's launches held to the same checks; full marks for the copy test."""
    pytest.importorskip("nbgrader", reason="the grader needs nbgrader (tools/wheelhouse.py --profile gpu-grade)")
    from tests.support.course_grading import bwrap_missing, grade

    if why := bwrap_missing():
        pytest.skip(f"no usable bubblewrap: {why}")
    cells = grade(NB, gpu="0")
    test = cells["test_copy_kernel_slow"]
    assert test.status == "passed" and test.score == test.points and test.judged, test
