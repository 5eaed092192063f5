"""The on-disk cache of compiled kernels: an unchanged cell never pays NVRTC twice.

A result is keyed by everything that can change it (source, kernel name, arch, options,
the student's include folders and their headers, toolchain versions); a hit touches neither
NVRTC nor torch, and costs milliseconds.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from gemmlab.compiling import cache, toolchain
from gemmlab.compiling.job import CompileJob
from gemmlab.compiling.record import Compiled

CACHE_KIND = "nvrtc"
CACHE_VERSION = 2  # 2: cubins are no longer cut at trailing zero bytes
_MAX_ENTRIES = 5000


def key(job: CompileJob) -> str:
    """The cache key of ``job``."""
    return cache.key_for(CACHE_KIND, CACHE_VERSION, job.source, job.name, job.arch, job.options, job.std,
                         job.filename, [(d, _dir_identity(d)) for d in job.include_dirs], toolchain.fingerprint())


def contains(entry: str) -> bool:
    """Whether a result with this key is stored."""
    return cache.load(CACHE_KIND, entry) is not None


def load(entry: str, source: str) -> Compiled | None:
    """The stored result (marked cached), or None when absent, torn or from an older layout."""
    raw = cache.load(CACHE_KIND, entry)
    if raw is None:
        return None
    try:
        return Compiled.from_record(json.loads(raw), source)
    except (ValueError, KeyError, TypeError):
        return None


def claim(entry: str, wait_s: float):
    """The right to compile ``entry`` (``cache.claim``): another process compiling it is waited for."""
    return cache.claim(CACHE_KIND, entry, wait_s)


def save(entry: str, compiled: Compiled) -> None:
    """Store a result; a read-only or full disk only costs the next compile its speed."""
    try:
        cache.store(CACHE_KIND, entry, json.dumps(compiled.to_record()).encode())
    except OSError:
        pass


def _dir_identity(folder: str) -> list:
    """Names, sizes and mtimes of the headers in a student's include folder: editing one invalidates the cache."""
    entries = []
    for root, _dirs, files in os.walk(folder):
        for file in sorted(files):
            path = Path(root) / file
            try:
                stat = path.stat()
            except OSError:
                continue
            entries.append((str(path.relative_to(folder)), stat.st_size, stat.st_mtime_ns))
            if len(entries) > _MAX_ENTRIES:
                return entries
    return entries
