"""Local logins: one password per user, issued by the instructor, kept on the server only as a scrypt hash.

Why not the machine's own accounts (PAM): a class on one machine should not need a system user
per student, nor root to make them. ``python -m classroom start`` issues a password for every user
of the roster that has none yet and writes them once to ``passwords.csv`` (mode 0600) for the
instructor to hand out; ``python -m classroom passwords --only NAME`` replaces one (a lost or
leaked password). LTI logins (classroom/lti.py) need no passwords at all.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from pathlib import Path
from typing import Iterable

from pool.tokens import write_private

#: scrypt's cost: about 50 ms and 16 MiB per check on one core, so guessing a handed-out password is slow.
SCRYPT = {"n": 2 ** 14, "r": 8, "p": 1, "maxmem": 64 << 20}


def _hash(password: str, salt: bytes) -> str:
    return hashlib.scrypt(password.encode("utf-8"), salt=salt, dklen=32, **SCRYPT).hex()


class Accounts:
    """User name -> (salt, scrypt hash); read from and written to ``accounts.json`` (mode 0600)."""

    def __init__(self, entries: dict[str, dict[str, str]] | None = None) -> None:
        self._entries = dict(entries or {})

    def names(self) -> set[str]:
        return set(self._entries)

    def issue(self, users: Iterable[str]) -> dict[str, str]:
        """A fresh password for each of ``users`` (replacing an earlier one): name -> the plain password."""
        issued = {}
        for user in users:
            password = "-".join(secrets.token_urlsafe(6) for _ in range(3))
            salt = secrets.token_bytes(16)
            self._entries[user] = {"salt": salt.hex(), "scrypt": _hash(password, salt)}
            issued[user] = password
        return issued

    def verify(self, user: str, password: str) -> bool:
        """Whether ``password`` is ``user``'s; the same work is done for an unknown user."""
        entry = self._entries.get(user, {"salt": "00" * 16, "scrypt": "00" * 32})
        ok = hmac.compare_digest(_hash(password, bytes.fromhex(entry["salt"])), entry["scrypt"])
        return ok and user in self._entries

    def keep_only(self, users: Iterable[str]) -> None:
        """Forget everyone else (a student taken off the roster can no longer log in)."""
        keep = set(users)
        self._entries = {u: e for u, e in self._entries.items() if u in keep}

    @classmethod
    def load(cls, path: str | Path) -> "Accounts":
        path = Path(path)
        if not path.exists():
            return cls()
        return cls(json.loads(path.read_text(encoding="utf-8")))

    def save(self, path: str | Path) -> None:
        write_private(Path(path), json.dumps(self._entries, indent=1, sort_keys=True))


def write_passwords(path: str | Path, issued: dict[str, str]) -> None:
    """The plain passwords as ``user,password`` lines (mode 0600), for the instructor to hand out once."""
    write_private(Path(path), "user,password\n" + "".join(f"{u},{p}\n" for u, p in sorted(issued.items())))


__all__ = ["Accounts", "SCRYPT", "write_passwords"]
