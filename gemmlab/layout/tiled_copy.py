"""TiledCopy: a copy atom repeated over threads and values, as in cute/atom/copy_atom.hpp.

``make_tiled_copy(atom, thr_layout, val_layout)`` builds the (thread, value) -> tile
layout with ``raked_product`` and ``right_inverse`` exactly like CuTe; partition_S/D use
CuTe's ``tile2thrfrg`` so per-thread slices match the C++ and the DSL.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import algebra as A
from .algebra import Layout, make_layout, size
from .atoms import CopyAtom, copy_atom
from .errors import LayoutError
from .printing import cute_str
from .tensor import Tensor, map_tensor
from .tiled_mma import TiledMMA


def _zip(layout: Layout) -> Layout:
    """CuTe's ``zip`` of a rank-2 layout of rank-2 modes: ((a,b),(c,d)) -> ((a,c),(b,d))."""
    a, b = layout[0], layout[1]
    return make_layout(make_layout(a[0], b[0]), make_layout(a[1], b[1]))


class TiledCopy:
    """CuTe's ``TiledCopy``; DSL ``cute.make_tiled_copy_tv`` / ``cute.make_tiled_copy``.

    ``layout_tv_tiled``: CuTe's ``TiledLayout_TV``, (thread, value) -> index in the tile.
    ``tv_layout``: CuTe's ``get_layoutS_TV()`` (the source view; ``get_layoutD_TV()`` for
    the destination) -- same as ``layout_tv_tiled`` up to how values are grouped.
    ``tiler``: the tile shape one step of the copy covers (CuTe's ``Tiler_MN``).
    """

    def __init__(self, atom: CopyAtom, layout_tv: Layout, tiler: tuple) -> None:
        self.atom = atom
        self.layout_tv_tiled = layout_tv
        self.tiler = tuple(tiler)
        if size(layout_tv[0]) % atom.num_threads:
            raise LayoutError(f"TiledCopy uses {size(layout_tv[0])} threads, not a multiple of the atom's {atom.num_threads}.")
        if size(layout_tv[1]) % atom.num_values:
            raise LayoutError(
                f"TiledCopy gives each thread {size(layout_tv[1])} values, not a multiple of the "
                f"{atom.num_values} values one {atom.name} moves; use a larger val_layout."
            )

    @property
    def num_threads(self) -> int:
        return size(self.layout_tv_tiled[0])

    @property
    def num_values(self) -> int:
        return size(self.layout_tv_tiled[1])

    def _ref2(self, trg: Layout) -> Layout:
        return A.composition(A.right_inverse(self.atom.tv_ref), trg)

    def tile2thrfrg(self, layout: Layout, ref2trg: Layout) -> Layout:
        """CuTe's ``tile2thrfrg``: ((tile),(rest...)) -> (thr, val, (rest...))."""
        atom_tv = A.zipped_divide(self.layout_tv_tiled, (self.atom.num_threads, self.atom.num_values))
        trg_tv = A.composition(atom_tv, (ref2trg, None))
        thrval2mn = A.coalesce(_zip(trg_tv), (1, (1, 1)))
        tv = A.composition(layout, (thrval2mn, None))
        return tv((None, None), None)

    def _tidfrg(self, layout: Any, trg: Layout) -> Any:
        if A.rank(layout) < len(self.tiler):
            raise LayoutError(f"tensor of shape {cute_str(layout.shape)} has fewer modes than the copy tile {self.tiler}.")
        return self.tile2thrfrg(A.zipped_divide(layout, self.tiler), self._ref2(trg))

    def tidfrg_S(self, layout: Any) -> Any:
        return self._tidfrg(layout, self.atom.tv_src)

    def tidfrg_D(self, layout: Any) -> Any:
        return self._tidfrg(layout, self.atom.tv_dst)

    def _layout_TV(self, trg: Layout) -> Layout:
        ref = make_layout(Layout(self.tiler), Layout(1))
        return self.tile2thrfrg(ref, self._ref2(trg))(None, None, 0)

    def get_layoutS_TV(self) -> Layout:
        return self._layout_TV(self.atom.tv_src)

    def get_layoutD_TV(self) -> Layout:
        return self._layout_TV(self.atom.tv_dst)

    @property
    def tv_layout(self) -> Layout:
        """(thread, value) -> column-major index in the ``tiler`` tile, source side (``get_layoutS_TV``)."""
        return self.get_layoutS_TV()

    def get_slice(self, thr_idx: int) -> "ThrCopy":
        """``tiled_copy.get_slice(threadIdx.x)`` / DSL ``tiled_copy.get_slice(tidx)``."""
        if not 0 <= thr_idx < self.num_threads:
            raise LayoutError(f"thread {thr_idx} is outside this TiledCopy's {self.num_threads} threads.")
        return ThrCopy(self, thr_idx)

    get_thread_slice = get_slice

    def __str__(self) -> str:
        return (f"TiledCopy {self.atom.name}\n  Tiler_MN: {cute_str(self.tiler)}\n"
                f"  TiledLayout_TV: {cute_str(self.layout_tv_tiled)}")


@dataclass
class ThrCopy:
    """CuTe's ``ThrCopy``: one thread's view of a TiledCopy."""

    tiled_copy: TiledCopy
    thr_idx: int

    def _partition(self, x: Any, fn) -> Any:
        def partition(t: Tensor) -> Tensor:
            r = A.rank(t.layout)
            return t.with_layout(fn(t.layout))(self.thr_idx, None, tuple([None] * r) if r > 1 else None)

        return map_tensor(x, partition)

    def partition_S(self, x: Any) -> Any:
        """``thr_copy.partition_S(gA)``: this thread's (CPY_V, CPY_M, CPY_K, ...) source slice."""
        return self._partition(x, self.tiled_copy.tidfrg_S)

    def partition_D(self, x: Any) -> Any:
        """``thr_copy.partition_D(sA)``: this thread's (CPY_V, CPY_M, CPY_K, ...) destination slice."""
        return self._partition(x, self.tiled_copy.tidfrg_D)


def _atom(a: CopyAtom | str, element_bits: int | None = None) -> CopyAtom:
    if isinstance(a, str):
        return copy_atom(a, element_bits=element_bits or 16)
    return a


def make_tiled_copy(atom: CopyAtom | str, thr_layout: Any = 1, val_layout: Any = 1) -> TiledCopy:
    """CuTe's ``make_tiled_copy(copy_atom, thr_layout, val_layout)``; DSL
    ``cute.make_tiled_copy_tv(atom, thr_layout, val_layout)``.

    ``thr_layout``: (m, n) -> thread index, e.g. ``Layout((32, 4), (4, 1))``;
    ``val_layout``: (m, n) -> value index, e.g. ``Layout((1, 8))``. A bare shape means
    column-major. Each thread copies a ``val_layout`` block; the blocks are raked over the
    tile of shape ``thr_shape * val_shape``.
    """
    atom = _atom(atom)
    thr = thr_layout if A.is_layout(thr_layout) else make_layout(thr_layout)
    val = val_layout if A.is_layout(val_layout) else make_layout(val_layout)
    layout_mn = A.raked_product(thr, val)
    layout_tv = A.with_shape(A.right_inverse(layout_mn), (size(thr), size(val)))
    tiler = A.product_each(layout_mn.shape)
    if not A.is_tuple(tiler):
        tiler = (tiler,)
    return TiledCopy(atom, layout_tv, tiler)


def make_tiled_copy_tv(atom: CopyAtom | str, layout_tv: Layout, tiler: tuple) -> TiledCopy:
    """CuTe's ``make_tiled_copy_impl(atom, layout_tv, tiler)``: give the TV layout directly."""
    return TiledCopy(_atom(atom), layout_tv, tiler)


def make_tiled_copy_A(atom: CopyAtom | str, mma: TiledMMA) -> TiledCopy:
    """CuTe's ``make_tiled_copy_A(copy_atom, tiled_mma)`` (DSL ``cute.make_tiled_copy_A``):
    a copy whose threads hold exactly the A values the MMA wants (ldmatrix -> mma)."""
    m, _, k = mma.tile_mnk
    return TiledCopy(_atom(atom), mma.tv_a, (m, k))


def make_tiled_copy_B(atom: CopyAtom | str, mma: TiledMMA) -> TiledCopy:
    """CuTe's ``make_tiled_copy_B(copy_atom, tiled_mma)`` (DSL ``cute.make_tiled_copy_B``)."""
    _, n, k = mma.tile_mnk
    return TiledCopy(_atom(atom), mma.tv_b, (n, k))


def make_tiled_copy_C(atom: CopyAtom | str, mma: TiledMMA) -> TiledCopy:
    """CuTe's ``make_tiled_copy_C(copy_atom, tiled_mma)`` (DSL ``cute.make_tiled_copy_C``)."""
    m, n, _ = mma.tile_mnk
    return TiledCopy(_atom(atom), mma.tv_c, (m, n))
