"""A :class:`~gemmlab.profiling.readout.Readout` as one matplotlib figure, in four panels.

Speed of light (how busy each unit was), shared memory (wavefronts per instruction: measured, ideal
and the bank model's prediction), occupancy (achieved against theoretical, and the CTAs per SM each
resource allows) and the top stall reasons. The title says which kernel, and on which GPU, with
which Nsight Compute and when; a recorded or synthetic readout says so in red.
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence

from .metrics import OCCUPANCY_LIMITS


class DrawnReadout(Protocol):
    """What the picture reads of a :class:`~gemmlab.profiling.readout.Readout` (named here, not imported: the
    readout draws itself through this module, so this module may not import it back)."""

    speed_of_light: Sequence[Any]
    shared: Sequence[Any]
    occupancy: Any
    source: str

    @property
    def label(self) -> str: ...

    def title(self) -> str: ...

    def clock_text(self) -> str: ...

    def top_stalls(self) -> Sequence[Any]: ...


COLOURS = {"bar": "#4c78a8", "ideal": "#9ecae9", "measured": "#4c78a8", "model": "#f58518", "stall": "#e45756",
           "theoretical": "#d9d9d9", "limit": "#bab0ac", "limiter": "#e45756"}


def _speed_of_light(ax: Any, r: DrawnReadout) -> None:
    names = [b.name for b in r.speed_of_light][::-1]
    values = [b.percent or 0.0 for b in r.speed_of_light][::-1]
    ax.barh(names, values, color=COLOURS["bar"])
    for y, b in enumerate(r.speed_of_light[::-1]):
        text = "not measured" if b.percent is None else f"{b.percent:.0f}%"
        ax.text(min((b.percent or 0.0) + 1.5, 88), y, text, va="center", fontsize=9)
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of peak")
    ax.set_title("Speed of light", loc="left", fontsize=10)


def _shared(ax: Any, r: DrawnReadout) -> None:
    width = 0.27
    for i, row in enumerate(r.shared):
        wf, ideal = row.per_instruction(row.wavefronts), row.per_instruction(row.ideal)
        bars = [("ideal", ideal, -width), ("measured", wf, 0.0)]
        if row.predicted is not None:
            bars.append(("model", row.predicted.wavefronts, width))
        for key, value, dx in bars:
            if value is None:
                continue
            ax.bar(i + dx, value, width, color=COLOURS[key], label=key if i == 0 or key == "model" else None)
            ax.text(i + dx, value, f"{value:.1f}", ha="center", va="bottom", fontsize=8)
        if not row.instructions:
            ax.text(i, 0.05, "none" if row.instructions == 0 else "not measured", ha="center", fontsize=8)
    ax.set_xticks(range(len(r.shared)), [row.label.split(" (")[0] for row in r.shared])
    ax.set_ylabel("wavefronts per instruction")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    if unique:
        ax.legend(unique.values(), unique.keys(), fontsize=8, loc="upper right")
    ax.set_title("Shared memory (bank conflicts = measured − ideal)", loc="left", fontsize=10)


def _occupancy(ax: Any, r: DrawnReadout) -> None:
    o = r.occupancy
    ax.barh(["theoretical", "achieved"], [o.theoretical_pct or 0.0, o.achieved_pct or 0.0],
            color=[COLOURS["theoretical"], COLOURS["bar"]])
    for y, value in enumerate((o.theoretical_pct, o.achieved_pct)):
        ax.text((value or 0.0) + 1.5, y, "not measured" if value is None else f"{value:.0f}%", va="center",
                fontsize=9)
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of the SM's warps")
    names = [k for k in OCCUPANCY_LIMITS if k in o.limits]
    if names:
        limiting = set(o.limiters)
        lines = ["CTAs per SM allowed by"] + [f"  {k}: {o.limits[k]:.0f}" + ("  ← limit" if k in limiting else "")
                                               for k in names]
        ax.text(0.45, 0.97, "\n".join(lines), transform=ax.transAxes, ha="left", va="top", fontsize=8,
                family="monospace", bbox={"facecolor": "white", "edgecolor": "#cccccc"})
    ax.set_title("Occupancy", loc="left", fontsize=10)


def _stalls(ax: Any, r: DrawnReadout) -> None:
    top = r.top_stalls()
    if not top:
        ax.text(0.5, 0.5, "stall reasons not measured", ha="center", va="center")
        ax.set_axis_off()
        return
    ax.barh([s.title for s in top][::-1], [s.cycles for s in top][::-1], color=COLOURS["stall"])
    for y, s in enumerate(top[::-1]):
        ax.text(s.cycles, y, f" {s.share:.0%}  (notebook {s.notebook.split(' ')[0].rstrip(',')})", va="center",
                fontsize=8)
    ax.set_xlim(0, max(s.cycles for s in top) * 1.6)
    ax.set_xlabel("cycles per issued instruction")
    ax.set_title("Where the warps waited", loc="left", fontsize=10)


def draw(r: DrawnReadout) -> Any:
    """The figure of readout ``r`` (the caller closes it)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 6.6))
    _speed_of_light(axes[0][0], r)
    _shared(axes[0][1], r)
    _occupancy(axes[1][0], r)
    _stalls(axes[1][1], r)
    fig.suptitle(r.title(), x=0.01, ha="left", fontsize=12, fontweight="bold")
    fig.text(0.01, 0.935, r.label, fontsize=9, color="#b00020" if r.source != "measured" else "#444444")
    if r.clock_text():
        fig.text(0.01, 0.005, r.clock_text(), fontsize=8, color="#444444")
    fig.tight_layout(rect=(0, 0.03, 1, 0.92))
    return fig


__all__ = ["DrawnReadout", "COLOURS", "draw"]
