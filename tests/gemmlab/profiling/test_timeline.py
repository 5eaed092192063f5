"""The timeline's buffer read back and drawn: the format the marks write, what goes wrong (a full region, a
mark reached by part of a warp, a buffer that is not one), the SM clock fitted to the global timer, the roles,
the pictures and the timeline as data. Buffers here are SYNTHETIC (gemmlab.profiling.synthetic writes them as
the marks' PTX would), not recorded from a GPU."""
from __future__ import annotations

import json
import struct

import matplotlib
import numpy as np
import pytest

from gemmlab.profiling import synthetic
from gemmlab.profiling.errors import TimelineError
from gemmlab.profiling.timeline import MAX_RECORDS, Timeline, buffer_bytes, header, parse_buffer, state_names
from gemmlab.profiling.trace_format import HEADER_BYTES, MAGIC, PARTIAL_BIT, RECORD_BYTES, SM_SHIFT, STATES

matplotlib.use("Agg")
ROLES = {"producer": [0], "consumer WG 1": [4, 5, 6, 7], "consumer WG 2": [8, 9, 10, 11]}


def timeline_of(raw: bytes, grid: int = 132, names=None) -> Timeline:
    records, full, head = parse_buffer(raw)
    return Timeline("ws_kernel", "gemm", (4096, 4096, 4096), "float16", "NVIDIA H100 80GB HBM3", "2026-12-02", grid,
                    head["warps_per_cta"], head["capacity"], head["ctas"], records, tuple(full), 0, names or {},
                    "synthetic")


def test_the_buffer_is_read_as_the_marks_wrote_it() -> None:
    raw = synthetic.trace_buffer(capacity=256, ctas=3, warps_per_cta=12, k_tiles=8, tiles=2)
    records, full, head = parse_buffer(raw)
    assert head == {"capacity": 256, "ctas": 3, "warps_per_cta": 12} and full == []
    assert set(np.unique(records["cta"])) == {0, 1, 2} and set(np.unique(records["warp"])) == set(range(12))
    first = records[(records["cta"] == 1) & (records["warp"] == 0)]
    assert first["state"][0] == STATES["START"] and first["state"][-1] == STATES["DONE"]
    assert np.all(np.diff(first["t"].astype(np.int64)) >= 0)                  # a warp's marks in order
    assert set(np.unique(records["sm"])) == {0, 1, 2} and not records["partial"].any()
    # warp 1 marked START and nothing else: one record, no span
    assert len(records[(records["cta"] == 0) & (records["warp"] == 1)]) == 1


@pytest.mark.parametrize("mutate, words", [
    (lambda raw: raw[:10], "at least its 64-byte header"),
    (lambda raw: struct.pack("<I", 0x12345678) + raw[4:], "not a timeline buffer"),
    (lambda raw: raw + b"\0" * RECORD_BYTES, "its header"),
])
def test_what_is_not_a_buffer_is_refused(mutate, words) -> None:
    with pytest.raises(TimelineError, match=words):
        parse_buffer(mutate(synthetic.trace_buffer(capacity=8, ctas=1, warps_per_cta=2, k_tiles=1, tiles=1)))


def test_a_warp_that_ran_out_of_records_and_part_warp_marks_are_said() -> None:
    t = timeline_of(synthetic.trace_buffer(capacity=16, ctas=2, k_tiles=8, tiles=2, partial_every=50))
    assert (0, 0) in t.full and (1, 4) in t.full                             # producer and consumers filled up
    assert t.partial_marks > 0
    notes = " ".join(t.warnings())
    assert "used all 16 records" in notes and "part of a warp" in notes and "2 of the launch's 132 CTAs" in notes
    assert "note: " in t.summary()


def test_the_sms_clock_gives_the_spans_when_the_global_timer_is_coarse() -> None:
    """A 1 µs global timer cannot tell a 300 ns wait from a 700 ns one; the SM's cycles can, once a CTA's marks
    (hundreds over its life on a GPU) have pinned the clock rate against the timer."""
    hz, rng = 1.98e9, np.random.default_rng(7)
    states = ["WAIT_LOAD", "MMA"]
    lengths = rng.integers(150, 900, size=120)                           # ns each state lasted
    marks = {0: [(0, "START")], 1: [(50, "START")]}
    now = 200
    for i, length in enumerate(lengths):
        marks[0].append((now, states[i % 2]))
        now += int(length)
    marks[0].append((now, "DONE"))
    marks[1] += [(3000, "LOAD"), (now - 100, "DONE")]
    capacity, warps = 128, 2
    raw = bytearray(header(capacity, 1, warps).ljust(buffer_bytes(capacity, 1, warps), b"\0"))
    for warp, rows in marks.items():
        for i, (ns, state) in enumerate(rows):
            coarse = 5_000_000 + (ns // 1000) * 1000                         # a 1 µs global timer
            clock = (4_294_000_000 + int(ns * hz / 1e9)) % (1 << 32)          # wraps past 2**32 on the way
            offset = HEADER_BYTES + (warp * capacity + i) * RECORD_BYTES
            struct.pack_into("<QII", raw, offset, coarse, clock, STATES[state] | (7 << SM_SHIFT))
    t = timeline_of(bytes(raw), grid=1)
    spans = [s for s in t.spans(0) if s.warp == 0 and s.state in states]
    assert len(spans) == len(lengths)
    assert np.abs(np.array([s.length for s in spans]) - lengths).max() < 0.02 * lengths.min()
    load = next(s for s in t.spans(0) if s.warp == 1 and s.state == "LOAD")
    assert load.start == pytest.approx(3000, abs=30)                          # warp 1 placed on the same clock
    (sm, cta, first, last), = t.sm_spans()                                    # across SMs: the global timer
    assert (sm, cta, first, last) == (7, 0, 0.0, (now // 1000) * 1000)
    shares = t.breakdown(0, {"consumer": [0], "producer": [1]})
    assert shares["consumer"]["MMA"] == pytest.approx(lengths[1::2].sum() / now, abs=0.01)
    assert list(shares["producer"]) == ["LOAD", "START"]                      # largest share first


def test_roles_and_states_of_ones_own_are_checked() -> None:
    t = timeline_of(synthetic.trace_buffer(capacity=64, ctas=1, k_tiles=2, tiles=1))
    with pytest.raises(TimelineError, match="names warp 12; the CTA has warps 0 to 11"):
        t.breakdown(0, {"ghost": [12]})
    with pytest.raises(TimelineError, match="id from 32 to 127"):
        state_names({5: "mine"})
    with pytest.raises(TimelineError, match="built-in state"):
        state_names({40: "mma"})
    assert state_names({40: "swizzle"}) == {40: "swizzle"}
    named = timeline_of(synthetic.trace_buffer(capacity=64, ctas=1, k_tiles=2, tiles=1), names={40: "swizzle"})
    assert named.state_name(40) == "swizzle" and named.state_name(41) == "state 41" and named.state_name(5) == "MMA"
    with pytest.raises(TimelineError, match="CTA 9 has no marks"):
        t.spans(9)


def test_whole_ctas_are_kept_when_the_report_would_overflow() -> None:
    t = timeline_of(synthetic.trace_buffer(capacity=64, ctas=4, k_tiles=4, tiles=1))
    per_cta = len(t.records) // 4
    kept = t.kept(limit=2 * per_cta + 1)
    assert kept.ctas == [0, 1] and kept.cut_ctas == 2 and "did not fit the report" in " ".join(kept.warnings())
    assert t.kept() is t and MAX_RECORDS >= len(t.records)


def test_the_timeline_crosses_the_wire_and_refuses_what_is_not_one() -> None:
    t = timeline_of(synthetic.trace_buffer(capacity=32, ctas=2, k_tiles=3, tiles=1), names={33: "mine"})
    again = Timeline.from_dict(json.loads(json.dumps(t.to_dict())))
    assert again == t and again.names == {33: "mine"} and again.records.dtype == t.records.dtype
    bad = t.to_dict()
    for broken in ({**bad, "records": "not base64!"}, {**bad, "records": bad["records"][:-8]}, {**bad, "shape": 3},
                   {**bad, "source": "invented"}, {}):
        with pytest.raises(TimelineError):
            Timeline.from_dict(broken)


def test_the_pictures_show_one_cta_by_role_and_the_sms_over_the_launch() -> None:
    import matplotlib.pyplot as plt

    t = timeline_of(synthetic.trace_buffer(capacity=128, ctas=3, k_tiles=4, tiles=2))
    fig = t.figure(0, ROLES)
    try:
        (ax,) = fig.axes
        labels = [tick.get_text() for tick in ax.get_yticklabels()]
        assert labels[0] == "producer · warp 0" and labels[1:5] == [f"consumer WG 1 · warp {w}" for w in (4, 5, 6, 7)]
        legend = [text.get_text() for text in ax.get_legend().get_texts()]
        assert {"MMA", "WAIT_LOAD", "WAIT_SLOT", "LOAD", "EPILOGUE"} <= set(legend) and "DONE" not in legend
        assert "SYNTHETIC" in ax.get_title(loc="left") and len(ax.patches) == len(t.spans(0))
    finally:
        plt.close(fig)
    fig = t.sm_figure()
    try:
        assert len(fig.axes[0].patches) == 3 and "which SM ran which CTA" in fig.axes[0].get_title(loc="left")
    finally:
        plt.close(fig)
    assert t._repr_html_().startswith("<img")


def test_the_format_constants_fit_together() -> None:
    assert MAGIC == int.from_bytes(b"GLTR", "little") and PARTIAL_BIT == 1 << 31
    assert len(header(4, 2, 3)) == HEADER_BYTES and buffer_bytes(4, 2, 3) == HEADER_BYTES + 4 * 2 * 3 * RECORD_BYTES
