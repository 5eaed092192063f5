"""Compiles in worker processes: a time limit, an interrupt that stops them, workers reused, printf headers."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from gemmlab.compilation import worker
from gemmlab.compiler import compile_to
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


def test_a_compile_bomb_is_stopped_at_its_limit_and_the_next_compile_works() -> None:
    start = time.monotonic()
    with pytest.raises(CompileTimeoutError, match=r"longer than 1.5 s.*timeout=") as caught:
        compile_to(BOMB, "bomb", arch="sm_90a", use_cache=False, timeout=1.5)
    assert 1.5 <= time.monotonic() - start < 5
    assert caught.value.limit_s == 1.5 and isinstance(caught.value, CompileError)
    assert compile_to(TINY, "tiny", arch="sm_90a", use_cache=False).cubin[:4] == b"\x7fELF"


def test_the_limit_comes_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv(worker.ENV_TIMEOUT, "1")
    with pytest.raises(CompileTimeoutError, match="longer than 1 s"):
        compile_to(BOMB, "bomb", arch="sm_90a", use_cache=False)
    monkeypatch.setenv(worker.ENV_TIMEOUT, "soon")
    with pytest.raises(CompileError, match="GEMMLAB_COMPILE_TIMEOUT='soon' is not a number"):
        compile_to(TINY, "tiny", arch="sm_90a", use_cache=False)
    monkeypatch.delenv(worker.ENV_TIMEOUT)
    assert worker.time_limit() == worker.DEFAULT_TIMEOUT_S
    with pytest.raises(CompileError, match="positive number of seconds"):
        worker.time_limit(0)


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
    assert time.monotonic() - start < 2.0            # 1 s until the interrupt, then at most a second
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
