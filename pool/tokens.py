"""Student tokens: issued from the roster, kept on the server only as a hash and an expiry.

Why this shape: a token is ``gp1_<id>_<secret>``. The id (48 random bits) finds the entry
without comparing secrets; the secret (256 random bits) is checked by comparing its SHA-256 with
the stored one in constant time (``hmac.compare_digest``). A secret that random needs no slow
password hash: nobody can guess it, and the store (mode 0600) holds no token a thief could use.
The instructor hands out the plain tokens once (``python -m pool tokens`` writes them to a CSV);
issuing again replaces a student's earlier tokens, which is also how one is revoked.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import re
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .errors import AuthError, RosterError

TOKEN_PREFIX = "gp1"
TOKEN_PATTERN = re.compile(rf"^{TOKEN_PREFIX}_([0-9a-f]{{12}})_([0-9a-f]{{64}})$")
STORE_FORMAT = 1


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


@dataclass(frozen=True)
class IssuedToken:
    """A plain token for the instructor to hand to ``student``; the server keeps only its hash."""

    student: str
    token: str
    expires: float

    @property
    def expires_text(self) -> str:
        return _iso(self.expires)


@dataclass(frozen=True)
class Grant:
    """Who a valid token belongs to, and until when it is valid."""

    student: str
    expires: float   #: math.inf for a Hub user (pool.hub_auth): valid while the Hub says so

    @property
    def expires_text(self) -> str:
        return "when your JupyterHub login ends" if math.isinf(self.expires) else _iso(self.expires)


@dataclass(frozen=True)
class _Entry:
    student: str
    sha256: str
    expires: float


class TokenStore:
    """The server's side of the tokens: id -> (student, hash of the secret, expiry)."""

    def __init__(self, entries: dict[str, _Entry] | None = None) -> None:
        self._entries = dict(entries or {})

    def __len__(self) -> int:
        return len(self._entries)

    def issue(self, students: Iterable[str], valid_s: float, now: float | None = None) -> list[IssuedToken]:
        """A fresh token for each of ``students``, valid ``valid_s`` seconds; their earlier tokens stop working."""
        now = time.time() if now is None else now
        issued = []
        for student in students:
            self._entries = {i: e for i, e in self._entries.items() if e.student != student}
            token_id, secret = secrets.token_hex(6), secrets.token_hex(32)
            self._entries[token_id] = _Entry(student, _digest(secret), now + valid_s)
            issued.append(IssuedToken(student, f"{TOKEN_PREFIX}_{token_id}_{secret}", now + valid_s))
        return issued

    def verify(self, token: str, now: float | None = None) -> Grant:
        """The grant of a valid token; an AuthError that says whether it is malformed, unknown or expired."""
        match = TOKEN_PATTERN.match(token)
        if match is None:
            raise AuthError(f"the token is malformed: a pool token looks like {TOKEN_PREFIX}_<12 hex>_<64 hex>; "
                            "copy it again from what your instructor sent (no spaces or quotes).")
        token_id, secret = match.groups()
        entry = self._entries.get(token_id)
        # Compare against a dummy digest when the id is unknown, so both paths do the same work.
        expected = entry.sha256 if entry is not None else "0" * 64
        if not hmac.compare_digest(_digest(secret), expected) or entry is None:
            raise AuthError("the token is unknown or was replaced by a newer one: ask your instructor for yours.")
        now = time.time() if now is None else now
        if now >= entry.expires:
            raise AuthError(f"the token expired on {_iso(entry.expires)}: ask your instructor for a new one.")
        return Grant(entry.student, entry.expires)

    def to_json(self) -> str:
        return json.dumps({"format": STORE_FORMAT, "tokens": {
            i: {"student": e.student, "sha256": e.sha256, "expires": e.expires} for i, e in sorted(self._entries.items())
        }}, indent=1)

    @classmethod
    def from_json(cls, text: str, where: str = "the token store") -> "TokenStore":
        try:
            data = json.loads(text)
            if data.get("format") != STORE_FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {STORE_FORMAT}")
            entries = {str(i): _Entry(str(e["student"]), str(e["sha256"]), float(e["expires"]))
                       for i, e in data["tokens"].items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise RosterError(f"{where} is not a token store written by `python -m pool tokens` ({exc}).") from None
        return cls(entries)

    @classmethod
    def load(cls, path: str | Path) -> "TokenStore":
        """The store at ``path``; an empty one when the file does not exist yet."""
        path = Path(path)
        if not path.exists():
            return cls()
        try:
            return cls.from_json(path.read_text(encoding="utf-8"), str(path))
        except OSError as exc:
            raise RosterError(f"cannot read the token store {path}: {exc.strerror or exc}") from None

    def save(self, path: str | Path) -> None:
        """Write atomically, readable by the owner only."""
        write_private(Path(path), self.to_json())


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically; the file is readable by its owner only (mode 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def default_store_path(roster: str | Path) -> Path:
    """Where the hashes of a roster's tokens live: ``roster.csv`` -> ``roster.tokens.json`` beside it."""
    roster = Path(roster)
    return roster.with_name(roster.stem + ".tokens.json")


__all__ = ["Grant", "IssuedToken", "TOKEN_PATTERN", "TOKEN_PREFIX", "TokenStore", "default_store_path",
           "write_private"]
