"""gemmlab.timing.perfbar on the CPU: bench_gemm is replaced by a fake timing, so the verdict logic is tested."""
from __future__ import annotations

import pytest

import gemmlab
from gemmlab.timing import perfbar
from gemmlab.results import BenchResult


def fake_bench(ratio: float, calls: list):
    def bench_gemm(fn, shape, convention, dtype, **kwargs):
        calls.append((fn, shape, convention, dtype, kwargs))
        cublas = 700.0
        ms = 2 * shape[0] * shape[1] * shape[2] / (ratio * cublas * 1e12) * 1e3
        return BenchResult(tuple(shape), convention, "float16", "float16", ms, ratio * cublas,
                           ms * ratio, cublas, ratio, "Fake GPU 80GB", 10)
    return bench_gemm


@pytest.fixture
def with_gpu(monkeypatch):
    monkeypatch.setattr(perfbar, "require_gpu", lambda what: None)
    calls: list = []

    def install(ratio: float):
        monkeypatch.setattr(gemmlab.timing.bench, "bench_gemm", fake_bench(ratio, calls))
        return calls
    return install


def test_needs_a_gpu(no_gpu):
    with pytest.raises(gemmlab.NoGPUError, match="performance_bar"):
        gemmlab.performance_bar(lambda A, B, D: None, 0.2)


def test_passes_above_the_bar_and_forwards_arguments(with_gpu):
    calls = with_gpu(0.31)
    fn = object()
    bar = gemmlab.performance_bar(fn, 0.25, shape=(1024, 2048, 512), convention="nn", rep=7)
    assert bar.passed and bool(bar)
    assert bar.ratio == pytest.approx(0.31) and bar.tflops == pytest.approx(0.31 * 700)
    assert bar.cublas_tflops == 700 and bar.device == "Fake GPU 80GB" and bar.shape == (1024, 2048, 512)
    assert calls == [(fn, (1024, 2048, 512), "nn", None, {"rep": 7})]
    bar.raise_if_failed()  # no error
    assert "PASSED" in str(bar)


def test_fails_below_the_bar_with_a_clear_message(with_gpu):
    with_gpu(0.12)
    bar = gemmlab.performance_bar(object(), 0.2)
    assert not bar.passed and "FAILED" in str(bar)
    with pytest.raises(perfbar.PerfBarError, match=r"0\.120× cuBLAS .* the bar is 0\.20×\. Hint: check first") as info:
        bar.raise_if_failed()
    assert isinstance(info.value, gemmlab.GemmlabError) and "Fake GPU" in str(info.value)
    with pytest.raises(perfbar.PerfBarError, match="Hint: use ldmatrix"):
        bar.raise_if_failed(hint="use ldmatrix")


def test_exactly_at_the_bar_passes(with_gpu):
    with_gpu(0.2)
    assert gemmlab.performance_bar(object(), 0.2).passed


@pytest.mark.parametrize("bad", [0, -0.1, "fast", None, 50])
def test_rejects_nonsense_bars(with_gpu, bad):
    with_gpu(0.5)
    with pytest.raises(gemmlab.GemmlabError, match="min_ratio"):
        gemmlab.performance_bar(object(), bad)


def test_roofline_and_html(with_gpu):
    with_gpu(0.3)
    bar = gemmlab.performance_bar(object(), 0.25)
    fig = bar.show(ceilings=(700.0, 3000.0))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(s.startswith("your kernel: 210.0 TFLOPS") for s in labels)
    assert any(s.startswith("cuBLAS: 700.0") for s in labels) and any("bar: 0.25×" in s for s in labels)
    html = bar._repr_html_()  # without a GPU no ceilings can be measured: the verdict alone
    assert "PASSED" in html


def test_result_round_trips_through_json(with_gpu) -> None:
    import json

    with_gpu(0.3)
    bar = gemmlab.performance_bar(object(), 0.25)
    data = json.loads(json.dumps(bar.to_dict()))
    assert data["passed"] is True and data["min_ratio"] == 0.25
    back = perfbar.PerfBarResult.from_dict(data)
    assert back == bar and str(back) == str(bar)
