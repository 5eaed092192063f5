"""What can go wrong between a notebook and the class's GPU pool, each with what to do about it."""
from __future__ import annotations

from ..errors import GemmlabError, KernelError


class PoolError(GemmlabError):
    """Base class: the pool could not judge a call; the message says why and what to do."""


class PoolAuthError(PoolError):
    """The pool refused the token (unknown, expired or malformed): ask the instructor for a current one."""


class PoolBusyError(PoolError):
    """A per-student limit was reached (jobs at once, GPU-seconds per hour); ``retry_after_s`` says when to retry."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class PoolRequestError(PoolError):
    """The pool refused the request itself (malformed, too large, outside what the judge runs)."""


class PoolUnavailableError(PoolError):
    """The pool could not be reached, did not answer in time, failed, or answered something unreadable."""


class UnsendableCallError(PoolError):
    """A GEMM function's launches cannot be sent as data (it launches nothing, or more than the pool runs)."""


class PoolKernelError(KernelError):
    """The kernel failed on the pool's GPU (an illegal address, a crash); this notebook's own state is unharmed."""


__all__ = ["PoolAuthError", "PoolBusyError", "PoolError", "PoolKernelError", "PoolRequestError",
           "PoolUnavailableError", "UnsendableCallError"]
