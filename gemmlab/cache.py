"""Content-addressed on-disk cache: same inputs, same key, no recompilation."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path


def cache_root() -> Path:
    """``$GEMMLAB_CACHE`` or ``~/.cache/gemmlab``; created on first use."""
    root = Path(os.environ.get("GEMMLAB_CACHE") or Path.home() / ".cache" / "gemmlab")
    root.mkdir(parents=True, exist_ok=True)
    return root


def key_for(*parts: object) -> str:
    """A stable hex digest of any JSON-serialisable parts (source, options, versions...)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:40]


def _path(kind: str, key: str) -> Path:
    folder = cache_root() / kind / key[:2]
    folder.mkdir(parents=True, exist_ok=True)
    return folder / key


def load(kind: str, key: str) -> bytes | None:
    """The cached bytes, or None when absent."""
    path = _path(kind, key)
    try:
        return path.read_bytes()
    except OSError:
        return None


def store(kind: str, key: str, data: bytes) -> None:
    """Write atomically, so a crash or a parallel writer never leaves a torn entry."""
    path = _path(kind, key)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
