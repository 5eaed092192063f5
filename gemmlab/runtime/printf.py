"""Device ``printf`` output, brought to where the student looks.

Why: the driver writes what ``printf`` in a kernel printed to the process's C-level stdout (file
descriptor 1) when the GPU work is synchronised. Jupyter shows ``sys.stdout`` in the cell, not file
descriptor 1 (that goes to the server's terminal), so a kernel's printf would seem to print nothing.
A launch of a kernel whose PTX calls ``vprintf`` is therefore synchronised with file descriptor 1
redirected (:func:`captured_fd_output`) and what was captured is written to ``sys.stdout``
(:func:`forward_device_printf`).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import tempfile
from typing import Callable, Iterator


def uses_printf(ptx: str | None) -> bool:
    """Whether a kernel's PTX calls the device ``printf`` (``vprintf``)."""
    return bool(ptx) and "vprintf" in ptx  # type: ignore[operator]


def _flush_c_stdio() -> None:
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # no C library to flush: nothing buffered there either
        pass


@contextlib.contextmanager
def captured_fd_output(fd: int = 1) -> Iterator[list[str]]:
    """Collect what is written to file descriptor ``fd`` inside the block into the yielded list
    (one string, after the block). The descriptor is restored even when the block raises. Without
    a usable descriptor (closed, or an odd redirect) the block runs uncaptured."""
    collected: list[str] = []
    try:
        sys.stdout.flush()
        _flush_c_stdio()
        saved = os.dup(fd)
    except (OSError, ValueError, AttributeError):
        yield collected
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), fd)
        try:
            yield collected
        finally:
            _flush_c_stdio()
            os.dup2(saved, fd)
            os.close(saved)
            sink.seek(0)
            collected.append(sink.read().decode("utf-8", errors="replace"))


def forward_device_printf(synchronize: Callable[[], None]) -> None:
    """Run ``synchronize()`` (which makes the driver flush device printf) with file descriptor 1
    captured, then write what was printed to ``sys.stdout``, also when ``synchronize`` raises
    (a kernel's last words before a fault are the most useful ones)."""
    printed: list[str] = []
    try:
        with captured_fd_output(1) as printed:
            synchronize()
    finally:
        _write_out("".join(printed))


def _write_out(text: str) -> None:
    if text:
        sys.stdout.write(text)
        sys.stdout.flush()


__all__ = ["captured_fd_output", "forward_device_printf", "uses_printf"]
