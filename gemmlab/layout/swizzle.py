"""Swizzles and swizzled ("composed") layouts, printed and evaluated the way CuTe does.

CuTe writes a swizzled shared-memory layout as ``Sw<B,M,S> o offset o inner``: the inner
layout gives a linear offset, the swizzle XORs some of its bits to spread rows over banks.
pycute has a ``Swizzle`` functor and a ``ComposedLayout`` but prints them differently and
cannot be sliced or divided; these versions can, so partitioning functions accept them.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable

import pycute

from .errors import LayoutError
from .evaluate import apply_swizzle
from .printing import cute_str


class Swizzle(pycute.Swizzle):
    """CuTe's ``Swizzle<B,M,S>`` (DSL: ``cute.make_swizzle(B, M, S)``).

    Keeps the low ``M`` bits of an offset, and XORs the ``B`` bits starting at bit ``M+S``
    into the ``B`` bits starting at bit ``M``. Works on ints and on numpy integer arrays.
    """

    def __init__(self, bits: int, base: int, shift: int) -> None:
        for name, v in (("B", bits), ("M", base), ("S", shift)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise LayoutError(
                    f"Swizzle({bits!r}, {base!r}, {shift!r}): {name} must be an int, got {type(v).__name__} {v!r}. "
                    "Bit counts are integers; math.log2 returns a float, so write int(math.log2(x)) "
                    "or x.bit_length() - 1."
                )
        bits, base, shift = int(bits), int(base), int(shift)
        if bits < 0 or base < 0 or abs(shift) < bits:
            raise LayoutError(
                f"Swizzle<{bits},{base},{shift}> is invalid: CuTe needs B >= 0, M >= 0 and |S| >= B "
                "(the XOR source bits must not overlap the target bits)."
            )
        super().__init__(bits, base, shift)

    def __call__(self, offset: Any) -> Any:
        return apply_swizzle(self, offset)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, pycute.Swizzle) and (self.bits, self.base, self.shift)
                == (other.bits, other.base, other.shift))

    def __hash__(self) -> int:
        return hash((self.bits, self.base, self.shift))

    def __str__(self) -> str:
        return cute_str(self)

    def __repr__(self) -> str:
        return f"Swizzle({self.bits},{self.base},{self.shift})"


class ComposedLayout(pycute.ComposedLayout):
    """CuTe's ``ComposedLayout<Outer, Offset, Inner>``: ``coord -> outer(offset + inner(coord))``.

    The inner layout carries the shape (so ``size``, slicing and dividing act on it); the
    outer function (a :class:`Swizzle` or a layout) is applied last.
    """

    def __init__(self, outer: Any, offset: int, inner: pycute.Layout) -> None:
        self.outer = outer
        self.offset = int(offset)
        self.inner = inner

    # pycute's names (its ComposedLayout is ``layoutB o offset o layoutA``), so code written
    # for pycute's ComposedLayout works on these too.
    @property
    def layoutA(self) -> pycute.Layout:  # noqa: N802 - pycute's name
        return self.inner

    @property
    def layoutB(self) -> Any:  # noqa: N802 - pycute's name
        return self.outer

    # CuTe's accessor names, so code reads like C++ (layout_a() o offset() o layout_b()).
    @property
    def layout_a(self) -> Any:
        return self.outer

    @property
    def layout_b(self) -> pycute.Layout:
        return self.inner

    @property
    def shape(self) -> Any:
        return self.inner.shape

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ComposedLayout) and self.outer == other.outer
                and self.offset == other.offset and self.inner == other.inner)

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, i: int) -> "ComposedLayout":
        return ComposedLayout(self.outer, self.offset, self.inner[i])

    def __call__(self, *args: Any) -> Any:
        if pycute.has_none(args):
            crd = args[0] if len(args) == 1 else args
            sliced, off = pycute.slice_and_offset(crd, self.inner)
            return ComposedLayout(self.outer, self.offset + off, sliced)
        return self.outer(self.offset + self.inner(*args))

    def map_inner(self, fn: Callable[[pycute.Layout], pycute.Layout]) -> "ComposedLayout":
        """Apply a layout transformation (divide, compose, slice) to the inner layout only."""
        return ComposedLayout(self.outer, self.offset, fn(self.inner))

    def size(self) -> int:
        return pycute.size(self.inner)

    def cosize(self) -> int:
        # The swizzle permutes offsets inside aligned blocks, so the span is the inner one
        # rounded up to the swizzle's block (what CuTe's cosize reports for Sw o L).
        inner = self.offset + pycute.cosize(self.inner)
        if isinstance(self.outer, pycute.Swizzle):
            return max(inner, int(self.outer(inner - 1)) + 1) if inner else 0
        return int(self.outer(inner - 1)) + 1

    def __str__(self) -> str:
        return cute_str(self)

    def __repr__(self) -> str:
        return f"ComposedLayout({self.outer!r},{self.offset},{self.inner!r})"


def make_swizzle(bits: int, base: int, shift: int) -> Swizzle:
    """``cute.make_swizzle(B, M, S)`` in the DSL, ``Swizzle<B,M,S>{}`` in C++."""
    return Swizzle(bits, base, shift)


def make_composed_layout(outer: Any, offset: int, inner: pycute.Layout) -> ComposedLayout:
    """CuTe's ``make_composed_layout(outer, offset, inner)`` (same name in the DSL)."""
    return ComposedLayout(outer, offset, inner)
