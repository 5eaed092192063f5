"""Notebook 05's graded CPU tests reject plausible wrong answers (and accept right ones).

Each wrong answer replaces the solution cell; the notebook's own test cell (visible + hidden
tests) must fail on it, and the ones marked ``visible`` must already fail the student's visible
tests. The kernel's tests run only on a GPU (tests/course/test_gpu_global_gemm.py).
"""
from __future__ import annotations

import matplotlib
import pytest

from tests.support.graded_cells import run_cells, visible_part, cells_by_grade_id

matplotlib.use("Agg")
NB = "05_global_gemm"
EXERCISES = {
    "operand_tile": ["setup", "operand_tile", "operand_tile_helpers", "test_operand_tile"],
    "warp_sectors": ["setup", "coalescing_picture", "warp_sectors", "warp_sectors_helpers", "test_warp_sectors"],
    "vector_bytes": ["setup", "vector_bytes", "vector_bytes_helpers", "test_vector_bytes"],
    "tile_of": ["setup", "tile_of", "tile_of_helpers", "test_tile_of"],
}

_OPERAND = '''
def operand_tile(operand, cta_tiler, cta_coord):
    proj = {PROJ}[operand]
    keep = [i for i, p in enumerate(proj) if p is not None]
    return proj, tuple(cta_tiler[i] for i in keep), tuple(cta_coord[i] for i in keep)
'''

# (exercise, name) -> (source of the wrong answer, must the visible tests already fail it?)
WRONG = {
    ("operand_tile", "A and B swapped"): (
        _OPERAND.replace("{PROJ}", '{"A": (None, 1, 1), "B": (1, None, 1), "C": (1, 1, None)}'), True),
    ("operand_tile", "B kept as (K, N)"): ('''
def operand_tile(operand, cta_tiler, cta_coord):
    proj = {"A": (1, None, 1), "B": (None, 1, 1), "C": (1, 1, None)}[operand]
    keep = [i for i, p in enumerate(proj) if p is not None]
    if operand == "B":
        keep = keep[::-1]
    return proj, tuple(cta_tiler[i] for i in keep), tuple(cta_coord[i] for i in keep)
''', False),
    ("operand_tile", "C keeps K"): (
        _OPERAND.replace("{PROJ}", '{"A": (1, None, 1), "B": (None, 1, 1), "C": (1, 1, 1)}'), False),
    ("operand_tile", "C drops N"): (
        _OPERAND.replace("{PROJ}", '{"A": (1, None, 1), "B": (None, 1, 1), "C": (1, None, 1)}'), False),
    ("operand_tile", "0 instead of None"): ('''
def operand_tile(operand, cta_tiler, cta_coord):
    proj = {"A": (1, 0, 1), "B": (0, 1, 1), "C": (1, 1, 0)}[operand]
    keep = [i for i, p in enumerate(proj) if p]
    return proj, tuple(cta_tiler[i] for i in keep), tuple(cta_coord[i] for i in keep)
''', True),
    ("operand_tile", "coordinate not projected"): ('''
def operand_tile(operand, cta_tiler, cta_coord):
    proj = {"A": (1, None, 1), "B": (None, 1, 1), "C": (1, 1, None)}[operand]
    keep = [i for i, p in enumerate(proj) if p is not None]
    return proj, tuple(cta_tiler[i] for i in keep), tuple(cta_coord)
''', True),
    ("operand_tile", "constant A answer"): ('''
def operand_tile(operand, cta_tiler, cta_coord):
    return (1, None, 1), (cta_tiler[0], cta_tiler[2]), (cta_coord[0], cta_coord[2])
''', False),

    ("warp_sectors", "every thread, not warp 0"): ('''
def warp_sectors(thr_layout, vec, elem_bytes, ld):
    rows, cols = L.mode_sizes(thr_layout)[:2]
    return len({((r * ld + c * vec) * elem_bytes) // 32 for r in range(rows) for c in range(cols)})
''', True),
    ("warp_sectors", "first byte of each vector only"): ('''
def warp_sectors(thr_layout, vec, elem_bytes, ld):
    rows, cols = L.mode_sizes(thr_layout)[:2]
    return len({((r * ld + c * vec) * elem_bytes) // 32 for r in range(rows) for c in range(cols)
                if thr_layout(r, c) < 32})
''', True),
    ("warp_sectors", "128-byte lines instead of sectors"): ('''
def warp_sectors(thr_layout, vec, elem_bytes, ld):
    rows, cols = L.mode_sizes(thr_layout)[:2]
    out = set()
    for r in range(rows):
        for c in range(cols):
            if thr_layout(r, c) < 32:
                lo = (r * ld + c * vec) * elem_bytes
                out.update(range(lo // 128, (lo + vec * elem_bytes - 1) // 128 + 1))
    return len(out)
''', True),
    ("warp_sectors", "column index not scaled by vec"): ('''
def warp_sectors(thr_layout, vec, elem_bytes, ld):
    rows, cols = L.mode_sizes(thr_layout)[:2]
    out = set()
    for r in range(rows):
        for c in range(cols):
            if thr_layout(r, c) < 32:
                lo = (r * ld + c) * elem_bytes
                out.update(range(lo // 32, (lo + vec * elem_bytes - 1) // 32 + 1))
    return len(out)
''', True),
    ("warp_sectors", "one sector per thread"): ('''
def warp_sectors(thr_layout, vec, elem_bytes, ld):
    return 32
''', True),
    ("warp_sectors", "bytes / 32, the ideal"): ('''
def warp_sectors(thr_layout, vec, elem_bytes, ld):
    return max(1, -(-32 * vec * elem_bytes // 32))
''', True),
    ("warp_sectors", "end byte exclusive off by one"): ('''
def warp_sectors(thr_layout, vec, elem_bytes, ld):
    rows, cols = L.mode_sizes(thr_layout)[:2]
    out = set()
    for r in range(rows):
        for c in range(cols):
            if thr_layout(r, c) < 32:
                lo = (r * ld + c * vec) * elem_bytes
                out.update(range(lo // 32, (lo + vec * elem_bytes) // 32 + 1))
    return len(out)
''', True),

    ("vector_bytes", "no element-size floor"): ('''
def vector_bytes(addresses, lengths, elem_bytes):
    for v in (16, 8, 4, 2, 1):
        if all(a % v == 0 for a in addresses) and all(n * elem_bytes % v == 0 for n in lengths):
            return v
''', True),
    ("vector_bytes", "addresses ignored"): ('''
def vector_bytes(addresses, lengths, elem_bytes):
    for v in (16, 8, 4, 2, 1):
        if v <= elem_bytes or all(n * elem_bytes % v == 0 for n in lengths):
            return max(v, elem_bytes)
''', True),
    ("vector_bytes", "lengths in elements, not bytes"): ('''
def vector_bytes(addresses, lengths, elem_bytes):
    for v in (16, 8, 4, 2, 1):
        if v <= elem_bytes or (all(a % v == 0 for a in addresses) and all(n % v == 0 for n in lengths)):
            return max(v, elem_bytes)
''', True),
    ("vector_bytes", "always 16"): ('''
def vector_bytes(addresses, lengths, elem_bytes):
    return 16
''', True),

    ("tile_of", "row-major always"): ('''
def tile_of(pid, tiles_m, tiles_n, group):
    return pid // tiles_n, pid % tiles_n
''', True),
    ("tile_of", "last band not shortened"): ('''
def tile_of(pid, tiles_m, tiles_n, group):
    per_group = group * tiles_n
    first_m = (pid // per_group) * group
    return first_m + (pid % per_group) % group, (pid % per_group) // group
''', True),
    ("tile_of", "walks along the band's rows"): ('''
def tile_of(pid, tiles_m, tiles_n, group):
    per_group = group * tiles_n
    first_m = (pid // per_group) * group
    return first_m + (pid % per_group) // tiles_n, (pid % per_group) % tiles_n
''', True),
}


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_solution_passes_its_tests(exercise: str) -> None:
    run_cells(NB, EXERCISES[exercise])


@pytest.mark.parametrize("exercise, name", sorted(WRONG))
def test_wrong_answer_fails(exercise: str, name: str) -> None:
    source, visible_too = WRONG[exercise, name]
    cells = EXERCISES[exercise]
    with pytest.raises(AssertionError):
        run_cells(NB, cells, replace={exercise: source})
    if visible_too:
        test_cell = cells[-1]
        with pytest.raises(AssertionError):
            run_cells(NB, cells, replace={exercise: source, test_cell: visible_part(cells_by_grade_id(NB)[test_cell])})


def test_the_tile_order_is_not_printed_in_the_kernel_skeleton() -> None:
    # The kernels call tile_of / tile_of_dsl, which the student writes: the given cells must not hold it.
    cells = cells_by_grade_id(NB)
    for given in ("gemm_cpp_tiles", "gemm_cpp_setup", "launchers"):
        assert "per_group" not in cells[given], f"{given} prints the answer to the tile order exercise"
    for answer in ("gemm_cpp_load_tile", "gemm_dsl_load_tile"):
        source = cells[answer]
        assert "per_group" in source.split("BEGIN SOLUTION")[1].split("END SOLUTION")[0], answer


def test_build_cells_name_the_parts_a_fast_build_lacks() -> None:
    """Without a GPU a kernel that compiles says nothing of itself; the build cells say when the VEC = 8
    build has no tensor-core MMA, no ldmatrix or no cp.async (an empty kernel body compiles too)."""
    ns: dict = {}
    exec(cells_by_grade_id(NB)["launchers"], ns)
    missing = ns["missing_instructions"]
    solution_like = ("cp.async.cg.shared.global [%r1], [%rd1], 16;\nldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                     "{%r2}, [%r3];\nmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1}, {%r4}, {%r5}, {%f1};")
    assert missing(solution_like) == []
    assert len(missing("ld.global.u32 %r1, [%rd1];")) == 3
    assert missing(solution_like.replace("ldmatrix", "ld.shared")) == ["ldmatrix (the shared -> register copies)"]
