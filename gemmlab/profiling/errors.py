"""What can stop a profile or a timeline, each with what to do about it."""
from __future__ import annotations

from ..errors import GemmlabError


class ProfilerError(GemmlabError):
    """Nsight Compute could not profile the kernel here (not installed, refused, no permission, failed)."""


class TimelineError(GemmlabError):
    """The kernel's timeline could not be recorded or read (no marks, a malformed buffer, too many records)."""


__all__ = ["ProfilerError", "TimelineError"]
