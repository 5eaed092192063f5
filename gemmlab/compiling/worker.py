"""Compiles in child processes, under a limit of compiler CPU time, which an interrupt stops within a second.

Why: NVRTC runs in the calling process and cannot be interrupted. A compile bomb ran past 150 s,
JupyterLab's interrupt could not stop it, and the student had to restart the kernel and lose their
state. A child process can be killed. Workers are started once and reused (a fresh one costs Python's
start-up and loading NVRTC), killed when a compile runs past its limit, is interrupted or the
interpreter exits, and replaced at the next compile (also when something else ended an idle one).
``compile_ahead`` runs its background compiles in the same workers.

The limit counts the compiler's CPU seconds, not the clock: on a busy JupyterHub node (load 10 on two
cores) a sound CuTe kernel needing 40 s of CPU took over 120 s of wall clock, and a wall-clock limit
called it a compile without end. Its value: ``timeout=`` of ``gemmlab.compile``, else
:func:`set_compile_limit` (from a notebook cell) or ``GEMMLAB_COMPILE_TIMEOUT`` (seconds), else
:data:`DEFAULT_TIMEOUT_S`. A wall-clock backstop (:func:`wall_backstop`, several times the limit) stops
a compile that a starved machine keeps from finishing; the two stops say different things: the
compiler used its whole allowance (a runaway or a very big kernel), or it was still working when the
machine's load made it wait too long. Where ``/proc`` is missing the limit is wall-clock time, as before.
Child side: ``python -m gemmlab.compiling.worker`` reads pickled jobs on stdin and answers each with a
pickled :class:`Compiled` or the GemmlabError it raised.
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

from gemmlab.errors import CompileError, CompileTimeoutError, GemmlabError, ToolchainError
from gemmlab.running.proctime import backstop_s, cpu_seconds
from gemmlab.compiling import cell_lines
from gemmlab.compiling.job import CompileJob
from gemmlab.compiling.record import Compiled

ENV_TIMEOUT = "GEMMLAB_COMPILE_TIMEOUT"
#: Compiler CPU seconds a compile may use unless told otherwise.
DEFAULT_TIMEOUT_S = 120.0
#: The wall-clock backstop is this many times the CPU limit (at least :data:`BACKSTOP_MIN_EXTRA_S` more).
BACKSTOP_FACTOR = 5.0
BACKSTOP_MIN_EXTRA_S = 300.0
#: Idle workers kept for the next compile (one foreground, and compile_ahead's usual two at once, share them).
MAX_IDLE = 2
_HEADER = struct.Struct("<Q")
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])

_LOCK = threading.Lock()
_IDLE: list["Worker"] = []
_LIVE: set["Worker"] = set()
#: Compiler CPU seconds of the last successful compile of each kernel name in this process (for the messages).
_LAST_CPU: dict[str, float] = {}

#: How to raise the limit from a notebook cell, as the messages say it.
HOW_TO_RAISE = ("run `gemmlab.set_compile_limit(300)` in a cell (300 s of compiler CPU for every later compile "
                f"in this kernel), or pass `timeout=300` to gemmlab.compile, or set {ENV_TIMEOUT}=300 before "
                "starting Jupyter")


def time_limit(timeout: float | None = None) -> float:
    """Compiler CPU seconds a compile may use: ``timeout``, else ``GEMMLAB_COMPILE_TIMEOUT`` (which
    :func:`set_compile_limit` sets), else :data:`DEFAULT_TIMEOUT_S`."""
    if timeout is None:
        raw = os.environ.get(ENV_TIMEOUT, "").strip()
        if not raw:
            return DEFAULT_TIMEOUT_S
        try:
            timeout = float(raw)
        except ValueError:
            raise CompileError(f"{ENV_TIMEOUT}={raw!r} is not a number of seconds: set it to e.g. 300, "
                               f"or unset it for the default of {DEFAULT_TIMEOUT_S:.0f} s.") from None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise CompileError(f"A compile limit must be a positive number of seconds, not {timeout!r}.")
    return float(timeout)


def set_compile_limit(seconds: float | None) -> float:
    """Let every later compile in this process (and the compiles it starts) use ``seconds`` of compiler CPU
    time; ``None`` goes back to the default. Returns the limit now in force.

    For a big but sound kernel on a slow or busy machine: ``gemmlab.set_compile_limit(300)`` in a cell.
    It sets ``GEMMLAB_COMPILE_TIMEOUT``, so background compiles (``compile_ahead``) follow it too."""
    if seconds is None:
        os.environ.pop(ENV_TIMEOUT, None)
        return time_limit()
    limit = time_limit(seconds)
    os.environ[ENV_TIMEOUT] = repr(limit)
    return limit


def wall_backstop(limit: float) -> float:
    """Wall-clock seconds after which a compile with a CPU ``limit`` is stopped however little CPU it got."""
    return backstop_s(limit, BACKSTOP_FACTOR, BACKSTOP_MIN_EXTRA_S)


#: Longest wait for the compiler's answer between two looks at pending signals (JupyterLab's interrupt).
SIGNAL_POLL_S = 0.25


def run(job: CompileJob, timeout: float | None = None) -> Compiled:
    """Compile ``job`` in a worker process. Past the limit the worker is killed and CompileTimeoutError
    says which limit stopped it; KeyboardInterrupt (JupyterLab's interrupt) kills it and propagates."""
    limit = time_limit(timeout)
    worker, reused = _take()
    try:
        outcome = worker.compile(job, limit)
        if reused and not worker.alive() and isinstance(outcome, ToolchainError):
            # a reused worker that was ended while idle (a grader stops what a cell left running) may look
            # alive until its end is seen: once more, on a fresh worker
            worker = Worker()
            outcome = worker.compile(job, limit)
    except BaseException:
        worker.kill()
        raise
    _give_back(worker)
    if type(outcome) is CompileError:
        raise cell_lines.annotate(outcome, job.source, job.filename)  # lines as the notebook shows them
    if isinstance(outcome, BaseException):
        raise outcome
    if worker.last_cpu_s is not None:
        _LAST_CPU[job.name] = worker.last_cpu_s
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


def _take() -> tuple["Worker", bool]:
    """A worker for the next compile, and whether it was used before."""
    while True:
        with _LOCK:
            worker = _IDLE.pop() if _IDLE else None
        if worker is None:
            return Worker(), False
        if worker.alive():
            return worker, True
        worker.kill()       # ended while idle (a grader stops what a cell left running): reap it, take another


def _give_back(worker: "Worker") -> None:
    with _LOCK:
        if len(_IDLE) < MAX_IDLE and worker in _LIVE:
            _IDLE.append(worker)
            return
    worker.kill()


class _Stopped(Exception):
    """The compile ran past a limit; ``error`` is what to raise."""

    def __init__(self, error: CompileTimeoutError) -> None:
        super().__init__(str(error))
        self.error = error


class _Meter:
    """What one compile has used so far: the worker's CPU seconds (wall seconds where /proc is missing)."""

    def __init__(self, pid: int, limit: float) -> None:
        self.pid, self.limit, self.started = pid, limit, time.monotonic()
        self.cpu0 = cpu_seconds(pid)
        self.backstop = wall_backstop(limit) if self.cpu0 is not None else limit

    def wall_s(self) -> float:
        return time.monotonic() - self.started

    def cpu_s(self) -> float | None:
        now = cpu_seconds(self.pid) if self.cpu0 is not None else None
        return None if now is None else now - self.cpu0

    def check(self, job: CompileJob) -> None:
        """Raise :class:`_Stopped` when the compile used its CPU allowance or ran into the wall-clock backstop."""
        wall, cpu = self.wall_s(), self.cpu_s()
        if cpu is not None and cpu >= self.limit:
            raise _Stopped(_cpu_exhausted(job, self.limit, cpu, wall))
        if wall >= self.backstop:
            raise _Stopped(_starved(job, self.limit, cpu, wall) if cpu is not None else _wall_limit(job, self.limit))

    def poll_s(self) -> float:
        """How long to wait for the answer before looking again."""
        return max(0.01, min(SIGNAL_POLL_S, self.backstop - self.wall_s()))


class Worker:
    """One child process that compiles jobs one at a time."""

    def __init__(self) -> None:
        path = [_PACKAGE_ROOT, *(p for p in sys.path if p and p != _PACKAGE_ROOT)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
        try:
            self._proc = subprocess.Popen([sys.executable, "-m", "gemmlab.compiling.worker"], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                          start_new_session=True)
        except OSError as exc:
            raise ToolchainError(f"Could not start a compiler process ({exc}): is the machine out of memory "
                                 "or processes?") from None
        self.pid = self._proc.pid
        self.last_cpu_s: float | None = None     #: compiler CPU seconds of the last compile
        with _LOCK:
            _LIVE.add(self)

    def alive(self) -> bool:
        return self._proc.poll() is None

    def compile(self, job: CompileJob, limit: float) -> Compiled | GemmlabError:
        """The worker's answer to ``job``: the result, or the GemmlabError the compile raised (returned)."""
        meter = _Meter(self.pid, limit)
        payload = pickle.dumps(job)
        try:
            self._proc.stdin.write(_HEADER.pack(len(payload)) + payload)
            self._proc.stdin.flush()
        except OSError:
            return self._died()
        try:
            header = self._receive(_HEADER.size, meter, job)
            body = None if header is None else self._receive(_HEADER.unpack(header)[0], meter, job)
        except _Stopped as stop:
            self.kill()
            raise stop.error from None
        if body is None:
            return self._died()
        self.last_cpu_s = meter.cpu_s()
        return pickle.loads(body)

    def _receive(self, size: int, meter: _Meter, job: CompileJob) -> bytes | None:
        """``size`` bytes from the worker, None at end of file; :class:`_Stopped` past a limit."""
        stream = self._proc.stdout
        fd = stream.fileno()
        chunks: list[bytes] = []
        got = 0
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while got < size:
                # Short waits: an interrupt (SIGINT) that the OS hands to another thread of this process only
                # sets Python's flag, which the main thread acts on once select returns.
                if not selector.select(meter.poll_s()):
                    meter.check(job)
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


def _what(job: CompileJob) -> str:
    return f"Compiling {job.name!r} for {job.arch}"


def _cpu_exhausted(job: CompileJob, limit: float, cpu: float, wall: float) -> CompileTimeoutError:
    last = _LAST_CPU.get(job.name)
    if last is not None and last < limit / 2:
        why = (f"Its last successful compile in this kernel took {last:.0f} s of CPU, so a change since then makes "
               "the compiler work far longer: look for deep template recursion or a huge unrolled loop. If the "
               "kernel is meant to be that much bigger, allow more: ")
    else:
        why = ("Either something in the source makes the compiler work without end (deep template recursion, a "
               "huge unrolled loop), or the kernel is big and sound and needs more. To allow more: ")
    return CompileTimeoutError(
        f"{_what(job)} used its whole allowance of {limit:g} s of compiler CPU time ({wall:.0f} s on the clock) "
        f"and was stopped. {why}{HOW_TO_RAISE}.", limit_s=limit, cpu_s=cpu, wall_s=wall)


def _starved(job: CompileJob, limit: float, cpu: float | None, wall: float) -> CompileTimeoutError:
    used = "no measurable" if not cpu else f"only {cpu:.0f} s of"
    return CompileTimeoutError(
        f"{_what(job)} was stopped after {wall:.0f} s on the clock: the machine is so busy that the compiler got "
        f"{used} CPU time in that while (its allowance is {limit:g} s of CPU). It was still working, so nothing "
        "need be wrong with the source: compile again when the machine is less busy (other students' or your own "
        "other notebooks may be compiling). The clock's backstop is "
        f"{BACKSTOP_FACTOR:g} times the CPU allowance; to raise both, {HOW_TO_RAISE}.",
        limit_s=limit, cpu_s=cpu, wall_s=wall)


def _wall_limit(job: CompileJob, limit: float) -> CompileTimeoutError:
    """Where the compiler's CPU time cannot be read (no /proc): the limit is the clock's."""
    return CompileTimeoutError(
        f"{_what(job)} took longer than {limit:g} s and was stopped. Something in the source may make the compiler "
        f"work without end (deep template recursion, a huge unrolled loop); if it is a big but sound kernel, "
        f"{HOW_TO_RAISE}.", limit_s=limit, wall_s=limit)


# --------------------------------------------------------------------------- the child


def _serve() -> int:
    """Child: answer jobs until stdin closes or the parent is gone."""
    import signal

    from gemmlab.compiling import nvrtc

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
