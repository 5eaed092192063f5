"""Unit tests of gemmlab.layout's own pieces: tensors, slicing, swizzles, numpy evaluation, errors."""
from __future__ import annotations

import numpy as np
import pycute
import pytest

import gemmlab.layout as L
from gemmlab.errors import GemmlabError


def _pycute_eval(layout):
    """Reference: pycute, one coordinate at a time, in column-major order of the domain."""
    return np.array([layout(i) for i in range(pycute.size(layout))])


@pytest.mark.parametrize("layout", [
    L.Layout((8, 4), (1, 8)), L.Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128))),
    L.Layout((128, (64, 16)), (0, (1, 64))), L.Layout(24, 3), L.Layout(((2, 3), 4), ((12, 1), 3)),
])
def test_layout_to_array_matches_pycute(layout):
    arr = L.layout_to_array(layout)
    assert arr.shape == tuple(L.product_each(layout.shape)) if isinstance(layout.shape, tuple) else (layout.shape,)
    np.testing.assert_array_equal(arr.ravel(order="F"), _pycute_eval(layout))
    if arr.ndim == 2:  # arr[i, j] is layout((i, j)) with 1-D coordinates per mode
        assert arr[1, 2] == layout((1, 2))


def test_make_layout_is_compact_col_major_like_cute():
    assert L.cute_str(L.make_layout((2, 1, 4))) == "(2,1,4):(1,0,2)"
    assert L.cute_str(L.make_layout((4, 8), (8, 1))) == "(4,8):(8,1)"
    assert L.cute_str(L.make_layout(L.Layout(4, 1), L.Layout(8, 4))) == "(4,8):(1,4)"
    with pytest.raises(GemmlabError, match="same nesting"):
        L.make_layout((4, 8), 1)


def test_swizzle_exact_bits_and_printing():
    sw = L.Swizzle(3, 3, 3)
    for off in range(1024):
        yyy = (off >> 6) & 0b111
        assert sw(off) == off ^ (yyy << 3)
    np.testing.assert_array_equal(sw(np.arange(1024)), [sw(i) for i in range(1024)])
    comp = L.composition(sw, L.make_layout((8, 64), (64, 1)))
    assert str(comp) == "Sw<3,3,3> o _0 o (8,64):(64,1)"
    assert L.size(comp) == 512
    assert comp((1, 9)) == sw(64 + 9)
    # a swizzle is a bijection of each 2^(B+M+S) block
    assert sorted(L.layout_to_array(comp).ravel()) == list(range(512))
    with pytest.raises(GemmlabError, match="invalid"):
        L.Swizzle(3, 3, 2)
    # a float bit count (math.log2's result) is named, not a TypeError deep inside pycute
    with pytest.raises(GemmlabError, match="M must be an int, got float 3.0"):
        L.Swizzle(3, 3.0, 3)
    assert L.Swizzle(np.int64(3), 3, 3) == sw


def test_swizzled_tensor_partitions_apply_swizzle_last():
    inner = L.make_layout((16, 64), (64, 1))
    sw = L.Swizzle(3, 3, 3)
    data = np.arange(1024) * 10
    t = L.make_tensor(data, L.composition(sw, inner))
    thr = L.make_layout((8, 4), (4, 1))
    for tid in (0, 5, 31):
        part = L.local_partition(t, thr, tid)
        plain = L.local_partition(L.make_identity_tensor((16, 64)), thr, tid)
        coords = plain.values().reshape(-1, 2, order="F")
        want = [data[sw(inner((int(m), int(k))))] for m, k in coords]
        np.testing.assert_array_equal(part.values().ravel(order="F"), want)
        assert str(part.layout).startswith("Sw<3,3,3> o ")


def test_tensor_indexing_and_slicing():
    a = np.arange(6 * 4).reshape(6, 4)                 # row-major 6x4
    t = L.make_tensor(a, L.make_layout((6, 4), (4, 1)))
    assert t[(2, 3)] == a[2, 3] and t(5, 1) == a[5, 1]
    row = t[(2, None)]
    np.testing.assert_array_equal(row.values(), a[2])
    col = t(None, 3)
    np.testing.assert_array_equal(col.values(), a[:, 3])
    ident = L.make_identity_tensor((6, 4))
    assert ident[(3, 2)] == (3, 2)
    with pytest.raises(GemmlabError):
        t[(1, 2, 3)]


def test_local_tile_shapes_and_flat_coord():
    m = L.make_identity_tensor((256, 128))
    g = L.local_tile(m, (128, 64), (1, None))
    assert g.shape == (128, 64, 2)
    assert g[(0, 0, 1)] == (128, 64)
    # an integer coordinate indexes the rest modes column-major, like C++
    assert L.local_tile(m, (32, 16), 7).values().tolist() == L.local_tile(m, (32, 16), (7, 0)).values().tolist()
    c = L.local_tile(m, (128, 64, 32), (1, 0, None), proj=(1, None, 1))
    assert c.shape == (128, 32, 4) and c[(0, 0, 2)] == (128, 64)


def test_local_partition_owns_a_strided_grid():
    p = L.local_partition(L.make_identity_tensor((16, 64)), L.make_layout((2, 16)), 5)
    assert p.shape == (8, 4)
    vals = p.values()
    assert vals[0, 0].tolist() == [1, 2] and vals[1, 1].tolist() == [3, 18]


def test_get_flat_coord_like_cute():
    assert L.get_flat_coord(L.make_layout((32, 4), (4, 1)), 77) == (19, 1)
    assert L.get_flat_coord(L.make_layout(((4, 8), 2)), 37) == (5, 1)


def test_tv_table_is_exact_for_128x128():
    """(Its speed, which the pictures need: benchmarks/layout_speed.py.)"""
    mma = L.make_tiled_mma("SM80_16x8x16_F32F16F16F32_TN", (2, 2, 1), (128, 128, 16))
    assert mma.tile_mnk == (128, 128, 16)
    thr, val = L.tv_to_tile_table(mma.tv_c, (128, 128))
    assert (thr >= 0).all() and thr.max() == 127
    tv = L.layout_to_array(mma.tv_c)
    assert all(tv[thr[m, n], val[m, n]] == m + 128 * n for m, n in [(0, 0), (77, 3), (127, 127), (5, 100)])


def test_tv_table_broadcast_lowest_thread_wins():
    wg = L.mma_atom("SM90_64x64x16_F32F16F16_SS")
    thr, _ = L.tv_to_tile_table(wg.tv_a, (64, 16))
    assert (thr == 0).all()
    thr_c, val_c = L.tv_to_tile_table(wg.tv_c, (64, 64))
    assert thr_c.max() == 127 and val_c.max() == 31


def test_wgmma_atom_shapes():
    for n in (8, 24, 256):
        a = L.mma_atom(f"SM90_64x{n}x16_F32F16F16_SS")
        assert a.shape_mnk == (64, n, 16) and a.num_threads == 128
        assert L.size(a.tv_c) == 64 * n and L.size(a.tv_b) == 128 * n * 16
    with pytest.raises(GemmlabError, match="multiple of 8"):
        L.mma_atom("SM90_64x260x16_F32F16F16_SS")


def test_errors_are_actionable():
    with pytest.raises(GemmlabError, match="Known"):
        L.mma_atom("SM80_16x8x32_F32F16F16F32_TN")
    with pytest.raises(GemmlabError, match="bits="):
        L.copy_atom("UniversalCopy")
    with pytest.raises(GemmlabError, match="copies"):
        L.copy_atom("SM80_CP_ASYNC_CACHEALWAYS", bits=256)
    with pytest.raises(GemmlabError, match="values"):
        L.make_tiled_copy(L.copy_atom("UniversalCopy", bits=128), L.make_layout((32, 4)), L.make_layout((1, 4)))
    mma = L.make_tiled_mma("SM80_16x8x16_F32F16F16F32_TN", (2, 2, 1))
    with pytest.raises(GemmlabError, match="outside"):
        mma.get_slice(128)
    with pytest.raises(GemmlabError, match="multiple"):
        L.make_tiled_mma("SM80_16x8x16_F32F16F16F32_TN", (4, 1, 1), (32, 32, 16))
    with pytest.raises(GemmlabError, match="fewer modes|rank"):
        mma.get_slice(0).partition_A(L.make_layout(64))


def test_tiled_mma_fragment_shapes():
    mma = L.make_tiled_mma("SM80_16x8x16_F32F16F16F32_TN", (2, 2, 1), (32, 32, 16))
    thr = mma.get_slice(3)
    assert thr.partition_fragment_C(L.make_layout((128, 128))) == ((2, 2), 4, 8)
    assert thr.partition_fragment_A(L.make_layout((128, 32))) == ((2, 2, 2), 4, 2)
    assert mma.partition_shape("B", (128, 32)) == ((2, 2), 8, 2)


def test_permutation_problem_names_what_is_not_a_reordering_of_its_tile() -> None:
    # the course's own block permutations, an integer tile and CuTe's `_` reorder their modes
    blocks = (L.Layout((16, 2, 2), (1, 32, 16)), L.Layout((8, 2, 4), (1, 32, 8)), 16)
    assert L.permutation_problem(blocks) is None
    assert L.permutation_problem((64, None, 16)) is None and L.permutation_problem(None) is None
    rng = np.random.default_rng()
    order = rng.permutation(3)                  # a random nesting order of a bijective layout
    shape = tuple(np.array((4, 2, 8))[order].tolist())
    stride = tuple(np.array((1, 4, 8))[order].tolist())
    assert L.permutation_problem((L.Layout(shape, stride),)) is None
    past = L.permutation_problem((64, L.Layout((8, 1, 8), (1, 8, 64))))
    assert past.startswith("the N permutation (8,1,8):(1,8,64) sends its 64 positions to 0..455") and "value" not in past
    twice = L.permutation_problem((L.Layout((16, 4, 2), (1, 16, 32)),))
    assert "sends its 128 positions to 0..95, 32 of them to a value another position has" in twice
    assert "neither a tile size" in L.permutation_problem((0, 64, 16))
    assert "neither a tile size" in L.permutation_problem((True, 64, 16))
    assert "not a tuple" in L.permutation_problem(64)
    assert "not 1 to 65,536" in L.permutation_problem((L.Layout(1 << 17, 1),))
