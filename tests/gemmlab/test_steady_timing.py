"""NVIDIA's fixed-power method and the clock readings beside every timing, on the CPU: the method's numbers
(iterations, operand copies, blocks), its warm-up that waits for the clock to settle, driven by a fake
back-to-back launcher on a simulated clock and a fake sampler; NVML-less sampling through a stand-in
nvidia-smi; and what a result records and prints. The GPU tests at the end run the real method."""
from __future__ import annotations

import json
import math
import os
import stat
import statistics
import time
from pathlib import Path

import pytest

import gemmlab
from gemmlab.timing import clock_sampler, steady_timing
from gemmlab.timing.bench import result_from_rounds
from gemmlab.results import BenchResult
from gemmlab.timing.clock_sampler import Sample
from gemmlab.timing.steady_timing import SteadyPlan, TimedBlocks

SHAPE = (4096, 4096, 4096)
H100_L2 = 50 * 1024 * 1024


# ----------------------------------------------------------------------------- the method's numbers
def test_iterations_follow_the_guidelines() -> None:
    plan = SteadyPlan()
    assert steady_timing.steady_iterations(0.18, plan) == 1112       # 4096³: > 1,000 and 200 ms of calls
    assert steady_timing.steady_iterations(1.4, plan) == 1000        # 8192³: the floor of 1,000
    assert steady_timing.steady_iterations(0.01, plan) == 20000      # small problems: more iterations
    assert steady_timing.steady_iterations(0.00001, plan) == plan.max_iterations
    assert steady_timing.steady_iterations(800.0, plan) == plan.blocks   # a naive kernel: one a block, not 1,000
    assert steady_timing.steady_iterations(50.0, plan) == 200         # no more than 10 s of calls


def test_operand_copies_hold_twice_the_l2() -> None:
    four_k = 2 * 4096 * 4096 * 2                                       # A and B, fp16
    assert steady_timing.rotation_sets(four_k, H100_L2) == 2          # 64 MiB of inputs: two copies still
    assert steady_timing.rotation_sets(2 * 1024 * 1024 * 2, H100_L2) == 25
    assert steady_timing.rotation_sets(10 * H100_L2, H100_L2) == 2    # bigger than L2: at least two
    assert steady_timing.split_blocks(1112, 12) == [93] * 8 + [92] * 4 and sum(steady_timing.split_blocks(7, 3)) == 7


def test_graphs_hold_whole_rotations_of_about_two_milliseconds() -> None:
    assert steady_timing.graph_calls(0.18, 2) == 12                   # 4096³: 6 rotations of 2 copies, 2.2 ms
    assert steady_timing.graph_calls(1.4, 2) == 2                     # 8192³: one rotation already takes longer
    assert steady_timing.graph_calls(0.001, 25) == 1000               # tiny calls: capped
    assert steady_timing.graph_calls(0.001, 4267) == 4267             # but never less than one rotation
    assert steady_timing.rounded_blocks([93, 92], 12) == [96, 96] and steady_timing.rounded_blocks([5], 1) == [5]


def test_an_impossible_plan_is_refused() -> None:
    with pytest.raises(ValueError):
        SteadyPlan(warmup_s=5.0, max_warmup_s=3.0)
    with pytest.raises(ValueError):
        SteadyPlan(blocks=0)


# ----------------------------------------------------------------------------- the phase, on a fake GPU
class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class FakeGpu:
    """Back-to-back calls on a simulated clock: each busy() chunk advances the clock, and the SM clock it
    runs at comes from ``mhz(t)`` (seconds since the first call)."""

    def __init__(self, clock: FakeClock, mhz, estimate_ms: float = 0.2) -> None:
        self.clock, self.mhz, self.estimate_ms = clock, mhz, estimate_ms
        self.start = clock.now
        self.samples: list[Sample] = []
        self.timed: tuple[int, int] | None = None

    def _run(self, seconds: float) -> None:
        end = self.clock.now + seconds
        while self.clock.now < end:
            self.clock.now += 0.02                                      # one sample every 20 ms
            self.samples.append(Sample(self.clock.now, self.mhz(self.clock.now - self.start), 690.0))

    def busy(self, seconds: float) -> None:
        self._run(seconds)

    def timed_blocks(self, iterations: int, blocks: int) -> TimedBlocks:
        self.timed = (iterations, blocks)
        t0 = self.clock.now
        counts = steady_timing.split_blocks(iterations, blocks)
        self._run(iterations * self.estimate_ms / 1e3)
        ms = [self.estimate_ms * 1980 / self.mhz(self.clock.now - self.start) for _ in counts]
        return TimedBlocks(ms, counts, (t0, self.clock.now), False)


class FakeSampler:
    source = "fake"

    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu = gpu

    def start(self) -> None:
        pass

    def samples(self) -> list[Sample]:
        return list(self.gpu.samples)

    def stop(self) -> list[Sample]:
        return self.samples()


def drifting_then_flat(settle_s: float):
    """The clock of a power-capped GEMM from idle: 1,980 MHz falling to 1,700 over ``settle_s``, then flat."""
    return lambda t: 1980 - 280 * min(t, settle_s) / settle_s


def swinging(t: float) -> float:
    """A clock that never settles: it swings ±100 MHz with a period of 1.2 s."""
    return 1800 + 100 * math.sin(2 * math.pi * t / 1.2)


def test_warm_up_lasts_three_seconds_when_the_clock_settles_sooner() -> None:
    clock = FakeClock()
    gpu = FakeGpu(clock, drifting_then_flat(1.0))
    phase = steady_timing.steady_phase(gpu, SteadyPlan(), FakeSampler(gpu), clock=clock, sleep=clock.sleep)
    assert 3.0 <= phase.warmup_s < 3.3 and phase.settled is True
    assert gpu.timed == (1000, 12) and phase.iterations == 1000
    assert clock.slept == [1.0], "one cool-down after the timed calls"


def test_warm_up_waits_for_a_drifting_clock_and_gives_up_at_the_limit() -> None:
    clock = FakeClock()
    gpu = FakeGpu(clock, drifting_then_flat(5.0))
    phase = steady_timing.steady_phase(gpu, SteadyPlan(), FakeSampler(gpu), clock=clock, sleep=clock.sleep)
    assert 5.0 <= phase.warmup_s < 6.5 and phase.settled is True, "timed once the drift had stopped"
    clock = FakeClock()
    gpu = FakeGpu(clock, swinging)
    phase = steady_timing.steady_phase(gpu, SteadyPlan(max_warmup_s=6.0), FakeSampler(gpu), clock=clock,
                                       sleep=clock.sleep)
    assert 6.0 <= phase.warmup_s < 6.3 and phase.settled is False, "still swinging: timed anyway, and said so"


def test_without_a_sampler_the_warm_up_is_the_fixed_three_seconds() -> None:
    clock = FakeClock()
    gpu = FakeGpu(clock, swinging)
    phase = steady_timing.steady_phase(gpu, SteadyPlan(), None, clock=clock, sleep=clock.sleep)
    assert 3.0 <= phase.warmup_s < 3.3 and phase.settled is None


def test_phases_pair_into_rounds_and_the_clock_reading_is_per_phase() -> None:
    clock = FakeClock()
    kernel_gpu = FakeGpu(clock, lambda t: 1755.0, estimate_ms=0.2)
    kernel = steady_timing.steady_phase(kernel_gpu, SteadyPlan(), None, clock=clock, sleep=clock.sleep)
    cublas_gpu = FakeGpu(clock, lambda t: 1700.0, estimate_ms=0.21)
    cublas = steady_timing.steady_phase(cublas_gpu, SteadyPlan(), None, clock=clock, sleep=clock.sleep)
    times, ctimes = steady_timing.paired_rounds(kernel, cublas)
    r = result_from_rounds(times, ctimes, SHAPE, "tn", "bfloat16", "bfloat16", "GPU X", "mine")
    expected = (0.21 * 1980 / 1700) / (0.2 * 1980 / 1755)
    assert r.rounds == 12 and r.ratio == pytest.approx(expected) and r.round_ratios == pytest.approx([expected] * 12)
    samples = kernel_gpu.samples + cublas_gpu.samples
    mine = clock_sampler.reading(samples, [kernel.timed.window], "fake")
    theirs = clock_sampler.reading(samples, [cublas.timed.window], "fake")
    assert (mine.sm_clock_mhz, theirs.sm_clock_mhz) == (1755.0, 1700.0) and mine.samples >= 9


# ----------------------------------------------------------------------------- sampling the clock
def test_settled_compares_the_halves_of_the_last_second() -> None:
    flat = [Sample(t / 50, 1755 + (15 if int(t) % 2 else -15), 700) for t in range(100)]   # dithering, no drift
    assert clock_sampler.settled(flat, now=2.0)
    falling = [Sample(t / 50, 1980 - 5 * t, 700) for t in range(100)]
    assert not clock_sampler.settled(falling, now=2.0)
    assert not clock_sampler.settled([Sample(t / 50, swinging(t / 50), 700) for t in range(100)], now=2.0)
    assert not clock_sampler.settled(flat[:3], now=2.0), "too few samples to tell"


def test_reading_keeps_the_samples_inside_the_windows() -> None:
    samples = [Sample(1.0, 1900, 400), Sample(2.0, 1750, 690), Sample(2.5, 1740, 700), Sample(9.0, 1980, 90)]
    r = clock_sampler.reading(samples, [(1.5, 3.0)], "nvml")
    assert (r.sm_clock_mhz, r.power_w, r.samples) == (1745.0, 695.0, 2) and "1,745 MHz, 695 W (nvml" in r.text()
    empty = clock_sampler.reading(samples, [(4.0, 5.0)], "nvml")
    assert empty.sm_clock_mhz is None and "no sample fell" in empty.text()
    assert "neither NVML nor nvidia-smi" in clock_sampler.reading([], [], "").text()


def test_rows_that_cannot_be_read_are_left_out() -> None:
    rows = [(1.0, ["1755", "698.2"]), (1.1, ["[N/A]", "700"]), (1.2, ["1740"]), (1.3, ["1730", "701.0"])]
    assert clock_sampler.samples_from_rows(rows) == [Sample(1.0, 1755.0, 698.2), Sample(1.3, 1730.0, 701.0)]


def _fake_smi(folder: Path, lines: list[str]) -> None:
    """An executable named nvidia-smi that prints ``lines`` every 20 ms, as ``--loop-ms`` does, then waits."""
    script = folder / "nvidia-smi"
    body = "".join(f"echo '{line}'; sleep 0.02\n" for line in lines)
    script.write_text(f"#!/bin/sh\n{body}sleep 30\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_nvidia_smi_sampling_without_nvml(tmp_path: Path, monkeypatch) -> None:
    """With no pynvml, open_sampler falls back to nvidia-smi; its lines become timestamped samples."""
    _fake_smi(tmp_path, ["1755, 698.50", "1740, 699.00", "[N/A], [N/A]", "1725, 700.25"])
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(clock_sampler, "NvmlSampler", _no_nvml)
    sampler = clock_sampler.open_sampler("GPU-0b1e2f3a-0000-1111-2222-333344445555")
    assert isinstance(sampler, clock_sampler.SmiSampler) and sampler.source == "nvidia-smi"
    t0 = time.monotonic()
    sampler.start()
    deadline = time.monotonic() + 10
    while len(sampler.samples()) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    samples = sampler.stop()
    assert [s.sm_mhz for s in samples] == [1755.0, 1740.0, 1725.0] and samples[-1].power_w == 700.25
    assert all(t0 <= s.t <= time.monotonic() for s in samples)


def _no_nvml(*args, **kwargs):
    raise ModuleNotFoundError("No module named 'pynvml'")


def test_a_uuid_is_written_as_nvml_and_nvidia_smi_write_it() -> None:
    raw = bytes(range(16))
    assert clock_sampler.uuid_text(raw) == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"


def test_nothing_to_sample_with_is_none(monkeypatch) -> None:
    monkeypatch.setattr(clock_sampler, "NvmlSampler", _no_nvml)
    monkeypatch.setattr(clock_sampler.shutil, "which", lambda name: None)
    assert clock_sampler.open_sampler("GPU-0b1e2f3a-0000-1111-2222-333344445555") is None


# ----------------------------------------------------------------------------- what a result records
def _steady_result(**fields) -> BenchResult:
    kernel = [[0.180 * (1 + 0.001 * j)] for j in range(12)]
    cublas = [[0.181 * (1 + 0.001 * j)] for j in range(12)]
    r = result_from_rounds(kernel, cublas, SHAPE, "tn", "bfloat16", "bfloat16", "NVIDIA H200", "capstone",
                           light_ms=0.1284)
    import dataclasses

    base = dict(method="nvidia", fill="uniform", sm_clock_mhz=1710.0, power_w=699.0, cublas_sm_clock_mhz=1695.0,
                cublas_power_w=700.0, clock_source="nvml", peak_tflops=1070.4, max_sm_clock_mhz=1980.0,
                warmup_s=3.4, settled=True, reps=1112)
    return dataclasses.replace(r, **{**base, **fields})


def test_a_result_says_how_it_was_timed_and_at_what_clock() -> None:
    r = _steady_result()
    text = str(r)
    assert "method nvidia (NVIDIA's fixed-power method" in text and "uniform fills" in text
    assert "warm-up 3.4 s, clock settled" in text
    assert "yours 1,710 MHz 699 W, cuBLAS 1,695 MHz 700 W (nvml)" in text
    share = r.tflops / (1070.4 * 1710 / 1980)
    assert r.tensor_share == pytest.approx(share) and f"tensor cores {share:.0%} busy at 1,710 MHz" in text
    assert "speed of light 0.1284 ms" in text and "uniform fills" in r._repr_html_()
    back = BenchResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back == r


def test_records_written_before_the_new_fields_still_read() -> None:
    r = _steady_result()
    old = {k: v for k, v in r.to_dict().items() if k in (
        "shape", "convention", "dtype", "out_dtype", "ms", "tflops", "cublas_ms", "cublas_tflops", "ratio", "device",
        "reps", "label", "ratio_low", "ratio_high", "coverage", "rounds", "round_ratios")}
    legacy = BenchResult.from_dict({**old, "a_field_from_a_later_version": 1})
    assert legacy.method == "flushed" and legacy.fill == "normal" and legacy.sm_clock_mhz is None
    assert "clock and power not sampled" in str(legacy) and "limit" not in str(legacy)


def test_timings_made_differently_are_not_compared() -> None:
    nvidia = _steady_result()
    flushed = _steady_result(method="flushed", fill="normal")
    with pytest.raises(gemmlab.GemmlabError, match="compare timings made the same way"):
        nvidia.compare(flushed)
    assert nvidia.compare(_steady_result(label="other")).within_noise


def test_bad_methods_and_fills_are_refused_before_any_gpu_work(no_gpu) -> None:
    with pytest.raises(gemmlab.GemmlabError, match="method is one of 'flushed', 'nvidia'"):
        gemmlab.bench_gemm(lambda A, B, D: None, method="cutlass")
    with pytest.raises(gemmlab.GemmlabError, match="fill is one of 'normal', 'uniform'"):
        gemmlab.bench_gemm(lambda A, B, D: None, method="nvidia", fill="zeros")
    with pytest.raises(gemmlab.NoGPUError):
        gemmlab.bench_gemm(lambda A, B, D: None, method="nvidia")


# ----------------------------------------------------------------------------- on a GPU
@pytest.mark.timing
def test_the_nvidia_method_times_cublas_against_itself(gpu) -> None:
    """The real method, its numbers shrunk (1 s warm-up, 300 calls): cuBLAS as "the kernel" lands near 1.0,
    every field of the method is filled, and the clock was sampled where NVML or nvidia-smi exists."""
    import torch

    plan = SteadyPlan(warmup_s=1.0, max_warmup_s=2.0, min_iterations=300, cooldown_s=0.2)
    r = gemmlab.bench_gemm(lambda A, B, D: torch.matmul(A, B.T, out=D), shape=(2048, 2048, 2048), method="nvidia",
                           steady=plan, dtype=torch.bfloat16)
    assert r.method == "nvidia" and r.fill == "uniform" and r.rounds == 12 and r.reps >= 300
    assert r.graphed is True and not r.launch_bound, "cuBLAS is captured and replayed without gaps"
    assert 0.9 < r.ratio < 1.1, str(r)
    assert r.warmup_s >= 1.0 and r.light_ms and r.ms > r.light_ms
    if r.clock_source:
        assert r.sm_clock_mhz and r.power_w and r.settled is not None, str(r)
    default = gemmlab.bench_gemm(lambda A, B, D: torch.matmul(A, B.T, out=D), shape=(2048, 2048, 2048))
    assert default.method == "flushed" and default.fill == "normal" and statistics.median(default.round_ratios) > 0.9
