"""gemmlab.layout's SM80 atoms against the PTX ISA fragment tables, written out here
independently from the ISA's formulas (groupID = laneid >> 2, threadID_in_group = laneid % 4).

PTX ISA 9.7.14.5.x "Matrix Fragments for mma.m16n8k16 / mma.m16n8k8" (f16/bf16), and
"ldmatrix" / "stmatrix" (each of lanes 8j..8j+7 gives the address of one row of matrix j;
each lane receives row laneid >> 2, elements 2*(laneid % 4) and +1 of every matrix).
"""
from __future__ import annotations

import numpy as np
import pytest

import gemmlab.layout as L


def group(lane: int) -> int:
    return lane >> 2


def tig(lane: int) -> int:
    return lane % 4


# ---- PTX fragment formulas: value i of lane -> (row, col) of the operand as PTX draws it

def ptx_a_m16n8k16(lane: int, i: int) -> tuple[int, int]:
    row = group(lane) + (8 if i in (2, 3, 6, 7) else 0)
    col = tig(lane) * 2 + (i & 1) + (8 if i >= 4 else 0)
    return row, col  # A is M x K


def ptx_b_m16n8k16(lane: int, i: int) -> tuple[int, int]:
    row = tig(lane) * 2 + (i & 1) + (8 if i >= 2 else 0)
    return row, group(lane)  # B is K x N


def ptx_a_m16n8k8(lane: int, i: int) -> tuple[int, int]:
    return group(lane) + (8 if i >= 2 else 0), tig(lane) * 2 + (i & 1)


def ptx_b_m16n8k8(lane: int, i: int) -> tuple[int, int]:
    return tig(lane) * 2 + i, group(lane)


def ptx_c_m16n8(lane: int, i: int) -> tuple[int, int]:
    return group(lane) + (8 if i >= 2 else 0), tig(lane) * 2 + (i & 1)  # C/D is M x N


K16 = ["SM80_16x8x16_F32F16F16F32_TN", "SM80_16x8x16_F32BF16BF16F32_TN", "SM80_16x8x16_F16F16F16F16_TN"]
K8 = ["SM80_16x8x8_F32F16F16F32_TN", "SM80_16x8x8_F32BF16BF16F32_TN", "SM80_16x8x8_F16F16F16F16_TN"]


def _check(tv, shape_rows_cols, ptx, n_vals, b_operand=False):
    """Every (lane, value) of the CuTe layout must hit the element PTX names.

    CuTe indexes A as (M,K), B as (N,K), C as (M,N), column-major; PTX draws B as K x N.
    """
    arr = L.layout_to_array(tv)
    assert arr.shape == (32, n_vals)
    rows, cols = shape_rows_cols
    for lane in range(32):
        for i in range(n_vals):
            r, c = ptx(lane, i)
            if b_operand:  # PTX (k, n) -> CuTe (n, k) in an N x K tile
                r, c = c, r
            assert arr[lane, i] == r + rows * c, (lane, i)
    # and the fragment covers the whole tile exactly once
    assert sorted(arr.ravel()) == list(range(rows * cols))


@pytest.mark.parametrize("name", K16)
def test_m16n8k16_fragments(name):
    atom = L.mma_atom(name)
    assert atom.shape_mnk == (16, 8, 16) and atom.num_threads == 32
    _check(atom.tv_a, (16, 16), ptx_a_m16n8k16, 8)
    _check(atom.tv_b, (8, 16), ptx_b_m16n8k16, 4, b_operand=True)
    _check(atom.tv_c, (16, 8), ptx_c_m16n8, 4)


@pytest.mark.parametrize("name", K8)
def test_m16n8k8_fragments(name):
    atom = L.mma_atom(name)
    assert atom.shape_mnk == (16, 8, 8)
    _check(atom.tv_a, (16, 8), ptx_a_m16n8k8, 4)
    _check(atom.tv_b, (8, 8), ptx_b_m16n8k8, 2, b_operand=True)
    _check(atom.tv_c, (16, 8), ptx_c_m16n8, 4)


def test_tv_table_matches_ptx_for_c():
    """tv_to_tile_table inverts the layout: element (m, n) of C belongs to the PTX lane."""
    thr, val = L.tv_to_tile_table(L.mma_atom(K16[0]).tv_c, (16, 8))
    for lane in range(32):
        for i in range(4):
            r, c = ptx_c_m16n8(lane, i)
            assert (thr[r, c], val[r, c]) == (lane, i)


# ---- ldmatrix / stmatrix (16-bit elements; matrix j is 8 rows x 8 elements, offset j*64 + row*8 + col)

@pytest.mark.parametrize("n", [1, 2, 4])
def test_ldmatrix_non_transposed(n):
    atom = L.copy_atom(f"SM75_U32x{n}_LDSM_N", element_bits=16)
    dst = L.layout_to_array(atom.tv_dst)          # (lane, value) -> element of the n matrices
    assert dst.shape == (32, 2 * n)
    for lane in range(32):
        for j in range(n):
            for h in range(2):
                assert dst[lane, h + 2 * j] == j * 64 + group(lane) * 8 + 2 * tig(lane) + h
    _check_addresses(atom, n)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_ldmatrix_transposed(n):
    atom = L.copy_atom(f"SM75_U16x{2 * n}_LDSM_T", element_bits=16)
    dst = L.layout_to_array(atom.tv_dst)
    for lane in range(32):
        for j in range(n):
            for h in range(2):
                # .trans: the lane gets column groupID of the stored rows 2*tig and 2*tig+1
                assert dst[lane, h + 2 * j] == j * 64 + (2 * tig(lane) + h) * 8 + group(lane)
    _check_addresses(atom, n)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_stmatrix_is_ldmatrix_reversed(n):
    atom = L.copy_atom(f"SM90_U32x{n}_STSM_N", element_bits=16)
    src = L.layout_to_array(atom.tv_src)          # registers: same distribution as ldmatrix's
    for lane in range(32):
        for j in range(n):
            for h in range(2):
                assert src[lane, h + 2 * j] == j * 64 + group(lane) * 8 + 2 * tig(lane) + h
    _check_addresses(atom, n, side="dst")


def _check_addresses(atom, n, side="src"):
    """Lanes 8j..8j+7 address the rows of matrix j; the 16 bytes a lane names are that row."""
    rows = atom.smem_rows
    for lane in range(32):
        assert rows[lane] == (lane if lane < 8 * n else -1), lane
    smem = L.layout_to_array(atom.tv_src if side == "src" else atom.tv_dst)
    for lane in range(8 * n):
        assert list(smem[lane]) == [lane * 8 + e for e in range(8)]


def test_copy_atom_bit_layouts_are_cute_traits():
    a = L.copy_atom("SM75_U32x4_LDSM_N")
    assert L.cute_str(a.src_bits) == "(32,128):(128,1)"
    assert L.cute_str(a.dst_bits) == "(32,(32,4)):(32,(1,1024))"
    assert L.cute_str(L.copy_atom("SM75_U32x1_LDSM_N", element_bits=16).tv_src) == "((8,4),8):((8,0),1)"
    u = L.copy_atom("UniversalCopy", bits=128, element_bits=16)
    assert L.size(u.tv_src) == 8 and u.num_threads == 1
    assert np.array_equal(L.layout_to_array(u.tv_src).ravel(), np.arange(8))
