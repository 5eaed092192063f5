"""Notebooks 04's and 04b's tensor-core solution kernels on a GPU: check_gemm on the one-warp 16x8x16 tile
and on 64x64 CTA tiles for several K, for the CuTe C++ and the CuTe DSL solutions alike; and which
elements each warp of the CTA kernel writes, by the notebook's own check: the solutions' warps each
write one 32x32 block, the same kernels without the permutation's layouts do not.

    pytest -m gpu tests/course/test_gpu_mma04.py
"""
from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import gemmlab

from tests.support.graded_cells import cells_by_grade_id
from tests.support.mma04_solutions import (CTA_ASSIGNMENT, CTA_THREADS, CTA_TILE, cpp_sources, cta_example,
                                           dsl_module, tile_example)

pytestmark = pytest.mark.gpu

CTA_SHAPES = [(64, 64, 16), (64, 64, 64), (64, 64, 272), (128, 192, 96), (320, 64, 16 * 37)]
#: The solutions' permutation, and what the wrong answers put in its place (C++ spelling, DSL spelling).
PERMUTATION = ("Tile<decltype(perm_m), decltype(perm_n), _16>{}", "permutation_mnk=perm)")
INTERLEAVED = {"integer tile": ("Tile<_64, _64, _16>{}", "permutation_mnk=(64, 64, 16))"),
               "no permutation": ("Tile<_32, _16, _16>{}", "permutation_mnk=None)"),
               # blocks along N only: passes the machine-code checks without a GPU (rows apart by a run-time pitch)
               "M interleaved": ("Tile<_64, decltype(perm_n), _16>{}", "permutation_mnk=(64, perm[1], 16))")}


def _cpp_launcher(kernel):
    def launch(A, B, D, threads=CTA_THREADS):
        M, K = A.shape
        N = B.shape[0]
        kernel(A, B, D, M, N, K, grid=(M // CTA_TILE, N // CTA_TILE), block=threads)
    return launch


def _dsl_launcher(kernel):
    return lambda A, B, D, threads=CTA_THREADS: kernel(A, B, D, threads)


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """{(kind, 'tile'|'cta'): gemm function fn(A, B, D[, threads])}, compiled for this GPU."""
    src = cpp_sources()
    tile_k = gemmlab.compile(src["mma_tile"], "mma_tile")
    cta_k = gemmlab.compile(src["cta_gemm"], "cta_gemm")
    mod = dsl_module(tmp_path_factory.mktemp("mma04"))
    tile_d = gemmlab.dsl.compile(mod.mma_tile_dsl, *tile_example("cuda"))
    cta_d = gemmlab.dsl.compile(mod.cta_gemm_dsl, *cta_example(device="cuda"))
    return {("C++", "tile"): lambda A, B, D: tile_k(A, B, D, grid=1, block=32),
            ("DSL", "tile"): tile_d,
            ("C++", "cta"): _cpp_launcher(cta_k),
            ("DSL", "cta"): _dsl_launcher(cta_d)}


@pytest.fixture(scope="module")
def check_warp_blocks():
    """The notebook's own check_warp_blocks, run from its cell."""
    ns: dict = {}
    exec("import numpy as np\nfrom gemmlab.checking.thread_shares import thread_shares", ns)
    cells = cells_by_grade_id(CTA_ASSIGNMENT)
    exec(cells["cta_mma_checker"].split("\ndef check_cta_mma")[0], ns)      # spans, which the message uses
    exec(cells["warp_shares"], ns)
    return ns["check_warp_blocks"]


@pytest.mark.parametrize("kind", ["C++", "DSL"])
def test_one_warp_tile(kernels, kind: str) -> None:
    import torch

    for _ in range(3):  # fresh random inputs each time
        res = gemmlab.check_gemm(kernels[kind, "tile"], shapes=[(16, 8, 16)], out_dtype=torch.float32)
        assert res.passed, str(res)


@pytest.mark.parametrize("kind", ["C++", "DSL"])
def test_cta_tile(kernels, kind: str) -> None:
    import torch

    res = gemmlab.check_gemm(kernels[kind, "cta"], shapes=CTA_SHAPES, out_dtype=torch.float32, tile=(64, 64))
    assert res.passed, str(res)


@pytest.mark.parametrize("kind", ["C++", "DSL"])
def test_cta_solution_gives_each_warp_one_block(kernels, check_warp_blocks, kind: str) -> None:
    check_warp_blocks(kind, kernels[kind, "cta"])


@pytest.mark.parametrize("wrong", list(INTERLEAVED))
@pytest.mark.parametrize("kind", ["C++", "DSL"])
def test_cta_kernel_without_the_layouts_is_correct_but_fails_the_warp_check(check_warp_blocks, kind: str, wrong: str,
                                                                            tmp_path: Path) -> None:
    import torch

    cpp_spelling, dsl_spelling = INTERLEAVED[wrong]
    if kind == "C++":
        source = cpp_sources()["cta_gemm"]
        assert PERMUTATION[0] in source
        source = source.replace(PERMUTATION[0], cpp_spelling)
        if wrong == "no permutation":   # one 16-wide n-step per warp: CuTe builds B's ldmatrix only as .x2
            b_x4 = "make_tiled_copy_B(Copy_Atom<SM75_U32x4_LDSM_N, half_t>{}, mma)"
            assert b_x4 in source
            source = source.replace(b_x4, b_x4.replace("x4", "x2"))
        fn = _cpp_launcher(gemmlab.compile(source, "cta_gemm"))
    else:
        mod = dsl_module(tmp_path)
        text = inspect.getsource(mod)
        assert PERMUTATION[1] in text
        path = tmp_path / "interleaved.py"
        path.write_text(text.replace(PERMUTATION[1], dsl_spelling))
        ns: dict = {"__name__": "interleaved"}
        exec(compile(path.read_text(), str(path), "exec"), ns)
        fn = _dsl_launcher(gemmlab.dsl.compile(ns["cta_gemm_dsl"], *cta_example(device="cuda")))
    res = gemmlab.check_gemm(fn, shapes=CTA_SHAPES[:2], out_dtype=torch.float32, tile=(64, 64))
    assert res.passed, "the interleaved kernel should compute the right D: " + str(res)
    with pytest.raises(AssertionError, match="not one 32x32 block"):
        check_warp_blocks(kind, fn)


@pytest.mark.parametrize("kind", ["C++", "DSL"])
def test_cta_bench_reports_a_ratio(kernels, kind: str) -> None:
    import torch

    r = gemmlab.bench_gemm(kernels[kind, "cta"], (2048, 2048, 2048), out_dtype=torch.float32, label=kind)
    print(r)
    assert r.tflops > 0 and r.ratio > 0
