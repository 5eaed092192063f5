"""One timing at a time per GPU, across processes.

Why: the grader may run several notebooks side by side on one GPU (most of a notebook's time is
C++ compiles on the CPU), but two GEMMs timed at once slow each other down and make a
performance bar unfair. ``bench_gemm`` therefore times inside ``exclusive_timing()``: an
``flock`` on the file named by ``GEMMLAB_TIMING_LOCK``, which the grader creates per GPU and
binds read-only into each sandbox. Without that variable (a student's own JupyterLab) there is
nothing to wait for. The kernel holding the lock releases it when it exits, even when killed;
one that holds it on purpose delays the others by at most ``GEMMLAB_TIMING_LOCK_WAIT`` seconds
(default 60), after which they time anyway and warn.
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


def _wait_s() -> float:
    try:
        return max(0.0, float(os.environ.get(ENV_WAIT, DEFAULT_WAIT_S)))
    except ValueError:
        return DEFAULT_WAIT_S


@contextlib.contextmanager
def exclusive_timing(wait_s: float | None = None) -> Iterator[bool]:
    """Hold this GPU's timing lock inside the block; yields whether it was acquired (False when
    no lock is configured, it cannot be opened, or another holder kept it past ``wait_s``)."""
    path = os.environ.get(ENV_PATH)
    if not path:
        yield False
        return
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY)       # flock needs no write access: the file is bound read-only
    except (ImportError, OSError):
        yield False
        return
    acquired = False
    try:
        deadline = time.monotonic() + (_wait_s() if wait_s is None else wait_s)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                acquired = True
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.01)
        if not acquired:
            warnings.warn("another process kept this GPU's timing lock too long; timing without it "
                          "(the result may be slower than on a quiet GPU)", RuntimeWarning, stacklevel=3)
        yield acquired
    finally:
        if acquired:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def lock_file_for(gpu: str, folder: str | os.PathLike | None = None) -> str:
    """The timing-lock file of GPU ``gpu`` on this host (created, readable by everyone: sandboxed
    kernels run as nobody). Every grading worker of one host that uses that GPU gets the same file."""
    import tempfile
    from pathlib import Path

    base = Path(folder) if folder is not None else Path(tempfile.gettempdir()) / f"gemmlab-timing-{os.getuid()}"
    base.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in str(gpu))
    path = base / f"gpu{safe}.lock"
    if not path.exists():
        path.touch()
    os.chmod(path, 0o644)
    return str(path)


__all__ = ["exclusive_timing", "lock_file_for"]
