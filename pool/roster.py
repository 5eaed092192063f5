"""The class roster: which student ids may hold a token.

Why its own module: the token command and the service read the same file, and an instructor's
roster comes in two shapes: nbgrader's CSV (a header with an ``id`` column, as ``nbgrader db
student import`` takes) or one id per line (the leaderboard's ``--roster``). Both are read here.
"""
from __future__ import annotations

import csv
import re
from pathlib import Path

from .errors import RosterError

#: A student id: what nbgrader and file names accept without quoting.
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
_ID_COLUMNS = ("id", "student_id", "student")


def read_roster(path: str | Path) -> list[str]:
    """The roster's student ids, in file order without repeats; a RosterError names a bad line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RosterError(f"cannot read the roster {path}: {exc.strerror or exc}") from None
    rows = [row for row in csv.reader(text.splitlines()) if row and row[0].strip() and not row[0].startswith("#")]
    column = 0
    if rows:
        header = [cell.strip().lower() for cell in rows[0]]
        named = [header.index(name) for name in _ID_COLUMNS if name in header]
        if named:
            column, rows = named[0], rows[1:]
    students: list[str] = []
    for number, row in enumerate(rows, 1):
        student = row[column].strip() if column < len(row) else ""
        if not STUDENT_ID.match(student):
            raise RosterError(f"{path}: roster entry {number} ({student!r:.60}) is not a student id "
                              "(letters, digits and . _ @ + -, at most 128 characters).")
        if student not in students:
            students.append(student)
    return students


__all__ = ["STUDENT_ID", "read_roster"]
