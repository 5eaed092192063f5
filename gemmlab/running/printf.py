"""Device ``printf`` output, brought to where the student looks, and bounded there.

Why: the driver writes what ``printf`` in a kernel printed to the process's C-level stdout (file
descriptor 1) when the GPU work is synchronised. Jupyter shows ``sys.stdout`` in the cell, not file
descriptor 1 (that goes to the server's terminal), so a kernel's printf would seem to print nothing.
A launch of a kernel whose PTX calls ``vprintf`` is therefore synchronised with file descriptor 1
redirected (:func:`captured_fd_output`) and what was captured is written to ``sys.stdout``
(:func:`forward_device_printf`).

Bounded: one thread printing in a loop fills the device's printf buffer at every launch, and a check
launches a kernel many times (on an H200 a printf-flooding kernel put 19.8 MB into one cell through
``check_gemm``). A notebook cell shows the first :data:`MAX_LINES` lines (at most :data:`MAX_BYTES`)
of device printf, then one note saying how much of that launch was dropped; later launches in the
same cell are dropped without a note. Outside a notebook the budget is the process's (:func:`reset_budget`
starts a fresh one). What is not shown is never read into memory: only its size is taken from the capture file.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Callable, Iterator

#: Lines of device printf a notebook cell shows (a process, outside a notebook); the rest is dropped and counted.
MAX_LINES = 200
#: Bytes of device printf a cell shows, whatever its lines.
MAX_BYTES = 64 << 10
#: Most bytes :func:`captured_fd_output` reads back by default (the rest is only counted).
MAX_CAPTURE_BYTES = 1 << 20


def uses_printf(ptx: str | None) -> bool:
    """Whether a kernel's PTX calls the device ``printf`` (``vprintf``)."""
    return bool(ptx) and "vprintf" in ptx  # type: ignore[operator]


def _flush_c_stdio() -> None:
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # no C library to flush: nothing buffered there either
        pass


#: Most bytes whose lines are counted (streamed, never held) when output goes beyond what is read.
MAX_COUNTED_BYTES = 256 << 20


class Captured(list):
    """What :func:`captured_fd_output` collected: one string (the first ``limit`` bytes written, decoded)
    after the block; ``total_bytes``, how many bytes were written in all, and ``total_lines``, how many lines
    (None when there were more than :data:`MAX_COUNTED_BYTES` to count)."""

    total_bytes: int = 0
    total_lines: int | None = 0


def _count_lines(sink: "tempfile._TemporaryFileWrapper", size: int) -> int | None:
    if size > MAX_COUNTED_BYTES:
        return None
    sink.seek(0)
    lines, last = 0, b"\n"
    while chunk := sink.read(1 << 20):
        lines += chunk.count(b"\n")
        last = chunk[-1:]
    return lines + (last != b"\n")


@contextlib.contextmanager
def captured_fd_output(fd: int = 1, limit: int = MAX_CAPTURE_BYTES) -> Iterator[Captured]:
    """Collect what is written to file descriptor ``fd`` inside the block into the yielded list (one
    string of at most ``limit`` bytes, after the block; ``total_bytes`` counts all of it). The descriptor
    is restored even when the block raises. Without a usable descriptor (closed, or an odd redirect)
    the block runs uncaptured."""
    collected = Captured()
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
            collected.total_bytes = sink.seek(0, os.SEEK_END)
            collected.total_lines = _count_lines(sink, collected.total_bytes)
            sink.seek(0)
            collected.append(sink.read(max(0, limit)).decode("utf-8", errors="replace"))


@dataclass
class _Budget:
    """What is left to show in one cell (``key``: the cell's execution count, None outside IPython)."""

    key: object
    lines: int = MAX_LINES
    bytes: int = MAX_BYTES
    noted: bool = False


_BUDGET = _Budget(key=object())


def _cell_key() -> object:
    """The running notebook cell's execution count, or None outside IPython (one budget per process)."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    return getattr(shell, "execution_count", None) if shell is not None else None


def _budget() -> _Budget:
    global _BUDGET
    key = _cell_key()
    if _BUDGET.key != key:
        _BUDGET = _Budget(key)
    return _BUDGET


def reset_budget() -> None:
    """Start a fresh budget of device printf to show (outside a notebook, where there are no cells to renew it;
    a notebook's next cell gets one anyway)."""
    global _BUDGET
    _BUDGET = _Budget(_cell_key())


def _size(n: int) -> str:
    return f"{n:,} bytes" if n < 10_000 else (f"{n / 1e3:,.0f} KB" if n < 1_000_000 else f"{n / 1e6:,.1f} MB")


def _shown(printed: Captured, budget: _Budget) -> str:
    """The part of one launch's printf that ``budget`` still allows, plus a note on what was dropped (the
    first time the cell drops anything)."""
    kept: list[str] = []
    for line in "".join(printed).splitlines(keepends=True):
        size = len(line.encode("utf-8"))
        if budget.lines <= 0 or budget.bytes <= 0:
            break
        if size > budget.bytes:         # one huge line: its start, cut where the budget ends
            line = line.encode("utf-8")[:budget.bytes].decode("utf-8", "ignore") + "\n"
            size = budget.bytes
        kept.append(line)
        budget.lines -= 1
        budget.bytes -= size
    out = "".join(kept)
    dropped = max(0, printed.total_bytes - len(out.encode("utf-8")))
    if dropped and not budget.noted:
        budget.noted = True
        lines = "more lines" if printed.total_lines is None else \
            f"{max(0, printed.total_lines - len(kept)):,} more line{'s' * (printed.total_lines - len(kept) != 1)}"
        out += (f"\n[device printf: {lines}, {_size(dropped)}, of this launch were dropped. A cell shows the first "
                f"{MAX_LINES} lines ({MAX_BYTES >> 10} KB) its kernels print; later launches in this cell print "
                "nothing. Print from one thread, or under a condition, to see what matters.]\n")
    return out


def forward_device_printf(synchronize: Callable[[], None]) -> None:
    """Run ``synchronize()`` (which makes the driver flush device printf) with file descriptor 1
    captured, then write what the cell's budget allows to ``sys.stdout``, also when ``synchronize``
    raises (a kernel's last words before a fault are the most useful ones)."""
    budget = _budget()
    printed = Captured()
    try:
        with captured_fd_output(1, limit=budget.bytes + 1) as printed:
            synchronize()
    finally:
        _write_out(_shown(printed, budget))


def _write_out(text: str) -> None:
    if text:
        sys.stdout.write(text)
        sys.stdout.flush()


__all__ = ["Captured", "MAX_BYTES", "MAX_CAPTURE_BYTES", "MAX_LINES", "captured_fd_output", "forward_device_printf",
           "reset_budget", "uses_printf"]
