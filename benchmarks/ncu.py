"""Nsight Compute (``ncu``) for the benchmark scripts: the toolkit's ncu plumbing, failing as a script does.

ladder_traffic.py, kernel_counters.py and bank_validation.py run a child process of themselves under
one ncu invocation and want each profiled launch's counters back as ``{name: value}``. That part lives
in :mod:`gemmlab.profiling.ncu` (the students' readout uses it too); here it is re-exported, and a
failure ends the script with ncu's output (SystemExit) instead of raising.
"""
from __future__ import annotations

import subprocess  # noqa: F401  (tests stand in for ncu by replacing subprocess.run)
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gemmlab.profiling import ncu as _tool  # noqa: E402
from gemmlab.profiling.errors import ProfilerError  # noqa: E402
from gemmlab.profiling.ncu import (
    DSL_PREFIX, FALLBACKS, MISSING_METRIC, NANOSECONDS, PREFIXES, command, failure, missing_metrics, number, parse_csv,
    short_name, tail, to_base,
)


def find_ncu() -> str:
    """Path of the ncu executable; SystemExit saying how to get one where there is none."""
    try:
        return _tool.find_ncu(FALLBACKS)
    except ProfilerError as exc:
        raise SystemExit(str(exc)) from None


def profile(child: list[str], metrics: dict[str, str], options: list[str] | None = None,
            timeout: float = 1200) -> tuple[list[dict[str, float | str]], str]:
    """Run ``child`` (a command line) under one ncu invocation; each profiled launch's counters
    (:func:`gemmlab.profiling.ncu.parse_csv`) and ncu's whole stdout, which holds the child's own output.

    A metric ncu does not know on this GPU is dropped and the run repeated, so one unknown name
    costs that column, not the table. SystemExit with ncu's output where it fails."""
    try:
        return _tool.profile(find_ncu(), child, metrics, options, timeout)
    except ProfilerError as exc:
        raise SystemExit(str(exc)) from None


__all__ = ["DSL_PREFIX", "FALLBACKS", "MISSING_METRIC", "NANOSECONDS", "PREFIXES", "command", "failure", "find_ncu",
           "missing_metrics", "number", "parse_csv", "profile", "short_name", "subprocess", "tail", "to_base"]
