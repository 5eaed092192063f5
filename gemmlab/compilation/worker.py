"""Compiles in child processes, with a time limit, which an interrupt stops within a second.

Why: NVRTC runs in the calling process and cannot be interrupted. A compile bomb ran past 150 s,
JupyterLab's interrupt could not stop it, and the student had to restart the kernel and lose their
state. A child process can be killed. Workers are started once and reused (a fresh one costs Python's
start-up and loading NVRTC), killed when a compile runs past its limit, is interrupted or the
interpreter exits, and replaced at the next compile. ``compile_ahead`` runs its background compiles
in the same workers.

The limit: ``timeout=`` of ``gemmlab.compile``, else ``GEMMLAB_COMPILE_TIMEOUT`` (seconds), else
:data:`DEFAULT_TIMEOUT_S`. Child side: ``python -m gemmlab.compilation.worker`` reads pickled jobs on
stdin and answers each with a pickled :class:`Compiled` or the GemmlabError it raised.
"""
from __future__ import annotations

import atexit
import os
import pickle
import selectors
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..errors import CompileError, CompileTimeoutError, GemmlabError, ToolchainError
from . import cell_lines
from .job import CompileJob
from .record import Compiled

ENV_TIMEOUT = "GEMMLAB_COMPILE_TIMEOUT"
DEFAULT_TIMEOUT_S = 120.0
#: Idle workers kept for the next compile (one foreground, and compile_ahead's usual two at once, share them).
MAX_IDLE = 2
_HEADER = struct.Struct("<Q")
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])

_LOCK = threading.Lock()
_IDLE: list["Worker"] = []
_LIVE: set["Worker"] = set()


def time_limit(timeout: float | None = None) -> float:
    """Seconds a compile may run: ``timeout``, else ``GEMMLAB_COMPILE_TIMEOUT``, else :data:`DEFAULT_TIMEOUT_S`."""
    if timeout is None:
        raw = os.environ.get(ENV_TIMEOUT, "").strip()
        if not raw:
            return DEFAULT_TIMEOUT_S
        try:
            timeout = float(raw)
        except ValueError:
            raise CompileError(f"{ENV_TIMEOUT}={raw!r} is not a number of seconds: set it to e.g. 300, "
                               f"or unset it for the default of {DEFAULT_TIMEOUT_S:.0f} s.") from None
    if not timeout > 0:
        raise CompileError(f"A compile time limit must be a positive number of seconds, not {timeout!r}.")
    return float(timeout)


#: Longest wait for the compiler's answer between two looks at pending signals (JupyterLab's interrupt).
SIGNAL_POLL_S = 0.25


def run(job: CompileJob, timeout: float | None = None) -> Compiled:
    """Compile ``job`` in a worker process. Past the limit the worker is killed and CompileTimeoutError
    names the limit; KeyboardInterrupt (JupyterLab's interrupt) kills it and propagates."""
    limit = time_limit(timeout)
    worker = _take()
    try:
        outcome = worker.compile(job, limit)
    except BaseException:
        worker.kill()
        raise
    _give_back(worker)
    if type(outcome) is CompileError:
        raise cell_lines.annotate(outcome, job.source, job.filename)  # lines as the notebook shows them
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def pids() -> list[int]:
    """Process ids of the live workers (idle or compiling)."""
    with _LOCK:
        return [w.pid for w in _LIVE]


@atexit.register
def stop_all() -> None:
    """Kill every worker (compiling or idle) and reap it, so its CPU time is accounted and nothing outlives us."""
    with _LOCK:
        workers = list(_LIVE)
    for worker in workers:
        worker.kill()


def _take() -> "Worker":
    with _LOCK:
        if _IDLE:
            return _IDLE.pop()
    return Worker()


def _give_back(worker: "Worker") -> None:
    with _LOCK:
        if len(_IDLE) < MAX_IDLE and worker in _LIVE:
            _IDLE.append(worker)
            return
    worker.kill()


class Worker:
    """One child process that compiles jobs one at a time."""

    def __init__(self) -> None:
        path = [_PACKAGE_ROOT, *(p for p in sys.path if p and p != _PACKAGE_ROOT)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
        try:
            self._proc = subprocess.Popen([sys.executable, "-m", "gemmlab.compilation.worker"], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                          start_new_session=True)
        except OSError as exc:
            raise ToolchainError(f"Could not start a compiler process ({exc}): is the machine out of memory "
                                 "or processes?") from None
        self.pid = self._proc.pid
        with _LOCK:
            _LIVE.add(self)

    def compile(self, job: CompileJob, limit: float) -> Compiled | GemmlabError:
        """The worker's answer to ``job``: the result, or the GemmlabError the compile raised (returned)."""
        deadline = time.monotonic() + limit
        payload = pickle.dumps(job)
        try:
            self._proc.stdin.write(_HEADER.pack(len(payload)) + payload)
            self._proc.stdin.flush()
        except OSError:
            return self._died()
        header = self._receive(_HEADER.size, deadline, job, limit)
        if header is None:
            return self._died()
        body = self._receive(_HEADER.unpack(header)[0], deadline, job, limit)
        if body is None:
            return self._died()
        return pickle.loads(body)

    def _receive(self, size: int, deadline: float, job: CompileJob, limit: float) -> bytes | None:
        """``size`` bytes from the worker, None at end of file; CompileTimeoutError past ``deadline``."""
        stream = self._proc.stdout
        fd = stream.fileno()
        chunks: list[bytes] = []
        got = 0
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while got < size:
                remaining = deadline - time.monotonic()
                # Short waits: an interrupt (SIGINT) that the OS hands to another thread of this process only
                # sets Python's flag, which the main thread acts on once select returns.
                if remaining <= 0 or not selector.select(min(remaining, SIGNAL_POLL_S)):
                    if time.monotonic() >= deadline:
                        self.kill()
                        raise _timeout(job, limit)
                    continue
                chunk = os.read(fd, min(size - got, 1 << 20))
                if not chunk:
                    return None
                chunks.append(chunk)
                got += len(chunk)
        return b"".join(chunks)

    def _died(self) -> ToolchainError:
        code = self._proc.wait()
        self.kill()
        why = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        hint = " (signal 9 is usually the machine running out of memory)" if code == -9 else ""
        return ToolchainError(f"The compiler process {why}{hint}. Compile again; if it happens every time, "
                              "run `gemmlab doctor`.")

    def kill(self) -> None:
        """Stop the process now and reap it; it is never used again."""
        with _LOCK:
            _LIVE.discard(self)
            if self in _IDLE:
                _IDLE.remove(self)
        try:
            self._proc.kill()
        except OSError:
            pass
        self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


def _timeout(job: CompileJob, limit: float) -> CompileTimeoutError:
    return CompileTimeoutError(
        f"Compiling {job.name!r} for {job.arch} took longer than {limit:g} s and was stopped. Something in the "
        "source makes the compiler work without end (deep template recursion, a huge unrolled loop); if it is a "
        f"big but sound kernel, allow more time: gemmlab.compile(..., timeout=300) or {ENV_TIMEOUT}=300.",
        limit_s=limit,
    )


# --------------------------------------------------------------------------- the child


def _serve() -> int:
    """Child: answer jobs until stdin closes or the parent is gone."""
    import signal

    from . import nvrtc

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what an interrupt stops
    jobs = sys.stdin.buffer
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print() from a library must not corrupt the answers
    parent = os.getppid()
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    while True:
        header = jobs.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return 0
        job = pickle.loads(jobs.read(_HEADER.unpack(header)[0]))
        try:
            outcome: object = nvrtc.compile_job(job)
        except GemmlabError as exc:
            outcome = exc
        except Exception as exc:  # noqa: BLE001 - the parent shows it as a toolchain problem
            outcome = ToolchainError(f"The compiler process failed: {type(exc).__name__}: {exc}. "
                                     "Run `gemmlab doctor` to check the toolchain.")
        payload = pickle.dumps(outcome)
        answers.write(_HEADER.pack(len(payload)) + payload)
        answers.flush()
        _return_memory()


def _exit_with_parent(parent: int) -> None:
    """A parent killed outright cannot stop its workers: they notice and stop themselves."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


def _return_memory() -> None:
    """A CuTe compile peaks near 3 GB; give it back to the system while the worker waits idle (glibc only)."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(_serve())
