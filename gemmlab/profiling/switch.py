"""Whether a CuTe DSL compile emits the timeline's marks: off unless a timeline is being recorded.

Why a switch and not a runtime flag: a mark costs instructions and registers, so a kernel built for
checking and timing must not carry any. :func:`gemmlab.profiling.timeline` records the student's
function inside :func:`tracing`; ``gemmlab.profiling.marks`` emits its PTX only then, and the DSL
front-end adds :func:`compile_key` to its cache key so a traced build and a plain one never share
an entry. Nothing here imports the DSL.
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager
from typing import Iterator

_TRACING: contextvars.ContextVar[bool] = contextvars.ContextVar("gemmlab_tracing", default=False)


def enabled() -> bool:
    """True while a timeline's kernels are being compiled (inside :func:`tracing`)."""
    return _TRACING.get()


@contextmanager
def tracing() -> Iterator[None]:
    """Inside the block, DSL compiles emit the marks of ``gemmlab.profiling.marks``."""
    token = _TRACING.set(True)
    try:
        yield
    finally:
        _TRACING.reset(token)


def compile_key() -> str:
    """What a DSL compile's cache key must add: '' for a plain build, a tag for a traced one."""
    return "gemmlab-timeline-marks" if enabled() else ""


__all__ = ["compile_key", "enabled", "tracing"]
