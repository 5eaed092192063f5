"""The kernel judge's own error: a request it cannot judge, and why."""
from __future__ import annotations

from ..errors import GemmlabError


class JudgeError(GemmlabError):
    """A judge request (its kernel spec, launch expressions, parameter names or sizes) was refused.

    The message names what was refused and what the judge understands instead.
    """


__all__ = ["JudgeError"]
