"""Why is my kernel slow: an Nsight Compute readout and an in-kernel timeline, locally or on the class's pool.

- :func:`profile` (``gemmlab.profile``): a curated Nsight Compute readout of a GEMM or copy kernel after
  one checked call (:class:`Readout`: speed-of-light bars, shared-memory wavefronts and bank conflicts
  beside the bank model, occupancy and its limiter, the top stall reasons each with a sentence and the
  notebook that treats it, the clock and power), and the full report file for Nsight Compute itself.
- :func:`timeline` (``gemmlab.timeline``): what every warp of a CTA was doing over one launch
  (:class:`Timeline`), from marks in the kernel: ``gemmlab_trace.h`` in C++, :mod:`.marks` in the DSL.
- :func:`recorded_readout`, :func:`recorded_timeline`: the course's recordings of the solutions,
  labelled with the GPU and date they came from (what ``recorded="name"`` shows without a GPU or pool).

Modules: ``ncu`` (running Nsight Compute, reading its CSV), ``versions`` (versions refused), ``metrics``
(the curated counters and stall sentences), ``readout`` and ``readout_picture``, ``trace_format`` (the
timeline's buffer and PTX), ``marks`` and ``switch`` (the DSL's marks), ``timeline`` and
``timeline_picture``, ``power`` (NVML), ``synthetic`` (labelled test data), ``api`` (the entry points).
The judge's side is ``gemmlab.judge.ncu_run``, ``profile_target`` and ``tracing``.
"""
from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "profile": ("gemmlab.profiling.api", "profile"),
    "timeline": ("gemmlab.profiling.api", "timeline"),
    "roles": ("gemmlab.profiling.api", "roles"),
    "recorded_readout": ("gemmlab.profiling.api", "recorded_readout"),
    "recorded_timeline": ("gemmlab.profiling.api", "recorded_timeline"),
    "recorded_names": ("gemmlab.profiling.api", "recorded_names"),
    "Readout": ("gemmlab.profiling.readout", "Readout"),
    "Timeline": ("gemmlab.profiling.timeline", "Timeline"),
    "ProfilerError": ("gemmlab.profiling.errors", "ProfilerError"),
    "TimelineError": ("gemmlab.profiling.errors", "TimelineError"),
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gemmlab.profiling' has no attribute {name!r}")
