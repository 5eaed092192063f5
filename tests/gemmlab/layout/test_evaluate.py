"""The one numpy evaluator of layouts and the one TV inversion (gemmlab.layout.evaluate)."""
from __future__ import annotations

import numpy as np
import pycute
import pytest

import gemmlab.layout as L
from gemmlab.errors import GemmlabError
from gemmlab.layout.evaluate import apply_swizzle, idx2crd_flat


def test_layout_to_array_matches_pycute_for_pycute_layouts():
    for lay in (pycute.Layout((8, (4, 2)), (2, (16, 1))),
                pycute.ComposedLayout(pycute.Swizzle(2, 3, 3), 0, pycute.Layout((32, 32), (32, 1)))):
        want = [lay(i) for i in range(pycute.size(lay.layoutA if hasattr(lay, "layoutA") else lay))]
        assert L.layout_to_array(lay).ravel(order="F").tolist() == want


def test_composed_layout_with_a_layout_outside_and_an_offset():
    inner = L.Layout((4, 4), (4, 1))
    outer = L.Layout(64, 2)
    comp = L.make_composed_layout(outer, 3, inner)
    arr = L.layout_to_array(comp)
    assert arr.shape == (4, 4)
    assert all(arr[r, c] == comp((r, c)) == 2 * (3 + 4 * r + c) for r in range(4) for c in range(4))


def test_apply_swizzle_on_ints_arrays_and_a_zero_shift():
    sw = pycute.Swizzle(3, 3, 3)
    offsets = np.arange(512)
    assert apply_swizzle(sw, offsets).tolist() == [sw(int(o)) for o in offsets]
    assert apply_swizzle(L.Swizzle(0, 4, 0), 37) == 37  # pycute's own Swizzle recurses forever here
    assert L.Swizzle(2, 0, -3)(np.array([0b00011])).tolist() == [0b11011] == [pycute.Swizzle(2, 0, -3)(0b00011)]


def test_idx2crd_flat_matches_pycute_idx2crd():
    shape = ((2, 3), 4)
    crd = idx2crd_flat(np.arange(24), shape)
    assert crd.shape == (24, 3)
    assert [tuple(c) for c in crd] == [pycute.flatten(pycute.idx2crd(i, shape)) for i in range(24)]


def test_mode_sizes_through_swizzles():
    assert L.mode_sizes(L.Layout(((4, 8), (2, 2)))) == (32, 4)
    assert L.mode_sizes(L.Layout(16)) == (16,)
    assert L.mode_sizes(pycute.ComposedLayout(pycute.Swizzle(3, 3, 3), 0, pycute.Layout((8, 64), (64, 1)))) == (8, 64)
    with pytest.raises(GemmlabError, match="not a layout"):
        L.mode_sizes((8, 64))


def test_tv_to_array_and_table_agree():
    tv = L.mma_atom("SM80_16x8x16_F32F16F16F32_TN").tv_c
    arr = L.tv_to_array(tv)
    thread_of, value_of = L.tv_to_tile_table(tv, (16, 8))
    assert arr.shape == (32, 4)
    for t in range(32):
        for v in range(4):
            assert arr[t, v] == tv((t, v))
            m, n = arr[t, v] % 16, arr[t, v] // 16
            assert (thread_of[m, n], value_of[m, n]) == (t, v)
    with pytest.raises(GemmlabError, match="check tile_shape"):
        L.tv_to_tile_table(tv, (8, 8))
    with pytest.raises(GemmlabError, match="two modes"):
        L.tv_to_array(L.Layout(32))


def test_cannot_evaluate_something_else():
    with pytest.raises(GemmlabError, match="not a layout"):
        L.layout_to_array("(8,8):(8,1)")


def test_cute_str_prints_pycute_swizzles_like_cute():
    comp = pycute.ComposedLayout(pycute.Swizzle(3, 3, 3), 0, pycute.Layout((8, 64), (64, 1)))
    assert L.cute_str(comp) == "Sw<3,3,3> o _0 o (8,64):(64,1)"
    assert str(L.composition(L.Swizzle(3, 3, 3), L.Layout((8, 64), (64, 1)))) == L.cute_str(comp)
