"""gemmlab.running.proctime: what work consumed, read from /proc, on a machine made busy on purpose.

A spinning process on one core beside three burners gets about a quarter of it: its run-queue waits are the
rest, and a WorkClock does not charge them. A process that only sleeps is charged the clock. One that lowered
its own priority is not "kept waiting": starving oneself buys no time.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from gemmlab.running import proctime
from tests.support.busy import burners, one_core

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux's /proc")

SPIN = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nos.nice(int(sys.argv[2]))\n" \
       "print('go', flush=True)\nwhile True:\n    pass\n"
SLEEP = "import time\nprint('go', flush=True)\ntime.sleep(60)\n"


def _start(code: str, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "go"
    return proc


def _watch(proc: subprocess.Popen, seconds: float) -> tuple[proctime.WorkClock, float]:
    """The clock after watching ``proc`` for ``seconds``, and the time its last update covered (read before the
    process is killed: on a loaded machine the kill and the wait take their own time, which no update saw)."""
    clock = proctime.WorkClock(lambda: [proc.pid])
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.25)
        clock.update()
    covered = clock.update().elapsed_s
    proc.kill()
    proc.wait()
    return clock, covered


def test_a_starved_spinner_is_charged_its_work_not_its_waits() -> None:
    core = one_core()
    with burners(3, core):
        clock, elapsed = _watch(_start(SPIN, str(core), "0"), 3.0)
    assert clock.waited_s > 0.5 * elapsed, clock           # three burners beside it: it waited most of the time
    assert clock.active_s < 0.5 * elapsed and abs(clock.active_s + clock.waited_s - elapsed) < 0.5
    assert 0 < clock.cpu_s < 0.6 * elapsed, clock


def test_a_sleeper_is_charged_the_clock() -> None:
    clock, elapsed = _watch(_start(SLEEP), 2.0)
    assert clock.active_s > 0.8 * elapsed and clock.cpu_s < 0.5, clock


def test_a_process_that_lowered_its_own_priority_is_not_kept_waiting() -> None:
    """nice 19 beside busy neighbours: it waits, but by its own choice, so the clock charges the time."""
    core = one_core()
    with burners(3, core):
        clock, elapsed = _watch(_start(SPIN, str(core), "19"), 3.0)
    assert clock.active_s > 0.8 * elapsed, clock


def test_cpu_of_a_tree_survives_its_children_ending() -> None:
    """A child's CPU moves to its parent when the parent reaps it: the tree's total does not drop."""
    code = ("import os, time\nprint('go', flush=True)\nfor _ in range(3):\n    pid = os.fork()\n    if pid == 0:\n"
            "        end = time.process_time() + 0.4\n        while time.process_time() < end:\n            pass\n"
            "        os._exit(0)\n    os.waitpid(pid, 0)\nprint('done', flush=True)\ntime.sleep(60)\n")
    proc = _start(code)
    try:
        assert proc.stdout.readline().strip() == "done"
        assert proctime.tree_cpu_seconds([proc.pid]) >= 1.1
        assert proctime.tree(proc.pid) == [proc.pid]
    finally:
        proc.kill()
        proc.wait()


def test_the_tree_and_a_backstop() -> None:
    assert proctime.tree(os.getpid())[0] == os.getpid()
    assert proctime.cpu_seconds(os.getpid()) > 0
    assert proctime.backstop_s(120) == 600 and proctime.backstop_s(8) == 308
