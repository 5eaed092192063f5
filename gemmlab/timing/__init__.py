"""Timing: how fast a kernel is, against what, and beyond which noise.

``events`` (CUDA-event timing: ``time_cuda``), ``steady_timing`` (NVIDIA's back-to-back method),
``bench`` (``gemmlab.bench_gemm``: a GEMM against cuBLAS, with its interval), ``spread`` (when a difference
is more than noise), ``clock_sampler`` (SM clock and power while timed), ``speed_of_light`` (the fastest
possible, so a faster timing is refused), ``timing_lock`` (one timing per GPU at a time), ``perfbar`` (the
graded bar relative to cuBLAS), ``ceilings``, ``roofline`` and ``roofline_math`` (this GPU's two roofs) and
``leaderboard_draw`` (the leaderboard's secret shapes and seeds).

``from gemmlab.timing import time_cuda`` keeps working: the names of ``events`` are served from here on use.
"""
from __future__ import annotations

import importlib
from typing import Any

from gemmlab.moved import submodules_on_use

_submodule = submodules_on_use("gemmlab.timing")


def __getattr__(name: str) -> Any:
    """A name ``gemmlab.timing`` held before it became this package (looked up in ``events``), or a submodule
    imported on first use."""
    events = importlib.import_module("gemmlab.timing.events")
    if not name.startswith("_") and hasattr(events, name):
        return getattr(events, name)
    return _submodule(name)
