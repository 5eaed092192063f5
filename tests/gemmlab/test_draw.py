"""Pictures: what each panel encodes, CuTe's conventions, the raster traffic model, speed."""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pycute
import pytest
from matplotlib.figure import Figure

from gemmlab.seeing import banks, draw
from gemmlab import layout as L
from gemmlab.errors import GemmlabError

ATOM = "SM80_16x8x16_F32F16F16F32_TN"


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=40)
    return buf.getvalue()


def _texts(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_layout_grid_values_like_print_layout():
    lay = pycute.Layout((8, (4, 2)), (2, (16, 1)))
    vals = draw.layout_values_2d(lay)
    assert vals.shape == (8, 8)
    assert all(vals[r, c] == lay(r, c) for r in range(8) for c in range(8))
    fig = draw.layout_grid(lay)
    assert isinstance(fig, Figure) and _png(fig)[:4] == b"\x89PNG"
    assert sorted(map(int, _texts(fig))) == sorted(vals.ravel().tolist())
    assert draw.layout_values_2d(pycute.Layout(8, 2)).tolist() == [[0, 2, 4, 6, 8, 10, 12, 14]]
    with pytest.raises(GemmlabError, match="rank"):
        draw.layout_grid(pycute.Layout((2, 2, 2)))


def test_tv_table_matches_mma_fragment_rule():
    """PTX m16n8k16 C fragment: row = lane/4 (+8 for values 2,3), col = 2*(lane%4) + (v%2)."""
    atom = L.mma_atom(ATOM)
    thread_of, value_of = draw.tv_table(atom.tv_c, (16, 8))
    for lane in range(32):
        for v in range(4):
            r, c = lane // 4 + 8 * (v // 2), 2 * (lane % 4) + v % 2
            assert (thread_of[r, c], value_of[r, c]) == (lane, v)
    assert draw.owned_coords(atom.tv_c, (16, 8), 5) == [(1, 2), (1, 3), (9, 2), (9, 3)]


def test_tiled_mma_draws_b_as_k_by_n_and_highlights():
    mma = L.make_tiled_mma(ATOM, (2, 2, 1))
    tables = draw.mma_tables(mma)
    M, N, K = mma.tile_mnk
    assert tables["A"][0].shape == (M, K) and tables["B"][0].shape == (K, N) and tables["C"][0].shape == (M, N)
    b_nk = draw.tv_table(mma.tv_b, (N, K))[0]
    assert (tables["B"][0] == b_nk.T).all()
    fig = draw.tiled_mma(mma, "ABC", highlight_thread=3)
    assert len(fig.axes) == 3 and [ax.get_title()[0] for ax in fig.axes] == ["A", "B", "C"]
    # the highlighted thread's cells are painted in the highlight colour, the others are not
    img = fig.axes[2].images[0].get_array()
    mine = tables["C"][0] == 3
    assert np.allclose(img[mine], draw.HIGHLIGHT) and not np.allclose(img[~mine][0], draw.HIGHLIGHT)
    texts = _texts(fig)
    owned = sum(int((t >= 0).sum()) for t, _ in tables.values())
    assert "T0\nV0" in texts and len(texts) == owned
    with pytest.raises(GemmlabError, match="which"):
        draw.tiled_mma(mma, "AX")


@pytest.mark.parametrize("atoms", [(1, 1, 1), (2, 1, 1), (1, 2, 1), (2, 2, 1)])
def test_tiled_mma_every_element_has_an_owner(atoms):
    """Every element of A, B and C belongs to some thread (a TiledMMA computes all of C).

    Fails while gemmlab.layout's TiledMMA.tv_b uses btile (ThrN, ThrK):(0, 1); CuTe's
    get_layoutB_TV uses (ThrM, ThrN):(0, 1), so warps along N get different B columns.
    """
    tables = draw.mma_tables(L.make_tiled_mma(ATOM, atoms))
    for name, (thread_of, _) in tables.items():
        assert (thread_of >= 0).all(), f"{name}: {(thread_of < 0).sum()} elements have no thread"


def test_big_tv_picture_is_one_image_and_unlabelled():
    """Why a 128x128 tile draws at once: one image of the whole tile, no artist per element (16,384 labels or
    patches would make it slow; its speed: benchmarks/layout_speed.py)."""
    tv = pycute.Layout((128, 128), (1, 128))
    fig = draw.tv_layout(tv, (128, 128))
    assert _png(fig)
    (ax,) = fig.axes
    assert [im.get_array().shape[:2] for im in ax.images] == [(128, 128)]
    assert _texts(fig) == [] and len(ax.patches) + len(ax.lines) + len(ax.collections) < 10


def test_tiled_copy_panels():
    tc = L.make_tiled_copy(L.copy_atom("UniversalCopy", 128), pycute.Layout((16, 8), (8, 1)), pycute.Layout((1, 8)))
    fig = draw.tiled_copy(tc)
    assert len(fig.axes) >= 1 and _png(fig)


def test_swizzle_banks_before_and_after():
    base = pycute.Layout((8, 64), (64, 1))
    before = draw.bank_grid(base, 2)
    after = draw.bank_grid(pycute.ComposedLayout(pycute.Swizzle(3, 3, 3), 0, base), 2)
    # column 0 of every row: same bank before, 8 different bank groups after
    assert len(set(before[:, 0])) == 1 and len(set(after[:, 0] // 4)) == 8
    fig = draw.swizzle(pycute.Swizzle(3, 3, 3), base, 2)
    assert len(fig.axes) == 2
    assert (fig.axes[1].images[0].get_array() == after).all()


def test_banks_picture_marks_conflicts():
    a = banks.analyze([8 * l for l in range(32)], "ld32")
    fig = draw.banks(a)
    state = fig.axes[0].images[0].get_array()
    assert state.shape == (2, 32)
    assert (state[:, 0::2] == 2).all() and (state[:, 1::2] == 0).all()
    assert "0" in _texts(fig) and "16" in _texts(fig)


def test_raster_order_grouped():
    assert draw.raster_order(2, 3).tolist() == [[0, 1, 2], [3, 4, 5]]
    g = draw.raster_order(4, 3, group=2)
    assert g.tolist() == [[0, 2, 4], [1, 3, 5], [6, 8, 10], [7, 9, 11]]
    assert sorted(draw.raster_order(5, 3, group=2).ravel().tolist()) == list(range(15))


def test_raster_traffic_model():
    M = N = K = 1024
    panel = 128 * K * 2
    # unlimited L2: every panel once
    t = draw.raster_traffic(M, N, K, 128, 128)
    assert t.total_bytes == t.ideal_bytes == 16 * panel and t.ratio_to_ideal == 1.0
    # L2 of 2 panels, row-major: A panel stays, every B panel is re-read for each tile row
    t = draw.raster_traffic(M, N, K, 128, 128, l2_bytes=2 * panel)
    assert t.a_bytes == 8 * panel and t.b_bytes == 64 * panel
    # 16x16 tiles, L2 for 10 panels. Grouped by 8: A panels of a group stay, B read once per group
    g = draw.raster_traffic(2048, 2048, K, 128, 128, group=8, l2_bytes=10 * panel)
    assert g.a_bytes == 16 * panel and g.b_bytes == 2 * 16 * panel
    # row-major: 16 B panels per row do not fit, so every row re-reads all of B
    r = draw.raster_traffic(2048, 2048, K, 128, 128, l2_bytes=10 * panel)
    assert r.a_bytes == 16 * panel and r.b_bytes == 16 * 16 * panel
    with pytest.raises(GemmlabError):
        draw.raster_traffic(0, N, K, 128, 128)


def test_cta_raster_figure():
    fig = draw.cta_raster(1024, 1024, 128, 128, group=4, l2_bytes=4 << 20, K=1024)
    assert len(fig.axes) == 2 and "grouped by 4" in fig.axes[1].get_title()
    assert _png(fig)


# --------------------------------------------------------------------------- divides and local_tile

def test_tile_numbers_of_a_plain_tiler_are_blocks_listed_column_major():
    tile_of, zipped = draw.tile_numbers((8, 8), (2, 4))
    r, c = np.meshgrid(np.arange(8), np.arange(8), indexing="ij")
    assert (tile_of == r // 2 + 4 * (c // 4)).all()          # tile (i, j) is number i + 4j: zipped_divide's order
    assert (zipped == np.arange(8)[None, :]).all()              # one tile per column of the zipped form
    _, logical = draw.tile_numbers((8, 8), (2, 4), "logical")
    assert (logical == tile_of).all()                           # a logical divide of a compact matrix draws in place


def test_tile_numbers_follow_a_strided_tiler():
    # rows {0, 4} form one tile's rows when the tiler's row mode is 2:4
    tile_of, zipped = draw.tile_numbers((8, 8), (L.Layout(2, 4), L.Layout(4, 1)))
    assert tile_of[0, 0] == tile_of[4, 0] != tile_of[1, 0]
    assert [int((tile_of == t).sum()) for t in range(8)] == [8] * 8
    assert all(len(set(zipped[:, j])) == 1 for j in range(8))


@pytest.mark.parametrize("how", ["zipped", "logical"])
def test_divide_picture_holds_the_same_indices_in_the_divides_order(how):
    lay = L.Layout((8, 8), (8, 1))
    fig = draw.divide(lay, (2, 4), how)
    left, right = fig.axes[:2]
    divided = (L.zipped_divide if how == "zipped" else L.logical_divide)(lay, (2, 4))
    assert [int(t.get_text()) for t in left.texts] == draw.layout_values_2d(lay).ravel().tolist()
    assert [int(t.get_text()) for t in right.texts] == draw.layout_values_2d(divided).ravel().tolist()
    assert str(divided) in right.get_title()
    assert [t.get_text() for t in right.get_yticklabels()][:3] == ["(0,0)", "(1,0)", "(0,1)"]   # CuTe's column-major split
    assert _png(fig)


def test_divide_refuses_what_it_cannot_draw():
    with pytest.raises(GemmlabError, match="how"):
        draw.divide(L.Layout((8, 8), (8, 1)), (2, 4), "tiled")
    with pytest.raises(GemmlabError, match="rank"):
        draw.divide(L.Layout((2, 2, 2), (1, 2, 4)), (2, 2))


@pytest.mark.parametrize("coord", [(1, 0), (0, 1), (1, None)])
def test_local_tile_picture_highlights_what_local_tile_returns(coord):
    fig = draw.local_tile((8, 12), (4, 6), coord, ("blockIdx.x", "blockIdx.y"))
    ax = fig.axes[0]
    rgb = ax.images[0].get_array()
    picked = np.all(np.isclose(rgb, draw.HIGHLIGHT), axis=-1)
    mine = L.local_tile(L.make_identity_tensor((8, 12)), (4, 6), coord).values().reshape(-1, 2)
    want = np.zeros((8, 12), dtype=bool)
    want[mine[:, 0], mine[:, 1]] = True
    assert (picked == want).all()
    assert sorted(t.get_text() for t in ax.texts) == ["(0,0)", "(0,1)", "(1,0)", "(1,1)"]
    assert "blockIdx.x" in ax.get_ylabel() and "blockIdx.y" in ax.get_xlabel()


def test_local_tile_picture_refuses_a_tile_outside_the_matrix():
    with pytest.raises(GemmlabError):
        draw.local_tile((8, 12), (4, 6), (2, 0))
    with pytest.raises(GemmlabError, match="2-D"):
        draw.local_tile((8, 12, 2), (4, 6, 1), (0, 0, 0))
