"""One kernel launch as Nsight Compute measured it, curated for a student: :class:`Readout`.

Why a class of its own: the same readout comes from a local ncu run, from the class's GPU pool (as
plain data in the judge's report) and from a recording shipped with the course (labelled with the
GPU and the date it was measured on), and a notebook shows all three the same way: the picture
(:mod:`.readout_picture`), a text summary, and the numbers as attributes for tests.

Built from one launch's counters (``{ncu metric: value}``, base units) by :meth:`Readout.from_counters`;
what a counter's absence means is "not measured" (None), never zero.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from .errors import ProfilerError
from .metrics import (CLOCKS, LIMIT_ADVICE, OCCUPANCY, OCCUPANCY_LIMITS, SHARED, SHARED_LABELS, SHARED_OPS,
                      SPEED_OF_LIGHT, SPEED_OF_LIGHT_NOTES, STALLS, stall_metric)

#: Where a readout's numbers came from.
SOURCES = ("measured", "recorded", "synthetic")
#: How many stall reasons the summary and the picture name.
TOP_STALLS = 4


def _value(counters: Mapping[str, Any], *names: str) -> float | None:
    """The first of ``names`` with a finite value in ``counters`` (None: not measured)."""
    for name in names:
        v = counters.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


def _first_measured(counters: Mapping[str, Any], names: tuple[str, ...]) -> tuple[float | None, str | None]:
    """The first name with a non-zero value (else the first with any value): a bar and the metric it shows."""
    found = [(n, _value(counters, n)) for n in names]
    found = [(n, v) for n, v in found if v is not None]
    for n, v in found:
        if v:
            return v, n
    return (found[0][1], found[0][0]) if found else (None, None)


@dataclass(frozen=True)
class Bar:
    """One speed-of-light bar: how busy a unit was, % of its peak (None: not measured)."""

    name: str
    percent: float | None
    metric: str | None
    note: str
    notebook: str


@dataclass(frozen=True)
class Prediction:
    """What the course's bank model (:mod:`gemmlab.seeing.banks`) predicts per instruction of one kind."""

    wavefronts: float
    conflicts: float
    label: str = "gemmlab.seeing.banks"


@dataclass(frozen=True)
class SharedRow:
    """Shared-memory instructions of one kind (loads or stores): how many, their wavefronts and bank conflicts.

    ``conflicts`` is Nsight Compute's count of wavefronts beyond the ideal (its l1tex shared-memory metrics), so
    the ideal is ``wavefronts - conflicts``."""

    kind: str
    instructions: float | None
    wavefronts: float | None
    conflicts: float | None
    predicted: Prediction | None = None
    by_op: dict[str, float] = field(default_factory=dict)   # warp instructions per type: {"ld.shared": ..., "ldmatrix": ...}

    @property
    def label(self) -> str:
        return SHARED_LABELS.get(self.kind, self.kind)

    @property
    def ideal(self) -> float | None:
        if self.wavefronts is None or self.conflicts is None:
            return None
        return self.wavefronts - self.conflicts

    def per_instruction(self, value: float | None) -> float | None:
        if value is None or not self.instructions:
            return None
        return value / self.instructions

    @property
    def way(self) -> float | None:
        """Wavefronts per ideal wavefront: 1.0 is conflict-free, 2.0 a two-way conflict on average."""
        ideal = self.ideal
        return self.wavefronts / ideal if ideal and self.wavefronts is not None else None


@dataclass(frozen=True)
class Occupancy:
    """Achieved against theoretical occupancy, and what limits the CTAs per SM."""

    achieved_pct: float | None
    theoretical_pct: float | None
    limits: dict[str, float] = field(default_factory=dict)   # resource -> CTAs per SM it allows
    registers_per_thread: float | None = None
    block_size: float | None = None
    grid_size: float | None = None
    smem_per_block: float | None = None
    waves: float | None = None
    sms: float | None = None

    @property
    def limiter(self) -> str | None:
        """The resource allowing the fewest CTAs per SM (None when ncu gave no limits)."""
        if not self.limits:
            return None
        order = list(OCCUPANCY_LIMITS)
        return min(self.limits, key=lambda k: (self.limits[k], order.index(k) if k in order else 99))

    @property
    def limiters(self) -> tuple[str, ...]:
        """Every resource allowing that fewest number of CTAs per SM (several when they tie)."""
        if not self.limits:
            return ()
        least = min(self.limits.values())
        return tuple(k for k in OCCUPANCY_LIMITS if self.limits.get(k) == least)

    @property
    def ctas_per_sm(self) -> float | None:
        return self.limits[self.limiter] if self.limiter else None


@dataclass(frozen=True)
class Stall:
    """One stall reason: cycles per issued instruction a warp spent on it, and its share of all stall cycles."""

    key: str
    title: str
    cycles: float
    share: float
    sentence: str
    notebook: str


@dataclass(frozen=True)
class Power:
    """The board while the kernel ran back to back for a moment outside the profiled launch (NVML)."""

    watts: float | None
    limit_watts: float | None
    sm_mhz: float | None
    reasons: tuple[str, ...] = ()     # clock event reasons NVML reported (e.g. "power cap")
    seconds: float = 0.0

    @property
    def capped(self) -> bool:
        return any("power" in r for r in self.reasons)


@dataclass(frozen=True)
class Readout:
    """A curated Nsight Compute readout of one launch (see the module docstring)."""

    kernel: str
    what: str                          # "gemm" or "copy"
    shape: tuple[int, int, int]
    dtype: str
    device: str
    ncu_version: str
    measured_on: str                   # the date (UTC) of the measurement, YYYY-MM-DD
    time_ns: float | None
    sm_hz: float | None
    dram_hz: float | None
    speed_of_light: tuple[Bar, ...]
    shared: tuple[SharedRow, ...]
    occupancy: Occupancy
    stalls: tuple[Stall, ...]
    power: Power | None = None
    other_launches: tuple[tuple[str, float], ...] = ()   # (kernel, ns) of the call's other launches
    report_file: str = ""              # the full .ncu-rep, where it was kept
    source: str = "measured"

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ProfilerError(f"a readout's source is one of {', '.join(SOURCES)}, not {self.source!r}.")

    # ----------------------------------------------------------------- building

    @classmethod
    def from_counters(cls, counters: Mapping[str, Any], *, kernel: str, what: str, shape: tuple[int, int, int],
                      dtype: str, device: str, ncu_version: str, measured_on: str, power: Power | None = None,
                      other_launches: tuple[tuple[str, float], ...] = (), source: str = "measured") -> "Readout":
        """The readout of one launch's counters (``{ncu metric name: value}`` in base units)."""
        bars = []
        for name, names in SPEED_OF_LIGHT.items():
            percent, metric = _first_measured(counters, names)
            note, notebook = SPEED_OF_LIGHT_NOTES[name]
            bars.append(Bar(name, percent, metric, note, notebook))
        shared = []
        for kind, metrics in SHARED.items():
            by_op = {SHARED_OPS[m]: v for m in metrics["instructions"] if (v := _value(counters, m)) is not None}
            shared.append(SharedRow(kind, sum(by_op.values()) if by_op else None,
                                    _value(counters, *metrics["wavefronts"]), _value(counters, *metrics["conflicts"]),
                                    None, by_op))
        limits = {k: v for k, m in OCCUPANCY_LIMITS.items() if (v := _value(counters, m)) is not None}
        occ = {k: _value(counters, m) for k, m in OCCUPANCY.items()}
        smem = None if occ["dynamic_smem"] is None and occ["static_smem"] is None else \
            (occ["dynamic_smem"] or 0.0) + (occ["static_smem"] or 0.0)
        occupancy = Occupancy(occ["achieved_pct"], occ["theoretical_pct"], limits, occ["registers_per_thread"],
                              occ["block_size"], occ["grid_size"], smem, occ["waves"], occ["sms"])
        measured = [(r, v) for r in STALLS if (v := _value(counters, stall_metric(r))) is not None]
        stalled = sum(v for r, v in measured if r.key != "selected")
        stalls = tuple(sorted((Stall(r.key, r.title, v, v / stalled if stalled else 0.0, r.sentence, r.notebook)
                               for r, v in measured), key=lambda s: -s.cycles))
        return cls(kernel, what, tuple(int(v) for v in shape), dtype, device, ncu_version, measured_on,  # type: ignore[arg-type]
                   _value(counters, CLOCKS["time_ns"]), _value(counters, CLOCKS["sm_hz"]),
                   _value(counters, CLOCKS["dram_hz"]), tuple(bars), tuple(shared), occupancy, stalls, power,
                   tuple(other_launches), "", source)

    def with_prediction(self, kind: str, model: Any, label: str = "gemmlab.seeing.banks") -> "Readout":
        """This readout with the bank model's prediction beside the measured ``kind`` ("ld" or "st") row.

        ``model``: a :class:`gemmlab.seeing.banks.Access` (one instruction), a :class:`gemmlab.seeing.banks.TileReport`
        (many: their average per instruction) or ``(wavefronts, conflicts)`` per instruction."""
        if kind not in SHARED:
            raise ProfilerError(f"a prediction is for 'ld' or 'st' instructions, not {kind!r}.")
        if isinstance(model, tuple) and len(model) == 2:
            wf, cf = (float(x) for x in model)
        elif hasattr(model, "instructions") and isinstance(getattr(model, "instructions"), list):
            n = len(model.instructions)
            if not n:
                raise ProfilerError("the bank model's report holds no instruction to compare with.")
            wf, cf = model.wavefronts / n, model.conflicts / n
        elif hasattr(model, "wavefronts") and hasattr(model, "conflicts"):
            wf, cf = float(model.wavefronts), float(model.conflicts)
        else:
            raise ProfilerError("a prediction is a gemmlab.banks Access or TileReport, or (wavefronts, conflicts) "
                                f"per instruction; not {type(model).__name__}.")
        rows = tuple(replace(r, predicted=Prediction(wf, cf, label)) if r.kind == kind else r for r in self.shared)
        return replace(self, shared=rows)

    # ----------------------------------------------------------------- reading

    def bar(self, name: str) -> Bar:
        """The speed-of-light bar called ``name`` ("tensor pipe", "issue slots", "L1 / shared", "L2", "DRAM")."""
        for b in self.speed_of_light:
            if b.name == name:
                return b
        raise KeyError(f"no bar {name!r}; the bars are {', '.join(b.name for b in self.speed_of_light)}")

    def shared_row(self, kind: str) -> SharedRow:
        for r in self.shared:
            if r.kind == kind:
                return r
        raise KeyError(f"no shared-memory row {kind!r}; the rows are 'ld' and 'st'")

    def top_stalls(self, n: int = TOP_STALLS) -> tuple[Stall, ...]:
        """The ``n`` stall reasons that cost the most cycles (issuing itself, 'selected', left out)."""
        return tuple(s for s in self.stalls if s.key != "selected")[:n]

    @property
    def tflops(self) -> float | None:
        if self.what != "gemm" or not self.time_ns:
            return None
        M, N, K = self.shape
        return 2 * M * N * K / self.time_ns / 1e3

    @property
    def label(self) -> str:
        """Where and when the numbers come from, e.g. 'NVIDIA H100 80GB HBM3, ncu 2025.3.1, 2026-12-02'."""
        tag = {"measured": "", "recorded": "recorded: ", "synthetic": "SYNTHETIC (not measured): "}[self.source]
        return f"{tag}{self.device}, Nsight Compute {self.ncu_version}, {self.measured_on}"

    def title(self) -> str:
        M, N, K = self.shape
        size = f"{M}×{N}" if self.what == "copy" else f"{M}×{N}×{K}"
        return f"{self.kernel} · {self.what} {size} {self.dtype}"

    def clock_text(self) -> str:
        parts = []
        if self.time_ns is not None:
            parts.append(f"{self.time_ns / 1e3:,.1f} µs" + (f" ({self.tflops:,.0f} TFLOPS)" if self.tflops else ""))
        if self.sm_hz:
            parts.append(f"SM clock {self.sm_hz / 1e9:.2f} GHz during the profiled launch")
        p = self.power
        if p is not None and p.watts is not None:
            text = f"back to back for {p.seconds:.1f} s: {p.watts:.0f} W"
            if p.limit_watts:
                text += f" of a {p.limit_watts:.0f} W limit"
            if p.sm_mhz:
                text += f" at {p.sm_mhz / 1e3:.2f} GHz"
            if p.reasons:
                text += f" ({', '.join(p.reasons)})"
            parts.append(text)
        return "; ".join(parts)

    def summary(self) -> str:
        """The readout as text: the bars, shared memory, occupancy, the top stalls each with its sentence."""
        lines = [self.title(), f"  {self.label}"]
        if self.clock_text():
            lines.append(f"  {self.clock_text()}")
        lines.append("Speed of light (% of each unit's peak):")
        for b in self.speed_of_light:
            value = "not measured" if b.percent is None else f"{b.percent:5.1f}%"
            lines.append(f"  {b.name:12s} {value:>12s}  {b.note} [notebook {b.notebook}]")
        lines.append("Shared memory, per instruction:")
        for r in self.shared:
            lines.append("  " + _shared_text(r))
        o = self.occupancy
        if o.achieved_pct is not None or o.theoretical_pct is not None:
            lines.append(f"Occupancy: {_pct(o.achieved_pct)} achieved of {_pct(o.theoretical_pct)} theoretical"
                         + (f"; {o.ctas_per_sm:.0f} CTA(s) per SM, limited by {' and '.join(o.limiters)}: "
                            + "; ".join(LIMIT_ADVICE[k] for k in o.limiters) if o.limiters else ""))
        top = self.top_stalls()
        if top:
            lines.append("Where the warps waited (cycles per issued instruction):")
            for s in top:
                lines.append(f"  {s.title:26s} {s.cycles:6.2f} ({s.share:4.0%})  {s.sentence} [notebook {s.notebook}]")
        if self.other_launches:
            lines.append("Other launches of the call: " + ", ".join(f"{k} ({ns / 1e3:,.1f} µs)"
                                                                   for k, ns in self.other_launches))
        if self.report_file:
            lines.append(f"Full report (open it in Nsight Compute): {self.report_file}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def figure(self) -> Any:
        """The readout as one matplotlib figure (see :mod:`.readout_picture`)."""
        from .readout_picture import draw

        return draw(self)

    def _repr_html_(self) -> str:
        from .html import figure_and_text

        return figure_and_text(self.figure(), f"Nsight Compute readout of {self.kernel}", self.summary())

    # ----------------------------------------------------------------- as data

    def to_dict(self) -> dict[str, Any]:
        def plain(value: Any) -> Any:
            if isinstance(value, float) and not math.isfinite(value):
                return None
            if isinstance(value, tuple):
                return [plain(v) for v in value]
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if hasattr(value, "__dataclass_fields__"):
                return {k: plain(getattr(value, k)) for k in value.__dataclass_fields__}
            return value

        return plain(self)

    @classmethod
    def from_dict(cls, data: Any) -> "Readout":
        """The readout :meth:`to_dict` wrote; a ProfilerError says what is malformed."""
        try:
            power = data.get("power")
            occupancy = dict(data["occupancy"])
            occupancy["limits"] = {str(k): float(v) for k, v in (occupancy.get("limits") or {}).items()}
            return cls(
                str(data["kernel"]), str(data["what"]), tuple(int(v) for v in data["shape"]),  # type: ignore[arg-type]
                str(data["dtype"]), str(data["device"]), str(data["ncu_version"]), str(data["measured_on"]),
                _opt(data["time_ns"]), _opt(data["sm_hz"]), _opt(data["dram_hz"]),
                tuple(Bar(str(b["name"]), _opt(b["percent"]), b.get("metric"), str(b["note"]), str(b["notebook"]))
                      for b in data["speed_of_light"]),
                tuple(SharedRow(str(r["kind"]), _opt(r["instructions"]), _opt(r["wavefronts"]), _opt(r["conflicts"]),
                                Prediction(float(r["predicted"]["wavefronts"]), float(r["predicted"]["conflicts"]),
                                           str(r["predicted"]["label"])) if r.get("predicted") else None,
                                {str(k): float(v) for k, v in (r.get("by_op") or {}).items()})
                      for r in data["shared"]),
                Occupancy(**{k: _opt(v) if k != "limits" else v for k, v in occupancy.items()}),
                tuple(Stall(str(s["key"]), str(s["title"]), float(s["cycles"]), float(s["share"]), str(s["sentence"]),
                            str(s["notebook"])) for s in data["stalls"]),
                Power(_opt(power["watts"]), _opt(power["limit_watts"]), _opt(power["sm_mhz"]),
                      tuple(str(r) for r in power.get("reasons", ())), float(power.get("seconds", 0.0)))
                if power else None,
                tuple((str(k), float(ns)) for k, ns in data.get("other_launches", ())),
                str(data.get("report_file", "")), str(data.get("source", "measured")))
        except ProfilerError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProfilerError(f"not a profiler readout ({type(exc).__name__}: {str(exc)[:120]}).") from None


def _opt(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{value!r:.30} is not a number")
    return float(value)


def _pct(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.1f}%"


def _shared_text(r: SharedRow) -> str:
    if r.instructions is None and r.wavefronts is None:
        return f"{r.label}: not measured"
    if not r.instructions:
        return f"{r.label}: none executed"
    wf, cf, ideal = (r.per_instruction(v) for v in (r.wavefronts, r.conflicts, r.ideal))
    text = f"{r.label}: {r.instructions:,.0f} warp instructions"
    if len([v for v in r.by_op.values() if v]) > 1:
        text += " (" + ", ".join(f"{op} {v:,.0f}" for op, v in r.by_op.items() if v) + ")"
    if wf is not None:
        text += f", {wf:.2f} wavefronts each"
        if cf is not None and ideal is not None:
            text += f" (ideal {ideal:.2f}), {cf:.2f} of them bank conflicts"
    if r.predicted is not None:
        p = r.predicted
        text += f"; {p.label} predicts {p.wavefronts:.2f} wavefronts, {p.conflicts:.2f} conflicts"
    return text


__all__ = ["Bar", "Occupancy", "Power", "Prediction", "Readout", "SOURCES", "SharedRow", "Stall", "TOP_STALLS"]
