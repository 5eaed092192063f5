"""What a profile and a trace share in the judge: the checked call of their one shape, and what it launches.

Why: both actions first check the kernel once on fresh data (a wrong kernel's counters or timeline
mean nothing), exactly as the check and copy actions would on that one shape, then run it once more
to measure. These helpers make that check request and count the launches of one call, so the
profiler knows which launches are the measured ones.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from .protocol import JudgeRequest
from .spec import DslSpec


def check_request(request: JudgeRequest) -> JudgeRequest:
    """The check (or copy check) of a profile's or trace's one shape, with the same dtypes, scalars and limits."""
    return dataclasses.replace(request, action="copy" if request.is_copy else "check", shapes=[request.shape],
                               profile=None)


def run_check(backend: Any, request: JudgeRequest) -> Any:
    """The backend's CheckResult (GEMM) or CopyResult (copy) of :func:`check_request`."""
    checking = check_request(request)
    return backend.copy(checking) if request.is_copy else backend.check(checking)


def launched_kernels(request: JudgeRequest, lowered_name: str = "") -> list[str]:
    """The kernels one call launches, in order: a C++ spec's one kernel (by its lowered name), or a DSL plan's."""
    if isinstance(request.spec, DslSpec):
        plan = request.spec.launch_for(*request.shape)
        return [str(step["kernel"]) for step in plan["steps"] if step.get("op") == "launch"]
    return [lowered_name or request.spec.name]


__all__ = ["check_request", "launched_kernels", "run_check"]
