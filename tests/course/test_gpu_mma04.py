"""Notebook 04's solution kernels on a GPU: check_gemm on the one-warp 16x8x16 tile and on
64x64 CTA tiles for several K, for the CuTe C++ and the CuTe DSL solutions alike.

    pytest -m gpu tests/test_gpu_mma04.py
"""
from __future__ import annotations


import pytest

import gemmlab

from tests.support.mma04_solutions import CTA_TILE, cpp_sources, cta_example, dsl_module, tile_example

pytestmark = pytest.mark.gpu

CTA_SHAPES = [(64, 64, 16), (64, 64, 64), (64, 64, 272), (128, 192, 96), (320, 64, 16 * 37)]


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """{(kind, 'tile'|'cta'): gemm function fn(A, B, D)}, compiled for this GPU."""
    src = cpp_sources()
    tile_k = gemmlab.compile(src["mma_tile"], "mma_tile")
    cta_k = gemmlab.compile(src["cta_gemm"], "cta_gemm")
    mod = dsl_module(tmp_path_factory.mktemp("mma04"))
    tile_d = gemmlab.dsl.compile(mod.mma_tile_dsl, *tile_example("cuda"))
    cta_d = gemmlab.dsl.compile(mod.cta_gemm_dsl, *cta_example(device="cuda"))

    def cta_cpp(A, B, D):
        M, K = A.shape
        N = B.shape[0]
        cta_k(A, B, D, M, N, K, grid=(M // CTA_TILE, N // CTA_TILE), block=128)

    return {("C++", "tile"): lambda A, B, D: tile_k(A, B, D, grid=1, block=32),
            ("DSL", "tile"): tile_d,
            ("C++", "cta"): cta_cpp,
            ("DSL", "cta"): cta_d}


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
def test_cta_bench_reports_a_ratio(kernels, kind: str) -> None:
    import torch

    r = gemmlab.bench_gemm(kernels[kind, "cta"], (2048, 2048, 2048), out_dtype=torch.float32, label=kind)
    print(r)
    assert r.tflops > 0 and r.ratio > 0
