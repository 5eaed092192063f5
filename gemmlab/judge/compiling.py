"""The judge's compile, in a child process under an address-space limit.

Why a child of its own: the limit must bound NVRTC (a template-heavy kernel or a compile bomb can
take many GB) but not the judge, whose CUDA context reserves far more address space than it
uses. ``gemmlab.compile``'s worker inherits the limits of the process that starts it, so this
child (started with the limit) compiles through the usual ``compile_to`` with its time limit and
answers the :class:`~gemmlab.compilation.record.Compiled` record, or the error, as JSON.

Child side: ``python -m gemmlab.judge.compiling`` reads ``{"spec": ..., "arch": ..., "timeout_s":
...}`` on stdin.
"""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from ..compilation.record import Compiled
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


def compile_limited(spec: KernelSpec, arch: str, timeout_s: float, memory_bytes: int | None) -> Compiled:
    """Compile ``spec`` for ``arch`` in a child limited to ``memory_bytes`` of address space and ``timeout_s``."""
    payload = json.dumps({"spec": spec.to_dict(), "arch": arch, "timeout_s": timeout_s}).encode()
    try:
        done = subprocess.run([sys.executable, "-s", "-P", "-m", "gemmlab.judge.compiling"], input=payload,
                              capture_output=True, timeout=timeout_s + 30, env=judge_environment(),
                              preexec_fn=_limited(memory_bytes))
    except subprocess.TimeoutExpired:
        raise CompileTimeoutError(f"compiling kernel '{spec.name}' ran past {timeout_s:g} s and was stopped.",
                                  timeout_s) from None
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["(no log)"]
        raise ToolchainError(f"the judge's compile process ended without an answer (status {done.returncode}; "
                             f"memory limit {memory_bytes or 0:,} bytes): {tail[0][:300]}") from None
    if "error" in answer:
        kind, message = answer["error"], answer["message"]
        if kind == "CompileTimeoutError":
            raise CompileTimeoutError(message, timeout_s)
        raise _ERRORS.get(kind, GemmlabError)(message)
    return Compiled.from_record(answer["record"], spec.source)


def _serve() -> int:
    from ..compiler import compile_to

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
