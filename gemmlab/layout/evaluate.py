"""Layouts evaluated over their whole domain with numpy, and TV layouts inverted into tables.

pycute evaluates one coordinate per call; pictures, bank counts and tensors need every value
of a 128x128 tile at once. This is the one place that does it, for gemmlab's and pycute's
layouts alike (written against pycute's classes, so it imports no other layout module).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pycute

from .errors import LayoutError
from .printing import cute_str


def apply_swizzle(swizzle: pycute.Swizzle, offsets: Any) -> Any:
    """CuTe's ``Swizzle<B,M,S>::operator()`` on an int or a numpy array of offsets.

    XORs the ``B`` bits at ``M+S`` into the ``B`` bits at ``M`` (pycute's own version
    recurses forever on a shift of 0, which ``Swizzle<0,M,0>`` has).
    """
    yyy = offsets & swizzle.yyy_msk
    moved = yyy >> swizzle.shift if swizzle.shift >= 0 else yyy << -swizzle.shift
    return offsets ^ moved


def idx2crd_flat(idx: np.ndarray, shape: Any) -> np.ndarray:
    """CuTe's ``idx2crd(idx, shape)`` for many column-major indices at once.

    Returns an int64 array ``(*idx.shape, leaves)``: one coordinate per leaf of the flattened
    shape. The last leaf takes what is left, as CuTe's generalized coordinates do.
    """
    dims = pycute.flatten(shape)
    rest = np.asarray(idx, dtype=np.int64)
    out = np.empty(rest.shape + (len(dims),), dtype=np.int64)
    for i, s in enumerate(dims):
        if i == len(dims) - 1:
            out[..., i] = rest
        else:
            out[..., i], rest = rest % s, rest // s
    return out


def _evaluate(layout: Any, idx: np.ndarray) -> np.ndarray:
    """``layout(i)`` for every 1-D coordinate in ``idx``."""
    if isinstance(layout, pycute.ComposedLayout):
        offsets = int(layout.offset) + _evaluate(layout.layoutA, idx)
        outer = layout.layoutB
        if isinstance(outer, pycute.Swizzle):
            return apply_swizzle(outer, offsets)
        if pycute.is_layout(outer):
            return _evaluate(outer, offsets)
        return np.vectorize(outer, otypes=[np.int64])(offsets)
    if isinstance(layout, pycute.Layout):
        strides = np.array(pycute.flatten(layout.stride), dtype=np.int64)
        return (idx2crd_flat(idx, layout.shape) * strides).sum(axis=-1)
    raise LayoutError(f"cannot evaluate a {type(layout).__name__} as a layout; pass a gemmlab.layout "
                      "(or pycute) Layout or swizzled ComposedLayout.")


def mode_sizes(layout: Any) -> tuple[int, ...]:
    """The size of each top-level mode, always as a tuple (CuTe's ``product_each(shape(layout))``).

    For a swizzled layout, the sizes of its inner layout (which carries the shape).
    """
    inner = layout
    while isinstance(inner, pycute.ComposedLayout):
        inner = inner.layoutA
    if not isinstance(inner, pycute.Layout):
        raise LayoutError(f"{layout!r} is not a layout; pass a gemmlab.layout (or pycute) Layout.")
    shape = inner.shape
    return tuple(int(pycute.product(s)) for s in shape) if pycute.is_tuple(shape) else (int(shape),)


def layout_to_array(layout: Any) -> np.ndarray:
    """Evaluate a layout over its whole domain at once.

    Returns ``a`` with ``a[i0, i1, ...] == layout((i0, i1, ...))`` where ``ik`` is the 1-D
    (column-major) coordinate in top-level mode ``k``; shape = sizes of the top-level modes.
    CuTe equivalent: printing every ``layout(i)``; the DSL's ``cute.print_tensor`` of an
    identity-composed tensor.
    """
    dims = mode_sizes(layout)
    n = int(np.prod(dims, dtype=np.int64))
    return _evaluate(layout, np.arange(n, dtype=np.int64)).reshape(dims, order="F")


def tv_to_array(tv: Any) -> np.ndarray:
    """A (thread, value) layout as a 2-D array ``a[thread, value]`` (value modes flattened column-major)."""
    sizes = mode_sizes(tv)
    if len(sizes) < 2:
        raise LayoutError(f"a TV layout has two modes, (thread, value); {cute_str(tv)} has {len(sizes)}.")
    return layout_to_array(tv).reshape(sizes[0], -1, order="F")


def tv_to_tile_table(tv: Any, tile_shape: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Invert a (thread, value) -> tile-index layout into per-element tables.

    Returns ``(thread_of, value_of)``, numpy int arrays shaped ``(M, N)`` for a
    ``tile_shape`` of ``(M, N)`` (further entries multiply into ``N``): which thread holds
    element ``(m, n)`` of the tile and as which of its values (column-major tile index, as
    CuTe's TV layouts use). Elements no thread holds are -1; where several (thread, value)
    pairs hold one element (broadcasts), the lowest thread wins.
    This is the picture ``cute::print_latex(tv_layout)`` draws.
    """
    arr = tv_to_array(tv)
    n_val = arr.shape[1]
    m = int(tile_shape[0])
    n = int(np.prod(tile_shape[1:], dtype=np.int64))
    flat = arr.ravel(order="C")  # thread-major: the first occurrence is the lowest thread
    if flat.size and (flat.min() < 0 or flat.max() >= m * n):
        raise LayoutError(
            f"TV layout {cute_str(tv)} maps outside a {m}x{n} tile (indices {int(flat.min())}.."
            f"{int(flat.max())}); check tile_shape."
        )
    uniq, first = np.unique(flat, return_index=True)
    thread_of = np.full(m * n, -1, dtype=np.int64)
    value_of = np.full(m * n, -1, dtype=np.int64)
    thread_of[uniq] = first // n_val
    value_of[uniq] = first % n_val
    return thread_of.reshape((m, n), order="F"), value_of.reshape((m, n), order="F")


__all__ = ["apply_swizzle", "idx2crd_flat", "layout_to_array", "mode_sizes", "tv_to_array", "tv_to_tile_table"]
