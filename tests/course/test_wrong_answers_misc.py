"""Plausible wrong answers to the CPU-graded exercises of notebooks 00, 02 and 06 score below full.

Each test runs the solution notebook's own test cell (visible and hidden tests together, as the
grader does) against a wrong answer and expects it to fail, and against the solution and expects
it to pass, so a test cell that can no longer tell them apart is caught here. The GPU-only tests
say how many points they leave unchecked without a GPU (``nbhelpers.gpu_graded``); that is checked
here too, against the notebooks' nbgrader points.
"""
from __future__ import annotations

import math
import random
import re
from typing import Callable

import nbformat
import pytest

from tests.support import ROOT
from autograder.cell_metadata import grade_id as grade_id_of


def _notebook(name: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "solutions" / name / f"{name}.ipynb", as_version=4)


def _source(nb: nbformat.NotebookNode, grade_id: str) -> str:
    [src] = [c.source for c in nb.cells if grade_id_of(c) == grade_id]
    return src


def _passes(test_cell: str, namespace: dict) -> bool:
    try:
        exec(test_cell, dict(namespace))
    except AssertionError:
        return False
    return True


# ---------------------------------------------------------------- 00: intensities and the roofline

NB00 = "00_gpu_and_roofline"


@pytest.fixture(scope="module")
def nb00() -> dict:
    from gemmlab.timing import roofline_math as rm

    nb = _notebook(NB00)
    ns = {"math": math, "random": random, "rm": rm, "PEAK": 692.0, "BW": 3020.0}
    for gid in ("naive_solution", "tiled_solution", "place_solution"):
        exec(_source(nb, gid), ns)
    return {"ns": ns, "tests": {gid: _source(nb, gid) for gid in ("test_naive", "test_tiled", "test_place")}}


def _wrong_naive(M, N, K, in_bytes=2, out_bytes=2):
    return 2 * M * N * K / (M * N * K * 2 * in_bytes)                   # forgets writing D


def _wrong_naive_fma(M, N, K, in_bytes=2, out_bytes=2):
    return M * N * K / (M * N * K * 2 * in_bytes + M * N * out_bytes)   # one flop per multiply-add


def _wrong_tiled_floor(M, N, K, tile_m, tile_n, in_bytes=2, out_bytes=2):
    moved = (M * K * (N // tile_n or 1) + N * K * (M // tile_m or 1)) * in_bytes + M * N * out_bytes
    return 2 * M * N * K / moved                                       # partial edge tiles not counted


def _wrong_tiled_swapped(M, N, K, tile_m, tile_n, in_bytes=2, out_bytes=2):
    moved = (M * K * math.ceil(M / tile_m) + N * K * math.ceil(N / tile_n)) * in_bytes + M * N * out_bytes
    return 2 * M * N * K / moved                                       # A re-read per row of CTAs


def _wrong_tiled_round(M, N, K, tile_m, tile_n, in_bytes=2, out_bytes=2):
    moved = (M * K * round(N / tile_n) + N * K * round(M / tile_m)) * in_bytes + M * N * out_bytes
    return 2 * M * N * K / moved                                       # a sliver past a tile rounds away


def _wrong_place_at_ridge(ns: dict) -> Callable:
    def place_kernel(M, N, K, tile_m, tile_n, peak_tflops, bw_gbps):
        intensity = ns["my_tiled_intensity"](M, N, K, tile_m, tile_n)
        ridge = peak_tflops * 1e12 / (bw_gbps * 1e9)
        reach = min(peak_tflops, intensity * bw_gbps * 1e9 / 1e12)
        return intensity, reach, ("memory" if intensity <= ridge else "compute")   # the ridge itself: memory
    return place_kernel


def _wrong_place_units(ns: dict) -> Callable:
    def place_kernel(M, N, K, tile_m, tile_n, peak_tflops, bw_gbps):
        intensity = ns["my_tiled_intensity"](M, N, K, tile_m, tile_n)
        ridge = peak_tflops / bw_gbps                                     # TFLOPS / GB/s without the 1000
        reach = min(peak_tflops, intensity * bw_gbps)
        return intensity, reach, ("memory" if intensity < ridge else "compute")
    return place_kernel


def test_00_solutions_pass(nb00: dict) -> None:
    for test in nb00["tests"].values():
        assert _passes(test, nb00["ns"])


@pytest.mark.parametrize("wrong", [_wrong_naive, _wrong_naive_fma])
def test_00_naive_wrong_answers_fail(nb00: dict, wrong: Callable) -> None:
    assert not _passes(nb00["tests"]["test_naive"], {**nb00["ns"], "my_naive_intensity": wrong})


@pytest.mark.parametrize("wrong", [_wrong_tiled_floor, _wrong_tiled_swapped, _wrong_tiled_round])
def test_00_tiled_wrong_answers_fail(nb00: dict, wrong: Callable) -> None:
    assert not _passes(nb00["tests"]["test_tiled"], {**nb00["ns"], "my_tiled_intensity": wrong})
    visible = nb00["tests"]["test_tiled"].split("### BEGIN HIDDEN TESTS")[0]
    assert not _passes(visible, {**nb00["ns"], "my_tiled_intensity": wrong}), "the visible test lets it pass"


@pytest.mark.parametrize("make", [_wrong_place_at_ridge, _wrong_place_units])
def test_00_place_wrong_answers_fail(nb00: dict, make: Callable) -> None:
    assert not _passes(nb00["tests"]["test_place"], {**nb00["ns"], "place_kernel": make(nb00["ns"])})


# ---------------------------------------------------------------- 02: layouts of a 128-bit coalesced copy

NB02 = "02_tiled_copy"


@pytest.fixture(scope="module")
def nb02() -> dict:
    import numpy as np

    from gemmlab import layout as L

    nb = _notebook(NB02)
    ns = {"np": np, "L": L}
    helpers = _source(nb, "warp_sectors")
    exec(helpers[:helpers.index("\nprint(")], ns)                         # the helpers, without the demo
    checker = _source(nb, "try_copy_layouts")
    exec(checker[:checker.index("\ntc = check_copy_layouts(")], ns)      # the checker, without its picture
    exec(_source(nb, "copy_layouts"), ns)
    return {"ns": ns, "test": _source(nb, "test_copy_layouts")}


def _layouts(thr_n_of: Callable[[int, int], int], by_rows: bool = True) -> Callable:
    from gemmlab import layout as L

    def copy_layouts(tile_m, tile_n, elem_bytes, num_threads=128):
        vec = 16 // elem_bytes
        thr_n = thr_n_of(tile_n // vec, num_threads)
        thr_m = max(num_threads // thr_n, 1)
        stride = (thr_n, 1) if by_rows else (1, thr_m)
        return L.Layout((thr_m, thr_n), stride), L.Layout((1, vec), (1, 1))
    return copy_layouts


def test_02_solution_passes(nb02: dict) -> None:
    assert _passes(nb02["test"], nb02["ns"])


@pytest.mark.parametrize("wrong", [
    _layouts(lambda vectors_per_row, threads: vectors_per_row),          # forgets min(..., threads)
    _layouts(lambda vectors_per_row, threads: 8),                        # the 64x64 fp16 answer for every tile
    _layouts(lambda vectors_per_row, threads: min(vectors_per_row, threads), by_rows=False),  # column numbering
], ids=["no-min", "always-8", "columns"])
def test_02_copy_layouts_wrong_answers_fail(nb02: dict, wrong: Callable) -> None:
    assert not _passes(nb02["test"], {**nb02["ns"], "copy_layouts": wrong})


# ---------------------------------------------------------------- 06: the ring schedule

NB06 = "06_pipelining"


@pytest.fixture(scope="module")
def nb06() -> dict:
    nb = _notebook(NB06)
    ns: dict = {}
    exec(_source(nb, "schedule_checker"), ns)
    exec(_source(nb, "pipeline_schedule"), ns)
    return {"ns": ns, "test": _source(nb, "test_pipeline_schedule")}


def _schedule(prologue_guard: bool = True, empty_commits: bool = True, wait: Callable[[int], int] = lambda s: s - 2):
    def pipeline_schedule(k_tiles, stages):
        ops = []
        for s in range(stages - 1):
            if s < k_tiles or not prologue_guard:
                ops.append(("load", s, s))
            ops.append(("commit",))
        for t in range(k_tiles):
            ops.append(("wait", wait(stages)))
            ops.append(("sync",))
            nxt = t + stages - 1
            if nxt < k_tiles:
                ops.append(("load", nxt, nxt % stages))
                ops.append(("commit",))
            elif empty_commits:
                ops.append(("commit",))
            ops.append(("compute", t, t % stages))
        return ops
    return pipeline_schedule


def test_06_solution_passes(nb06: dict) -> None:
    assert _passes(nb06["test"], nb06["ns"])


@pytest.mark.parametrize("wrong", [
    _schedule(prologue_guard=False),          # loads tiles past K when K is shorter than the ring
    _schedule(empty_commits=False),           # the last tiles are never waited for
    _schedule(wait=lambda s: s - 1),          # waits one group too few
    _schedule(wait=lambda s: 0),              # waits for everything: not pipelined
], ids=["prologue-past-K", "no-empty-commit", "wait-too-little", "wait-all"])
def test_06_schedule_wrong_answers_fail(nb06: dict, wrong: Callable) -> None:
    assert not _passes(nb06["test"], {**nb06["ns"], "pipeline_schedule": wrong})


# ---------------------------------------------------------------- GPU-only tests say what they leave unchecked

GPU_NOTEBOOKS = ["01_layouts_and_partitioning", "02_tiled_copy", "03_swizzle_and_banks", "04_mma", "04b_tiled_mma",
                 "05_global_gemm", "06_pipelining", "07_hopper", "08_cuda_ladder", "09_capstone"]
#: nbh.gpu_graded(points, ...), or 07's hopper_gpu_here(points, ...) around it.
_GPU_GRADED = re.compile(r"(?:\bnbh\.gpu_graded|\bnbhelpers\.gpu_graded|\bhopper_gpu_here)\((\d+),")


@pytest.mark.parametrize("name", GPU_NOTEBOOKS)
def test_gpu_tests_count_their_own_points(name: str) -> None:
    nb = _notebook(name)
    total = 0
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("grade"):
            continue
        total += meta.get("points", 0)
        if cell.metadata.get("gemmlab", {}).get("needs_gpu"):
            visible = cell.source.split("### BEGIN HIDDEN TESTS")[0]
            assert _GPU_GRADED.findall(visible) == [str(meta["points"])], (
                f"{name}: {meta['grade_id']} needs a GPU; its visible part must call nbh.gpu_graded({meta['points']}, "
                "...) once, so that its points are counted (and Validate fails it) where no GPU runs it")
            assert set(_GPU_GRADED.findall(cell.source)) == {str(meta["points"])}
    last = nb.cells[-1]
    assert last.cell_type == "code" and re.search(rf"\bnbh(?:elpers)?\.unchecked_summary\(total_points={total}\)",
                                                  last.source), (
        f"{name}: the last cell must report unchecked points out of {total}")


def test_unchecked_summary_counts_points_without_a_gpu(no_gpu, capsys, monkeypatch) -> None:
    import gemmlab
    from gemmlab.notebook import nbhelpers

    nbhelpers.setup()
    assert nbhelpers.gpu_graded(4, "the copy test", pool=True) is False
    assert nbhelpers.gpu_graded(4, "the copy test", pool=True) is False   # a re-run cell counts once
    assert nbhelpers.gpu_graded(1, "the bandwidth test") is False
    assert nbhelpers.unchecked_points() == {"the copy test": 4, "the bandwidth test": 1}
    assert nbhelpers.unchecked_summary(8) == 5
    out = capsys.readouterr().out
    assert "NOT CHECKED (4 points)" in out and "5 of 8 points were NOT checked: no GPU here" in out
    # "checked" is not "passed": a newcomer read the summary as six points earned beside two failed tests
    assert "The other 3 points were checked here, passed or not: each test cell above says which." in out, out
    # The shared GPU pool is pointed to where gemmlab offers it, for the tests it can run (each message of the
    # copy test, and the summary), and a test that launches kernels itself is said to need a GPU here.
    assert callable(gemmlab.connect)
    assert out.count("call `gemmlab.connect(url, token)`") == 3, out
    assert "1 of them (4 points) can run on your class's GPU pool" in out and \
        "The others (the bandwidth test) launch kernels themselves" in out, out
    assert out.count("the class's GPU pool cannot run it") == 1, out
    with monkeypatch.context() as patched:
        patched.setattr(gemmlab, "connect", None)
        assert nbhelpers.gpu_graded(2, "the third test") is False
        assert nbhelpers.unchecked_summary(10) == 7
        assert "connect" not in capsys.readouterr().out
    nbhelpers.setup()
    assert nbhelpers.unchecked_summary(8) == 0


def test_validate_fails_a_gpu_test_it_cannot_check(no_gpu, monkeypatch) -> None:
    """nbgrader's Validate shows only failures, so a GPU test that ran nothing must fail there, with the
    points it leaves unchecked; in the student's own run it only says so (Run All goes on)."""
    from gemmlab.notebook import nbhelpers

    monkeypatch.setenv(nbhelpers.VALIDATING_ENV, "1")
    with pytest.raises(nbhelpers.GpuTestNotChecked, match=r"NOT CHECKED \(4 points\): the copy test needs a GPU"):
        nbhelpers.gpu_graded(4, "the copy test")
    assert isinstance(nbhelpers.GpuTestNotChecked("x"), AssertionError)
    monkeypatch.delenv(nbhelpers.VALIDATING_ENV)
    assert nbhelpers.gpu_graded(4, "the copy test") is False
