"""The one error the layout package raises, in a module of its own so every layout module can use it."""
from __future__ import annotations

from ..errors import GemmlabError


class LayoutError(GemmlabError):
    """A layout operation was asked for something CuTe would reject (the message says what)."""


__all__ = ["LayoutError"]
