"""Compile the kernel variants a notebook will need in background worker processes, before it needs them.

Why: a CuTe C++ kernel costs 10-20 s of NVRTC on one core, and a kernel cell is often built in
several variants (element type, vector width): notebook 05's checks on odd shapes need eight.
Compiled one after another when first called, they dominate a notebook's run and its grading.
``compile_ahead`` runs them side by side in gemmlab's compiler workers (:mod:`gemmlab.compiling.worker`;
NVRTC's C++ front end runs on one core), each result stored in the on-disk cache;
``gemmlab.compile`` of a variant still in flight waits for it instead of compiling it a second
time. A background compile that fails stores nothing, so the foreground compile fails with the
usual message.

    gemmlab.compile_ahead(SOURCE, ["gemm<cute::half_t>", ("gemm<cute::half_t>", ["-DVEC=4"])], arch="sm_90a")

``GEMMLAB_COMPILE_JOBS`` sets how many run at once (default: half the CPU cores, at most 2, since
one CuTe GEMM compile holds about 3 GB and a graded notebook may use 16 GiB in all; 0 turns
compiling ahead off). Each has the compile time limit (``GEMMLAB_COMPILE_TIMEOUT``); workers still
running when Python exits are stopped.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Sequence

from gemmlab.compiling import store, worker
from gemmlab.compiling.job import DEFAULT_FILENAME, DEFAULT_STD, CompileJob, check_arch, resolve_dirs
from gemmlab.errors import GemmlabError

_LOCK = threading.Lock()
_IN_FLIGHT: dict[str, threading.Event] = {}      # cache key -> set when its background compile ended
_ENDED: set[str] = set()                         # keys whose background compile ended, not yet used
_GENERATIONS: dict[str | None, int] = {}         # group -> number of its latest compile_ahead call
_SLOTS: threading.Semaphore | None = None
_SLOT_COUNT = 0


def jobs() -> int:
    """How many background compiles run at once (``GEMMLAB_COMPILE_JOBS``; default half the cores, at most 2)."""
    raw = os.environ.get("GEMMLAB_COMPILE_JOBS")
    if raw is not None:
        try:
            return max(0, int(raw))
        except ValueError:
            pass
    return max(1, min(2, (os.cpu_count() or 2) // 2))


def _slots(count: int) -> threading.Semaphore:
    global _SLOTS, _SLOT_COUNT
    with _LOCK:
        if _SLOTS is None or _SLOT_COUNT != count:
            _SLOTS, _SLOT_COUNT = threading.Semaphore(count), count
        return _SLOTS


def compile_ahead(source: str, builds: Sequence[str | tuple[str, Sequence[str]]], arch: str | None = None,
                  include_dirs: Sequence[str | Path] = (), std: str = DEFAULT_STD, filename: str | None = None,
                  group: str | None = None) -> int:
    """Start compiling each build (a kernel name, or ``(name, options)``) of ``source`` in the
    background; returns how many were queued (those cached or already in flight are skipped).
    A later call with the same ``group`` (a cell re-run after an edit) drops this call's builds
    that have not started yet."""
    count = jobs()
    if count == 0:
        return 0
    arch = check_arch(arch)
    dirs = resolve_dirs(include_dirs)
    slots = _slots(count)
    with _LOCK:
        generation = _GENERATIONS[group] = _GENERATIONS.get(group, 0) + 1
    started = 0
    for build in builds:
        name, options = (build, ()) if isinstance(build, str) else (build[0], tuple(build[1]))
        job = CompileJob(source, name.strip(), arch, tuple(str(o) for o in options), dirs, std,
                         filename or DEFAULT_FILENAME)
        key = store.key(job)
        with _LOCK:
            if key in _IN_FLIGHT:
                continue
        if store.contains(key):
            continue
        done = threading.Event()
        with _LOCK:
            _IN_FLIGHT[key] = done
        threading.Thread(target=_run, args=(key, job, done, slots, group, generation), daemon=True,
                         name=f"gemmlab-ahead {name}").start()
        started += 1
    return started


def wait_for(key: str, timeout_s: float) -> bool:
    """If a background compile of ``key`` is in flight, wait until it ends (at most ``timeout_s``);
    whether there was one."""
    with _LOCK:
        done = _IN_FLIGHT.get(key)
    if done is None:
        return False
    done.wait(timeout_s)
    return True


def in_flight() -> int:
    """How many background compiles are queued or running."""
    with _LOCK:
        return len(_IN_FLIGHT)


def take_background(key: str) -> bool:
    """Whether ``key`` was compiled in the background for this process and not yet used (then forget it):
    no one saw that compile's warnings, so its first user repeats them."""
    with _LOCK:
        if key in _ENDED:
            _ENDED.discard(key)
            return True
        return False


def _superseded(group: str | None, generation: int) -> bool:
    with _LOCK:
        return group is not None and _GENERATIONS.get(group, 0) != generation


def _run(key: str, job: CompileJob, done: threading.Event, slots: threading.Semaphore, group: str | None,
         generation: int) -> None:
    try:
        with slots:
            if _superseded(group, generation):
                return
            store.save(key, worker.run(job))
    except GemmlabError:
        pass  # nothing stored: the foreground compile reports it with the usual message
    finally:
        with _LOCK:
            _IN_FLIGHT.pop(key, None)
            _ENDED.add(key)
        done.set()
