"""Hand-in files as the grader reads them: regular files only, never through a link, and size-capped.

Why: hand-ins are collected and read by the grader itself, outside any sandbox and with the grader's
rights. A hand-in that was a symbolic link to the instructor's solution notebook was copied as the
student's own work and earned full marks; one linked to /dev/zero was copied without end. So a link,
a device, a pipe or a file over :data:`MAX_BYTES` is refused with a reason the student can act on,
and nothing it points to is ever read. A refusal made while collecting is kept beside the hand-ins
(:data:`REFUSALS`), so the grade says why instead of "not handed in".
"""
from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

#: The largest notebook file the grader reads (a notebook with its pictures is a few MB).
MAX_BYTES = 64 << 20
#: Beside the collected notebooks of one hand-in: notebook name -> why it was refused.
REFUSALS = ".refused.json"

LINK = "it is a symbolic link, not a file: hand in the notebook file itself"
NOT_REGULAR = "it is not a regular file (a folder, device or pipe): hand in the notebook file itself"


class NotAFile(Exception):
    """The path is not a regular file the grader may read; ``str(exc)`` says why, for the student."""


def read_regular(path: Path, limit: int = MAX_BYTES) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes, not a link; else
    NotAFile. FileNotFoundError when there is nothing there (not even a broken link)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    if os.path.islink(path):
        raise NotAFile(LINK)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise NotAFile(LINK) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotAFile(NOT_REGULAR)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise NotAFile(f"it is larger than the {limit >> 20} MB a notebook file may be: clear its outputs")
        return b"".join(chunks)
    finally:
        os.close(fd)


def is_real_folder(path: Path) -> bool:
    """Whether ``path`` is a folder itself, not a link to one."""
    return path.is_dir() and not path.is_symlink()


def collect(sources: list[Path], dest: Path, refused: dict[str, str] | None = None) -> int:
    """Copy each regular notebook file of ``sources`` into the (new, empty) folder ``dest``; what is
    refused goes into ``dest``'s :data:`REFUSALS` with ``refused``'s earlier reasons. Returns how many
    files were copied."""
    notes = dict(refused or {})
    copied = 0
    for src in sources:
        try:
            data = read_regular(src)
        except NotAFile as why:
            notes[src.name] = str(why)
            continue
        except OSError as err:
            notes[src.name] = f"it could not be read ({err.strerror or err})"
            continue
        (dest / src.name).write_bytes(data)
        copied += 1
    if notes:
        (dest / REFUSALS).write_text(json.dumps(notes, indent=1, sort_keys=True))
    return copied


def refusals(folder: Path) -> dict[str, str]:
    """What collecting refused in ``folder`` (notebook name -> why); {} when nothing was."""
    try:
        notes = json.loads(read_regular(folder / REFUSALS, limit=1 << 20))
    except (FileNotFoundError, NotAFile, OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in notes.items()} if isinstance(notes, dict) else {}


def unsafe_entries(root: Path, pattern: str) -> list[Path]:
    """Links and other non-regular files (folders aside) anywhere under the entries of ``root`` that
    match ``pattern``: what a copy that follows links would read with the grader's rights."""
    found = []
    if not root.is_dir():
        return found
    for top in sorted(root.glob(pattern)):
        walk = [top]
        while walk:
            path = walk.pop()
            if path.is_symlink():
                found.append(path)
            elif path.is_dir():
                walk.extend(sorted(path.iterdir()))
            elif not path.is_file():
                found.append(path)
    return found
