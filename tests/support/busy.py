"""A machine made busy on purpose: processes that burn CPU, pinned to one core beside the work under test.

Why: limits that count the clock fail honest work on a busy machine (a shared JupyterHub node, CI beside other
jobs). Tests of limits that count work instead run that work on one core shared with ``n`` burners, so it gets
about 1/(n+1) of the core however idle the rest of the machine is.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import Iterator

_BURN = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nprint('burning', flush=True)\nwhile True:\n    pass\n"


def one_core() -> int:
    """A core this process may run on (the work and the burners share it)."""
    return min(os.sched_getaffinity(0))


@contextlib.contextmanager
def burners(n: int, core: int) -> Iterator[list[int]]:
    """``n`` processes spinning on ``core`` while the block runs; their pids. They are killed after it."""
    procs = [subprocess.Popen([sys.executable, "-c", _BURN, str(core)], stdout=subprocess.PIPE, text=True,
                              start_new_session=True) for _ in range(n)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "burning"
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@contextlib.contextmanager
def pinned(core: int) -> Iterator[None]:
    """This process (and every process it starts from now on) runs on ``core`` alone while the block runs."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


__all__ = ["burners", "one_core", "pinned"]
