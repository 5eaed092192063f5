"""Timings that state their noise, on the CPU: the intervals of gemmlab.timing.spread (their coverage
checked by simulation), bench_gemm's interleaved rounds with fake timers, the result's interval in
its text, JSON and comparisons, and the performance bar's "within noise". The GPU tests at the end
time cuBLAS against itself."""
from __future__ import annotations

import json
import math
import random
import statistics

import pytest

import gemmlab
from gemmlab.timing import perfbar, spread, events as timing
from gemmlab.checking import report
from gemmlab.timing.bench import result_from_rounds
from gemmlab.results import BenchResult

SHAPE = (4096, 4096, 4096)


# ----------------------------------------------------------------------------- gemmlab.timing.spread
def test_median_interval_is_the_sign_test_interval() -> None:
    low, high, coverage = spread.median_interval(list(range(1, 13)))      # 12 rounds: 3rd to 10th
    assert (low, high) == (3, 10) and coverage == pytest.approx(1 - 2 * (1 + 12 + 66) / 4096)
    low, high, coverage = spread.median_interval([5.0, 1.0, 3.0])          # too few for 95 %: the range
    assert (low, high, coverage) == (1.0, 5.0, 0.75)
    assert spread.median_interval(range(6))[2] == pytest.approx(1 - 2 / 64)
    with pytest.raises(spread.NoSpreadError):
        spread.median_interval([1.0])


def test_rank_sum_counts_and_the_tabled_critical_value() -> None:
    assert spread._u_counts(2, 2) == [1, 1, 2, 1, 1]
    assert sum(spread._u_counts(7, 9)) == math.comb(16, 7)
    # two-sided 5 % critical value of U for n = m = 12 is 37 (tables): the interval starts at the 38th difference
    assert spread._rank_sum_cut(12, 12, 0.95)[0] == 38
    k, coverage = spread._rank_sum_cut(30, 30, 0.95)
    normal = spread._normal_u_cdf(30, 30)
    assert abs(normal(k - 1) - (1 - coverage) / 2) < 0.003, "the normal approximation agrees with the exact count"


@pytest.mark.parametrize("draw", [lambda rng: rng.lognormvariate(0, 0.02),
                                  lambda rng: 1.0 + rng.expovariate(50.0)])      # skewed, like GPU times
def test_intervals_cover_as_often_as_they_claim(draw) -> None:
    rng = random.Random(7)
    true_median = statistics.median(draw(rng) for _ in range(200_001))
    hits, shifts = 0, 0
    trials = 1500
    for _ in range(trials):
        xs = [draw(rng) for _ in range(12)]
        low, high, coverage = spread.median_interval(xs)
        hits += low <= true_median <= high
        ys = [draw(rng) for _ in range(12)]                                # same distribution: no shift
        _, lo, hi, _ = spread.shift_interval(xs, ys)
        shifts += lo <= 0.0 <= hi
    assert hits / trials >= 0.94 and shifts / trials >= 0.94


def test_comparisons_say_within_noise_or_which_is_faster() -> None:
    noisy = [1.0 + 0.01 * ((i * 7) % 5 - 2) for i in range(12)]
    against = spread.against_one("k", "cuBLAS", noisy)
    assert against.within_noise and against.verdict == "within noise" and "within noise" in str(against)
    faster = spread.between("new", "old", [v * 1.05 for v in noisy], noisy)
    assert faster.verdict == "faster" and faster.ratio == pytest.approx(1.05) and faster.low > 1.0
    assert "beyond the noise" in str(faster) and "new runs at 1.050× old's speed" in str(faster)
    slower = spread.between("old", "new", noisy, [v * 1.05 for v in noisy])
    assert slower.verdict == "slower" and slower.high < 1.0
    same = spread.between("a", "b", noisy, list(reversed(noisy)))
    assert same.within_noise
    with pytest.raises(gemmlab.GemmlabError, match="positive"):
        spread.between("a", "b", [0.0, 1.0], [1.0, 1.0])


# ----------------------------------------------------------------------------- timing: rounds
def test_rounds_interleave_and_alternate_the_order() -> None:
    calls = []

    def fake(name, ms):
        def run(n):
            calls.append((name, n))
            return [ms] * n
        return run

    times = timing.interleaved_rounds([fake("kernel", 2.0), fake("cublas", 1.0)], [4, 3], 4)
    assert calls == [("kernel", 4), ("cublas", 3), ("cublas", 3), ("kernel", 4)] * 2
    assert [len(r) for r in times[0]] == [4] * 4 and times[1][0] == [1.0] * 3


def test_calls_per_round() -> None:
    assert timing.round_reps(0.2, 12, rep=5) == 5                       # rep: calls of each function a round
    assert timing.round_reps(0.2, 12, rep_ms=100.0) == 41               # 100 ms of calls over 12 rounds
    assert timing.round_reps(20.0, 12, rep_ms=100.0) == timing.MIN_ROUND_REPS == 1   # a slow kernel: once a round
    assert timing.round_reps(3.0, 12, rep_ms=100.0) == 2
    assert timing.round_reps(0.001, 10, rep_ms=100.0) == 100            # at most 1000 calls in all


# ----------------------------------------------------------------------------- BenchResult
def _rounds(ratios: list[float], kernel_ms: float = 0.2, calls: int = 5) -> tuple[list, list]:
    """Per-round times of a kernel and of cuBLAS whose median round ratios are ``ratios``."""
    kernel = [[kernel_ms * (1 + 0.001 * j) for j in range(calls)] for _ in ratios]
    cublas = [[statistics.median(k) * r * (1 + 0.001 * (j - calls // 2)) for j in range(calls)] for k, r in zip(kernel, ratios)]
    return kernel, cublas


def _result(ratios: list[float], label: str = "mine", device: str = "GPU X", shape=SHAPE) -> BenchResult:
    kernel, cublas = _rounds(ratios)
    return result_from_rounds(kernel, cublas, shape, "tn", "float16", "float16", device, label)


RATIOS = [0.972, 0.968, 0.975, 0.970, 0.979, 0.965, 0.971, 0.973, 0.969, 0.974, 0.977, 0.966]


def test_result_from_rounds_carries_the_median_ratio_and_its_interval() -> None:
    r = _result(RATIOS)
    s = sorted(RATIOS)
    assert r.ratio == pytest.approx(statistics.median(RATIOS)) and r.rounds == 12 and r.reps == 60
    assert (r.ratio_low, r.ratio_high) == pytest.approx((s[2], s[9])) and r.coverage == pytest.approx(0.9614, abs=1e-4)
    assert r.ms == pytest.approx(0.2 * 1.002) and r.tflops == pytest.approx(2 * 4096 ** 3 / (r.ms * 1e-3) / 1e12)
    text = str(r)
    assert f"{r.ratio:.3f}× cuBLAS  (96% interval {s[2]:.3f}–{s[9]:.3f}, 12 rounds" in text
    assert "within noise" not in text and "96% interval" in r._repr_html_()
    one = _result([0.9])
    assert one.interval is None and "no interval" in str(one)
    with pytest.raises(gemmlab.GemmlabError, match="both the kernel and cuBLAS"):
        result_from_rounds([[1.0]], [], SHAPE, "tn", "float16", "float16", "GPU X")


def test_a_kernel_within_noise_of_cublas_says_so() -> None:
    r = _result([0.99, 1.01, 1.0, 0.995, 1.004, 1.002, 0.998, 1.006, 0.993, 1.001, 0.997, 1.003])
    assert r.ratio_low < 1.0 < r.ratio_high
    assert "within noise of cuBLAS" in str(r) and "within noise of cuBLAS" in r._repr_html_()
    assert r.compare().within_noise and "cuBLAS" in str(r.compare())
    assert gemmlab.timing.bench.compare(_result(RATIOS)).verdict == "slower"


def test_two_kernels_compared_beyond_or_within_the_noise() -> None:
    old = _result(RATIOS, "old")
    new = _result([v * 1.02 for v in RATIOS], "new")
    assert new.compare(old).verdict == "faster" and new.compare(old).ratio == pytest.approx(1.02, abs=1e-3)
    again = _result(list(reversed(RATIOS)), "old")
    assert again.compare(old).within_noise and "this run" in str(again.compare(old))
    with pytest.raises(gemmlab.GemmlabError, match="different problems"):
        new.compare(_result(RATIOS, shape=(8192, 8192, 8192)))
    with pytest.raises(gemmlab.GemmlabError, match="time both on one GPU"):
        new.compare(_result(RATIOS, device="GPU Y"))
    with pytest.raises(spread.NoSpreadError, match="rounds=12"):
        new.compare(_result([1.0]))
    with pytest.raises(spread.NoSpreadError):
        _result([1.0]).compare()


def test_the_published_record_round_trips_and_old_records_still_read() -> None:
    r = _result(RATIOS)
    published = json.loads(json.dumps(report.payload("bench", r)))
    back = BenchResult.from_dict(published["data"])
    assert back == r and str(back) == str(r) and back.compare(r).within_noise
    old = {k: v for k, v in r.to_dict().items()
           if k not in ("ratio_low", "ratio_high", "coverage", "rounds", "round_ratios")}
    legacy = BenchResult.from_dict(old)
    assert legacy.interval is None and legacy.ratio == r.ratio and "no interval" in str(legacy)


# ----------------------------------------------------------------------------- the performance bar
def test_the_bar_says_when_it_lies_within_the_noise(monkeypatch) -> None:
    result = _result(RATIOS)
    monkeypatch.setattr(perfbar, "require_gpu", lambda what: None)
    monkeypatch.setattr(gemmlab.timing.bench, "bench_gemm", lambda fn, shape, convention, dtype, **kw: result)
    inside = gemmlab.performance_bar(object(), 0.97)
    assert inside.bar_within_noise and "within noise of the bar" in str(inside) and "96% interval" in str(inside)
    assert inside.to_dict()["bar_within_noise"] is True
    assert perfbar.PerfBarResult.from_dict(json.loads(json.dumps(inside.to_dict()))) == inside
    below = gemmlab.performance_bar(object(), 0.974)
    assert not below.passed and below.bar_within_noise
    with pytest.raises(perfbar.PerfBarError, match=r"the bar is 0\.97×\. Hint: .* lies inside this run's interval"):
        below.raise_if_failed()
    clear = gemmlab.performance_bar(object(), 0.9)
    assert clear.passed and not clear.bar_within_noise and "within noise" not in str(clear)


# ----------------------------------------------------------------------------- on a GPU
def test_bench_gemm_times_interleaved_rounds(gpu) -> None:
    import torch

    r = gemmlab.bench_gemm(lambda A, B, D: torch.matmul(A, B.T, out=D), shape=(1024, 1024, 1024), rep=5, rounds=6)
    assert r.rounds == 6 and len(r.round_ratios) == 6 and r.reps == 30
    assert r.ratio_low <= r.ratio <= r.ratio_high and r.coverage == pytest.approx(1 - 2 / 64)
    with pytest.raises(gemmlab.GemmlabError, match="rounds"):
        gemmlab.bench_gemm(lambda A, B, D: None, shape=(64, 64, 64), rounds=0)


@pytest.mark.timing
def test_cublas_against_itself_is_within_noise(gpu) -> None:
    """The same cuBLAS call as "the kernel": its ratio is 1 up to noise, and the interval says so
    (an interval that misses 1.0 here would be too narrow: the method would mislead students)."""
    import torch

    misses = []
    for _ in range(3):
        r = gemmlab.bench_gemm(lambda A, B, D: torch.matmul(A, B.T, out=D), shape=SHAPE)
        assert 0.97 < r.ratio < 1.03, str(r)
        misses.append(not r.compare().within_noise)
    assert sum(misses) <= 1, misses
