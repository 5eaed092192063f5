"""Explorers driven through their widgets, as a student's clicks would (dummy comm, no browser)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest
from matplotlib.figure import Figure

from gemmlab.seeing import banks, draw, widgets


@pytest.fixture
def tv():
    return widgets.TVExplorer(draw_figures=False)


def test_tv_explorer_thread_ownership(tv):
    tv.thread.value = 5
    # SM80 16x8x16: C fragment rows lane/4 and lane/4 + 8, columns 2*(lane%4)+{0,1}
    assert tv.owned["C"] == [(1, 2), (1, 3), (9, 2), (9, 3)]
    assert len(tv.owned["A"]) == 8 and len(tv.owned["B"]) == 4
    tv.atoms_m.value = 2
    tv.atoms_n.value = 2
    assert tv.tiled_mma.tile_mnk == (32, 16, 16) and tv.tiled_mma.num_threads == 128
    tv.thread.value = 127
    assert tv.error is None and len(tv.owned["C"]) == 4
    assert "128 threads" in tv.message.value


def test_tv_explorer_reports_bad_input(tv):
    tv.thread.value = 40  # only 32 threads
    assert tv.error and "0..31" in tv.error and "0..31" in tv.message.value
    tv.thread.value = -1
    assert tv.error is None and tv.owned == {}
    tv.permutation.value = "32,x"
    assert "integers" in tv.error
    tv.permutation.value = "32,16,16"
    assert tv.error is None and tv.tiled_mma.tile_mnk == (32, 16, 16)
    tv.permutation.value = "24,8,16"
    assert tv.error is not None  # 24 is not a multiple of the atom's 16


def test_tv_explorer_draws():
    ex = widgets.tv_explorer()
    assert isinstance(ex.figure, Figure) and len(ex.figure.axes) == 3
    ex.which.value = "C"
    assert len(ex.figure.axes) == 1


def test_swizzle_explorer_conflicts():
    ex = widgets.SwizzleExplorer(draw_figures=False)
    # Swizzle<3,3,3> on 8x64 halves: ldmatrix.x4 of 8 rows is conflict-free
    assert ex.conflicts == 0 and ex.access.wavefronts == 4
    ex.bits.value = 0  # no swizzle: each matrix's 8 rows share 4 banks -> 8-way
    assert ex.conflicts == 28
    ex.bits.value = 2  # Swizzle<2,3,3>: 4 distinct bank groups -> 2-way
    assert ex.access.wavefronts == 8
    ex.access_kind.value = "ld128 along rows: 32 consecutive 16-byte chunks"
    assert ex.conflicts == 0
    ex.shift.value = 1  # S < B is not a swizzle
    assert "shift" in ex.error
    ex.shift.value = 3
    ex.bits.value = 3
    ex.access_kind.value = "ld32 down a column: element 0 of each row (lane l reads row l mod rows)"
    want = banks.analyze(ex.addresses, "ld32").conflicts
    assert ex.conflicts == want and ex.error is None
    # M=2 keeps the rows' starts aligned but splits each 16-byte vector: wrong data, said so
    ex.access_kind.value = "ldmatrix.x4: 8 rows x 4 chunks of 16 bytes"
    ex.base.value = 2
    assert "M=2 is too small" in ex.error and "wrong elements" in ex.error


def test_swizzle_explorer_draws_two_figures():
    ex = widgets.swizzle_explorer()
    assert isinstance(ex.figure, Figure)
    assert ex.figures()[1].axes[0].get_title().startswith("ldmatrix.x4")


def test_cta_grid_explorer():
    ex = widgets.CtaGridExplorer(draw_figures=False)
    ex.M.value, ex.N.value, ex.K.value = 2048, 2048, 2048
    ex.l2_mib.value = 4
    ex.group.value = 4
    want = draw.raster_traffic(2048, 2048, 2048, 128, 128, 4, 4 << 20, 2)
    assert ex.grouped.total_bytes == want.total_bytes
    assert ex.grouped.total_bytes < ex.row_major.total_bytes
    assert ex.grouped.order[1, 0] == 1  # grouped: the second CTA goes down, not right
    assert "MiB" in ex.message.value
    ex.group.value = 1
    assert ex.grouped.total_bytes == ex.row_major.total_bytes


def test_cta_grid_explorer_draws():
    ex = widgets.cta_grid_explorer()
    assert isinstance(ex.figure, Figure) and len(ex.figure.axes) == 2
