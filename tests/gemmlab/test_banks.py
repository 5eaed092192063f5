"""The bank model on hand-checked cases, its validation, and the tile-level helpers."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pycute
import pytest

from gemmlab.seeing import banks
from gemmlab.errors import GemmlabError


def lanes(f):
    return [f(l) for l in range(32)]


@pytest.mark.parametrize("stride_words, expected", [(1, 1), (2, 2), (4, 4), (8, 8), (16, 16), (32, 32), (33, 1)])
def test_ld32_stride(stride_words, expected):
    a = banks.analyze(lanes(lambda l: 4 * stride_words * l), "ld32")
    assert (a.wavefronts, a.ideal_wavefronts, a.conflicts) == (expected, 1, expected - 1)


def test_broadcast_and_same_word_are_free():
    assert banks.analyze([0] * 32, "ld32").wavefronts == 1
    # four lanes per word, 8 distinct words in 8 banks
    assert banks.analyze(lanes(lambda l: 4 * (l % 8)), "st32").conflicts == 0
    # two distinct words in bank 0 -> 2 wavefronts even though 16 lanes share each word
    a = banks.analyze(lanes(lambda l: 0 if l < 16 else 128), "ld32")
    assert (a.wavefronts, a.conflicts) == (2, 1)


def test_wide_accesses_use_phases():
    assert banks.analyze(lanes(lambda l: 8 * l), "ld64").wavefronts == 2
    a = banks.analyze(lanes(lambda l: 16 * l), "st128")
    assert (a.wavefronts, a.ideal_wavefronts, a.conflicts) == (4, 4, 0)
    # a quarter-warp reading one 128-byte column of a row-major 64-half tile: 8-way per phase
    a = banks.analyze(lanes(lambda l: 128 * l), "ld128")
    assert (a.wavefronts, a.ideal_wavefronts) == (32, 4)


def test_pair_packing_is_a_model_switch():
    addrs = lanes(lambda l: 16 * (l // 2))
    assert banks.analyze(addrs, "ld128").wavefronts == 2
    assert banks.analyze(addrs, "ld128", banks.Model(uniform_pair_packing=False)).wavefronts == 4
    assert banks.analyze(addrs, "st128").wavefronts == 4  # stores are not packed


def test_inactive_lanes():
    a = banks.analyze([0] + [None] * 31, "ld128")
    assert (a.wavefronts, a.ideal_wavefronts) == (1, 1)
    a = banks.analyze(lanes(lambda l: 16 * l if l < 8 else None), "ld128")
    assert a.wavefronts == 1


def test_ldmatrix_rows_and_swizzle():
    rows = [128 * r for r in range(32)]
    a = banks.analyze(rows, "ldmatrix.x4")
    assert (a.wavefronts, a.ideal_wavefronts, a.conflicts) == (32, 4, 28)
    sw = pycute.Swizzle(3, 3, 3)
    a = banks.analyze([2 * sw(64 * r) for r in range(32)], "ldmatrix.x4")
    assert (a.wavefronts, a.conflicts) == (4, 0)
    # .x1 uses lanes 0-7 only; the rest may be anything (even misaligned garbage ignored)
    a = banks.analyze([16 * r for r in range(8)] + [None] * 24, "ldmatrix.x1")
    assert (a.wavefronts, a.ideal_wavefronts) == (1, 1)
    assert banks.analyze([16 * r for r in range(16)], "stmatrix.x2").wavefronts == 2


def test_detail_lists_lanes_per_bank():
    a = banks.analyze(lanes(lambda l: 8 * l), "ld32")  # 2-way: lanes l and l+16 share a bank
    d = a.wavefront_detail
    assert len(d) == a.wavefronts == 2
    assert d[0].lanes[0] == (0,) and d[1].lanes[0] == (16,)
    assert d[0].lanes[1] == () and 0 in d[0].conflicted_banks
    served = sorted(l for w in d for b in w.lanes for l in b)
    assert served == list(range(32))


@pytest.mark.parametrize("bad, op, words", [
    (lanes(lambda l: 4 * l), "ld48", "unknown"),
    ([0] * 31, "ld32", "32"),
    (lanes(lambda l: 8 * l + 4), "ld64", "aligned"),
    (lanes(lambda l: -4), "ld32", "non-negative"),
    (lanes(lambda l: 1 << 30), "ld32", "beyond shared memory"),
    (lanes(lambda l: "x"), "ld32", "integer"),
])
def test_validation_messages(bad, op, words):
    with pytest.raises(GemmlabError, match=words):
        banks.analyze(bad, op)


def test_conflicts_batches_like_analyze():
    rng = np.random.default_rng(0)
    for op in banks.OPS:
        w = banks.OPS[op].bytes_per_address
        rows = (rng.integers(0, 512, size=(20, 32)) * w).tolist()
        rep = banks.conflicts(rows, op)
        single = [banks.analyze(r, op) for r in rows]
        assert [a.wavefronts for a in rep.instructions] == [a.wavefronts for a in single]
        assert rep.wavefronts == sum(a.wavefronts for a in single)
        assert rep.conflicts == rep.wavefronts - rep.ideal_wavefronts
        assert rep.worst.conflicts == max(a.conflicts for a in single)


def _row_copy():
    """128 threads, each storing 8 contiguous halves of a 16x64 slab (thread t -> row t//8)."""
    tv = pycute.Layout(((8, 16), 8), ((128, 1), 16))
    return SimpleNamespace(tv_layout=tv, tiler=(16, 64), num_threads=128)


def test_copy_conflicts_row_major_tile():
    rep = banks.copy_conflicts(pycute.Layout((128, 64), (64, 1)), _row_copy(), 2, "st128")
    assert len(rep.instructions) == 4 * 8
    assert (rep.wavefronts, rep.conflicts) == (128, 0)


def test_copy_conflicts_column_major_copy_needs_swizzle():
    # thread t owns column-chunk t%8 of row t//8... but now the smem tile is K-major with
    # 128-byte rows and each quarter-warp hits the same 16 bytes of 8 rows: 8-way conflicts.
    tv = pycute.Layout(((16, 8), 8), ((1, 128), 16))  # lanes walk down rows first
    tc = SimpleNamespace(tv_layout=tv, tiler=(16, 64), num_threads=128)
    plain = pycute.Layout((128, 64), (64, 1))
    rep = banks.copy_conflicts(plain, tc, 2, "st128")
    assert rep.conflicts == rep.ideal_wavefronts * 7
    swz = pycute.ComposedLayout(pycute.Swizzle(3, 3, 3), 0, plain)
    rep = banks.copy_conflicts(swz, tc, 2, "st128")
    assert rep.conflicts == 0
    padded = pycute.Layout((128, 64), (72, 1))
    assert banks.copy_conflicts(padded, tc, 2, "st128").conflicts == 0


def test_non_contiguous_vector_is_an_error():
    col_major = pycute.Layout((128, 64), (1, 128))
    with pytest.raises(GemmlabError, match="not contiguous"):
        banks.copy_conflicts(col_major, _row_copy(), 2, "st128")
    with pytest.raises(GemmlabError, match="does not divide"):
        banks.copy_conflicts(pycute.Layout((100, 64), (64, 1)), _row_copy(), 2, "st128")


def test_ldmatrix_conflicts_rows():
    # a warp of ldmatrix.x4: thread t addresses row t of a 32x8 half slab (16 bytes each)
    tv = pycute.Layout((32, 8), (1, 32))
    tc = SimpleNamespace(tv_layout=tv, tiler=(32, 8), num_threads=32)
    plain = pycute.Layout((32, 64), (64, 1))
    rep = banks.ldmatrix_conflicts(plain, tc)
    assert (rep.wavefronts, rep.ideal_wavefronts) == (8 * 32, 8 * 4)
    swz = pycute.ComposedLayout(pycute.Swizzle(3, 3, 3), 0, plain)
    rep = banks.ldmatrix_conflicts(swz, tc)
    assert rep.conflicts == 0
    with pytest.raises(GemmlabError, match="ldmatrix"):
        banks.ldmatrix_conflicts(plain, tc, op="ld128")


def test_half_tile_copy_covers_every_instruction_without_conflict():
    """All 32 st128 instructions of a swizzled 128x64 half tile (its speed: benchmarks/layout_speed.py)."""
    plain = pycute.ComposedLayout(pycute.Swizzle(3, 3, 3), 0, pycute.Layout((128, 64), (64, 1)))
    rep = banks.copy_conflicts(plain, _row_copy(), 2, "st128")
    assert (len(rep.instructions), rep.wavefronts, rep.ideal_wavefronts, rep.conflicts) == (32, 128, 128, 0), rep


def test_with_gemmlab_layout_objects():
    from gemmlab import layout as L

    mma = L.make_tiled_mma("SM80_16x8x16_F32F16F16F32_TN", (2, 2, 1))
    plain = L.Layout((32, 64), (64, 1))
    rep = banks.ldmatrix_conflicts(plain, mma)
    assert len(rep.instructions) == 4 * 4  # 4 warps x 4 K-steps of 16
    assert rep.conflicts == 7 * rep.ideal_wavefronts  # 8 rows of 128 bytes share 4 banks
    assert banks.ldmatrix_conflicts(L.composition(L.Swizzle(3, 3, 3), plain), mma).conflicts == 0
    copy = L.make_tiled_copy(L.copy_atom("UniversalCopy", 128), L.Layout((16, 8), (8, 1)), L.Layout((1, 8)))
    swz = L.composition(L.Swizzle(3, 3, 3), L.Layout((128, 64), (64, 1)))
    rep = banks.copy_conflicts(swz, copy, 2, "st128")
    assert (len(rep.instructions), rep.conflicts) == (32, 0)
