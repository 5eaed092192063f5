"""A :class:`~gemmlab.profiling.timeline.Timeline` as pictures: one CTA's warps over time, and the SMs over the launch.

One CTA: a lane per warp (grouped and labelled by role when the caller names roles), each span
coloured by state, time in µs from the CTA's first mark; the legend lists only the states that
occur. The SMs: a lane per SM, each CTA a bar from its first to its last mark, coloured by the
order CTAs started in, so the last wave (the CTAs still running when the others are done) shows.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Protocol

from .lanes import warp_roles


class DrawnTimeline(Protocol):
    """What the pictures read of a :class:`~gemmlab.profiling.timeline.Timeline` (named here, not imported: the
    timeline draws itself through this module, so this module may not import it back)."""

    warps_per_cta: int
    source: str

    @property
    def label(self) -> str: ...

    def title(self) -> str: ...

    def spans(self, cta: int = 0) -> list[Any]: ...

    def sm_spans(self) -> list[tuple[int, int, float, float]]: ...


COLOURS = {"START": "#d9d9d9", "LOAD": "#4c78a8", "WAIT_LOAD": "#f58518", "WAIT_SLOT": "#eeca3b", "MMA": "#54a24b",
           "WAIT_MMA": "#b5d99c", "SYNC": "#e45756", "EPILOGUE": "#b279a2", "OTHER": "#9d755d"}
EXTRA = ("#72b7b2", "#ff9da6", "#bab0ac", "#79706e", "#d67195")


def _colour(state: str, extra: dict[str, str]) -> str:
    if state in COLOURS:
        return COLOURS[state]
    return extra.setdefault(state, EXTRA[len(extra) % len(EXTRA)])


def draw_cta(t: DrawnTimeline, cta: int, roles: Mapping[str, Iterable[int]] | None = None) -> Any:
    """The figure of ``cta``'s warps (the caller closes it)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    spans = t.spans(cta)
    names = warp_roles(roles, t.warps_per_cta)
    warps = sorted({s.warp for s in spans} | set(names), key=lambda w: (list(names.values()).index(names[w])
                                                                         if w in names else 1 << 20, w))
    row = {w: i for i, w in enumerate(warps)}
    fig, ax = plt.subplots(figsize=(12, 0.9 + 0.32 * max(len(warps), 1)))
    extra: dict[str, str] = {}
    seen: dict[str, str] = {}
    for s in spans:
        colour = _colour(s.state, extra)
        seen.setdefault(s.state, colour)
        ax.barh(row[s.warp], s.length / 1e3, left=s.start / 1e3, height=0.8, color=colour, linewidth=0)
    ax.set_yticks(range(len(warps)), [f"{names[w]} · warp {w}" if w in names else f"warp {w}" for w in warps],
                  fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"µs from CTA {cta}'s first mark (the SM's clock)")
    ax.legend([Patch(color=c) for c in seen.values()], list(seen), ncol=min(len(seen), 8), fontsize=8,
              loc="upper center", bbox_to_anchor=(0.5, -0.35 if len(warps) < 6 else -0.12), frameon=False)
    ax.set_title(f"{t.title()}\nCTA {cta} · {t.label}", loc="left", fontsize=10,
                 color="#b00020" if t.source != "measured" else "black")
    fig.tight_layout()
    return fig


def draw_sms(t: DrawnTimeline) -> Any:
    """The figure of every traced CTA on its SM over the launch (the caller closes it)."""
    import matplotlib.pyplot as plt

    spans = t.sm_spans()
    sms = sorted({s[0] for s in spans})
    row = {sm: i for i, sm in enumerate(sms)}
    starts = sorted(s[2] for s in spans)
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.06 * max(len(sms), 1)))
    cmap = plt.get_cmap("viridis")
    for sm, cta, first, last in spans:
        order = starts.index(first) / max(len(starts) - 1, 1)
        ax.barh(row[sm], max(last - first, 1.0) / 1e3, left=first / 1e3, height=0.9, color=cmap(order), linewidth=0)
    end = max((s[3] for s in spans), default=0.0)
    ax.axvline(end / 1e3, color="#e45756", linewidth=1)
    ax.set_yticks([])
    ax.set_ylabel(f"{len(sms)} SMs")
    ax.set_xlabel("µs from the launch's first mark (global timer); colour: the order CTAs started in")
    ax.set_title(f"{t.title()}\nwhich SM ran which CTA when · {t.label}", loc="left", fontsize=10,
                 color="#b00020" if t.source != "measured" else "black")
    fig.tight_layout()
    return fig


__all__ = ["COLOURS", "draw_cta", "draw_sms"]
