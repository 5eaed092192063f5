"""Content-addressed on-disk cache: same inputs, same key, no recompilation.

Two layers: the cache this process writes (``$GEMMLAB_CACHE``), and an optional folder of the same
layout that it only reads (``$GEMMLAB_CACHE_READONLY``), filled by someone else: a test run's compiles,
seeded into the grader's sandboxes so that a kernel compiled once in the run is not compiled again
there. A read-only layer is never written, so no one who reads it can change what another reads.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import time
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

#: The folder of the cache this process reads and writes (default ``~/.cache/gemmlab``).
CACHE_ENV = "GEMMLAB_CACHE"
#: A second cache folder, read when the first misses and never written.
READONLY_ENV = "GEMMLAB_CACHE_READONLY"


def cache_root() -> Path:
    """``$GEMMLAB_CACHE`` or ``~/.cache/gemmlab``; created on first use."""
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "gemmlab")
    root.mkdir(parents=True, exist_ok=True)
    return root


def readonly_root() -> Path | None:
    """``$GEMMLAB_CACHE_READONLY`` when it names a folder, else None; never created or written."""
    folder = os.environ.get(READONLY_ENV)
    return Path(folder) if folder and Path(folder).is_dir() else None


def key_for(*parts: object) -> str:
    """A stable hex digest of any JSON-serialisable parts (source, options, versions...)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:40]


def _relative(kind: str, key: str) -> Path:
    return Path(kind) / key[:2] / key


def _path(kind: str, key: str) -> Path:
    path = cache_root() / _relative(kind, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def load(kind: str, key: str) -> bytes | None:
    """The cached bytes (this process's cache first, then the read-only layer), or None when absent."""
    try:
        return _path(kind, key).read_bytes()
    except OSError:
        pass
    seed = readonly_root()
    if seed is None:
        return None
    try:
        return (seed / _relative(kind, key)).read_bytes()
    except OSError:
        return None


def store(kind: str, key: str, data: bytes) -> None:
    """Write atomically, so a crash or a parallel writer never leaves a torn entry.

    The entry gets the permissions of any file its owner creates (the umask decides, as for the
    notebooks beside it), so a cache folder made readable to share it shares its entries too."""
    path = _path(kind, key)
    tmp = path.parent / f".tmp-{secrets.token_hex(8)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def claim(kind: str, key: str, wait_s: float) -> Iterator[None]:
    """Hold the right to fill one entry, across processes: a second process that claims it waits (at most
    ``wait_s``) until the first has stored it, then reads it instead of making it again (two notebooks, or
    two test workers, compiling the same kernel at once). Past the wait, or where the cache cannot hold a
    lock file (read-only), it goes on without the claim: a claim only saves work, it never blocks it."""
    lock = _path(kind, key).with_name(f".claim-{key}")
    handle, held = _lock(lock, time.monotonic() + wait_s)
    if handle is None:
        yield
        return
    with handle:
        try:
            yield
        finally:
            if held:     # no lock file stays beside the entry; a waiter on this file opens it again
                lock.unlink(missing_ok=True)


def _lock(lock: Path, deadline: float) -> tuple[IO[str] | None, bool]:
    """``(open file, held)`` for the claim's lock file, waiting until ``deadline``; ``(None, False)`` where it cannot
    be opened. A lock won on a file its holder has since removed is a lock on nothing (a newcomer makes a new file
    and holds that): then the file is opened again, so that no two processes ever hold one claim."""
    while True:
        try:
            handle = open(lock, "w")
        except OSError:
            return None, False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    return handle, False
                time.sleep(0.1)
        try:
            now = os.stat(lock)
        except FileNotFoundError:
            now = None
        mine = os.fstat(handle.fileno())
        if now is not None and (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
            return handle, True
        handle.close()


def load_json(kind: str, key: str) -> dict | None:
    raw = load(kind, key)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def store_json(kind: str, key: str, value: dict) -> None:
    store(kind, key, json.dumps(value, sort_keys=True).encode())
