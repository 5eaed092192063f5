"""A cell's limit counts work: many processes that keep each other waiting are stopped by the CPU they use."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from autograder.harness.cellclock import CPU_PER_LIMIT_S, CellClock, backstop_s
from tests.support.busy import one_core

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux's /proc")

#: Each of the eight writes its line with one write(2) (atomic on a pipe): print() may write "go" and its newline
#: apart, and two processes' lines then interleave ("gogo").
FORK_SPINNERS = ("import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nfor _ in range(7):\n"
                 "    if os.fork() == 0:\n        break\nos.write(1, b'go\\n')\nwhile True:\n    pass\n")


def test_spinners_that_keep_each_other_waiting_are_stopped_by_their_cpu() -> None:
    """Eight processes on one core each wait 7/8 of the time, so their time not kept waiting barely grows: the
    CPU they use together ends the cell (a fork bomb that waits on itself buys no time)."""
    proc = subprocess.Popen([sys.executable, "-c", FORK_SPINNERS, str(one_core())], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        for _ in range(8):
            assert proc.stdout.readline().strip() == "go"
        clock = CellClock(0.5, lambda: [proc.pid])
        while not clock.update().over():
            assert not clock.starved(), "a cell that uses CPU is never the machine's fault"
            time.sleep(0.25)
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
    assert clock.cpu_over() and clock.active_s < 0.5 and clock.cpu_s >= CPU_PER_LIMIT_S * 0.5, vars(clock.work)
    assert "of CPU" in clock.spent()


def test_the_backstop_is_several_times_the_limit() -> None:
    assert backstop_s(180) == 900 and backstop_s(8) == 308
