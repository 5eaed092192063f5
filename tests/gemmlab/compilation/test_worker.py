"""Compiles in worker processes: a limit of compiler CPU time with a wall-clock backstop, an interrupt that stops
them, workers reused and replaced, printf headers."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from gemmlab.compiling import worker
from gemmlab.compiling.compiler import compile_to
from gemmlab.errors import CompileError, CompileTimeoutError

#: 2^DEPTH distinct template instantiations: seconds at depth 12, without end at 30.
BOMB = r"""
template <int N, int M> struct Tree { static constexpr int v = Tree<N - 1, 2 * M>::v + Tree<N - 1, 2 * M + 1>::v; };
template <int M> struct Tree<0, M> { static constexpr int v = 1; };
__global__ void bomb(int* x) { x[0] = Tree<30, 0>::v; }
"""
TINY = "__global__ void tiny(int* x) { x[0] = 1; }\n"


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_compile_bomb_is_stopped_when_it_used_its_cpu_allowance_and_the_next_compile_works() -> None:
    with pytest.raises(CompileTimeoutError, match=r"used its whole allowance of 1.5 s of compiler CPU time") as caught:
        compile_to(BOMB, "bomb", arch="sm_90a", use_cache=False, timeout=1.5)
    err = caught.value
    assert err.limit_s == 1.5 and err.cpu_s >= 1.5 and isinstance(err, CompileError)
    assert "gemmlab.set_compile_limit(300)" in str(err), "the message says how to raise the limit from a cell"
    assert compile_to(TINY, "tiny", arch="sm_90a", use_cache=False).cubin[:4] == b"\x7fELF"


def test_a_runaway_is_told_from_a_kernel_that_compiled_before() -> None:
    """The limit message names what this kernel needed the last time it compiled: a change that made it explode."""
    compile_to("__global__ void bomb(int* x) { x[0] = 1; }\n", "bomb", arch="sm_90a", use_cache=False)
    with pytest.raises(CompileTimeoutError, match=r"Its last successful compile in this kernel took \d+ s of CPU, "
                                                  r"so a change since then makes the compiler work far longer"):
        compile_to(BOMB, "bomb", arch="sm_90a", use_cache=False, timeout=1.5)


def test_a_starved_compile_is_stopped_by_the_clock_and_says_the_machine_was_busy(monkeypatch) -> None:
    """A compiler that gets no CPU (here: stopped outright, as a badly overloaded machine would starve it) uses
    none of its allowance; the wall-clock backstop ends it, and the message says it was still working."""
    monkeypatch.setattr(worker, "BACKSTOP_FACTOR", 2.0)
    monkeypatch.setattr(worker, "BACKSTOP_MIN_EXTRA_S", 0.0)
    compile_to(TINY, "tiny", arch="sm_90a", use_cache=False)     # an idle worker, which the next compile takes
    (pid,) = worker.pids()
    os.kill(pid, signal.SIGSTOP)
    try:
        with pytest.raises(CompileTimeoutError, match=r"was stopped after \d+ s on the clock: the machine is so busy "
                                                      r"that the compiler got .* It was still working") as caught:
            compile_to(TINY + "// starved\n", "tiny", arch="sm_90a", use_cache=False, timeout=1.0)
    finally:
        if not _gone(pid):
            os.kill(pid, signal.SIGCONT)
    assert caught.value.cpu_s < 1.0 <= caught.value.wall_s / 2, "stopped by the clock, not by its CPU allowance"
    assert _gone(pid) and compile_to(TINY, "tiny", arch="sm_90a", use_cache=False).lowered_name == "_Z4tinyPi"


def test_the_limit_comes_from_a_cell_or_the_environment(monkeypatch) -> None:
    monkeypatch.delenv(worker.ENV_TIMEOUT, raising=False)
    assert worker.set_compile_limit(1) == 1.0 and os.environ[worker.ENV_TIMEOUT] == "1.0"
    with pytest.raises(CompileTimeoutError, match="allowance of 1 s"):
        compile_to(BOMB, "bomb", arch="sm_90a", use_cache=False)
    assert worker.set_compile_limit(None) == worker.DEFAULT_TIMEOUT_S and worker.ENV_TIMEOUT not in os.environ
    import gemmlab

    assert gemmlab.set_compile_limit is worker.set_compile_limit, "public: gemmlab.set_compile_limit(300) in a cell"
    for bad in (0, -5, float("nan"), float("inf"), "300", True):
        with pytest.raises(CompileError, match="positive number of seconds"):
            worker.set_compile_limit(bad)
    monkeypatch.setenv(worker.ENV_TIMEOUT, "soon")
    with pytest.raises(CompileError, match="GEMMLAB_COMPILE_TIMEOUT='soon' is not a number"):
        compile_to(TINY, "tiny", arch="sm_90a", use_cache=False)
    monkeypatch.delenv(worker.ENV_TIMEOUT)
    assert worker.time_limit() == worker.DEFAULT_TIMEOUT_S


def test_an_idle_worker_that_something_else_ended_is_replaced() -> None:
    """A grader stops the processes a cell left running; the next compile takes a fresh worker instead of failing."""
    compile_to(TINY, "tiny", arch="sm_90a", use_cache=False)
    (pid,) = worker.pids()
    os.kill(pid, signal.SIGKILL)
    assert compile_to(TINY + "// after\n", "tiny", arch="sm_90a", use_cache=False).lowered_name == "_Z4tinyPi"
    assert pid not in worker.pids()


def test_an_interrupt_stops_the_compile_within_a_second() -> None:
    # Python's own interrupt handler, whatever a test before this one in the same process left (CI saw SIGINT ignored).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    compile_to(TINY, "tiny", arch="sm_90a", use_cache=False)   # a worker is running and idle
    before = set(worker.pids())
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            compile_to(BOMB, "bomb", arch="sm_90a", use_cache=False, timeout=60)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    # 1 s until the interrupt, then a poll of 0.25 s; the bound is loose so that a busy machine cannot fail it,
    # and far below the 60 s limit, so the interrupt (not the limit) stopped it
    assert time.monotonic() - start < 30
    assert all(_gone(pid) for pid in before)          # the compiling worker was killed and reaped
    assert compile_to(TINY, "tiny", arch="sm_90a", use_cache=False).lowered_name == "_Z4tinyPi"


def test_workers_are_reused_between_compiles() -> None:
    compile_to(TINY, "tiny", arch="sm_90a", use_cache=False)
    first = worker.pids()
    compile_to(TINY + "// again\n", "tiny", arch="sm_90a", use_cache=False)
    assert worker.pids() == first and len(first) == 1


def test_stop_all_leaves_no_process_behind() -> None:
    compile_to(TINY, "tiny", arch="sm_90a", use_cache=False)
    pids = worker.pids()
    worker.stop_all()
    assert worker.pids() == [] and all(_gone(pid) for pid in pids)


def test_compile_errors_come_back_with_their_diagnostics() -> None:
    with pytest.raises(CompileError) as caught:
        compile_to("__global__ void k(int* x) {\n  x[0] = missing;\n}\n", "k", arch="sm_90a", use_cache=False)
    assert caught.value.diagnostics[0].line == 2 and "missing" in caught.value.log


def test_printf_and_the_standard_headers_students_write_compile() -> None:
    source = r"""
#include <cstdio>
#include <stdio.h>
#include <cassert>
#include <assert.h>
#include <cstdint>
#include <stdint.h>
#include <cstddef>
#include <stddef.h>
#include <climits>
#include <limits.h>
__global__ void show(const float* x) {
  std::uint32_t big = UINT_MAX;
  int8_t small = 1;
  std::size_t n = sizeof(big);
  assert(x != nullptr);
  printf("thread %d: %u %d %d %f\n", threadIdx.x, big, small, (int)n, x[threadIdx.x]);
}
"""
    quiet = compile_to(source, "show", arch="sm_90a", use_cache=False)
    assert "vprintf" in quiet.ptx and "__assertfail" not in quiet.ptx   # -DNDEBUG: asserts off by default
    checked = compile_to(source, "show", arch="sm_90a", use_cache=False, options=["-UNDEBUG"])
    assert "__assertfail" in checked.ptx
