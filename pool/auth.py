"""Who is asking: the ``Authorization: Bearer <token>`` header checked against the roster and the token store.

Why reload: the instructor issues, replaces or revokes tokens (``python -m pool tokens``) and
edits the roster while the service runs; both files are read again when their modification time
changes, so neither needs a restart. A student dropped from the roster loses access at once.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable, Generic, TypeVar

from .errors import AuthError
from .roster import read_roster
from .tokens import Grant, TokenStore

T = TypeVar("T")


class _Reloading(Generic[T]):
    """The value read from ``path``, read again when the file's mtime or size changes."""

    def __init__(self, path: Path, read: Callable[[Path], T]) -> None:
        self.path, self._read = path, read
        self._stamp: tuple[int, int] | None = None
        self._value = read(path)
        self._stamp = self._current_stamp()
        self._lock = threading.Lock()

    def _current_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def get(self) -> T:
        with self._lock:
            stamp = self._current_stamp()
            if stamp != self._stamp:
                self._value, self._stamp = self._read(self.path), stamp
            return self._value


class Authenticator:
    """Turns a request's Authorization header into a :class:`Grant`, or an AuthError a student can act on."""

    def __init__(self, roster: str | Path, store: str | Path) -> None:
        self._roster = _Reloading(Path(roster), lambda p: frozenset(read_roster(p)))
        self._store = _Reloading(Path(store), TokenStore.load)

    def students(self) -> frozenset[str]:
        return self._roster.get()

    def authenticate(self, header: str | None, now: float | None = None) -> Grant:
        if not header:
            raise AuthError("no token: send the header 'Authorization: Bearer <token>' with the token your "
                            "instructor gave you (the course README says where to set it).")
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError("the Authorization header must be 'Bearer <token>'.")
        grant = self._store.get().verify(token.strip(), now)
        if grant.student not in self._roster.get():
            raise AuthError(f"student {grant.student!r} is no longer on the class roster: ask your instructor.")
        return grant


__all__ = ["Authenticator"]
