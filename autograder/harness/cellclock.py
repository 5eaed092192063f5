"""A cell's time limit counted as the work its kernels did, not as time on the clock.

Why: graded beside other work (CI at load 10-35 on two cores, a grading host running many notebooks),
honest cells waited for a CPU and ran into wall-clock limits: the honest hand-in of the class test
scored 3/6 instead of 6/6. So a cell's limit counts the time its kernels' processes were not kept
waiting for a CPU (:class:`gemmlab.running.proctime.WorkClock`: sleeping or waiting on a GPU counts, waiting in
the scheduler's run queue does not) and stops them when they use more than :data:`CPU_PER_LIMIT_S`
CPU-seconds per second of the limit (many threads that keep each other waiting). An endless loop is
stopped and scored as before; it only takes longer on the clock when the machine is busy.

A wall-clock backstop (:func:`backstop_s`, several times the limit) ends a cell that a starved machine
never let use its limit. That is the machine's failure, not the cell's: :class:`MachineBusy`, which the
runner turns into an infrastructure failure (retried, never graded). A thread that lowered its own
priority does not count as kept waiting (``WorkClock``), so starving oneself buys no time.
"""
from __future__ import annotations

import time
from typing import Callable

from gemmlab.running import proctime

#: The wall-clock backstop is this many times a limit, and at least BACKSTOP_MIN_EXTRA_S more than it.
BACKSTOP_FACTOR = 5.0
BACKSTOP_MIN_EXTRA_S = 300.0
#: CPU seconds a cell's processes may use together per second of its limit.
CPU_PER_LIMIT_S = 4.0


class MachineBusy(RuntimeError):
    """The grading machine kept a kernel waiting for a CPU so long that its limit could not be used: not the
    submission's doing (retried elsewhere or later, never graded). The message says what was measured."""


def backstop_s(limit_s: float) -> float:
    """Wall-clock seconds after which work with a limit of ``limit_s`` is stopped however little it did."""
    return proctime.backstop_s(limit_s, BACKSTOP_FACTOR, BACKSTOP_MIN_EXTRA_S)


class CellClock:
    """The limit of one cell (or one request to a kernel) over the process trees ``roots()`` names; call
    :meth:`update` now and then, then ask :meth:`over` and :meth:`starved`."""

    def __init__(self, limit_s: float, roots: Callable[[], list[int]]) -> None:
        self.limit_s = float(limit_s)
        self.backstop_s = backstop_s(self.limit_s)
        self.work = proctime.WorkClock(roots)
        self.started = time.monotonic()

    def update(self) -> "CellClock":
        self.work.update()
        return self

    @property
    def active_s(self) -> float:
        """Seconds of the limit used: time on the clock less the time kept waiting for a CPU."""
        return self.work.active_s

    @property
    def cpu_s(self) -> float:
        return self.work.cpu_s

    def cpu_over(self) -> bool:
        return self.work.cpu_s >= CPU_PER_LIMIT_S * self.limit_s

    def over(self) -> bool:
        """Whether the work used its limit (the cell's own doing: it is stopped and scored)."""
        return self.work.active_s >= self.limit_s or self.cpu_over()

    def starved(self) -> bool:
        """Whether the wall-clock backstop ran out before the work could use its limit (the machine's doing)."""
        return time.monotonic() - self.started >= self.backstop_s

    def spent(self) -> str:
        """What the work used, in words (for the verdict's message)."""
        if self.cpu_over():
            return (f"; its processes used {self.work.cpu_s:.0f} s of CPU, {CPU_PER_LIMIT_S:g} times its limit "
                    "(many threads or processes at once)")
        waited = f", not counting {self.work.waited_s:.0f} s it waited for a busy CPU" if self.work.waited_s >= 1 else ""
        return f"; it worked {self.work.active_s:.0f} s{waited}"

    def busy(self, what: str) -> MachineBusy:
        """The :class:`MachineBusy` for ``what`` (e.g. "the cell test_gemm") that ran into the backstop."""
        return MachineBusy(
            f"{what} had used {self.work.active_s:.0f} s of its {self.limit_s:g} s limit after "
            f"{time.monotonic() - self.started:.0f} s on the clock: the grading machine kept it waiting for a CPU "
            f"({self.work.waited_s:.0f} s). Not graded here: it is graded again when the machine is less busy.")


__all__ = ["BACKSTOP_FACTOR", "BACKSTOP_MIN_EXTRA_S", "CPU_PER_LIMIT_S", "CellClock", "MachineBusy", "backstop_s"]
