"""The pool's errors: each carries the HTTP status a student gets and a message they can act on."""
from __future__ import annotations


class PoolError(Exception):
    """Base class: ``status`` is the HTTP status the service answers with, the message its body."""

    status = 400


class AuthError(PoolError):
    """No token, a malformed, unknown or expired one, or one of a student no longer on the roster."""

    status = 401


class LimitExceeded(PoolError):
    """A per-student limit is reached; ``retry_after_s`` says when a request may fit again."""

    status = 429

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = max(0.0, float(retry_after_s))


class RequestTooLarge(PoolError):
    """The request body is larger than the judge accepts."""

    status = 413


class Unavailable(PoolError):
    """Something the pool depends on (the JupyterHub that vouches for students) did not answer."""

    status = 503


class RosterError(PoolError):
    """The roster or the token store cannot be read (the instructor's side, at start-up or reload)."""


__all__ = ["AuthError", "LimitExceeded", "PoolError", "RequestTooLarge", "RosterError", "Unavailable"]
