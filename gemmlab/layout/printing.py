"""CuTe's way of printing layouts, swizzles and shapes: ``(4,8):(8,1)``, ``Sw<3,3,3> o _0 o ...``.

Written against pycute's classes only, so the swizzle and algebra modules can both print
without importing each other.
"""
from __future__ import annotations

from typing import Any

import pycute


def cute_str(x: Any) -> str:
    """Print like CuTe: ``((4,8),(2,2)):((32,1),(16,8))``, ``Sw<3,3,3> o _0 o (8,64):(64,1)``."""
    if isinstance(x, pycute.Swizzle):
        return f"Sw<{x.bits},{x.base},{x.shift}>"
    if isinstance(x, pycute.ComposedLayout):
        offset = "_0" if x.offset == 0 else str(x.offset)
        return f"{cute_str(x.layoutB)} o {offset} o {cute_str(x.layoutA)}"
    if isinstance(x, pycute.Layout):
        return f"{_tuple_str(x.shape)}:{_tuple_str(x.stride)}"
    return _tuple_str(x)


def _tuple_str(t: Any) -> str:
    if pycute.is_tuple(t):
        return "(" + ",".join(_tuple_str(e) for e in t) + ")"
    return "_" if t is None else str(t)


__all__ = ["cute_str"]
