"""``python -m gemmlab.judge``: read one JSON request on stdin, write one JSON report on stdout.

Nothing else reaches stdout: before anything runs, file descriptor 1 is pointed at stderr (so
prints, logs and a kernel's device ``printf``, which the driver writes to descriptor 1, land in
the log), and the report is written to a private copy of the original stdout. The process
exits right after the report, without tearing down a CUDA context a hung kernel may still hold.

Option (chosen by the trusted caller, never by the request): ``--compile-memory-mb N`` (address-space
limit of the compile process; 0: none). The judge compiles without gemmlab's on-disk cache, which a
student's process may be able to write. It always judges on the GPU (:class:`~.backend.GpuBackend`);
tests run the same flow with a test double of their own through :func:`serve`.
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Sequence

from .backend import Backend, GpuBackend, judge
from .errors import JudgeError
from .protocol import MAX_REQUEST_BYTES, JudgeReport, JudgeRequest


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gemmlab.judge", description=__doc__.splitlines()[0])
    parser.add_argument("--compile-memory-mb", type=int, default=16384)
    return parser


def answer(raw: bytes, backend: Backend) -> JudgeReport:
    """The report for one raw request: refused when it does not parse, else the backend's judgement."""
    try:
        request = JudgeRequest.from_json(raw)
    except JudgeError as exc:
        return JudgeReport("refused", error=str(exc), error_type="JudgeError")
    try:
        return judge(request, backend)
    except Exception as exc:  # not a GemmlabError: a fault in the judge itself, reported instead of lost
        traceback.print_exc(file=sys.stderr)
        return JudgeReport("error", request.action, error=f"the judge failed unexpectedly: {type(exc).__name__}: "
                           f"{str(exc)[:500]}", error_type=type(exc).__name__)


def _report_channel() -> int:
    """A private copy of stdout for the report; descriptor 1 (and sys.stdout) then go to stderr."""
    sys.stdout.flush()
    channel = os.dup(1)
    os.dup2(2, 1)
    return channel


def serve(backend: Backend, argv: Sequence[str] | None = None) -> int:
    """Read one request on stdin and write ``backend``'s report on the report channel (the options are parsed,
    so a caller's command line is checked the same way whichever backend answers)."""
    _parser().parse_args(argv)
    channel = _report_channel()
    raw = sys.stdin.buffer.read(MAX_REQUEST_BYTES + 1)
    report = answer(raw, backend)
    data = report.to_json().encode()
    while data:
        data = data[os.write(channel, data):]
    os.close(channel)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gemmlab.judge``: one request judged on this machine's GPU."""
    args = _parser().parse_args(argv)
    return serve(GpuBackend(compile_memory_bytes=max(args.compile_memory_mb, 0) << 20), argv)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
