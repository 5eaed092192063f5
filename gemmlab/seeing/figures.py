"""Figures as data: one place that turns a matplotlib figure into PNG bytes, base64 or an ``<img>``.

Results (checks, speed bars, grading feedback) embed pictures in HTML; they all go through here
so the encoding (format, resolution, tight bounding box) is decided once.
"""
from __future__ import annotations

import base64
import html
import io
from typing import Any

DPI = 90


def figure_png(fig: Any, dpi: int = DPI) -> bytes:
    """The PNG bytes of a matplotlib figure, cropped to what is drawn."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", dpi=dpi)
    return buf.getvalue()


def png_base64(png: bytes) -> str:
    """PNG bytes as the base64 text a ``data:`` URL holds."""
    return base64.b64encode(png).decode("ascii")


def png_img_tag(png: bytes, alt: str) -> str:
    """An ``<img>`` element showing PNG bytes inline; ``alt`` is escaped."""
    return f"<img alt='{html.escape(alt, quote=True)}' src='data:image/png;base64,{png_base64(png)}'/>"


def figure_img_tag(fig: Any, alt: str, dpi: int = DPI) -> str:
    """An ``<img>`` element showing a matplotlib figure inline."""
    return png_img_tag(figure_png(fig, dpi), alt)


__all__ = ["DPI", "figure_img_tag", "figure_png", "png_base64", "png_img_tag"]
