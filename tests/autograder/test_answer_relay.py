"""The grader's answer relay (autograder.harness.judging.AnswerRelay), directly: whole lines between the
judge's socket and the student kernel's, a flood cut whole, a kernel that ends or restarts answered for.

The relay is the only path between the judge, which runs the tests, and the student's kernel, which runs
the student's Python: a call lost or a reply forged here is a grade wrong. These tests drive a real relay
through real socket pairs (the ends the kernels inherit), with no kernel or sandbox around it, and once
end to end: the judge's own channel (``gemmlab.answers.stand_ins.Answer``) and a child process that answers
with ``serve_in_background``, as a student's kernel does when graded.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from typing import Iterator

import pytest

from autograder.harness.judging import AnswerRelay, LineCutter
from gemmlab.answers import stand_ins, wire
from gemmlab.answers.wire import ANSWER_FD_ENV, MAX_REPLY_CHARS
from tests.support import ROOT

WAIT_S = 10.0


class SmallRelay(AnswerRelay):
    """The real relay with a line limit small enough to flood quickly."""

    MAX_LINE = 4096


class Ends:
    """The judge's and the student kernel's ends of a relay, read line by line with a deadline."""

    def __init__(self, relay: AnswerRelay) -> None:
        self.relay = relay
        self.judge = relay.pair("judge")
        self.student = relay.pair("student")
        self._buffers: dict[socket.socket, bytes] = {}

    def line(self, sock: socket.socket, wait_s: float = WAIT_S) -> bytes:
        """The next whole line ``sock`` receives (without its newline); fails the test after ``wait_s``."""
        buffer = self._buffers.get(sock, b"")
        deadline = time.monotonic() + wait_s
        while b"\n" not in buffer:
            left = deadline - time.monotonic()
            assert left > 0, f"no whole line within {wait_s} s (got {len(buffer)} bytes: {buffer[:80]!r})"
            sock.settimeout(left)
            try:
                chunk = sock.recv(1 << 20)
            except socket.timeout:
                continue
            assert chunk, "the relay closed this end"
            buffer += chunk
        line, self._buffers[sock] = buffer.split(b"\n", 1)
        return line

    def nothing_more(self, sock: socket.socket, wait_s: float = 0.5) -> bool:
        """Whether ``sock`` receives nothing (beyond what was read) within ``wait_s``."""
        if self._buffers.get(sock):
            return False
        sock.settimeout(wait_s)
        try:
            return not sock.recv(1 << 16)
        except socket.timeout:
            return True


@pytest.fixture
def ends() -> Iterator[Ends]:
    relay = SmallRelay()
    try:
        yield Ends(relay)
    finally:
        relay.close()


def _call(ident: int, name: str = "square") -> bytes:
    return json.dumps({"id": ident, "name": name, "args": [], "kwargs": {}}).encode()


# ------------------------------------------------------------------ lines, whole and in order
def test_a_call_and_its_reply_cross_whole_however_they_are_cut(ends: Ends) -> None:
    call = _call(1)
    for piece in (call[:5], call[5:17], call[17:] + b"\n"):        # one line sent in three pieces
        ends.judge.sendall(piece)
        time.sleep(0.05)
    assert ends.line(ends.student) == call
    ends.student.sendall(b'{"id": 1, "result": 1}\n{"id": 1, "result": 2}\n{"id": 1, "res')   # two and a half
    assert ends.line(ends.judge) == b'{"id": 1, "result": 1}'
    assert ends.line(ends.judge) == b'{"id": 1, "result": 2}'
    assert ends.nothing_more(ends.judge), "half a line was passed on"
    ends.student.sendall(b'ult": 3}\n')
    assert ends.line(ends.judge) == b'{"id": 1, "result": 3}'


def test_a_line_at_the_limit_passes_and_one_byte_more_is_cut(ends: Ends) -> None:
    limit = SmallRelay.MAX_LINE
    ends.judge.sendall(_call(4) + b"\n")
    ends.line(ends.student)
    at_limit = b'{"id": 4, "result": "' + b"a" * (limit - 23) + b'"}'
    assert len(at_limit) == limit
    ends.student.sendall(at_limit + b"\n")
    assert ends.line(ends.judge) == at_limit
    ends.student.sendall(b"b" + at_limit + b"\n")                     # arrives whole, in one piece: still cut
    cut = json.loads(ends.line(ends.judge))
    assert cut["id"] == 4 and cut["error"] == "OutputLimit", cut
    assert ends.nothing_more(ends.judge)


# ------------------------------------------------------------------ a flood
def test_a_flood_is_cut_whole_and_the_judge_told_for_its_call(ends: Ends) -> None:
    """A reply longer than the limit is never passed on, not its start nor its end: the judge's pending call
    gets an OutputLimit error instead (once), and the relay goes on relaying the next call."""
    ends.judge.sendall(_call(7) + b"\n")
    assert json.loads(ends.line(ends.student))["id"] == 7
    flood = b"x" * (3 * SmallRelay.MAX_LINE)
    for start in range(0, len(flood), 1000):                  # in pieces, as a kernel writing in a loop sends it
        ends.student.sendall(flood[start:start + 1000])
    cut = json.loads(ends.line(ends.judge))
    assert cut == {"id": 7, "error": "OutputLimit",
                   "message": f"the reply was longer than {SmallRelay.MAX_LINE:,} characters"}, cut
    forged = b'{"id": 8, "result": 64}'                       # the flood's last bytes, shaped as the next reply
    ends.student.sendall(b"x" * 100 + forged + b"\n")
    assert ends.nothing_more(ends.judge), "the end of the flooded line reached the judge"
    ends.judge.sendall(_call(8) + b"\n")
    assert json.loads(ends.line(ends.student))["id"] == 8
    ends.student.sendall(b'{"id": 8, "result": 9}\n')
    assert ends.line(ends.judge) == b'{"id": 8, "result": 9}'


def test_the_relays_limit_is_the_longest_reply_the_judge_reads() -> None:
    assert AnswerRelay.MAX_LINE == MAX_REPLY_CHARS


@pytest.mark.parametrize("pieces, lines", [
    ([b"ab\ncd\n"], [b"ab", b"cd"]),
    ([b"a", b"b\nc", b"d\n"], [b"ab", b"cd"]),
    ([b"12345\n"], [b"12345"]),                     # at the limit
    ([b"123456\n", b"ok\n"], [None, b"ok"]),        # one over, in one piece
    ([b"1234", b"56789", b"0\nok\n"], [None, b"ok"]),  # over, in pieces: cut once, its end dropped too
    ([b"123456", b"789", b"0123456", b"\n"], [None]),  # reported once however long
])
def test_line_cutter_yields_whole_lines_and_one_mark_per_cut_line(pieces: list[bytes], lines: list) -> None:
    cutter = LineCutter(5)
    got: list = []
    for piece in pieces:
        got += cutter.feed(piece)
    assert got == lines


def test_line_cutter_holds_at_most_its_limit() -> None:
    cutter = LineCutter(5)
    for _ in range(100):
        cutter.feed(b"x" * 1000)
        assert cutter.held() <= 5


# ------------------------------------------------------------------ kernels that end or restart
def test_a_student_kernel_that_ends_during_a_call_fails_that_call(ends: Ends) -> None:
    ends.judge.sendall(_call(3) + b"\n")
    ends.line(ends.student)
    ends.student.close()                                          # the kernel died while answering
    reply = json.loads(ends.line(ends.judge))
    assert reply["id"] == 3 and reply["error"] == "KernelError" and "ended during this call" in reply["message"]


def test_a_call_with_no_student_kernel_fails_at_once(ends: Ends) -> None:
    ends.student.close()
    ends.line(ends.judge)                                         # the notice for the last call (none yet)
    ends.judge.sendall(_call(5) + b"\n")
    reply = json.loads(ends.line(ends.judge, wait_s=2))
    assert reply["id"] == 5 and reply["error"] == "KernelError" and "not running" in reply["message"], reply


def test_a_restarted_kernel_gets_a_fresh_end_and_an_old_end_closing_late_says_nothing(ends: Ends) -> None:
    """Each kernel start pairs anew and the relay closes the old end itself. An old kernel's end that closes
    late sends no notice: it would answer the judge's call that the new kernel is answering."""
    for i in range(20):
        old = ends.student
        ends.student = ends.relay.pair("student")
        ends.judge.sendall(_call(i) + b"\n")
        assert json.loads(ends.line(ends.student))["id"] == i
        old.close()                                      # the old kernel's end closes during the call
        time.sleep(0.06)                                 # a turn of the relay's loop (50 ms) to see it
        reply = b'{"id": %d, "result": %d}' % (i, i)
        ends.student.sendall(reply + b"\n")
        assert ends.line(ends.judge) == reply
    assert ends.nothing_more(ends.judge)


def test_close_stops_the_relay_and_closes_its_ends() -> None:
    relay = AnswerRelay()
    judge, student = relay.pair("judge"), relay.pair("student")
    relay.close()
    for sock in (judge, student):
        sock.settimeout(WAIT_S)
        assert sock.recv(16) == b"", "the relay's end is still open"


# ------------------------------------------------------------------ end to end: the judge's channel, a student process
SERVER = """
import sys, time
from gemmlab.answers.wire import ANSWER_FD_ENV
from gemmlab.answers.serving import serve_in_background
import os

def square(x):
    return x * x

def flood(n):
    os.write(int(os.environ[ANSWER_FD_ENV]), b"y" * n)   # bytes straight onto the socket, no newline
    return n

assert serve_in_background(globals())
print("serving", flush=True)
sys.stdin.read()                                          # until the test closes stdin
"""


@pytest.fixture
def student_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[SmallRelay]:
    """A relay between this process (the judge: its channel on the relay's judge end) and a child process
    answering as a graded student's kernel does."""
    relay = SmallRelay()
    student_end, judge_end = relay.pair("student"), relay.pair("judge")
    env = dict(os.environ, **{ANSWER_FD_ENV: str(student_end.fileno())},
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen([sys.executable, "-c", SERVER], env=env, pass_fds=(student_end.fileno(),),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    student_end.close()
    monkeypatch.setenv(ANSWER_FD_ENV, str(os.dup(judge_end.fileno())))
    judge_end.close()
    monkeypatch.setattr(stand_ins, "channel", stand_ins.SocketChannel())
    try:
        assert child.stdout.readline().strip() == "serving"
        yield relay
    finally:
        child.stdin.close()
        child.wait(timeout=WAIT_S)
        relay.close()
        os.close(int(os.environ[ANSWER_FD_ENV]))


def test_end_to_end_a_judged_call_is_answered_and_a_flood_costs_only_its_call(student_process) -> None:
    square, flood = stand_ins.Answer("square"), stand_ins.Answer("flood")
    assert square(7) == 49 and square.each([(2,), (3,)]) == [4, 9]
    with pytest.raises(wire.AnswerError, match=f"longer than {SmallRelay.MAX_LINE:,} characters"):
        flood(3 * SmallRelay.MAX_LINE)
    assert square(12) == 144, "the call after a flood is answered"
