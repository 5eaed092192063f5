"""Results as data for the course's grader: a result's ``to_dict()`` published as display data.

The grader used to read TFLOPS and ratios back out of printed text, which breaks whenever a
sentence changes and sees only what a notebook happened to print. Instead, inside the grader
(``GEMMLAB_GRADING=1``, see :func:`gemmlab.checking.integrity.grading_mode`) ``check_gemm``, ``bench_gemm`` and
``performance_bar`` publish each result they return as display data of the MIME type
:data:`RESULT_MIME`: ``{"kind": ..., "data": result.to_dict()}``. The grader takes these outputs
out of the cell (the student never sees them) and keeps them as typed records, and rebuilds the
result objects with their ``from_dict`` for the feedback report.
"""
from __future__ import annotations

from typing import Any, Protocol

#: The MIME type of a published result (a JSON object: ``{"kind": str, "data": dict}``).
RESULT_MIME = "application/vnd.gemmlab.result+json"

#: The kinds of result that are published, by the function that returns them.
KINDS = ("check", "bench", "perf_bar")


class SupportsToDict(Protocol):
    def to_dict(self) -> dict: ...


def payload(kind: str, result: SupportsToDict) -> dict[str, Any]:
    """The JSON object published for ``result`` (one of :data:`KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown result kind {kind!r}; known: {', '.join(KINDS)}")
    return {"kind": kind, "data": result.to_dict()}


def publish(kind: str, result: SupportsToDict) -> None:
    """Send ``result`` to the notebook's frontend as :data:`RESULT_MIME` display data.

    Callers publish only in grading mode. Outside an IPython kernel (a script, a test) there is
    no frontend and nothing is sent."""
    try:
        from IPython import get_ipython
        from IPython.display import publish_display_data
    except ImportError:
        return
    if get_ipython() is None:
        return
    publish_display_data({RESULT_MIME: payload(kind, result)})


__all__ = ["KINDS", "RESULT_MIME", "SupportsToDict", "payload", "publish"]
