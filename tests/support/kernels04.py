"""Notebooks 04's and 04b's kernels, the solutions and the wrong answers students write, compiled once per process.

Why: the graded tests of 04's Exercises 1(c) and 3 and 04b's Exercise 3 read the kernels' machine code
(gemmlab.techniques), so their wrong-answer tests need real images: each wrong answer here is a text edit of the
solution cell read from solutions/*.ipynb at test time (tests.support.techniques.edit insists the text it replaces
is there), compiled for sm_90a without a GPU. A CuTe DSL kernel takes a few seconds, a CuTe C++ kernel 20–90 s on
two cores: tests that build C++ variants are marked slow, and every build is cached (here per process, and on disk
by gemmlab's compile cache).
"""
from __future__ import annotations

from functools import cache
from typing import Any

from tests.support import techniques as S

#: What the notebooks' DSL cells import from earlier cells.
IMPORTS = "import cutlass\nimport cutlass.cute as cute\nimport cuda.bindings.driver as cuda\n"

_SIMT_PERM_DSL = "permutation_mnk=(64, perm_n, 1)"
_SIMT_PERM_CPP = "Tile<_64, Layout<Shape<_16, _4>, Stride<_4, _1>>, _1>{}"
_CTA_PERM_DSL = ("perm = (cute.make_layout((16, 2, 2), stride=(1, 32, 16)), "
                 "cute.make_layout((8, 2, 4), stride=(1, 32, 8)), 16)")
_CTA_MMA_DSL = "tiled_mma = cute.make_tiled_mma(op, cute.make_layout((2, 2, 1)), permutation_mnk=perm)"
_CTA_B_DSL = "s2r_B = cute.make_tiled_copy_B(ldsm, tiled_mma)"
_CTA_TILE_CPP = "Tile<decltype(perm_m), decltype(perm_n), _16>{}"
_CTA_B_CPP = "auto s2r_b = make_tiled_copy_B(Copy_Atom<SM75_U32x4_LDSM_N, half_t>{}, mma);"

#: kernel -> (notebook, cell tag, function or source name, {variant: [(old, new), ...]}).
KERNELS: dict[str, tuple[str, str, str, dict[str, list[tuple[str, str]]]]] = {
    "simt_dsl": ("04_mma", "kernel:mma04_simt_dsl", "simt_tile_dsl", {
        "solution": [],
        "integer tile": [(_SIMT_PERM_DSL, "permutation_mnk=(64, 64, 1)")],
        "pairs": [("perm_n = cute.make_layout((16, 4), stride=(4, 1))",
                   "perm_n = cute.make_layout((16, 2, 2), stride=(2, 1, 32))")],
    }),
    "simt_cpp": ("04_mma", "kernel:mma04_simt_cpp", "SIMT_CPP", {
        "solution": [],
        "integer tile": [(_SIMT_PERM_CPP, "Tile<_64, _64, _1>{}")],
    }),
    "tile_dsl": ("04_mma", "kernel:mma04_tile_dsl", "mma_tile_dsl", {
        "solution": [],
        "m16n8k8 atom": [("(cutlass.Float16, cutlass.Float32, (16, 8, 16))",
                          "(cutlass.Float16, cutlass.Float32, (16, 8, 8))")],
    }),
    "tile_cpp": ("04_mma", "kernel:mma04_tile_cpp", "MMA_TILE_CPP", {
        "solution": [],
        "m16n8k8 atom": [("TiledMMA mma = make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{});",
                          "TiledMMA mma = make_tiled_mma(SM80_16x8x8_F32F16F16F32_TN{});")],
    }),
    "cta_dsl": ("04b_tiled_mma", "kernel:mma04_cta_dsl", "cta_gemm_dsl", {
        "solution": [],
        "integer tile": [(_CTA_PERM_DSL, "perm = (64, 64, 16)")],
        "no permutation": [(_CTA_MMA_DSL, "tiled_mma = cute.make_tiled_mma(op, cute.make_layout((2, 2, 1)))")],
        "blocks along M only": [(_CTA_PERM_DSL, "perm = (cute.make_layout((16, 2, 2), stride=(1, 32, 16)), 64, 16)")],
        "blocks along N only": [(_CTA_PERM_DSL, "perm = (64, cute.make_layout((8, 2, 4), stride=(1, 32, 8)), 16)")],
        "B by plain copy": [(_CTA_B_DSL, "s2r_B = cute.make_tiled_copy_B(cute.make_copy_atom("
                                         "cute.nvgpu.CopyUniversalOp(), mA.element_type), tiled_mma)")],
        "B by ldmatrix.x2": [(_CTA_B_DSL, "s2r_B = cute.make_tiled_copy_B(cute.make_copy_atom("
                                          "cute.nvgpu.warp.LdMatrix8x8x16bOp(False, 2), mA.element_type), tiled_mma)")],
    }),
    "cta_cpp": ("04b_tiled_mma", "kernel:mma04_cta_cpp", "CTA_CPP", {
        "solution": [],
        "integer tile": [(_CTA_TILE_CPP, "Tile<_64, _64, _16>{}")],
        # without the permutation a warp's B is too narrow for ldmatrix.x4: CuTe refuses it at compile time
        "no permutation, B by ldmatrix.x2": [(",\n                                  " + _CTA_TILE_CPP, ""),
                                             (_CTA_B_CPP, _CTA_B_CPP.replace("U32x4", "U32x2"))],
        "B by plain copy": [(_CTA_B_CPP, _CTA_B_CPP.replace("SM75_U32x4_LDSM_N", "UniversalCopy<half_t>"))],
    }),
}

#: Arguments the DSL host functions are compiled for (CPU tensors: nothing runs).
_EXAMPLES = {"simt_dsl": ((64, 16), (64, 16), (64, 64), 256), "tile_dsl": ((16, 16), (8, 16), (16, 8), None),
             "cta_dsl": ((128, 64), (64, 64), (128, 64), 128)}
_CPP_NAMES = {"simt_cpp": "simt_tile", "tile_cpp": "mma_tile", "cta_cpp": "cta_gemm"}


def variants(kernel: str) -> list[str]:
    return list(KERNELS[kernel][3])


def source(kernel: str, variant: str) -> str:
    """The solution cell of ``kernel`` with ``variant``'s edits."""
    notebook, tag, _, edits = KERNELS[kernel]
    text = S.source(notebook, tag)
    for old, new in edits[variant]:
        text = S.edit(text, old, new)
    return text


@cache
def compiled(kernel: str, variant: str = "solution") -> Any:
    """``kernel``'s ``variant`` compiled for sm_90a: a DslKernel or a C++ Kernel."""
    import torch

    import gemmlab

    _, _, name, _ = KERNELS[kernel]
    ns = S.run_sources(f"{kernel}-{variant}".replace(" ", "-"), [IMPORTS, source(kernel, variant)])
    if kernel.endswith("_cpp"):
        return gemmlab.compile(ns[name], _CPP_NAMES[kernel], arch="sm_90a")
    a, b, d, threads = _EXAMPLES[kernel]
    example = [torch.empty(*a, dtype=torch.float16), torch.empty(*b, dtype=torch.float16), torch.empty(*d)]
    return gemmlab.dsl.compile(ns[name], *example, *([threads] if threads else []), arch="sm_90a")


__all__ = ["IMPORTS", "KERNELS", "compiled", "source", "variants"]
