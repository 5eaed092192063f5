"""The grader's half of "answers out, verdicts in": the code it sends to the judge and the student's kernel.

Why: a test cell's verdict is computed in the judge, a second kernel (its own sandbox, its own
PID namespace) that runs the instructor's cells and no student Python. The grader drives both:

- after the student's kernel ran an answer cell, it asks that kernel to describe the names the
  instructor's answer cell defines (:func:`gemmlab.answers.serving.describe`) and binds them in the
  judge (:func:`gemmlab.answers.stand_ins.bind`);
- while the judge runs a cell, each call of a student function is a JSON line on the judge's socket;
  :class:`AnswerRelay` passes it to the student kernel's socket, where a thread of that kernel runs
  it (:func:`gemmlab.answers.serving.serve`), and passes the plain-data reply back.

Everything the student's kernel returns is a string the judge decodes with its own types.
"""
from __future__ import annotations

import ast
import json
import os
import select
import socket
import threading
import time

from gemmlab.answers import serving, stand_ins
from gemmlab.answers.wire import JUDGE_ENV, MAX_DESCRIPTION_CHARS, MAX_REPLY_CHARS
from gemmlab.timing.leaderboard_draw import SECRET_ENV as LEADERBOARD_SECRET_ENV

from .kernel import SandboxedKernel

#: Environment of the judge's kernel: gemmlab's grading mode and the judge's own switch.
JUDGE_KERNEL_ENV = {JUDGE_ENV: "1", "GEMMLAB_GRADING": "1"}


def judge_kernel_env() -> dict[str, str]:
    """:data:`JUDGE_KERNEL_ENV`, plus the leaderboard's secret where the grader has one: the judge draws the
    leaderboard's shapes and seeds from it (gemmlab.timing.leaderboard_draw); the student's kernel never gets it
    (the sandbox passes only autograder.harness.sandbox.PASSED_THROUGH)."""
    env = dict(JUDGE_KERNEL_ENV)
    secret = os.environ.get(LEADERBOARD_SECRET_ENV)
    if secret:
        env[LEADERBOARD_SECRET_ENV] = secret
    return env

#: First code the judge runs: quiet warnings (nbgrader zeroes a cell with anything on stderr), gemmlab loaded.
JUDGE_BOOTSTRAP = (
    "import warnings as __w\n__w.filterwarnings('ignore')\ndel __w\n"
    f"import {stand_ins.__name__}\n"
)

#: Run in the student's kernel after the grader's bootstrap: a thread that answers the judge's calls.
STUDENT_SERVER = (f"__import__({serving.__name__!r}, fromlist=['serve_in_background'])"
                  f".{serving.serve_in_background.__name__}(get_ipython().user_ns)\nNone\n")

#: Seconds the student's kernel may take to describe its answers.
DESCRIBE_S = 30.0


def _module_call(function: object, argument: object) -> str:
    """An expression calling ``function`` (of the student's side, :mod:`gemmlab.answers.serving`) on the kernel's
    namespace and ``argument`` (as a literal); named from the function itself, so a rename fails here, not while
    grading."""
    module, name = function.__module__, function.__name__  # type: ignore[attr-defined]
    return f"__import__({module!r}, fromlist=[{name!r}]).{name}(get_ipython().user_ns, {argument!r})"


def _string_value(text: str) -> str | None:
    """The string a user expression's ``text/plain`` stands for, or None if it is not a string literal."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def describe(student: SandboxedKernel, names: list[str]) -> str:
    """The student's kernel's description of ``names`` (JSON, at most about MAX_DESCRIPTION_CHARS); each one not
    plain data ("opaque", with the reason) when the kernel cannot answer or answers beyond the limit, so every
    test that uses it fails saying why."""
    if not names:
        return "{}"
    ok, text = student.evaluate(_module_call(serving.describe, list(names)), DESCRIBE_S)
    if ok and len(text) > 4 * MAX_DESCRIPTION_CHARS:
        ok, text = False, (f"its description takes {len(text):,} characters; the answers of a notebook may take "
                           f"{MAX_DESCRIPTION_CHARS:,} in all")
    value = _string_value(text) if ok else None
    return value if value is not None else json.dumps({n: {"kind": "opaque", "why": f"{n}: your notebook's kernel "
                                                           "did not describe it" + ("" if ok else f" ({text[:300]})")}
                                                       for n in names})


def bind_code(description: str, given: list[str] = (), names: list[str] | None = None) -> str:
    """Code that binds the described names in the judge's namespace (only ``names``, those the grader asked the
    student's kernel to describe: a forged description cannot rebind anything else), then runs the instructor's
    ``given`` statements of the answer cells (each on its own: one that fails leaves the student's name bound)."""
    lines = [f"__import__({stand_ins.__name__!r}, fromlist=['bind']).{stand_ins.bind.__name__}("
             f"get_ipython().user_ns, {description!r}, {list(names) if names is not None else None!r})"]
    for code in given:
        body = "\n".join("    " + line for line in code.splitlines())
        lines.append(f"try:\n{body}\nexcept Exception:\n    pass")
    return "\n".join(lines) + "\nNone"


class LineCutter:
    """Whole lines out of a byte stream, each at most ``limit`` bytes long.

    A longer line is dropped whole: what came of it as soon as it passes the limit, its rest up to the
    newline as it comes. :meth:`feed` gives ``None`` once in its place, so the relay can answer for it;
    no part of a cut line is ever passed on (its end could otherwise pose as the next reply)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held = bytearray()
        self._cutting = False

    def feed(self, chunk: bytes) -> list[bytes | None]:
        """The lines ``chunk`` completes (without their newlines), ``None`` for each line cut."""
        out: list[bytes | None] = []
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            if not self._cutting:
                self._held += chunk[start:end]
            if newline < 0:
                if not self._cutting and len(self._held) > self.limit:
                    out.append(None)
                    self._cutting = True
                    self._held.clear()
                return out
            if self._cutting:
                self._cutting = False
            else:
                out.append(bytes(self._held) if len(self._held) <= self.limit else None)
            self._held.clear()
            start = newline + 1

    def held(self) -> int:
        """Bytes of an unfinished line held: never more than ``limit``."""
        return len(self._held)


class AnswerRelay:
    """Relays whole lines between the judge's socket and the student kernel's: calls one way, replies the other.

    Each kernel gets its end of a fresh socket pair at every start (:meth:`pair`), so either kernel can
    be restarted alone. A line longer than ``MAX_LINE`` (a flood) is dropped whole (:class:`LineCutter`)
    and the judge gets an error reply for its last call instead; the grader reads nothing else from
    either kernel here.
    """

    MAX_LINE = MAX_REPLY_CHARS

    def __init__(self) -> None:
        self._ends: dict[str, socket.socket | None] = {"judge": None, "student": None}
        self._retired: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gemmlab-answer-relay", daemon=True)
        self._thread.start()

    def pair(self, side: str) -> socket.socket:
        """A new socket pair for ``side``'s next kernel: the relay keeps one end, the kernel inherits the other.

        The relay's old end is closed by the relay's own thread, never under a ``select`` that still waits on it."""
        mine, theirs = socket.socketpair()
        mine.setblocking(False)
        with self._lock:
            old = self._ends[side]
            self._ends[side] = mine
            if old is not None:
                self._retired.append(old)
        return theirs

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for end in [*self._ends.values(), *self._retired]:
            if end is not None:
                end.close()

    def _run(self) -> None:
        cutters: dict[socket.socket, LineCutter] = {}
        last_call: object = None
        while not self._stop.is_set():
            with self._lock:
                retired, self._retired = self._retired, []
                ends = {side: end for side, end in self._ends.items() if end is not None}
            for end in retired:
                cutters.pop(end, None)
                end.close()
            if not ends:
                time.sleep(0.01)
                continue
            readable, _, _ = select.select(list(ends.values()), [], [], 0.05)
            for side, end in ends.items():
                if end not in readable:
                    continue
                try:
                    chunk = end.recv(1 << 20)
                except OSError:
                    chunk = b""
                if not chunk:
                    with self._lock:
                        current = self._ends[side] is end
                        if current:
                            self._ends[side] = None
                            self._retired.append(end)
                    # The kernel the judge talks to ended: the call it was answering never will be. (An end
                    # already replaced says nothing: the grader restarts a kernel between cells, with no call
                    # in flight, and a notice now would answer the judge's next call to the new kernel.)
                    if side == "student" and current:
                        self._send("judge", json.dumps({"id": last_call, "error": "KernelError", "message":
                                                        "your notebook's kernel ended during this call"}).encode(),
                                   last_call)
                    continue
                other = "student" if side == "judge" else "judge"
                for line in cutters.setdefault(end, LineCutter(self.MAX_LINE)).feed(chunk):
                    if line is None:
                        if side == "student":
                            self._send("judge", json.dumps({"id": last_call, "error": "OutputLimit", "message": (
                                f"the reply was longer than {self.MAX_LINE:,} characters")}).encode(), last_call)
                        continue
                    if side == "judge":
                        last_call = _call_id(line)
                    self._send(other, line, last_call)

    def _send(self, side: str, line: bytes, last_call: object) -> None:
        with self._lock:
            end = self._ends[side]
        if end is None:
            if side == "student":     # no student kernel to ask: the judge's call fails at once
                self._send("judge", json.dumps({"id": last_call, "error": "KernelError", "message":
                                                "your notebook's kernel is not running"}).encode(), last_call)
            return
        try:
            end.setblocking(True)
            end.sendall(line + b"\n")
        except OSError:
            pass
        finally:
            end.setblocking(False)


def _call_id(line: bytes) -> object:
    try:
        call = json.loads(line)
    except ValueError:
        return None
    return call.get("id") if isinstance(call, dict) else None


__all__ = ["AnswerRelay", "DESCRIBE_S", "JUDGE_BOOTSTRAP", "JUDGE_KERNEL_ENV", "LineCutter", "STUDENT_SERVER",
           "bind_code", "describe", "judge_kernel_env"]
