"""How fast is this GEMM, and how far from cuBLAS on the same shape, beyond the noise?

Two methods (docs/TIMING.md says when they differ):

- ``method="flushed"`` (the default, what the course grades with): CUDA events, a short warm-up, L2
  flushed before every call (so a small problem cannot live in cache and look faster than DRAM
  allows), normal random fills. The kernel and cuBLAS (through torch, same shape, dtypes and
  convention) are timed in alternating *rounds* of the same call, so both see the same clocks.
- ``method="nvidia"``: NVIDIA's fixed-power method from CUTLASS's GEMM measurement guidelines
  (:mod:`gemmlab.timing.steady_timing`): uniform [-1, 1] fills, back-to-back calls until the SM clock has
  settled (3 s or more), more than 1,000 timed calls rotating through copies of the operands at least
  twice the L2 size, no other GPU work between them, a cool-down; the kernel's phase, then cuBLAS's.

Either way each round (a block of calls, for "nvidia") gives one ratio (cuBLAS's time over the
kernel's), the reported ratio is the median of those, and their spread gives an interval around it
(:mod:`gemmlab.timing.spread`). Every result records its method and fill, the median SM clock and power
while each side was timed (:mod:`gemmlab.timing.clock_sampler`), and the problem's speed of light
(:mod:`gemmlab.timing.speed_of_light`): a time below it is refused, and times are floored at it before any
median or ratio. ``result.compare()`` says whether the kernel differs from cuBLAS beyond the noise,
``result.compare(other)`` whether two kernels do.
"""
from __future__ import annotations

import dataclasses
import secrets
import statistics
from dataclasses import dataclass
from typing import Any, Callable

from gemmlab.checking import report
from gemmlab.dtypes import dtype_name
from gemmlab.errors import GemmlabError
from gemmlab.running.gpu import require_gpu
from gemmlab.checking.integrity import (
    BenchIntegrityError, grading_mode, input_nudger, library_guard, library_message, verify_nothing_left_running,
    verify_once,
)
from gemmlab.running import faults
from gemmlab.running.device import device_label, torch_device
from gemmlab.running.streams import DEFAULT_TIMEOUT_S, synchronize
from gemmlab.results import FILLS, METHODS, ROUNDS, BenchResult
from gemmlab.timing.spread import LEVEL, Comparison, median_interval
from gemmlab.timing.speed_of_light import PeakRates, floor_at_light, gemm_light_ms, peak_rates, refuse_faster_than_light
from gemmlab.timing.steady_timing import (
    DeviceBackToBack, SteadyPhase, SteadyPlan, measure_estimate, paired_rounds, rotation_sets, steady_phase, wait_for,
)
from gemmlab.timing.events import (
    guard_persisting_l2, interleaved_rounds, l2_flush_buffer, prepare_timer, round_reps, time_cuda,
)
from gemmlab.timing.timing_lock import exclusive_timing, shared_gpu_work
from gemmlab.offload import pool_for_work



def result_from_rounds(kernel_rounds: list[list[float]], cublas_rounds: list[list[float]],
                       shape: tuple[int, int, int], convention: str, dtype: str, out_dtype: str, device: str,
                       label: str = "your kernel", level: float = LEVEL, light_ms: float | None = None) -> BenchResult:
    """The :class:`BenchResult` of interleaved rounds (ms of each timed call, per round): times and
    TFLOPS from the medians of all calls, the ratio as the median of the per-round ratios (so it can
    differ slightly from ``tflops / cublas_tflops``), and the interval from their spread.

    Every kernel time is floored at ``light_ms`` (the problem's speed of light) first, so no aggregate
    rests on a time the GPU cannot reach."""
    if not kernel_rounds or len(kernel_rounds) != len(cublas_rounds) or not all(kernel_rounds) \
            or not all(cublas_rounds):
        raise GemmlabError("each round needs timings of both the kernel and cuBLAS.")
    kernel_rounds = [floor_at_light(r, light_ms) for r in kernel_rounds]
    round_ratios = tuple(statistics.median(c) / statistics.median(k) for k, c in zip(kernel_rounds, cublas_rounds))
    times = [t for r in kernel_rounds for t in r]
    ctimes = [t for r in cublas_rounds for t in r]
    ms, cms = statistics.median(times), statistics.median(ctimes)
    M, N, K = shape
    work = 2.0 * M * N * K
    low = high = coverage = None
    if len(round_ratios) >= 2:
        low, high, coverage = median_interval(round_ratios, level)
    return BenchResult((M, N, K), convention, dtype, out_dtype, ms, work / (ms * 1e-3) / 1e12, cms,
                       work / (cms * 1e-3) / 1e12, statistics.median(round_ratios), device, len(times), label,
                       low, high, coverage, len(round_ratios), round_ratios, light_ms=light_ms)


def _cublas_fn(convention: str, A: Any, B: Any, out: Any, alpha: float, beta: float) -> Callable[[], Any]:
    import torch

    if convention == "tn":
        Bt = B.T
        if out.dtype == A.dtype:
            return lambda: torch.matmul(A, Bt, out=out)
        try:  # fp16/bf16 inputs, fp32 output in one cuBLAS call (torch >= 2.9)
            torch.mm(A[:1, :8], Bt[:8, :1], out_dtype=out.dtype)
            return lambda: torch.mm(A, Bt, out_dtype=out.dtype)
        except (TypeError, RuntimeError):
            return lambda: out.copy_(torch.matmul(A, Bt))
    if out.dtype == A.dtype:
        return lambda: out.addmm_(A, B, beta=beta, alpha=alpha)
    return lambda: out.copy_(torch.addmm(out.to(A.dtype), A, B, beta=beta, alpha=alpha))


def bench_gemm(fn: Callable[..., Any], shape: tuple[int, int, int] = (4096, 4096, 4096), convention: str = "tn",
               dtype: Any = None, out_dtype: Any = None, warmup_ms: float = 25.0, rep: int | None = None,
               rep_ms: float = 100.0, flush_l2: bool = True, alpha: float = 1.0, beta: float = 0.0,
               label: str = "your kernel", timeout_s: float | None = None, verify: bool | None = None,
               rounds: int = ROUNDS, method: str = "flushed", fill: str | None = None, seed: int | None = None,
               steady: SteadyPlan | None = None) -> BenchResult:
    """Median time and TFLOPS (2·M·N·K / t) of ``fn`` and of cuBLAS on the same problem, and the
    ratio with its interval.

    ``fn`` follows gemmlab's conventions: ``fn(A, B, D)`` for "tn", ``fn(A, B, C, alpha, beta)``
    for "nn". Run :func:`gemmlab.check_gemm` first: a fast wrong kernel is not fast.

    ``method="flushed"`` (default): the kernel and cuBLAS are timed in ``rounds`` alternating rounds,
    each of ``rep`` calls of each (default: as many as fit in ``rep_ms`` spread over the rounds, at least
    one a round), L2 flushed before every call. ``method="nvidia"``: NVIDIA's fixed-power method (module
    docstring; ``steady`` changes its numbers, :class:`gemmlab.timing.steady_timing.SteadyPlan`); it takes about
    ten seconds a call. ``fill``: "normal" or "uniform" inputs (default: the method's); ``seed`` makes the
    inputs reproducible (default: fresh ones).

    ``verify`` (default: on in the course's grader, ``GEMMLAB_GRADING=1``) defeats the known
    benchmark cheats: one input element changes before every timed call ("flushed"; "nvidia" rotates
    through operand copies of different values instead, as other GPU work between its calls is what it
    forbids), torch computation inside the timed calls fails, and afterwards the inputs get new values
    in place, the output is poisoned and one call must produce the right result on torch's current
    stream by the time it returns. A failure raises :class:`BenchIntegrityError`. Always: persisting L2
    is reset before the timed calls and must stay off, and a time below the problem's speed of light is
    refused (:class:`gemmlab.timing.speed_of_light.FasterThanLightError`).

    After ``gemmlab.connect(...)`` on a machine without a GPU the class's GPU pool times it (verified,
    with the flushed method's defaults; the result names the pool's GPU).
    """
    if method not in METHODS:
        raise GemmlabError(f"method is one of {', '.join(map(repr, METHODS))}, not {method!r:.40}.")
    fill = METHODS[method][0] if fill is None else fill
    if fill not in FILLS:
        raise GemmlabError(f"fill is one of {', '.join(map(repr, FILLS))}, not {fill!r:.40}.")
    pool = pool_for_work()
    if pool is not None:
        if (method, fill, seed, steady) != ("flushed", "normal", None, None):
            raise GemmlabError("the class's GPU pool times with the flushed method on fresh normal inputs: leave "
                               "method=, fill=, seed= and steady= out to time there.")
        return pool.bench_gemm(fn, shape, convention, dtype, out_dtype, alpha, beta, label, timeout_s=timeout_s,
                               rounds=rounds, flush_l2=flush_l2)
    require_gpu("bench_gemm")
    import torch

    if convention not in ("tn", "nn"):
        raise GemmlabError(f"convention must be 'tn' or 'nn', not {convention!r}.")
    M, N, K = (int(v) for v in shape)
    if min(M, N, K) <= 0:
        raise GemmlabError(f"shape must be three positive sizes (M, N, K), not {shape!r}.")
    if not isinstance(rounds, int) or rounds < 1:
        raise GemmlabError(f"rounds must be a whole number of rounds, at least 1 (2 or more for an interval), "
                           f"not {rounds!r}.")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63):
        raise GemmlabError(f"seed is a whole number from 0 to 2**63 - 1, not {seed!r:.40}.")
    dtype = torch.float16 if dtype is None else dtype
    out_dtype = dtype if out_dtype is None else out_dtype
    dev = torch_device()
    problem = Problem((M, N, K), convention, dtype, out_dtype, alpha, beta, fill, dev, label,
                      DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s,
                      grading_mode() if verify is None else bool(verify), seed)
    rates = peak_rates(dev.index)
    light = gemm_light_ms((M, N, K), rates, torch.empty((), dtype=dtype).element_size(), convention, beta,
                          inputs_from_dram=flush_l2 or method == "nvidia")
    try:
        if method == "flushed":
            times, ctimes, side = _time_flushed(fn, problem, warmup_ms, rep, rep_ms, flush_l2, rounds)
        else:
            times, ctimes, side = _time_steady(fn, problem, steady or SteadyPlan())
    except torch.cuda.OutOfMemoryError:
        raise GemmlabError(f"{M}×{N}×{K} does not fit in GPU memory: bench a smaller shape.") from None
    except RuntimeError as exc:
        translated = faults.translate(exc, f"{label} at {M}×{N}×{K}")
        if translated is exc:
            raise
        raise translated from None
    refuse_faster_than_light([t for r in times for t in r], light, f"{label} at {M}×{N}×{K}", rates)
    result = result_from_rounds(times, ctimes, (M, N, K), convention, dtype_name(dtype),
                                dtype_name(out_dtype), device_label(dev), label, light_ms=light)
    result = dataclasses.replace(result, method=method, fill=fill, **side, **_peak_fields(rates))
    if grading_mode():
        report.publish("bench", result)
    return result


@dataclass(frozen=True)
class Problem:
    """One bench_gemm problem: what to multiply, how to fill it, and how to check the kernel."""

    shape: tuple[int, int, int]
    convention: str
    dtype: Any
    out_dtype: Any
    alpha: float
    beta: float
    fill: str
    device: Any
    label: str
    timeout_s: float
    check: bool
    seed: int | None

    @property
    def what(self) -> str:
        M, N, K = self.shape
        return f"{self.label} at {M}×{N}×{K}"

    def generator(self) -> Any:
        import torch

        gen = torch.Generator(device=self.device)
        gen.manual_seed(secrets.randbits(62) if self.seed is None else self.seed)
        return gen

    def operands(self, gen: Any) -> tuple[Any, Any, Any]:
        """A, B and the output, filled from ``gen`` (the output too: "nn" reads it as C)."""
        M, N, K = self.shape
        A = filled((M, K), self.dtype, self.fill, gen, self.device)
        B = filled((N, K) if self.convention == "tn" else (K, N), self.dtype, self.fill, gen, self.device)
        return A, B, filled((M, N), self.out_dtype, self.fill, gen, self.device)

    def input_bytes(self) -> int:
        """Bytes a call must read from A, B (and C, for "nn" with beta ≠ 0)."""
        import torch

        M, N, K = self.shape
        size, out = (torch.empty((), dtype=t).element_size() for t in (self.dtype, self.out_dtype))
        return (M * K + K * N) * size + (M * N * out if self.convention == "nn" and self.beta != 0 else 0)

    def call(self, fn: Callable[..., Any], A: Any, B: Any, out: Any) -> Callable[[], Any]:
        if self.convention == "tn":
            return lambda: fn(A, B, out)
        return lambda: fn(A, B, out, self.alpha, self.beta)


def filled(shape: tuple[int, ...], dtype: Any, fill: str, gen: Any, device: Any) -> Any:
    """A new tensor of ``fill`` values: normal (mean 0, variance 1) or uniform in [-1, 1]."""
    import torch

    if fill == "normal":
        values = torch.randn(shape, generator=gen, device=device)
    else:
        values = torch.rand(shape, generator=gen, device=device).mul_(2).sub_(1)
    return values.to(dtype)


def _first_call(call: Callable[[], Any], problem: Problem) -> None:
    """Compile, load and run once outside the exclusive timing: as graded GPU work (shared; a compile
    hands that back), so other graders on this GPU may time meanwhile."""
    with shared_gpu_work(), library_guard(problem.check) as used:
        call()
        synchronize(timeout_s=problem.timeout_s, what=problem.what)
    if used:
        raise BenchIntegrityError(library_message(used))


def _guarded(run: Callable[..., Any], check: bool) -> Callable[..., Any]:
    """``run`` with torch computation inside it refused (when ``check``)."""
    def guarded(*args: Any) -> Any:
        with library_guard(check) as seen:
            out = run(*args)
        if seen:
            raise BenchIntegrityError(library_message(seen))
        return out
    return guarded


class _Windows:
    """Host times during which each side's timed calls ran, for reading the sampled clock."""

    def __init__(self) -> None:
        self.spans: dict[str, list[tuple[float, float]]] = {"kernel": [], "cublas": []}

    def around(self, side: str, run: Callable[[int], list[float]]) -> Callable[[int], list[float]]:
        import time

        def timed(n: int) -> list[float]:
            t0 = time.monotonic()
            out = run(n)
            self.spans[side].append((t0, time.monotonic()))
            return out
        return timed


def _clock_fields(sampler: Any, samples: list[Any], kernel: list[tuple[float, float]],
                  cublas: list[tuple[float, float]]) -> dict[str, Any]:
    from gemmlab.timing.clock_sampler import reading

    source = sampler.source if sampler is not None else ""
    mine, theirs = reading(samples, kernel, source), reading(samples, cublas, source)
    return {"sm_clock_mhz": mine.sm_clock_mhz, "power_w": mine.power_w, "cublas_sm_clock_mhz": theirs.sm_clock_mhz,
            "cublas_power_w": theirs.power_w, "clock_source": source}


def _peak_fields(rates: PeakRates) -> dict[str, Any]:
    return {"peak_tflops": rates.tensor_tflops, "max_sm_clock_mhz": rates.max_sm_clock_mhz or None}


def _sampler(device: Any) -> Any:
    """A started clock sampler of ``device``, or None where nothing can sample."""
    from gemmlab.timing.clock_sampler import device_sampler

    try:
        sampler = device_sampler(device.index)
        if sampler is not None:
            sampler.start()
        return sampler
    except Exception:  # noqa: BLE001 - no clock readings is a missing column, never a failed timing
        return None


def _time_flushed(fn: Callable[..., Any], problem: Problem, warmup_ms: float, rep: int | None, rep_ms: float,
                  flush_l2: bool, rounds: int) -> tuple[list, list, dict[str, Any]]:
    """The default method: interleaved rounds with L2 flushed before each call (docs/TIMING.md)."""
    A, B, out = problem.operands(problem.generator())
    ref_out = out.clone()
    yours = problem.call(fn, A, B, out)
    _first_call(yours, problem)
    check = problem.check
    with exclusive_timing():
        sampler = _sampler(problem.device)     # started before the warm-ups: nvidia-smi takes a while to answer
        try:
            flush = l2_flush_buffer() if flush_l2 else None
            with library_guard(check) as used:
                mine = prepare_timer(yours, warmup_ms, flush_l2, problem.timeout_s, problem.what,
                                     input_nudger(A) if check else None, flush_buffer=flush)
            if used:
                raise BenchIntegrityError(library_message(used))
            cublas = prepare_timer(_cublas_fn(problem.convention, A, B, ref_out, problem.alpha, problem.beta),
                                   warmup_ms, flush_l2, problem.timeout_s, "cuBLAS", flush_buffer=flush)
            windows = _Windows()
            reps = [round_reps(t.estimate_ms, rounds, rep, rep_ms) for t in (mine, cublas)]
            times, ctimes = interleaved_rounds([windows.around("kernel", _guarded(mine.run, check)),
                                                windows.around("cublas", cublas.run)], reps, rounds)
        finally:
            samples = sampler.stop() if sampler is not None else []
        if check:
            verify_once(yours, A, B, out, problem.convention, problem.alpha, problem.beta, problem.timeout_s,
                        problem.label)
            verify_nothing_left_running(yours, statistics.median(t for r in times for t in r), problem.label)
    return times, ctimes, _clock_fields(sampler, samples, windows.spans["kernel"], windows.spans["cublas"])


def _time_steady(fn: Callable[..., Any], problem: Problem, plan: SteadyPlan) -> tuple[list, list, dict[str, Any]]:
    """NVIDIA's fixed-power method (:mod:`gemmlab.timing.steady_timing`): the kernel's phase, then cuBLAS's."""
    from gemmlab.running.device import device_attributes

    gen = problem.generator()
    sets = rotation_sets(problem.input_bytes(), device_attributes(problem.device.index).l2_bytes)
    operands = [problem.operands(gen) for _ in range(sets)]
    mine = [problem.call(fn, *ops) for ops in operands]
    theirs = [_cublas_fn(problem.convention, *ops, problem.alpha, problem.beta) for ops in operands]
    _first_call(mine[0], problem)
    wait = wait_for(problem.timeout_s, problem.what)
    phases: dict[str, SteadyPhase] = {}
    graphed: dict[str, bool] = {}
    with exclusive_timing():
        sampler = _sampler(problem.device)
        try:
            for side, calls in (("kernel", mine), ("cublas", theirs)):
                run = (lambda i, calls=calls: calls[i]())
                synchronize(timeout_s=problem.timeout_s, what=problem.what)
                estimate = measure_estimate(run, sets, wait)
                check_l2 = guard_persisting_l2(problem.what)
                checked_side = problem.check and side == "kernel"
                back_to_back = _guarded(DeviceBackToBack, checked_side)(run, sets, estimate, wait)
                graphed[side] = back_to_back.graphed
                phases[side] = _guarded(steady_phase, checked_side)(back_to_back, plan, sampler)
                check_l2()
        finally:
            samples = sampler.stop() if sampler is not None else []
        if problem.check:
            A, B, out = operands[0]
            verify_once(mine[0], A, B, out, problem.convention, problem.alpha, problem.beta, problem.timeout_s,
                        problem.label)
            verify_nothing_left_running(mine[0], statistics.median(phases["kernel"].timed.block_ms), problem.label)
    kernel, cublas = phases["kernel"], phases["cublas"]
    side = _clock_fields(sampler, samples, [kernel.timed.window], [cublas.timed.window])
    side.update(warmup_s=round(kernel.warmup_s, 3), settled=kernel.settled, launch_bound=kernel.timed.launch_bound,
                graphed=graphed["kernel"])
    times, ctimes = paired_rounds(kernel, cublas)
    return times, ctimes, {**side, "reps": sum(kernel.timed.calls_per_block)}


def compare(a: BenchResult, b: BenchResult | None = None, level: float = LEVEL) -> Comparison:
    """``a.compare(b)``: does ``a`` differ from ``b`` (or from cuBLAS, when ``b`` is None) beyond the noise?"""
    return a.compare(b, level)


#: ``BenchIntegrityError`` and ``time_cuda`` live in gemmlab.checking.integrity and gemmlab.timing.events;
#: bench_gemm raises the one and times with the other, and notebooks reach both through this module.
__all__ = ["FILLS", "METHODS", "ROUNDS", "BenchIntegrityError", "BenchResult", "Comparison", "Problem", "bench_gemm",
           "compare", "filled", "result_from_rounds", "time_cuda"]
