"""What work consumed, read from ``/proc``: CPU seconds, and time kept waiting for a CPU.

Why: on a busy machine (a JupyterHub node shared by thirty students, a grading host running many
notebooks, CI beside other jobs) a wall-clock limit stops sound work that only waited for a CPU.
At load 10 a CuTe compile that needs 40 s of CPU took more than 120 s and was stopped as a compile
"without end"; honest grading cells timed out and lost their points. So limits count what the work
used:

- :func:`cpu_seconds` / :func:`tree_cpu_seconds`: CPU time of a process (all its threads, and the
  children it has reaped) or of a whole process tree;
- :class:`WorkClock`: wall-clock time minus the time a process tree was kept waiting in the
  scheduler's run queue (``/proc/PID/task/TID/schedstat``). Work that sleeps or waits on a GPU is
  timed as by the clock; work that wanted a CPU and did not get one is not charged for the wait.
  A thread that lowered its own priority (a higher nice value than the process watching it, which
  started the work, or a batch or idle scheduling policy) is not counted as kept waiting: starving
  oneself buys no time.

Linux only. Elsewhere (no ``/proc``) every reading is ``None`` and :class:`WorkClock` counts wall
time, so callers keep the clock's meaning there.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: Scheduling policies whose run-queue wait counts as being kept waiting (SCHED_OTHER; FIFO and RR need privileges).
_NORMAL_POLICIES = (0, 1, 2)


@dataclass(frozen=True)
class ProcessStat:
    """The fields of ``/proc/PID/stat`` limits need."""

    pid: int
    ppid: int
    start_ticks: int      #: when the process started (clock ticks after boot): with ``pid``, its identity
    cpu_s: float          #: user + system time of all its threads, and of the children it reaped
    nice: int
    policy: int


def _fields(text: str) -> list[str]:
    """The fields after the command name (which may hold spaces and parentheses)."""
    return text[text.rindex(")") + 2:].split()


def process_stat(pid: int, tid: int | None = None) -> ProcessStat | None:
    """``/proc/PID/stat`` (or a thread's, ``/proc/PID/task/TID/stat``), None when it is gone or unreadable."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        with open(path, "rb") as f:
            f_ = _fields(f.read().decode("ascii", "replace"))
        ticks = sum(int(v) for v in f_[11:15])      # utime, stime, cutime, cstime
        return ProcessStat(tid or pid, int(f_[1]), int(f_[19]), ticks / _TICKS, int(f_[16]),
                           int(f_[38]) if len(f_) > 38 else 0)
    except (OSError, ValueError, IndexError):
        return None


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds process ``pid`` has used (all threads, and the children it reaped); None if unknown."""
    stat = process_stat(pid)
    return None if stat is None else stat.cpu_s


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (every thread's), from ``/proc/PID/task/*/children`` when the kernel
    provides it, else by reading every process's parent."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    try:
        for tid in tids:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
        return found
    except FileNotFoundError:       # a kernel without CONFIG_PROC_CHILDREN (or the thread ended: scan)
        pass
    except (OSError, ValueError):
        return found
    return [p for p in _all_pids() if (s := process_stat(p)) is not None and s.ppid == pid]


def _all_pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def tree(root: int) -> list[int]:
    """``root`` and all its descendants alive now (``[]`` when ``root`` is gone)."""
    if not os.path.exists(f"/proc/{root}"):
        return []
    out, seen, todo = [root], {root}, [root]
    while todo and len(out) < 100_000:
        for child in children(todo.pop()):
            if child not in seen:
                seen.add(child)
                out.append(child)
                todo.append(child)
    return out


def tree_cpu_seconds(roots: list[int]) -> float | None:
    """CPU seconds used by the process trees under ``roots``: each live process's own time plus what it
    reaped, so a child's time moves to its parent when it ends instead of vanishing. None without /proc."""
    stats = [process_stat(p) for root in roots for p in tree(root)]
    known = [s for s in stats if s is not None]
    return sum(s.cpu_s for s in known) if known else None


def _run_queue_wait_s(pid: int, tid: int) -> float | None:
    """Seconds thread ``tid`` of ``pid`` has spent runnable but waiting for a CPU (schedstat's 2nd field)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return []


def backstop_s(limit_s: float, factor: float = 5.0, extra_s: float = 300.0) -> float:
    """Wall-clock seconds after which work limited to ``limit_s`` (of CPU, or of time not kept waiting) is stopped
    however little it did: ``factor`` times the limit, and at least ``extra_s`` more than it. Past it, the machine
    starved the work: the stop says so instead of blaming the work."""
    return max(limit_s * factor, limit_s + extra_s)


@dataclass
class WorkClock:
    """How long work on the process trees under ``roots()`` has run, not counting the time it was kept
    waiting for a CPU, and the CPU it used; call :meth:`update` now and then (every half second is plenty).

    Per interval between updates, the time charged is the interval less the longest run-queue wait of any
    counted thread in it (so a starved compile worker beside a sleeping kernel is not charged for its wait,
    and a kernel that only sleeps is charged the whole interval). ``cpu_s`` is the CPU the trees used since
    the clock started: many spinning threads that keep each other waiting are stopped by it.
    """

    roots: Callable[[], list[int]]
    started: float = field(default_factory=time.monotonic)
    active_s: float = 0.0             #: wall time minus the time kept waiting for a CPU
    waited_s: float = 0.0             #: the time not charged: kept waiting for a CPU
    cpu_s: float = 0.0                #: CPU seconds the trees used since the start
    _last: float = 0.0
    _waits: dict = field(default_factory=dict)
    _cpu0: float | None = None
    _nice0: int = 0

    def __post_init__(self) -> None:
        self._last = self.started
        self._nice0 = os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else 0
        self._sample()

    @property
    def elapsed_s(self) -> float:
        """Wall-clock seconds since the clock started."""
        return time.monotonic() - self.started

    def _sample(self) -> tuple[dict, float | None]:
        waits: dict[tuple[int, int, int], float] = {}
        cpu = 0.0
        seen_cpu = False
        for root in self.roots():
            for pid in tree(root):
                stat = process_stat(pid)
                if stat is None:
                    continue
                cpu += stat.cpu_s
                seen_cpu = True
                for tid in _threads(pid):
                    thread = process_stat(pid, tid)
                    if thread is None or thread.nice > self._nice0 or thread.policy not in _NORMAL_POLICIES:
                        continue        # lowered its own priority: its waits are its own doing
                    wait = _run_queue_wait_s(pid, tid)
                    if wait is not None:
                        waits[(pid, tid, thread.start_ticks)] = wait
        total = cpu if seen_cpu else None
        if self._cpu0 is None and total is not None:
            self._cpu0 = total
        return waits, total

    def update(self) -> "WorkClock":
        """Read the trees again and advance the counts to now; returns self."""
        now = time.monotonic()
        interval = max(0.0, now - self._last)
        waits, cpu = self._sample()
        longest = 0.0
        for key, wait in waits.items():
            before = self._waits.get(key, 0.0)      # a thread born in the interval waited only in it
            longest = max(longest, wait - before)
        kept = min(interval, max(0.0, longest))
        self.active_s += interval - kept
        self.waited_s += kept
        if cpu is not None and self._cpu0 is not None:
            self.cpu_s = max(self.cpu_s, cpu - self._cpu0)
        self._waits, self._last = waits, now
        return self


__all__ = ["ProcessStat", "WorkClock", "backstop_s", "children", "cpu_seconds", "process_stat", "tree", "tree_cpu_seconds"]
