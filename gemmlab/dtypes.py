"""A torch dtype's short name (``torch.float16`` -> ``"float16"``), the name the course writes everywhere.

Results, recordings, judge requests and messages carry dtypes by this name: it is plain JSON, and it reads the
way students write it. A leaf module that never imports torch, so the torch-free parts of gemmlab (result
records, the judge's wire format, the grader) can name a dtype too.
"""
from __future__ import annotations

from typing import Any


def dtype_name(dtype: Any) -> str:
    """``torch.float16`` (or the string ``"torch.float16"`` or ``"float16"``) -> ``"float16"``."""
    return str(dtype).removeprefix("torch.")


__all__ = ["dtype_name"]
