"""Notebooks 04 and 04b (tensor-core MMA) without a GPU: their solution kernels compile for sm_90a to
tensor-core code, and the layout facts the notebooks teach hold against the CuTe DSL."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")

import gemmlab  # noqa: E402
import gemmlab.layout as L  # noqa: E402

from tests.support.kernel_resources import assert_no_spills  # noqa: E402
from tests.support.mma04_solutions import cpp_sources, cta_example, dsl_module, tile_example  # noqa: E402

MMA16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


def _count(ptx: str | bytes, pattern: str) -> int:
    text = ptx if isinstance(ptx, str) else ptx.decode()
    return len(re.findall(pattern, text))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mma_tile", "cta_gemm"])
def test_cpp_solution_compiles_to_mma_sync(name: str) -> None:
    k = gemmlab.compile(cpp_sources()[name], name, arch="sm_90a")
    n_mma = _count(k.ptx, re.escape(MMA16))
    if name == "mma_tile":
        assert n_mma == 1, f"the one-tile kernel should issue exactly one mma.sync, PTX has {n_mma}"
    else:
        # 8 MMAs and 4 ldmatrix.x4 per k-tile and warp (32x32 block); the compiler may unroll the loop.
        n_ldsm = _count(k.ptx, r"ldmatrix\.sync\.aligned\.x4\.m8n8\.shared\.b16")
        assert n_mma >= 8 and n_mma % 8 == 0 and n_ldsm * 2 == n_mma, (n_mma, n_ldsm)
        assert k.resources.static_smem_bytes == 2 * 64 * 16 * 2
    assert_no_spills(k.resources, name)


def test_dsl_solutions_compile_to_mma_sync(tmp_path: Path) -> None:
    mod = dsl_module(tmp_path)
    tile = gemmlab.dsl.compile(mod.mma_tile_dsl, *tile_example(), arch="sm_90a")
    assert _count(tile.ptx, re.escape(MMA16)) == 1
    cta = gemmlab.dsl.compile(mod.cta_gemm_dsl, *cta_example(), arch="sm_90a")
    n_mma = _count(cta.ptx, re.escape(MMA16))
    n_ldsm = _count(cta.ptx, r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16")
    assert n_mma >= 8 and n_mma % 8 == 0 and n_ldsm * 2 == n_mma, (n_mma, n_ldsm)


def test_cta_tiled_mma_gives_each_warp_a_32x32_block() -> None:
    """The permutation both kernels use: warp w computes rows 32*(w%2).. and columns 32*(w//2).."""
    mma = L.make_tiled_mma("SM80_16x8x16_F32F16F16F32_TN", (2, 2, 1),
                           (L.Layout((16, 2, 2), (1, 32, 16)), L.Layout((8, 2, 4), (1, 32, 8)), 16))
    assert mma.tile_mnk == (64, 64, 16) and mma.num_threads == 128
    idx = L.layout_to_array(mma.tv_c).ravel(order="F").reshape(-1, 128).T  # [thread, value]
    for w in range(4):
        block = idx[32 * w:32 * w + 32].ravel()
        m, n = block % 64, block // 64
        assert (m.min(), m.max(), n.min(), n.max()) == (32 * (w % 2), 32 * (w % 2) + 31, 32 * (w // 2), 32 * (w // 2) + 31)
    assert sorted(idx.ravel().tolist()) == list(range(64 * 64))


def test_ldmatrix_copies_of_the_cta_mma_match_its_fragments() -> None:
    """make_tiled_copy_A/B with the x4 atom: destination (thread, value) -> element is the MMA's."""
    mma = L.make_tiled_mma("SM80_16x8x16_F32F16F16F32_TN", (2, 2, 1),
                           (L.Layout((16, 2, 2), (1, 32, 16)), L.Layout((8, 2, 4), (1, 32, 8)), 16))
    atom = L.copy_atom("SM75_U32x4_LDSM_N")
    for make, tv in ((L.make_tiled_copy_A, mma.tv_a), (L.make_tiled_copy_B, mma.tv_b)):
        copy = make(atom, mma)
        dst = L.layout_to_array(copy.get_layoutD_TV()).ravel(order="F").reshape(-1, 128).T  # [thread, value]
        ref = L.layout_to_array(tv).ravel(order="F").reshape(-1, 128).T
        for t in range(128):  # each thread receives exactly its own fragment (values may be grouped differently)
            assert sorted(dst[t]) == sorted(ref[t]), f"{make.__name__}: thread {t}"
