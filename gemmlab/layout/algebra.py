"""CuTe's layout algebra: pycute's functions, plus what pycute lacks, with CuTe's semantics.

Most functions are pycute's own (NVIDIA's Python port of CuTe). Re-implemented here only
where pycute differs from CuTe C++ / the CuTe DSL: ``zipped_divide`` (CuTe splits a mode
whose tiler is ``_``), ``logical_product`` with an int tiler, ``blocked_product``,
``raked_product`` and ``upcast``/``downcast``. Every function also
accepts a swizzled :class:`ComposedLayout` where CuTe does, acting on its inner layout.
"""
from __future__ import annotations

from itertools import chain
from math import gcd
from typing import Any

import pycute
from pycute import (  # noqa: F401  (re-exported)
    Layout,
    coalesce,
    complement,
    cosize,
    crd2idx,
    flatten,
    idx2crd,
    inner_product,
    is_int,
    is_layout,
    is_tuple,
    left_inverse,
    prefix_product,
    product,
    right_inverse,
    shape_div,
    slice_and_offset,
)

from .errors import LayoutError
from .printing import cute_str
from .swizzle import ComposedLayout, Swizzle


def make_layout(*args: Any) -> Layout:
    """``make_layout(shape, stride=None)`` like CuTe (column-major by default), or
    ``make_layout(layout0, layout1, ...)`` to concatenate layouts as modes (also CuTe).

    DSL: ``cute.make_layout(shape, stride=...)``.
    """
    if args and all(is_layout(a) for a in args):
        return pycute.make_layout(*args)
    if len(args) == 1 and isinstance(args[0], (list, tuple)) and args[0] and all(is_layout(a) for a in args[0]):
        return pycute.make_layout(*args[0])
    if len(args) not in (1, 2):
        raise LayoutError("make_layout takes (shape) or (shape, stride), or several layouts.")
    shape = args[0]
    stride = args[1] if len(args) == 2 else None
    if stride is not None and not _congruent(shape, stride):
        raise LayoutError(f"make_layout: stride {stride} does not have the same nesting as shape {shape}.")
    return Layout(shape, compact_col_major(shape) if stride is None else stride)


def compact_col_major(shape: Any, current: int = 1) -> Any:
    """CuTe's ``compact_col_major(shape)``: column-major strides, 0 for size-1 modes (as CuTe)."""
    if is_tuple(shape):
        out = []
        for s in shape:
            out.append(compact_col_major(s, current))
            current *= pycute.product(s)
        return tuple(out)
    return 0 if shape == 1 else current


def _congruent(a: Any, b: Any) -> bool:
    if is_tuple(a):
        return is_tuple(b) and len(a) == len(b) and all(_congruent(x, y) for x, y in zip(a, b))
    return not is_tuple(b)


def size(x: Any) -> int:
    """``cute::size`` / ``cute.size``: number of coordinates in the domain (layout, shape, tensor)."""
    if hasattr(x, "size") and callable(x.size):
        return x.size()
    return pycute.product(x)


def rank(x: Any) -> int:
    """``cute::rank``: number of top-level modes."""
    shape = x.shape if hasattr(x, "shape") else x
    return len(shape) if is_tuple(shape) else 1


def shape(x: Any) -> Any:
    """``cute::shape``."""
    return x.shape if hasattr(x, "shape") else x


def filter(layout: Layout, profile: Any = None) -> Layout:  # noqa: A001 - CuTe's name
    """``cute::filter``: drop stride-0 and size-1 modes, then coalesce."""
    return pycute.filter(layout, profile)


def _as_layout(tiler: Any) -> Any:
    return Layout(tiler) if is_int(tiler) else tiler


def _composition(a: Layout, b: Any) -> Layout:
    try:
        return pycute.composition(a, b)
    except AssertionError:
        raise LayoutError(
            f"composition({cute_str(a)}, {cute_str(b)}) is not defined: the second layout's strides "
            "must divide (or be multiples of) the first layout's mode sizes, as in CuTe."
        ) from None


def composition(a: Any, b: Any) -> Any:
    """``cute::composition(A, B)`` / ``cute.composition``: the layout ``c -> A(B(c))``.

    ``B`` may be a layout, an int, ``None`` (CuTe's ``_``, leave the mode alone) or a tuple
    of those (by-mode). ``A`` may be a :class:`Swizzle`: ``composition(Swizzle(3,3,3),
    L)`` gives CuTe's ``Sw<3,3,3> o _0 o L``.
    """
    if isinstance(a, pycute.Swizzle):
        if not is_layout(b):
            b = make_layout(b)
        if isinstance(b, ComposedLayout):
            raise LayoutError("composition(Swizzle, swizzled layout) is not supported; compose with the inner layout.")
        sw = a if isinstance(a, Swizzle) else Swizzle(a.bits, a.base, a.shift)
        return ComposedLayout(sw, 0, b)
    if isinstance(a, ComposedLayout):
        return a.map_inner(lambda inner: composition(inner, b))
    if is_tuple(b):
        if len(b) > len(a):
            raise LayoutError(f"composition: tiler {b} has more modes than layout {cute_str(a)}.")
        return make_layout(*chain((composition(a[i], b[i]) for i in range(len(b))),
                                  (a[i] for i in range(len(b), len(a)))))
    if b is None:
        return a
    if isinstance(b, ComposedLayout):
        raise LayoutError("composition(layout, swizzled layout) is not supported here.")
    return _composition(a, _as_layout(b))


def logical_divide(layout: Any, tiler: Any) -> Any:
    """``cute::logical_divide`` / ``cute.logical_divide``: split each mode into (tile, rest).

    ``tiler``: a layout, an int, ``None`` (``_``) or a tuple of those, by mode.
    """
    if isinstance(layout, ComposedLayout):
        return layout.map_inner(lambda inner: logical_divide(inner, tiler))
    if tiler is None:
        return layout
    if is_tuple(tiler):
        if len(tiler) > len(layout):
            raise LayoutError(f"logical_divide: tiler {tiler} has more modes than layout {cute_str(layout)}.")
        return make_layout(*chain((logical_divide(layout[i], tiler[i]) for i in range(len(tiler))),
                                  (layout[i] for i in range(len(tiler), len(layout)))))
    tiler = _as_layout(tiler)
    return _composition(layout, make_layout(tiler, complement(tiler, size(layout))))


def _zip2_by(layout: Layout, guide: Any) -> Layout:
    """CuTe's ``tile_unzip``: gather ((A,a),(B,b),...) into ((A,B,...),(a,b,...,rest))."""
    if is_tuple(guide):
        splits = [_zip2_by(layout[i], guide[i]) for i in range(len(guide))]
        tile = make_layout(*[s[0] for s in splits])
        rest = make_layout(*chain((s[1] for s in splits), (layout[i] for i in range(len(guide), len(layout)))))
        return make_layout(tile, rest)
    if len(layout) != 2:
        raise LayoutError(f"zipped_divide: mode {cute_str(layout)} is not a (tile, rest) pair.")
    return layout


def zipped_divide(layout: Any, tiler: Any) -> Any:
    """``cute::zipped_divide`` / ``cute.zipped_divide``: ((tile modes), (rest modes))."""
    if isinstance(layout, ComposedLayout):
        return layout.map_inner(lambda inner: zipped_divide(inner, tiler))
    return _zip2_by(logical_divide(layout, tiler), tiler)


def tiled_divide(layout: Any, tiler: Any) -> Any:
    """``cute::tiled_divide`` / ``cute.tiled_divide``: ((tile modes), rest0, rest1, ...)."""
    z = zipped_divide(layout, tiler)
    r1 = rank(z[1])
    return z(None, tuple([None] * r1)) if r1 > 1 else z


def flat_divide(layout: Any, tiler: Any) -> Any:
    """``cute::flat_divide`` / ``cute.flat_divide``: (tile0, tile1, ..., rest0, rest1, ...)."""
    z = zipped_divide(layout, tiler)
    return z(full_slice(z[0].shape), full_slice(z[1].shape))


def logical_product(block: Any, tiler: Any) -> Any:
    """``cute::logical_product`` / ``cute.logical_product``: (block, tiler repeated over block's complement)."""
    if tiler is None:
        return block
    if is_tuple(tiler):
        return make_layout(*chain((logical_product(block[i], tiler[i]) for i in range(len(tiler))),
                                  (block[i] for i in range(len(tiler), len(block)))))
    tiler = _as_layout(tiler)
    return make_layout(block, _composition(complement(block, size(block) * cosize(tiler)), tiler))


def _append(layout: Layout, r: int) -> Layout:
    """CuTe's ``append<R>(layout)``: pad with 1:0 modes up to rank ``r``."""
    modes = [layout[i] for i in range(len(layout))] if is_tuple(layout.shape) else [layout]
    modes += [Layout(1, 0)] * (r - len(modes))
    return make_layout(*modes)


def _zip_pair(result: Layout, first: int) -> Layout:
    a, b = result[0], result[1]
    return make_layout(*[make_layout(a[i], b[i]) if first == 0 else make_layout(b[i], a[i])
                         for i in range(len(a))])


def blocked_product(block: Layout, tiler: Layout) -> Layout:
    """``cute::blocked_product`` / ``cute.blocked_product``: tile ``block`` across ``tiler``, blocks contiguous."""
    r = max(rank(block), rank(tiler))
    return _zip_pair(logical_product(_append(block, r), _append(tiler, r)), 0)


def raked_product(block: Layout, tiler: Layout) -> Layout:
    """``cute::raked_product`` / ``cute.raked_product``: like blocked_product but the blocks interleave."""
    r = max(rank(block), rank(tiler))
    return _zip_pair(logical_product(_append(block, r), _append(tiler, r)), 1)


def zipped_product(block: Layout, tiler: Any) -> Layout:
    """``cute::zipped_product``: ((block modes), (product modes))."""
    return _zip2_by(logical_product(block, tiler), tiler)


def tiled_product(block: Layout, tiler: Any) -> Layout:
    """``cute::tiled_product``: ((block modes), product0, product1, ...)."""
    z = zipped_product(block, tiler)
    r1 = rank(z[1])
    return z(None, tuple([None] * r1)) if r1 > 1 else z


def product_each(shape_: Any) -> Any:
    """``cute::product_each``: the size of each top-level mode."""
    return tuple(pycute.product(s) for s in shape_) if is_tuple(shape_) else shape_


def full_slice(shape_: Any) -> Any:
    """The coordinate that keeps every top-level mode (CuTe's ``repeat<rank>(_)``)."""
    return tuple([None] * len(shape_)) if is_tuple(shape_) else None


def with_shape(layout: Layout, *shape_: Any) -> Layout:
    """``layout.with_shape(shape)`` in CuTe: ``composition(layout, make_layout(shape))``."""
    s = shape_[0] if len(shape_) == 1 else tuple(shape_)
    return composition(layout, Layout(s))


def _map_leaves(shape_: Any, stride: Any, fn) -> tuple[Any, Any]:
    if is_tuple(shape_):
        pairs = [_map_leaves(s, d, fn) for s, d in zip(shape_, stride)]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    return fn(shape_, stride)


def upcast(layout: Layout, n: int) -> Layout:
    """``cute::upcast<N>``: view a layout of small elements as one of N-times-larger elements."""

    def leaf(s: int, d: int) -> tuple[int, int]:
        if d == 0:
            return s, d
        if d % n and n % abs(d):
            raise LayoutError(f"upcast<{n}>: stride {d} and {n} do not divide each other.")
        step = -(-n // abs(d))
        return -(-s // step), (1 if d > 0 else -1) * -(-abs(d) // n)

    return Layout(*_map_leaves(layout.shape, layout.stride, leaf))


def downcast(layout: Layout, n: int) -> Layout:
    """``cute::downcast<N>``: view a layout of large elements as one of N-times-smaller elements."""

    def leaf(s: int, d: int) -> tuple[int, int]:
        return (s * n, d) if abs(d) == 1 else (s, d * n)

    return Layout(*_map_leaves(layout.shape, layout.stride, leaf))


def recast_layout(layout: Layout, old_bits: int, new_bits: int) -> Layout:
    """``cute::recast_layout<Old, New>`` given element sizes in bits (e.g. bits -> fp16: 1, 16)."""
    g = gcd(old_bits, new_bits)
    num, den = new_bits // g, old_bits // g
    if num == 1 and den == 1:
        return layout
    if num == 1:
        return downcast(layout, den)
    if den == 1:
        return upcast(layout, num)
    return downcast(upcast(layout, num), den)
