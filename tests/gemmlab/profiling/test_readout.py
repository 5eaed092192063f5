"""The students' readout from ncu's counters: what each panel says, the bank model beside the measurement,
"not measured" for what ncu did not count, the picture, and the readout as data. Counters here are SYNTHETIC
(gemmlab.profiling.synthetic), printed in ncu's raw-page format and read back as a real run's would be."""
from __future__ import annotations

import json

import matplotlib
import pytest

from gemmlab.seeing import banks
from gemmlab.profiling import metrics, ncu, synthetic
from gemmlab.profiling.errors import ProfilerError
from gemmlab.profiling.readout import Power, Readout

matplotlib.use("Agg")

CONTEXT = dict(kernel="ws_kernel", what="gemm", shape=(4096, 4096, 4096), dtype="float16",
               device="NVIDIA H100 80GB HBM3", ncu_version="2025.3.1", measured_on="2026-12-02")


def readout_of(counters: dict[str, float], **context) -> Readout:
    """The counters printed as ncu's raw page and read back, then made a readout (as the judge does)."""
    (launch,) = ncu.parse_raw_csv(synthetic.raw_csv([("ws_kernel", counters)]))
    return Readout.from_counters(launch, **{**CONTEXT, "source": "synthetic", **context})


def test_each_panel_reads_its_counters() -> None:
    c = synthetic.counters((4096, 4096, 4096), "gemm", seed=3)
    r = readout_of(c)
    assert r.bar("tensor pipe").percent == pytest.approx(c[metrics.SPEED_OF_LIGHT["tensor pipe"][0]], rel=1e-4)
    assert r.bar("tensor pipe").metric == metrics.SPEED_OF_LIGHT["tensor pipe"][0]     # wgmma's counter, non-zero
    assert r.bar("DRAM").percent == pytest.approx(c["dram__throughput.avg.pct_of_peak_sustained_elapsed"], rel=1e-4)
    st = r.shared_row("st")
    assert st.instructions == c["smsp__inst_executed_op_shared_st.sum"]
    assert st.ideal == st.wavefronts - st.conflicts and st.way == pytest.approx(2.0)    # every store conflicts 2-way
    o = r.occupancy
    assert o.limiters == ("registers", "shared memory") and o.ctas_per_sm == 1 and o.registers_per_thread == 168
    assert o.smem_per_block == 213_000
    top = r.top_stalls()
    assert [s.key for s in top[:2]] == ["math_pipe_throttle", "long_scoreboard"] and "selected" not in {s.key for s in top}
    assert sum(s.share for s in r.stalls if s.key != "selected") == pytest.approx(1.0)
    assert r.tflops == pytest.approx(2 * 4096 ** 3 / c["gpu__time_duration.sum"] / 1e3, rel=1e-4)


def test_the_summary_explains_in_sentences_and_names_the_notebooks() -> None:
    text = readout_of(synthetic.counters((4096, 4096, 4096))).summary()
    assert text.startswith("ws_kernel · gemm 4096×4096×4096 float16")
    assert "SYNTHETIC (not measured): NVIDIA H100 80GB HBM3, Nsight Compute 2025.3.1, 2026-12-02" in text
    assert "limited by registers and shared memory" in text
    reason = {r.key: r for r in metrics.STALLS}["long_scoreboard"]
    assert f"{reason.sentence} [notebook {reason.notebook}]" in text


def test_a_counter_ncu_did_not_give_is_not_measured_never_zero() -> None:
    c = synthetic.counters((256, 256, 256))
    for name in metrics.SPEED_OF_LIGHT["tensor pipe"] + ("sm__warps_active.avg.pct_of_peak_sustained_active",):
        del c[name]
    c["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = float("nan")
    r = readout_of(c)
    assert r.bar("tensor pipe").percent is None and r.bar("DRAM").percent is None
    assert r.occupancy.achieved_pct is None
    text = r.summary()
    assert "tensor pipe  not measured" in text and "not measured achieved" in text
    assert readout_of({}).summary().count("not measured") >= 7            # an empty launch: nothing invented


def test_mma_sync_kernels_fill_the_tensor_bar_from_the_hmma_counter() -> None:
    c = synthetic.counters((4096, 4096, 4096))
    c[metrics.SPEED_OF_LIGHT["tensor pipe"][0]] = 0.0      # no wgmma
    c[metrics.SPEED_OF_LIGHT["tensor pipe"][1]] = 42.0     # mma.sync
    bar = readout_of(c).bar("tensor pipe")
    assert bar.percent == 42.0 and bar.metric == metrics.SPEED_OF_LIGHT["tensor pipe"][1]


def test_the_bank_model_stands_beside_the_measurement() -> None:
    r = readout_of(synthetic.counters((4096, 4096, 4096)))
    column = banks.analyze([128 * lane for lane in range(32)], "ld32")          # a 32-way conflict
    tile = banks.conflicts([[4 * lane for lane in range(32)], [128 * lane for lane in range(32)]], "ld32")
    one = r.with_prediction("ld", column)
    assert one.shared_row("ld").predicted.wavefronts == 32 and one.shared_row("ld").predicted.conflicts == 31
    assert one.shared_row("st").predicted is None and r.shared_row("ld").predicted is None   # r is unchanged
    avg = r.with_prediction("st", tile).shared_row("st").predicted
    assert (avg.wavefronts, avg.conflicts) == (16.5, 15.5)                       # the average per instruction
    assert "gemmlab.seeing.banks predicts 32.00 wavefronts, 31.00 conflicts" in one.summary()
    for bad, words in ((("x", column), "'ld' or 'st'"), (("ld", [1, 2, 3]), "Access or TileReport")):
        with pytest.raises(ProfilerError, match=words):
            r.with_prediction(*bad)


def test_the_readout_crosses_the_wire_and_refuses_what_is_not_one() -> None:
    r = readout_of(synthetic.counters((4096, 4096, 4096)), power=Power(612.0, 700.0, 1650.0, ("power cap",), 0.5))
    r = r.with_prediction("ld", (1.0, 0.0))
    again = Readout.from_dict(json.loads(json.dumps(r.to_dict(), allow_nan=False)))
    assert again == r and again.power.capped and "612 W of a 700 W limit at 1.65 GHz (power cap)" in again.summary()
    for broken in ({}, {**r.to_dict(), "shape": "big"}, {**r.to_dict(), "time_ns": "fast"},
                   {**r.to_dict(), "source": "invented"}):
        with pytest.raises(ProfilerError):
            Readout.from_dict(broken)


def test_the_picture_has_its_four_panels_and_says_where_the_numbers_come_from() -> None:
    import matplotlib.pyplot as plt

    r = readout_of(synthetic.counters((4096, 4096, 4096))).with_prediction("ld", (2.0, 1.0))
    fig = r.figure()
    try:
        titles = [ax.get_title(loc="left") for ax in fig.axes]
        assert titles[:4] == ["Speed of light", "Shared memory (bank conflicts = measured − ideal)", "Occupancy",
                              "Where the warps waited"]
        texts = [t.get_text() for t in fig.texts]
        assert any("SYNTHETIC (not measured)" in t for t in texts)
        sol = fig.axes[0]
        assert [tick.get_text() for tick in sol.get_yticklabels()] == ["DRAM", "L2", "L1 / shared", "issue slots",
                                                                        "tensor pipe"]
        assert len(fig.axes[1].patches) == 5          # ld: ideal, measured, model; st: ideal, measured
    finally:
        plt.close(fig)
    html = r._repr_html_()
    assert html.startswith("<img") and "Where the warps waited" in html


def test_a_copy_readout_has_no_tflops_and_its_own_title() -> None:
    r = readout_of(synthetic.counters((8192, 8192, 1), "copy"), what="copy", shape=(8192, 8192, 1))
    assert r.tflops is None and r.title() == "ws_kernel · copy 8192×8192 float16"
    assert r.top_stalls()[0].key == "long_scoreboard"


def test_shared_instructions_are_counted_per_type() -> None:
    c = synthetic.counters((4096, 4096, 4096))
    c["smsp__inst_executed_op_shared_ld.sum"], c["smsp__inst_executed_op_ldsm.sum"] = 1000.0, 3000.0
    ld = readout_of(c).shared_row("ld")
    assert ld.instructions == 4000 and ld.by_op == {"ld.shared": 1000.0, "ldmatrix": 3000.0}
    assert "4,000 warp instructions (ld.shared 1,000, ldmatrix 3,000)" in readout_of(c).summary()
    del c["smsp__inst_executed_op_ldsm.sum"]
    assert readout_of(c).shared_row("ld").by_op == {"ld.shared": 1000.0}
