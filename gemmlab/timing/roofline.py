"""The roofline picture: where a kernel sits against this GPU's two roofs.

Log-log axes: arithmetic intensity (flop/byte) across, TFLOPS up. Left of the ridge a
kernel is limited by DRAM bandwidth, right of it by the tensor cores. Works without a GPU
when the ceilings are given as numbers.
"""
from __future__ import annotations

import math
import sys
import types
from typing import Any, Iterable, Sequence

from gemmlab.dtypes import dtype_name
from gemmlab.errors import GemmlabError
from gemmlab.timing.roofline_math import attainable, ridge

Point = tuple[str, float, float]  # (label, intensity flop/byte, TFLOPS)


def _roofs(ceilings: Any, dtype: str, peak_tflops: float | None, bw_gbps: float | None) -> tuple[float, float, str]:
    """(peak TFLOPS, bandwidth GB/s, caption) from explicit numbers, a Ceilings, a tuple or a dict."""
    if peak_tflops is not None and bw_gbps is not None:
        return float(peak_tflops), float(bw_gbps), ""
    if ceilings is None:
        from gemmlab.timing.ceilings import ceilings as measure

        ceilings = measure()
    if hasattr(ceilings, "peak") and hasattr(ceilings, "copy_gbps"):
        return ceilings.peak(dtype), float(ceilings.copy_gbps), str(getattr(ceilings, "device", ""))
    if isinstance(ceilings, dict):
        return float(ceilings["peak_tflops"]), float(ceilings["bw_gbps"]), str(ceilings.get("device", ""))
    if isinstance(ceilings, (tuple, list)) and len(ceilings) == 2:
        return float(ceilings[0]), float(ceilings[1]), ""
    raise GemmlabError("ceilings must be a gemmlab Ceilings, (peak_tflops, bw_gbps), or "
                       "{'peak_tflops': ..., 'bw_gbps': ...}.")


def _as_points(points: Iterable[Any] | None) -> list[Point]:
    out: list[Point] = []
    for p in points or ():
        if hasattr(p, "tflops") and hasattr(p, "intensity"):  # a BenchResult: yours and cuBLAS
            out.append((getattr(p, "label", "your kernel"), float(p.intensity), float(p.tflops)))
            if getattr(p, "cublas_tflops", None):
                out.append(("cuBLAS", float(p.intensity), float(p.cublas_tflops)))
        elif isinstance(p, (tuple, list)) and len(p) == 3:
            label, x, y = p
            if not (float(x) > 0 and float(y) > 0):
                raise GemmlabError(f"point {label!r}: intensity and TFLOPS must be > 0 on a log plot, got {x}, {y}.")
            out.append((str(label), float(x), float(y)))
        else:
            raise GemmlabError(f"a roofline point is (label, intensity, tflops) or a BenchResult, not {p!r}.")
    return out


def roofline(points: Sequence[Any] | None = None, ceilings: Any = None, ax: Any = None, dtype: str = "float16",
             peak_tflops: float | None = None, bw_gbps: float | None = None, title: str | None = None,
             xlim: tuple[float, float] | None = None) -> Any:
    """Draw the roofline with labelled points; returns the matplotlib Figure.

    ``ceilings``: a :class:`gemmlab.timing.ceilings.Ceilings` (default: measured on this GPU), a
    ``(peak_tflops, bw_gbps)`` pair, or pass ``peak_tflops=`` and ``bw_gbps=`` directly.
    """
    peak, bw, device = _roofs(ceilings, dtype_name(dtype), peak_tflops, bw_gbps)
    pts = _as_points(points)
    knee = ridge(peak, bw)
    xs = [x for _, x, _ in pts] + [knee]
    lo, hi = xlim or (10 ** math.floor(math.log10(min(xs) / 4)), 10 ** math.ceil(math.log10(max(xs) * 4)))
    if ax is None:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(7, 4.5))
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [attainable(x, peak, bw) for x in grid], color="black", lw=2, label="roofline")
    ax.axvline(knee, color="grey", ls=":", lw=1)
    ax.annotate(f"ridge {knee:.0f} flop/B", (knee, peak), xytext=(6, -14), textcoords="offset points",
                fontsize=8, color="grey")
    ax.text(lo * 1.5, attainable(lo * 1.5, peak, bw) / 2.2, f"{bw:,.0f} GB/s", fontsize=8)
    ax.text(hi / 1.3, peak * 1.08, f"{peak:.0f} TFLOPS", fontsize=8, ha="right")
    markers = "os^Dv<>p*h"
    for index, (label, x, y) in enumerate(pts):
        ax.scatter([x], [y], marker=markers[index % len(markers)], s=40, zorder=3,
                   label=f"{label}: {y:.1f} TFLOPS ({y / attainable(x, peak, bw):.0%} of roof)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ymin = min([attainable(lo, peak, bw)] + [y for _, _, y in pts]) / 2
    ax.set_ylim(ymin, peak * 2)
    ax.set_xlabel("arithmetic intensity (flop / byte of DRAM traffic)")
    ax.set_ylabel("TFLOPS")
    ax.set_title(title or (f"Roofline {device} ({dtype})" if device else f"Roofline ({dtype})"), fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="lower right")
    return fig


__all__ = ["roofline"]


class _CallableModule(types.ModuleType):
    """``gemmlab.timing.roofline`` is both this module and its main function: importing the submodule
    replaces the lazy function attribute on the package, so the module must be callable too."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return roofline(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
