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
``timeline_picture`` (the pictures take the data objects; the data objects draw themselves through them, and
neither imports the other back), ``lanes`` (warp roles), ``html``, ``power`` (NVML), ``synthetic`` (labelled
test data), ``api`` (the entry points).
The judge's side is ``gemmlab.judge.ncu_run``, ``profile_target`` and ``tracing``.
"""
from __future__ import annotations

from .api import profile, recorded_names, recorded_readout, recorded_timeline, roles, timeline
from .errors import ProfilerError, TimelineError
from .readout import Readout
from .timeline import Timeline

__all__ = ["ProfilerError", "Readout", "Timeline", "TimelineError", "profile", "recorded_names", "recorded_readout",
           "recorded_timeline", "roles", "timeline"]
