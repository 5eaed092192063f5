"""A readout or a timeline in a notebook: its picture, then its text (the numbers a screen reader and a test read)."""
from __future__ import annotations

import html
from typing import Any


def figure_and_text(fig: Any, alt: str, text: str) -> str:
    """``fig`` as an inline image (then closed) above ``text`` in a ``<pre>``; only the text when ``fig`` is None."""
    if fig is None:
        return f"<pre>{html.escape(text)}</pre>"
    import matplotlib.pyplot as plt

    from gemmlab.seeing.figures import figure_img_tag

    try:
        img = figure_img_tag(fig, alt)
    finally:
        plt.close(fig)
    return f"{img}<pre>{html.escape(text)}</pre>"


__all__ = ["figure_and_text"]
