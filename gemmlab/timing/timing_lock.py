"""One timing at a time per GPU, and no other graded GPU work during it, across processes.

Why: the grader may run several notebooks side by side on one GPU (most of a notebook's time is
C++ compiles on the CPU), but a GEMM timed while another notebook's kernels run is slower, and
the performance bar unfair (measured on an H100: a capstone timed beside three other notebooks
read 0.29-0.42x cuBLAS instead of 0.93x). So the GPU's graded work is a readers-writer lock:
``bench_gemm`` times inside ``exclusive_timing()`` and ``check_gemm`` runs each shape inside
``shared_gpu_work()``. Many checks may run at once; a timing waits for the running ones, and
checks that start while a timing waits queue behind it (a second "turn" file gives the timing
writer preference, so a steady stream of checks cannot starve it).

The files are named by ``GEMMLAB_TIMING_LOCK`` (and that path + ``.turn``), which the grader
creates per GPU and binds read-only into each sandbox: ``flock`` needs no write access. Without
that variable (a student's own JupyterLab) nothing waits. A process holding a lock releases it
when it exits, even when killed. One that holds it on purpose (or a kernel that hangs inside a
check) delays each wait of the others by at most ``GEMMLAB_TIMING_LOCK_WAIT`` seconds (default
60), after which they go on without the lock (a timing warns); such waits cost a process three
times that in all at most, after which it only takes the lock when it is free, so a hostile
holder cannot turn each of many checks into a minute's delay.
"""
from __future__ import annotations

import contextlib
import os
import time
import warnings
from typing import Iterator

ENV_PATH = "GEMMLAB_TIMING_LOCK"
ENV_WAIT = "GEMMLAB_TIMING_LOCK_WAIT"
DEFAULT_WAIT_S = 60.0
TURN_SUFFIX = ".turn"

_waited_s = 0.0   # seconds this process spent in waits that ran out (a holder kept the lock too long)
_TOTAL_WAITS = 3  # such waits cost a process at most this many times GEMMLAB_TIMING_LOCK_WAIT in all
_held = 0         # nesting depth in this process: flock would make a nested block wait for its own lock
_held_ok = False  # whether the outermost block got the lock
_shared_fds: tuple[int, int | None] | None = None  # (main, turn) while this process holds the lock shared


def start_fresh() -> None:
    """Forget this process's lock history (waits that ran out, nesting) as a new process starts with none: for a
    process reused for unrelated work, such as a test runner between tests. Refused inside a held block."""
    global _waited_s, _held, _held_ok, _shared_fds
    if _held:
        raise RuntimeError("start_fresh() inside a timing-lock block: leave the block first")
    _waited_s, _held, _held_ok, _shared_fds = 0.0, 0, False, None


def _wait_s() -> float:
    try:
        return max(0.0, float(os.environ.get(ENV_WAIT, DEFAULT_WAIT_S)))
    except ValueError:
        return DEFAULT_WAIT_S


def _open(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDONLY)       # flock needs no write access: the file is bound read-only
    except OSError:
        return None


def _deadline(wait_s: float | None) -> float:
    """When to stop waiting: the per-wait limit, cut to what waits that ran out have left."""
    per_wait = _wait_s() if wait_s is None else wait_s
    left = max(0.0, _TOTAL_WAITS * _wait_s() - _waited_s)
    return time.monotonic() + min(per_wait, left)


def waited_seconds() -> float:
    """Seconds this process spent in lock waits that ran out (a holder kept the lock too long)."""
    return _waited_s


def _ran_out(seconds: float) -> None:
    global _waited_s
    _waited_s += seconds


def _take(fd: int, mode: int, deadline: float) -> bool:
    """flock ``fd`` in ``mode`` (LOCK_EX or LOCK_SH), polling until ``deadline``."""
    import fcntl

    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)


@contextlib.contextmanager
def _locked(exclusive: bool, wait_s: float | None) -> Iterator[bool]:
    global _held, _held_ok, _shared_fds
    if _held:
        _held += 1
        try:
            yield _held_ok
        finally:
            _held -= 1
        return
    path = os.environ.get(ENV_PATH)
    try:
        import fcntl
    except ImportError:
        path = None
    main = _open(path) if path else None
    if main is None:
        yield False
        return
    turn = _open(path + TURN_SUFFIX)
    held: list[int] = []
    try:
        deadline = _deadline(wait_s)
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        t0 = time.monotonic()
        ok = turn is None or _take(turn, mode, deadline)
        if ok and turn is not None:
            held.append(turn)
        ok = ok and _take(main, mode, deadline)
        if ok:
            held.append(main)
        else:
            _ran_out(time.monotonic() - t0)
        if turn is not None and not exclusive and turn in held:
            fcntl.flock(turn, fcntl.LOCK_UN)   # a reader only passes through the turn: writers queue there
            held.remove(turn)
        if not ok:
            for fd in held:
                fcntl.flock(fd, fcntl.LOCK_UN)
            held.clear()
            if exclusive:
                warnings.warn("another process kept this GPU's timing lock too long; timing without it "
                              "(the result may be slower than on a quiet GPU)", RuntimeWarning, stacklevel=4)
        _held, _held_ok = _held + 1, ok
        if ok and not exclusive:
            _shared_fds = (main, turn)
        try:
            yield ok
        finally:
            _held, _shared_fds = _held - 1, None
    finally:
        for fd in reversed(held):
            fcntl.flock(fd, fcntl.LOCK_UN)
        for fd in (main, turn):
            if fd is not None:
                os.close(fd)


@contextlib.contextmanager
def compiling() -> Iterator[None]:
    """Hand back a shared hold while compiling: a compile (~20 s for CuTe C++) uses the CPU, not the
    GPU, and should not keep another grader's timing waiting. Taken again afterwards."""
    fds = _shared_fds
    if fds is None:
        yield
        return
    import fcntl

    main, turn = fds
    fcntl.flock(main, fcntl.LOCK_UN)
    try:
        yield
    finally:
        deadline, t0 = _deadline(None), time.monotonic()
        ok = (turn is None or _take(turn, fcntl.LOCK_SH, deadline)) and _take(main, fcntl.LOCK_SH, deadline)
        if turn is not None:
            fcntl.flock(turn, fcntl.LOCK_UN)
        if not ok:                  # go on without it, as any block that could not get it does
            _ran_out(time.monotonic() - t0)


def exclusive_timing(wait_s: float | None = None) -> contextlib.AbstractContextManager[bool]:
    """Hold this GPU's lock alone inside the block (for timing); yields whether it was acquired
    (False when no lock is configured, it cannot be opened, or another holder kept it past ``wait_s``)."""
    return _locked(True, wait_s)


def shared_gpu_work(wait_s: float | None = None) -> contextlib.AbstractContextManager[bool]:
    """Hold this GPU's lock shared inside the block: graded GPU work that may overlap other graded
    work but not a timing. Yields whether it was acquired, as ``exclusive_timing``."""
    return _locked(False, wait_s)


def lock_file_for(gpu: str, folder: str | os.PathLike | None = None) -> str:
    """The timing-lock file of GPU ``gpu`` on this host (created, readable by everyone: sandboxed
    kernels run as nobody). Every grading worker of one host that uses that GPU gets the same file."""
    import tempfile
    from pathlib import Path

    base = Path(folder) if folder is not None else Path(tempfile.gettempdir()) / f"gemmlab-timing-{os.getuid()}"
    base.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in str(gpu))
    path = base / f"gpu{safe}.lock"
    for p in (path, Path(str(path) + TURN_SUFFIX)):
        if not p.exists():
            p.touch()
        os.chmod(p, 0o644)
    return str(path)


__all__ = ["compiling", "exclusive_timing", "lock_file_for", "shared_gpu_work", "start_fresh", "waited_seconds"]
