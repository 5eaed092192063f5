"""Tiling and partitioning of tensors: ``local_tile``, ``local_partition`` and friends.

Exactly CuTe's definitions (cute/tensor_impl.hpp): divide the tensor by a tiler with
``zipped_divide`` -> ((tile), (rest)), then slice one side with a coordinate.
"""
from __future__ import annotations

from typing import Any

import pycute

from . import algebra as A
from .errors import LayoutError
from .printing import cute_str
from .tensor import Tensor, map_tensor


def _append_none(coord: Any, r: int) -> tuple:
    c = tuple(coord)
    return c + (None,) * (r - len(c))


def _slice(t: Tensor, crd: Any) -> Tensor:
    """Slice keeping the ``None`` modes; a coordinate without any gives a one-element tensor."""
    if pycute.has_none(crd):
        return t(crd)
    return Tensor(t.engine, A.Layout(1, 0), t.offset + t.layout(crd))


def _mode_coord(mode: Any, coord: Any) -> Any:
    """``coord`` as a slice of one mode of a zipped divide: padded with None to the mode's rank."""
    if not A.is_tuple(coord):
        return coord
    padded = _append_none(coord, A.rank(mode))
    return padded if A.is_tuple(mode.shape) else padded[0]


def inner_partition(x: Any, tiler: Any, coord: Any) -> Any:
    """``cute::inner_partition``: keep the tile, slice the rest mode with ``coord``."""

    def partition(t: Tensor) -> Tensor:
        tiled = t.with_layout(A.zipped_divide(t.layout, tiler))
        return _slice(tiled, (A.full_slice(tiled.layout[0].shape), _mode_coord(tiled.layout[1], coord)))

    return map_tensor(x, partition)


def outer_partition(x: Any, tiler: Any, coord: Any) -> Any:
    """``cute::outer_partition``: slice the tile mode with ``coord``, keep the rest."""

    def partition(t: Tensor) -> Tensor:
        tiled = t.with_layout(A.zipped_divide(t.layout, tiler))
        return _slice(tiled, (_mode_coord(tiled.layout[0], coord), A.full_slice(tiled.layout[1].shape)))

    return map_tensor(x, partition)


def dice(proj: Any, x: Any) -> Any:
    """CuTe's ``dice(proj, x)``: keep the modes where ``proj`` is not ``X`` (``None`` here).

    The DSL writes projections as ``proj=(1, None, 1)``; C++ as ``Step<_1, X, _1>{}``.
    """
    if not A.is_tuple(proj):
        return None if proj is None else x
    keep = [i for i, p in enumerate(proj) if p is not None]
    if A.is_layout(x):
        return A.make_layout(*[x[i] for i in keep])
    return tuple(x[i] for i in keep)


def local_tile(x: Any, tiler: Any, coord: Any, proj: Any = None) -> Any:
    """CuTe's ``local_tile(tensor, tiler, coord[, proj])`` / DSL ``cute.local_tile``.

    Cuts ``tensor`` into tiles of shape ``tiler`` and returns tile ``coord``; ``None``
    entries of ``coord`` keep that tile mode, e.g. ``local_tile(mA, (BM, BK), (m, None))``
    is (BM, BK, k_tiles). ``proj`` (e.g. ``(1, None, 1)``) first drops modes of a 3-D
    CTA tiler and coord, as in ``local_tile(mA, cta_tiler, cta_coord, Step<_1,X,_1>{})``.
    """
    if proj is not None:
        tiler, coord = dice(proj, tiler), dice(proj, coord)
    try:
        return inner_partition(x, tiler, coord)
    except LayoutError:
        raise
    except (AssertionError, TypeError, IndexError) as exc:
        raise LayoutError(f"local_tile: tiler {tiler} and coord {coord} do not fit the tensor ({exc}).") from None


def local_partition(x: Any, thr_layout: Any, thr_idx: int, proj: Any = None) -> Any:
    """CuTe's ``local_partition(tensor, thr_layout, thr_idx[, proj])`` / DSL ``cute.local_partition``.

    Spreads the threads of ``thr_layout`` (coord -> thread index) over the tensor like a
    stencil, and returns every element that thread ``thr_idx`` owns: the tile of shape
    ``shape(thr_layout)`` is sliced at the thread's coordinate.
    """
    if not A.is_layout(thr_layout):
        thr_layout = A.make_layout(thr_layout)
    if not 0 <= thr_idx < A.size(thr_layout):
        raise LayoutError(f"local_partition: thread {thr_idx} is outside the {A.size(thr_layout)} threads of {cute_str(thr_layout)}.")
    if proj is not None:
        # CuTe dices the thread layout but still maps the full thread index through it.
        thr_layout = dice(proj, thr_layout)
    coord = get_flat_coord(thr_layout, thr_idx)
    try:
        return outer_partition(x, A.product_each(thr_layout.shape), coord)
    except LayoutError:
        raise
    except (AssertionError, TypeError, IndexError) as exc:
        raise LayoutError(f"local_partition: thread layout {cute_str(thr_layout)} does not fit the tensor ({exc}).") from None


def get_hier_coord(layout: A.Layout, idx: int) -> Any:
    """CuTe's ``layout.get_hier_coord(idx)``: the coordinate whose image under ``layout`` is ``idx``."""
    flat_shape, flat_stride = A.flatten(layout.shape), A.flatten(layout.stride)
    # CuTe's idx2crd(idx, shape, stride): each leaf is (idx / stride) % shape.
    crd = [0 if (s == 1 or d == 0) else (idx // d) % s for s, d in zip(flat_shape, flat_stride)]
    return _unflatten(crd, layout.shape)


def _unflatten(flat: list[int], shape: Any) -> Any:
    it = iter(flat)

    def build(s: Any) -> Any:
        return tuple(build(e) for e in s) if A.is_tuple(s) else next(it)

    return build(shape)


def get_flat_coord(layout: A.Layout, idx: int) -> Any:
    """CuTe's ``layout.get_flat_coord(idx)``: one 1-D coordinate per top-level mode."""
    hier = get_hier_coord(layout, idx)
    if not A.is_tuple(layout.shape):
        return hier
    return tuple(A.crd2idx(h, s) if A.is_tuple(s) else h for h, s in zip(hier, layout.shape))
