"""Processes a cell of the student's kernel starts live no longer than that cell's limit.

Why: the threat model said a cell's limit stops the processes it starts, yet only the kernel's own work
was interrupted. A process started in the background ran on until the whole kernel ended (up to the
submission's 30 minutes), using CPU beside other students' grading and the GPU during timings.

Each process that appears in the kernel's tree is given the deadline of the cell that was running when
it was first seen: that cell's start plus its limit. Past it, the process is killed; a cell that runs
past its limit has every process it started killed with it at once. The processes the kernel started
with are left alone, and the sandbox's PID namespace ends everything else when the kernel ends.
gemmlab's compile workers are processes like any other: a worker ended this way is replaced at the
next compile (:mod:`gemmlab.compiling.worker`).
"""
from __future__ import annotations

import os
import signal
import time

from gemmlab.running.proctime import process_stat, tree

#: A process's identity: its pid and when it started (a reused pid is another process).
Ident = tuple[int, int]


def _ident(pid: int) -> Ident | None:
    stat = process_stat(pid)
    return None if stat is None else (pid, stat.start_ticks)


def stop(ident: Ident) -> bool:
    """Kill the process ``ident`` names (never another that took its pid); whether a signal was sent."""
    pid, started = ident
    try:
        handle = os.pidfd_open(pid)
    except (OSError, AttributeError):
        handle = None
    try:
        if _ident(pid) != (pid, started):
            return False
        if handle is not None:
            signal.pidfd_send_signal(handle, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        if handle is not None:
            os.close(handle)


class Leftovers:
    """The processes of one kernel (the tree under ``root``) that its cells started, with their deadlines."""

    def __init__(self, root: int) -> None:
        self.root = root
        self._own = {i for i in map(_ident, tree(root)) if i is not None}
        self._deadline: dict[Ident, float] = {}
        self._cell: dict[Ident, int] = {}
        self._stopped: set[Ident] = set()       # killed already (a zombie until its parent reaps it)

    def note(self, cell: int, deadline: float) -> None:
        """Give each process not seen before to ``cell``, to be stopped at ``deadline`` (time.monotonic)."""
        for pid in tree(self.root):
            ident = _ident(pid)
            if ident is None or ident in self._own or ident in self._deadline or ident in self._stopped:
                continue
            self._deadline[ident] = deadline
            self._cell[ident] = cell

    def stop_expired(self, now: float | None = None) -> int:
        """Kill the processes whose deadline has passed; how many were still there."""
        now = time.monotonic() if now is None else now
        return self._stop([i for i, d in self._deadline.items() if d <= now])

    def stop_cell(self, cell: int) -> int:
        """Kill every process ``cell`` started (it ran past its limit); how many were still there."""
        return self._stop([i for i, c in self._cell.items() if c == cell])

    def _stop(self, idents: list[Ident]) -> int:
        stopped = sum(stop(i) for i in idents)
        for ident in idents:
            self._deadline.pop(ident, None)
            self._cell.pop(ident, None)
            self._stopped.add(ident)
        return stopped


__all__ = ["Leftovers", "stop"]
