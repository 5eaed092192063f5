"""A small CuTe ``Tensor``: a layout plus an engine (numpy data or an identity/coordinate map).

CuTe's partitioning functions only transform layouts; the data pointer rides along. Here
the engine is either a flat numpy array (``data[offset + layout(coord)]``) or, for
``make_identity_tensor(shape)``, the map from a linear offset back to the coordinate it
came from, so partitioning an identity tensor shows which coordinates a thread owns.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pycute

from .algebra import Layout, idx2crd, is_layout, make_layout, size
from .errors import LayoutError
from .evaluate import idx2crd_flat, layout_to_array
from .printing import cute_str
from .swizzle import ComposedLayout


class IdentityEngine:
    """CuTe's counting iterator of an identity tensor: offset -> natural coordinate of ``shape``."""

    def __init__(self, shape: Any) -> None:
        self.shape = shape

    def __getitem__(self, offset: int) -> Any:
        return idx2crd(int(offset), self.shape)

    def coords(self, offsets: np.ndarray) -> np.ndarray:
        """Vectorised: array of offsets -> array (..., rank) of flat coordinates."""
        return idx2crd_flat(offsets, self.shape)

    def __repr__(self) -> str:
        return f"ArithTuple(0) (identity of {cute_str(self.shape)})"


class Tensor:
    """CuTe's ``Tensor`` (DSL: ``cute.Tensor``): ``engine[offset + layout(coord)]``.

    ``t(coord)`` / ``t[coord]`` read an element; a coordinate with ``None`` in some
    positions (CuTe's ``_``) returns the sub-tensor over those modes, as in CuTe.
    """

    def __init__(self, engine: Any, layout: Any, offset: int = 0) -> None:
        self.engine = engine
        self.layout = layout
        self.offset = int(offset)

    @property
    def shape(self) -> Any:
        return self.layout.shape

    def size(self) -> int:
        return size(self.layout)

    def __len__(self) -> int:
        return len(self.layout)

    @property
    def is_identity(self) -> bool:
        return isinstance(self.engine, IdentityEngine)

    def __call__(self, *coord: Any) -> Any:
        crd = coord[0] if len(coord) == 1 else tuple(coord)
        if pycute.has_none(crd):
            return self._slice(crd)
        try:
            off = self.layout(crd)
        except (AssertionError, TypeError, IndexError):
            raise LayoutError(
                f"coordinate {cute_str(crd)} does not fit this tensor's shape {cute_str(self.shape)}."
            ) from None
        return self.engine[self.offset + off]

    __getitem__ = __call__

    def _slice(self, crd: Any) -> "Tensor":
        try:
            if isinstance(self.layout, ComposedLayout):
                return Tensor(self.engine, self.layout(crd), self.offset)
            sliced, off = pycute.slice_and_offset(crd, self.layout)
        except (AssertionError, TypeError):
            raise LayoutError(
                f"slice {cute_str(crd)} does not fit this tensor's shape {cute_str(self.shape)}."
            ) from None
        return Tensor(self.engine, sliced, self.offset + off)

    def with_layout(self, layout: Any) -> "Tensor":
        """Same engine and offset, another layout (what CuTe's partitioners do)."""
        return Tensor(self.engine, layout, self.offset)

    def offsets(self) -> np.ndarray:
        """Engine offsets of every element, shaped by the top-level modes (numpy)."""
        return self.offset + layout_to_array(self.layout)

    def values(self) -> np.ndarray:
        """Every element as a numpy array shaped by the top-level modes.

        For an identity tensor the last axis holds the (flattened) coordinate.
        """
        offs = self.offsets()
        if self.is_identity:
            return self.engine.coords(offs)
        return np.asarray(self.engine)[offs]

    def __repr__(self) -> str:
        eng = repr(self.engine) if self.is_identity else f"numpy[{np.asarray(self.engine).dtype}]"
        return f"{eng} o {cute_str(self.layout)}"


def make_tensor(data: Any, layout: Any) -> Tensor:
    """CuTe's ``make_tensor(ptr, layout)`` / DSL ``cute.make_tensor(iterator, layout)``.

    ``data``: a numpy array (read flat, like memory behind a pointer) or ``None`` for a new
    zero-filled array big enough for the layout (CuTe's ``make_tensor<T>(layout)``).
    ``layout`` may also be a shape (column-major is used).
    """
    if not is_layout(layout):
        layout = make_layout(layout)
    if data is None:
        data = np.zeros(max(int(layout_to_array(layout).max()) + 1, 1) if size(layout) else 1)
    arr = np.asarray(data).reshape(-1)
    return Tensor(arr, layout)


def make_identity_tensor(shape: Any) -> Tensor:
    """CuTe's ``make_identity_tensor(shape)`` / DSL ``cute.make_identity_tensor``: element = its coordinate."""
    return Tensor(IdentityEngine(shape), Layout(shape))


def map_tensor(x: Any, fn: Callable[[Tensor], Tensor]) -> Any:
    """Apply a tensor transformation to a tensor or a bare layout, returning the same kind.

    CuTe's partitioners take both; a layout goes through ``fn`` as a tensor without data and
    comes back as the resulting tensor's layout.
    """
    if isinstance(x, Tensor):
        return fn(x)
    if is_layout(x):
        return fn(Tensor(None, x)).layout
    raise LayoutError(f"expected a gemmlab.layout Tensor or Layout, got {type(x).__name__}.")

