"""The judge's compile, in a child process under an address-space limit.

Why a child of its own: the limit must bound NVRTC (a template-heavy kernel or a compile bomb can
take many GB) but not the judge, whose CUDA context reserves far more address space than it
uses. ``gemmlab.compile``'s worker inherits the limits of the process that starts it, so this
child (started with the limit) compiles through the usual ``compile_to`` with its limit of compiler
CPU seconds (a busy grading host's waits do not count; the worker's own wall-clock backstop stops a
starved compile) and answers the :class:`~gemmlab.compiling.record.Compiled` record, or the error,
as JSON. Its answer and log are read bounded (:data:`MAX_ANSWER_BYTES`, :data:`LOG_TAIL_BYTES`).

Child side: ``python -m gemmlab.judge.compiling`` reads ``{"spec": ..., "arch": ..., "timeout_s":
...}`` on stdin.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import IO, Any

from gemmlab.compiling.record import Compiled
from gemmlab.compiling.worker import wall_backstop
from ..errors import CompileError, CompileTimeoutError, GemmlabError, ToolchainError
from .client import judge_environment
from .spec import KernelSpec

#: Errors the child may answer, rebuilt by name in the judge.
_ERRORS: dict[str, type[GemmlabError]] = {"CompileError": CompileError, "ToolchainError": ToolchainError,
                                          "GemmlabError": GemmlabError}


def _limited(nbytes: int | None) -> Any:
    if not nbytes:
        return None

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))

    return limit


#: Largest answer read from the compile process (the record holds the PTX and cubin of the student's kernel).
MAX_ANSWER_BYTES = 256 << 20
#: How much of the compile process's log is kept for a message.
LOG_TAIL_BYTES = 8192
#: Extra wall-clock seconds the compile process gets beyond its worker's own backstop (Python and NVRTC start-up).
START_S = 60.0


def _tail(stream: IO[bytes]) -> str:
    size = stream.seek(0, os.SEEK_END)
    stream.seek(max(0, size - LOG_TAIL_BYTES))
    return stream.read().decode("utf-8", "replace")


def compile_limited(spec: KernelSpec, arch: str, timeout_s: float, memory_bytes: int | None) -> Compiled:
    """Compile ``spec`` for ``arch`` in a child limited to ``memory_bytes`` of address space and ``timeout_s`` of
    compiler CPU time."""
    payload = json.dumps({"spec": spec.to_dict(), "arch": arch, "timeout_s": timeout_s}).encode()
    backstop = wall_backstop(timeout_s) + START_S
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            done = subprocess.run([sys.executable, "-s", "-P", "-m", "gemmlab.judge.compiling"], input=payload,
                                  stdout=out, stderr=err, timeout=backstop, env=judge_environment(),
                                  preexec_fn=_limited(memory_bytes))
        except subprocess.TimeoutExpired:
            raise CompileTimeoutError(f"compiling kernel '{spec.name}' was stopped after {backstop:.0f} s on the clock "
                                      f"(its allowance is {timeout_s:g} s of compiler CPU): the grading machine was "
                                      "too busy to finish it.", timeout_s, wall_s=backstop) from None
        out.seek(0)
        raw = out.read(MAX_ANSWER_BYTES + 1)
        log = _tail(err)
    if len(raw) > MAX_ANSWER_BYTES:
        raise ToolchainError(f"the compiled kernel '{spec.name}' (its PTX and cubin) takes more than "
                             f"{MAX_ANSWER_BYTES >> 20} MB, more than the judge reads: make the kernel smaller.")
    try:
        answer = json.loads(raw)
    except ValueError:
        tail = log.strip().splitlines()[-1:] or ["(no log)"]
        raise ToolchainError(f"the judge's compile process ended without an answer (status {done.returncode}; "
                             f"memory limit {memory_bytes or 0:,} bytes): {tail[0][:300]}") from None
    if "error" in answer:
        kind, message = answer["error"], answer["message"]
        if kind == "CompileTimeoutError":
            raise CompileTimeoutError(message, timeout_s)
        raise _ERRORS.get(kind, GemmlabError)(message)
    return Compiled.from_record(answer["record"], spec.source)


def _serve() -> int:
    from gemmlab.compiling.compiler import compile_to

    request = json.loads(sys.stdin.buffer.read())
    spec = KernelSpec.from_dict(request["spec"])
    try:
        compiled = compile_to(spec.source, spec.name, request["arch"], spec.options, use_cache=False,
                              timeout=float(request["timeout_s"]))
        answer: dict[str, Any] = {"record": compiled.to_record()}
    except GemmlabError as exc:
        answer = {"error": type(exc).__name__, "message": str(exc)}
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
