"""Roofline arithmetic (exact values) and the roofline figure, without a GPU."""
from __future__ import annotations


import pytest

from gemmlab.timing import roofline_math as rm
from gemmlab.results import BenchResult
from gemmlab.timing.ceilings import Ceilings
from gemmlab.errors import GemmlabError
from gemmlab.timing.roofline import roofline


def test_flops_and_ideal_intensity_exact():
    assert rm.flops(2, 3, 4) == 48
    # 4096^3 fp16 in/out: 2*4096^3 / (3 * 4096^2 * 2 bytes) = 4096/3
    assert rm.intensity_ideal(4096, 4096, 4096, 2, 2) == pytest.approx(4096 / 3)
    # fp32 output: bytes = (MK+NK)*2 + MN*4 = 4*4096^2*2 -> 2*4096^3/(8*4096^2) = 1024
    assert rm.intensity_ideal(4096, 4096, 4096, 2, 4) == pytest.approx(1024)
    # reading C as well (beta != 0) adds M*N*out_bytes
    assert rm.intensity_ideal(4, 4, 4, 2, 2, read_output=True) == pytest.approx(128 / (32 + 32 + 64))


def test_tiled_intensity_counts_rereads():
    # 256^3 with 128x128 tiles: A read twice, B read twice -> bytes = (2*256*256 + 2*256*256)*2 + 256*256*2
    M = N = K = 256
    expected = 2 * M * N * K / ((2 * M * K + 2 * N * K) * 2 + M * N * 2)
    assert rm.intensity_tiled(M, N, K, 128, 128, 2, 2) == pytest.approx(expected)
    # one tile covering everything is the ideal case
    assert rm.intensity_tiled(M, N, K, 256, 256) == pytest.approx(rm.intensity_ideal(M, N, K))
    # partial tiles count as whole re-reads: N=129 with tile 128 -> A read twice
    t = rm.intensity_tiled(128, 129, 64, 128, 128, 2, 2)
    assert t == pytest.approx(2 * 128 * 129 * 64 / ((128 * 64 * 2 + 129 * 64 * 1) * 2 + 128 * 129 * 2))
    # bigger tiles -> more reuse
    assert rm.intensity_tiled(4096, 4096, 4096, 256, 128) > rm.intensity_tiled(4096, 4096, 4096, 64, 64)


def test_naive_intensity_is_about_half_a_flop_per_byte():
    v = rm.naive_intensity(4096, 4096, 4096, 2, 2)
    assert v == pytest.approx(2 * 4096**3 / (4096**3 * 4 + 4096**2 * 2))
    assert 0.49 < v < 0.5


def test_attainable_ridge_and_bound():
    # H100-like: 3000 GB/s, 700 TFLOPS -> ridge 233.33 flop/B
    assert rm.ridge(700, 3000) == pytest.approx(700e12 / 3000e9)
    assert rm.attainable(10, 700, 3000) == pytest.approx(30.0)
    assert rm.attainable(1000, 700, 3000) == 700
    assert rm.bound(10, 700, 3000) == "memory"
    assert rm.bound(1000, 700, 3000) == "compute"
    with pytest.raises(ValueError):
        rm.attainable(0, 700, 3000)


def _bench(tflops: float, cublas: float) -> BenchResult:
    return BenchResult((4096, 4096, 4096), "tn", "float16", "float16", 1.0, tflops, 0.2, cublas,
                       tflops / cublas, "test GPU", 10, "mine")


def test_bench_result_text_and_intensity():
    r = _bench(140.0, 690.0)
    assert r.intensity == pytest.approx(4096 / 3)
    text = str(r)
    assert "0.203× cuBLAS" in text and "140.0 TFLOPS" in text and "no interval" in text
    assert "cuBLAS" in r._repr_html_()


def test_roofline_figure_with_explicit_ceilings():
    fig = roofline([("naive", rm.naive_intensity(4096, 4096, 4096), 1.5), _bench(140.0, 690.0)],
                   peak_tflops=700, bw_gbps=3000)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(l.startswith("naive") for l in labels)
    assert any(l.startswith("mine") for l in labels) and any(l.startswith("cuBLAS") for l in labels)
    # the roof line itself: min(peak, I*bw) at both ends
    line = ax.get_lines()[0]
    xs, ys = line.get_xdata(), line.get_ydata()
    assert ys[0] == pytest.approx(xs[0] * 3.0) and ys[-1] == pytest.approx(700)
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"


def test_roofline_from_ceilings_object_and_bad_points():
    c = Ceilings("test GPU", 3000.0, {"float16": 650.0, "bfloat16": 680.0}, "2026-01-01")
    assert c.ridge("bfloat16") == pytest.approx(680e12 / 3000e9)
    fig = roofline([("x", 100.0, 50.0)], ceilings=c, dtype="bfloat16")
    assert "test GPU" in fig.axes[0].get_title()
    with pytest.raises(GemmlabError):
        roofline([("bad", 0.0, 1.0)], ceilings=c)
    with pytest.raises(GemmlabError):
        roofline([("x", 1.0)], ceilings=c)
    with pytest.raises(GemmlabError):
        c.peak("float32")


def test_package_names_stay_callable_after_submodule_import():
    import gemmlab
    import gemmlab.timing.ceilings  # noqa: F401  (binds the submodule over the lazy function)
    import gemmlab.timing.roofline  # noqa: F401

    fig = gemmlab.roofline([("x", 10.0, 5.0)], peak_tflops=100, bw_gbps=1000)
    assert fig.axes
    assert callable(gemmlab.timing.ceilings)


def test_left_work_running_flags_only_calls_that_outlast_their_timed_work() -> None:
    from gemmlab.checking.integrity import left_work_running

    assert not left_work_running(after_ms=0.02, gpu_ms=0.25)     # an honest 4096³ GEMM: idle when it ends
    assert not left_work_running(after_ms=0.08, gpu_ms=0.005)    # a tiny call, a slow synchronize
    assert left_work_running(after_ms=10.5, gpu_ms=0.001)        # sleeps on a side stream
    assert left_work_running(after_ms=0.30, gpu_ms=0.005)        # the GEMM hidden on a side stream
    assert left_work_running(after_ms=0.30, gpu_ms=0.30)         # the same work again, left running


def test_a_gate_that_ran_out_before_the_batch_was_queued_is_doubled_up_to_the_cap() -> None:
    from gemmlab.timing.events import next_gate

    assert next_gate(1000, gate_ran_out=False, max_cycles=10_000) is None     # still asleep: the batch stands
    assert next_gate(1000, gate_ran_out=True, max_cycles=10_000) == 2000      # woke early: queue again, longer
    assert next_gate(8000, gate_ran_out=True, max_cycles=10_000) == 10_000    # never past the cap
    assert next_gate(10_000, gate_ran_out=True, max_cycles=10_000) is None    # at the cap: accept


def test_the_nudge_between_graded_timings_changes_one_input_without_a_host_copy() -> None:
    # A host-to-device copy synchronizes the stream, and the GPU would then wait inside the next
    # timed window while Python launched the kernel: the nudge must pass its value as a kernel argument.
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from gemmlab.checking.integrity import input_nudger

    ops: list[str] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ops.append(func._schema.name.split("::")[-1])
            return func(*args, **(kwargs or {}))

    A = torch.zeros(64, 32)
    nudge = input_nudger(A)
    changed = 0
    for _ in range(20):
        before = A.clone()
        with Record():
            nudge()
        changed += int((A != before).sum())
    assert 15 <= changed <= 20                                  # one element a call (a redraw may repeat 0.0: rare)
    assert not {"copy_", "lift_fresh", "_to_copy", "_local_scalar_dense"} & set(ops), ops
    assert "fill_" in ops


def test_bench_result_round_trips_through_json() -> None:
    import json

    r = BenchResult((4096, 4096, 4096), "nn", "bfloat16", "float32", 0.25, 549.7, 0.2, 687.2, 0.8, "NVIDIA H100",
                    40, label="mine")
    back = BenchResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back == r and str(back) == str(r)
