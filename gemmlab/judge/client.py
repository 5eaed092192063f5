"""Run the kernel judge in a fresh process and get its report, whatever happens to that process.

Why a process per judgement: a kernel that faults loses its CUDA context, one that hangs may
never finish, and one that floods can fill pipes; none of that may reach the grader. The child
is ``python -m gemmlab.judge`` started in an empty directory with an allow-listed environment
(no student ``PYTHONPATH``, no user site, no current directory on the path), killed with its
process group past the wall-clock limit, and read through bounded buffers. A child that dies,
hangs or prints something other than a report gives a report that says so, never a traceback.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Callable, Mapping, Sequence

from .errors import JudgeError
from .protocol import MAX_REPORT_BYTES, JudgeReport, JudgeRequest

#: Environment variables passed on to the judge; everything else of the caller's environment stays behind.
ENV_ALLOW = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH",
             "LD_LIBRARY_PATH", "PYTHONPATH", "GEMMLAB_HIDE_GPU")
#: How much of the judge's log (stderr) is kept for a report on a failure.
LOG_TAIL_BYTES = 8192
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def judge_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The judge's environment: the allow-listed variables of ``base`` (default: ours), gemmlab first on the path."""
    base = os.environ if base is None else base
    env = {k: base[k] for k in ENV_ALLOW if k in base}
    env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_ROOT, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONSAFEPATH"] = "1"
    return env


def judge_command(compile_memory_mb: int = 16384, python: str = sys.executable) -> list[str]:
    """The command line of one judge process: ``python -m gemmlab.judge``, which judges on the GPU.

    Callers that run another judge program (the repository's tests run one without a GPU) pass its
    command to :func:`judge` or the pool's executors instead; this package names no other."""
    return [python, "-s", "-P", "-m", "gemmlab.judge", "--compile-memory-mb", str(int(compile_memory_mb))]


def _read_bounded(stream: IO[bytes], limit: int, out: list[bytes]) -> None:
    """Read to EOF, keeping at most ``limit + 1`` bytes (so "over the limit" can be told)."""
    kept = 0
    while chunk := stream.read(65536):
        if kept <= limit:
            out.append(chunk[: limit + 1 - kept])
            kept += len(out[-1])


def _read_tail(stream: IO[bytes], limit: int, out: list[bytes]) -> None:
    """Read to EOF, keeping the last ``limit`` bytes."""
    tail = b""
    while chunk := stream.read(65536):
        tail = (tail + chunk)[-limit:]
    out.append(tail)


def _feed(stream: IO[bytes], payload: bytes) -> None:
    try:
        stream.write(payload)
        stream.close()
    except (BrokenPipeError, OSError):  # the child stopped reading: its exit status tells why
        pass


def _memory_limiter(memory_limit_mb: int | None) -> Callable[[], None] | None:
    if not memory_limit_mb:
        return None

    def limit() -> None:
        import resource

        nbytes = int(memory_limit_mb) << 20
        resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))

    return limit


def _died(returncode: int, log: str) -> str:
    if returncode < 0:
        try:
            how = f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"was killed by signal {-returncode}"
    else:
        how = f"exited with status {returncode}"
    last = log.strip().splitlines()[-1][:300] if log.strip() else "(no log)"
    return f"the judge process {how} without a report; its last log line: {last}"


def run_judge(command: Sequence[str], payload: bytes, timeout_s: float, env: Mapping[str, str] | None = None,
              memory_limit_mb: int | None = None) -> JudgeReport:
    """Run one judge ``command`` with ``payload`` on stdin and turn whatever happens into a report."""
    with tempfile.TemporaryDirectory(prefix="gemmlab-judge-") as cwd:
        proc = subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=cwd, env=dict(env) if env is not None else judge_environment(),
                                start_new_session=True, preexec_fn=_memory_limiter(memory_limit_mb))
        out: list[bytes] = []
        err: list[bytes] = []
        threads = [threading.Thread(target=_feed, args=(proc.stdin, payload), daemon=True),
                   threading.Thread(target=_read_bounded, args=(proc.stdout, MAX_REPORT_BYTES, out), daemon=True),
                   threading.Thread(target=_read_tail, args=(proc.stderr, LOG_TAIL_BYTES, err), daemon=True)]
        for t in threads:
            t.start()
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the judge and anything it started in its group
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        for t in threads:
            t.join(timeout=5)
    raw = b"".join(out)
    log = b"".join(err).decode("utf-8", "replace")
    if raw.strip():
        try:
            return JudgeReport.from_json(raw)
        except JudgeError as exc:
            if not timed_out and proc.returncode == 0:
                return JudgeReport("crashed", error=f"the judge answered something that is not a report ({exc}); "
                                   f"it began: {raw[:120].decode('utf-8', 'replace')!r}", error_type="JudgeError")
    if timed_out:
        return JudgeReport("timeout", error=f"the judge did not answer within {timeout_s:g} s and was stopped "
                           "(a kernel or compile that never ends?).", error_type="JudgeTimeout")
    if proc.returncode != 0:
        return JudgeReport("crashed", error=_died(proc.returncode, log), error_type="JudgeCrashed")
    return JudgeReport("crashed", error="the judge exited without a report.", error_type="JudgeCrashed")


def judge(request: JudgeRequest, timeout_s: float = 600.0, memory_limit_mb: int | None = None,
          compile_memory_mb: int = 16384, command: Sequence[str] | None = None) -> JudgeReport:
    """Judge ``request`` in a fresh judge process, stopped after ``timeout_s`` s.

    ``command`` is the judge program (default :func:`judge_command`: the GPU judge, which bounds only its
    compile, by ``compile_memory_mb``, in a compile process of its own: CUDA reserves far more address
    space than it uses). ``memory_limit_mb`` bounds the whole address space of another program.
    """
    if not isinstance(request, JudgeRequest):
        raise JudgeError(f"judge() takes a JudgeRequest, not {type(request).__name__}.")
    command = list(command) if command is not None else judge_command(compile_memory_mb)
    return run_judge(command, request.to_json().encode(), timeout_s, memory_limit_mb=memory_limit_mb)


__all__ = ["ENV_ALLOW", "LOG_TAIL_BYTES", "judge", "judge_command", "judge_environment", "run_judge"]
