"""Seeing layouts: pictures and models a student reads, not kernels that run.

``draw`` (layouts, TV partitions, swizzles, CTA rasters), ``widgets`` (the interactive explorers),
``banks`` (the shared-memory bank model: wavefronts per warp-wide instruction), ``checklist`` (the seven
design decisions of a GEMM kernel, and what follows from them) and ``figures`` (a matplotlib figure as PNG
bytes or an ``<img>``). The layout algebra they draw is :mod:`gemmlab.layout`.
"""
from gemmlab.moved import submodules_on_use

__getattr__ = submodules_on_use("gemmlab.seeing")
