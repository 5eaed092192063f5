"""One launch's in-kernel timeline: what every traced warp was doing, when (:class:`Timeline`).

Why per warp and in states: a warp-specialised kernel is a few roles (a producer warp issuing TMA
loads, consumer warpgroups issuing wgmmas, an epilogue) handing tiles to each other through
barriers. Its marks (``GEMMLAB_TRACE(WAIT_LOAD)`` in C++, ``tracer.mark(marks.WAIT_LOAD)`` in the
DSL; :mod:`.trace_format`) say "from here on this warp is in state X", so each warp's record is a
row of coloured spans: where the producer waits for a free slot, where the consumers wait for data,
how long the epilogue holds the SM.

Two clocks per mark: ``%clock`` (the SM's cycles: fine-grained, but each SM counts on its own) and
``%globaltimer`` (nanoseconds, one clock for the whole GPU, but coarse on some GPUs). Within one CTA
(one SM) the spans use the SM's cycles converted to nanoseconds by a straight-line fit against the
global timer; across CTAs (:meth:`Timeline.sm_spans`, the last wave) the global timer.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from .errors import TimelineError
from .lanes import warp_roles
from .trace_format import (CUSTOM_IDS, HEADER_BYTES, MAGIC, NAMES, PARTIAL_BIT, RECORD_BYTES, SM_MASK, SM_SHIFT,
                           STATE_MASK, STATES, VERSION)

#: Records one timeline may carry back (about 5.8 MB of base64): whole CTAs in order until it is full.
MAX_RECORDS = 1 << 18
#: The fields of one kept record on the wire, packed (22 bytes each).
WIRE_FIELDS = (("cta", "<u4"), ("warp", "<u2"), ("sm", "<u2"), ("state", "<u1"), ("partial", "<u1"), ("t", "<u8"),
               ("clock", "<u4"))
SOURCES = ("measured", "recorded", "synthetic")


def wire_dtype() -> Any:
    import numpy as np

    return np.dtype(list(WIRE_FIELDS))


def header(capacity: int, ctas: int, warps_per_cta: int) -> bytes:
    """The buffer's header the judge writes before the launch (the kernel reads it in ``begin``)."""
    import struct

    return struct.pack("<5I", MAGIC, VERSION, capacity, ctas, warps_per_cta).ljust(HEADER_BYTES, b"\0")


def buffer_bytes(capacity: int, ctas: int, warps_per_cta: int) -> int:
    """Size of a buffer for ``ctas`` CTAs of ``warps_per_cta`` warps, ``capacity`` records per warp."""
    return HEADER_BYTES + ctas * warps_per_cta * capacity * RECORD_BYTES


def parse_buffer(raw: bytes | memoryview) -> tuple[Any, list[tuple[int, int]], dict[str, int]]:
    """The records a kernel wrote into a buffer read back from the GPU: (records as :func:`wire_dtype` in CTA,
    warp, mark order; the (cta, warp) whose region filled up; the header's numbers). A TimelineError for a
    buffer that is not one."""
    import struct

    import numpy as np

    raw = bytes(raw)
    if len(raw) < HEADER_BYTES:
        raise TimelineError(f"a timeline buffer holds at least its {HEADER_BYTES}-byte header; this one has "
                            f"{len(raw)} bytes.")
    magic, version, capacity, ctas, wpc = struct.unpack_from("<5I", raw)
    if magic != MAGIC or version != VERSION:
        raise TimelineError(f"not a timeline buffer of version {VERSION} (magic {magic:#x}, version {version}).")
    if buffer_bytes(capacity, ctas, wpc) != len(raw):
        raise TimelineError(f"the buffer has {len(raw):,} bytes; its header ({ctas} CTAs × {wpc} warps × {capacity} "
                            f"records) says {buffer_bytes(capacity, ctas, wpc):,}.")
    body = np.frombuffer(raw, dtype="<u4", offset=HEADER_BYTES).reshape(ctas, wpc, capacity, 4)
    t = body[..., 0].astype(np.uint64) | (body[..., 1].astype(np.uint64) << np.uint64(32))
    written = t != 0
    cta, warp, _slot = np.nonzero(written)
    meta = body[..., 3][written]
    out = np.zeros(len(cta), dtype=wire_dtype())
    out["cta"], out["warp"] = cta, warp
    out["state"] = meta & STATE_MASK
    out["sm"] = (meta >> SM_SHIFT) & SM_MASK
    out["partial"] = (meta & PARTIAL_BIT) != 0
    out["t"] = t[written]
    out["clock"] = body[..., 2][written]
    full = [(int(c), int(w)) for c, w in zip(*np.nonzero(written[..., -1]))] if capacity else []  # last slot used
    return out, full, {"capacity": capacity, "ctas": ctas, "warps_per_cta": wpc}


@dataclass(frozen=True)
class Span:
    """A warp in one state from ``start`` to ``end`` (ns from the CTA's first mark, or the kernel's)."""

    cta: int
    warp: int
    state: str
    start: float
    end: float

    @property
    def length(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Timeline:
    """The marks of one traced launch (see the module docstring); ``records`` are :func:`wire_dtype` rows."""

    kernel: str
    what: str
    shape: tuple[int, int, int]
    dtype: str
    device: str
    measured_on: str
    grid_ctas: int                       # CTAs in the launch
    warps_per_cta: int
    capacity: int                        # records each warp could write
    ctas_traced: int
    records: Any = field(repr=False)
    full: tuple[tuple[int, int], ...] = ()          # (cta, warp) whose records ran out
    cut_ctas: int = 0                    # traced CTAs whose records did not fit the report
    names: Mapping[int, str] = field(default_factory=dict)   # the kernel's own states (ids 32..127)
    source: str = "measured"

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise TimelineError(f"a timeline's source is one of {', '.join(SOURCES)}, not {self.source!r}.")

    # ----------------------------------------------------------------- reading

    def state_name(self, state: int) -> str:
        if state in NAMES:
            return NAMES[state]
        return str(self.names.get(state, f"state {state}"))

    @property
    def ctas(self) -> list[int]:
        """The CTAs with records, in order."""
        import numpy as np

        return [int(c) for c in np.unique(self.records["cta"])]

    @property
    def partial_marks(self) -> int:
        """Marks reached by only part of a warp (the timeline of such a warp may be wrong: see the header)."""
        return int(self.records["partial"].sum())

    def _of_cta(self, cta: int) -> Any:
        rows = self.records[self.records["cta"] == cta]
        if not len(rows):
            raise TimelineError(f"CTA {cta} has no marks in this timeline (traced: {self.ctas[:8]}"
                                f"{'...' if len(self.ctas) > 8 else ''}).")
        return rows

    def cta_nanoseconds(self, cta: int) -> tuple[Any, Any]:
        """(rows of ``cta``, each row's time in ns from the CTA's first mark, from the SM's cycles fitted to
        the global timer)."""
        import numpy as np

        rows = self._of_cta(cta)
        rows = rows[np.argsort(rows["t"], kind="stable")]
        # Cycles from the first mark, signed (a launch lasts far less than 2**31 cycles), so %clock's wrap at 2**32
        # and marks that share one tick of a coarse global timer both come out right.
        cycles = ((rows["clock"].astype(np.int64) - int(rows["clock"][0]) + (1 << 31)) % (1 << 32) - (1 << 31)
                  ).astype(np.float64)
        t = (rows["t"] - rows["t"][0]).astype(np.float64)
        ns = t
        if len(rows) >= 2 and np.ptp(cycles) > 0 and np.ptp(t) > 0:
            slope, offset = np.polyfit(cycles, t, 1)
            if slope > 0:
                ns = offset + slope * cycles
        order = np.argsort(ns, kind="stable")
        return rows[order], ns[order] - ns.min()

    def spans(self, cta: int = 0) -> list[Span]:
        """Every warp of ``cta`` as spans of states (each mark starts a state the warp's next mark ends)."""
        import numpy as np

        rows, ns = self.cta_nanoseconds(cta)
        out: list[Span] = []
        for warp in np.unique(rows["warp"]):
            mine = np.nonzero(rows["warp"] == warp)[0]
            for a, b in zip(mine[:-1], mine[1:]):
                out.append(Span(cta, int(warp), self.state_name(int(rows["state"][a])), float(ns[a]), float(ns[b])))
        return out

    def breakdown(self, cta: int = 0, roles: Mapping[str, Iterable[int]] | None = None) -> dict[str, dict[str, float]]:
        """For each role (default: each warp), the share of its time in each state, over ``cta``'s spans."""
        groups = warp_roles(roles, self.warps_per_cta)
        totals: dict[str, dict[str, float]] = {}
        for span in self.spans(cta):
            role = groups.get(span.warp, f"warp {span.warp}")
            totals.setdefault(role, {}).setdefault(span.state, 0.0)
            totals[role][span.state] += span.length
        return {role: {s: v / sum(states.values()) for s, v in sorted(states.items(), key=lambda kv: -kv[1])}
                for role, states in totals.items() if sum(states.values()) > 0}

    def sm_spans(self) -> list[tuple[int, int, float, float]]:
        """Each traced CTA as (sm, cta, first mark, last mark) in ns of the global timer from the kernel's first mark:
        which SM ran which CTA when (the last wave is the CTAs still running after the others ended)."""
        import numpy as np

        if not len(self.records):
            return []
        t0 = int(self.records["t"].min())
        out = []
        for cta in self.ctas:
            rows = self.records[self.records["cta"] == cta]
            out.append((int(np.bincount(rows["sm"]).argmax()), cta, float(int(rows["t"].min()) - t0),
                        float(int(rows["t"].max()) - t0)))
        return sorted(out, key=lambda s: (s[0], s[2]))

    @property
    def label(self) -> str:
        tag = {"measured": "", "recorded": "recorded: ", "synthetic": "SYNTHETIC (not measured): "}[self.source]
        return f"{tag}{self.device}, {self.measured_on}"

    def title(self) -> str:
        M, N, K = self.shape
        return f"{self.kernel} · {self.what} {M}×{N}×{K} {self.dtype}: timeline of one launch"

    def warnings(self) -> list[str]:
        """What may make this timeline incomplete or wrong, in sentences."""
        notes = []
        if self.full:
            c, w = self.full[0]
            notes.append(f"{len(self.full)} warp(s) (first: CTA {c}, warp {w}) used all {self.capacity} records: their "
                         "later marks were dropped; ask for a larger capacity= or mark less often.")
        if self.partial_marks:
            notes.append(f"{self.partial_marks} mark(s) were reached by only part of a warp: a warp's lanes then keep "
                         "different cursors and its records may overwrite each other. Put GEMMLAB_TRACE / "
                         "tracer.mark where the whole warp runs it (outside `if (lane == 0)`).")
        if self.ctas_traced < self.grid_ctas:
            notes.append(f"{self.ctas_traced} of the launch's {self.grid_ctas} CTAs were traced.")
        if self.cut_ctas:
            notes.append(f"the last {self.cut_ctas} traced CTA(s) did not fit the report ({MAX_RECORDS:,} records).")
        return notes

    def summary(self, cta: int = 0, roles: Mapping[str, Iterable[int]] | None = None) -> str:
        lines = [self.title(), f"  {self.label}",
                 f"  {len(self.records):,} marks from {len(self.ctas)} CTA(s) of {self.grid_ctas}, "
                 f"{self.warps_per_cta} warps each"]
        if len(self.records):
            for role, shares in self.breakdown(cta, roles).items():
                text = ", ".join(f"{s} {v:.0%}" for s, v in shares.items() if v >= 0.005)
                lines.append(f"  CTA {cta}, {role}: {text}")
        lines += [f"  note: {n}" for n in self.warnings()]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary(self.ctas[0]) if len(self.records) else self.summary()

    def figure(self, cta: int | None = None, roles: Mapping[str, Iterable[int]] | None = None) -> Any:
        """One CTA's warps over time, a lane per warp grouped by role (default: the first traced CTA)."""
        from .timeline_picture import draw_cta

        return draw_cta(self, self.ctas[0] if cta is None else cta, roles)

    def sm_figure(self) -> Any:
        """Every traced CTA as a bar on the SM that ran it, over the whole launch: the waves and the last one."""
        from .timeline_picture import draw_sms

        return draw_sms(self)

    def _repr_html_(self) -> str:
        from .html import figure_and_text

        return figure_and_text(self.figure() if len(self.records) else None, f"timeline of {self.kernel}", str(self))

    # ----------------------------------------------------------------- as data

    def kept(self, limit: int = MAX_RECORDS) -> "Timeline":
        """This timeline with whole CTAs kept, in order, while they fit ``limit`` records."""
        import numpy as np

        if len(self.records) <= limit:
            return self
        counts = np.bincount(self.records["cta"])
        keep = np.cumsum(counts) <= limit
        ctas = np.nonzero(keep & (counts > 0))[0]
        mask = np.isin(self.records["cta"], ctas)
        return replace(self, records=self.records[mask],
                       cut_ctas=self.cut_ctas + int(((counts > 0) & ~keep).sum()))

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "what": self.what, "shape": list(self.shape), "dtype": self.dtype,
                "device": self.device, "measured_on": self.measured_on, "grid_ctas": self.grid_ctas,
                "warps_per_cta": self.warps_per_cta, "capacity": self.capacity, "ctas_traced": self.ctas_traced,
                "records": base64.b64encode(self.records.tobytes()).decode("ascii"),
                "full": [list(f) for f in self.full], "cut_ctas": self.cut_ctas,
                "names": {str(k): v for k, v in self.names.items()}, "source": self.source}

    @classmethod
    def from_dict(cls, data: Any) -> "Timeline":
        """The timeline :meth:`to_dict` wrote; a TimelineError says what is malformed."""
        import numpy as np

        try:
            raw = base64.b64decode(str(data["records"]), validate=True)
            dtype = wire_dtype()
            if len(raw) % dtype.itemsize or len(raw) // dtype.itemsize > MAX_RECORDS:
                raise ValueError(f"{len(raw)} bytes of records")
            records = np.frombuffer(raw, dtype=dtype).copy()
            names = {int(k): str(v)[:40] for k, v in (data.get("names") or {}).items()}
            return cls(str(data["kernel"]), str(data["what"]), tuple(int(v) for v in data["shape"]),  # type: ignore[arg-type]
                       str(data["dtype"]), str(data["device"]), str(data["measured_on"]), int(data["grid_ctas"]),
                       int(data["warps_per_cta"]), int(data["capacity"]), int(data["ctas_traced"]), records,
                       tuple((int(c), int(w)) for c, w in data.get("full", ())), int(data.get("cut_ctas", 0)), names,
                       str(data.get("source", "measured")))
        except TimelineError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TimelineError(f"not a timeline ({type(exc).__name__}: {str(exc)[:120]}).") from None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Timeline):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]



def state_names(names: Mapping[int, str] | None) -> dict[int, str]:
    """The kernel's own states, checked: ids from 32 to 127, names that are not the built-in ones."""
    out = {}
    for key, value in (names or {}).items():
        if not isinstance(key, int) or key not in CUSTOM_IDS:
            raise TimelineError(f"a state of your own has an id from {CUSTOM_IDS.start} to {CUSTOM_IDS.stop - 1}, "
                                f"not {key!r}.")
        if str(value).upper() in STATES:
            raise TimelineError(f"{value!r} is a built-in state's name; give yours another.")
        out[key] = str(value)[:40]
    return out


__all__ = ["MAX_RECORDS", "SOURCES", "Span", "Timeline", "WIRE_FIELDS", "buffer_bytes", "header", "parse_buffer",
           "state_names", "warp_roles", "wire_dtype"]
