"""How fast is this GEMM, and how far from cuBLAS on the same shape, beyond the noise?

Times with CUDA events, after a warm-up, with L2 flushed before every repetition (so a
small problem cannot live in cache and look faster than DRAM allows). The kernel and cuBLAS
(through torch, same shape, dtypes and convention) are timed in alternating *rounds* of the
same call, so both see the same clocks; each round gives one ratio (cuBLAS's median time over
the kernel's), the reported ratio is the median of those, and the spread of the rounds gives
an interval around it (:mod:`gemmlab.spread`; the method: docs/TIMING.md). ``result.compare()``
says whether the kernel differs from cuBLAS beyond that noise, ``result.compare(other)`` whether
two kernels do.
"""
from __future__ import annotations

import html
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Callable

from . import report
from .errors import GemmlabError
from .gpu import require_gpu
from .integrity import (BenchIntegrityError, grading_mode, input_nudger, library_guard, library_message,
                        verify_nothing_left_running, verify_once)
from .runtime import faults
from .runtime.device import device_label, torch_device
from .runtime.streams import DEFAULT_TIMEOUT_S, synchronize
from .spread import LEVEL, Comparison, NoSpreadError, against_one, between, interval_text, median_interval
from .timing import interleaved_rounds, l2_flush_buffer, prepare_timer, round_reps, time_cuda
from .timing_lock import exclusive_timing, shared_gpu_work


#: Rounds of kernel-then-cuBLAS (or cuBLAS-then-kernel) timings in one bench_gemm call.
ROUNDS = 12


@dataclass(frozen=True)
class BenchResult:
    """Median times (ms) and TFLOPS for a GEMM function and for cuBLAS on the same problem, and the
    median per-round ratio with its interval (``ratio_low``–``ratio_high``, which holds the true
    median ratio of this run's conditions with probability ``coverage``; None when fewer than two
    rounds were timed)."""

    shape: tuple[int, int, int]
    convention: str
    dtype: str
    out_dtype: str
    ms: float
    tflops: float
    cublas_ms: float
    cublas_tflops: float
    ratio: float  # your TFLOPS / cuBLAS TFLOPS
    device: str
    reps: int
    label: str = "your kernel"
    ratio_low: float | None = None
    ratio_high: float | None = None
    coverage: float | None = None
    rounds: int = 0
    round_ratios: tuple[float, ...] = ()

    @property
    def intensity(self) -> float:
        """Ideal arithmetic intensity (flop/byte) of this problem, for the roofline."""
        from .roofline_math import intensity_ideal

        M, N, K = self.shape
        size = {"float16": 2, "bfloat16": 2, "float32": 4}
        return intensity_ideal(M, N, K, size.get(self.dtype, 2), size.get(self.out_dtype, 2),
                               read_output=self.convention == "nn")

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe fields (the shape as a list), for results exchanged between processes."""
        data = asdict(self)
        data["shape"] = list(self.shape)
        data["round_ratios"] = list(self.round_ratios)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BenchResult":
        """The result :meth:`to_dict` wrote."""
        fields = dict(data)
        fields["shape"] = tuple(int(v) for v in fields["shape"])
        fields["round_ratios"] = tuple(float(v) for v in fields.get("round_ratios", ()))
        return cls(**fields)

    @property
    def interval(self) -> tuple[float, float] | None:
        """``(ratio_low, ratio_high)``, or None for a result without rounds."""
        if self.ratio_low is None or self.ratio_high is None:
            return None
        return self.ratio_low, self.ratio_high

    def spread_text(self) -> str:
        """'96% interval 0.965–0.979, 12 rounds', or why there is none."""
        if self.interval is None or self.coverage is None:
            return f"median of {self.reps} runs; no interval: fewer than 2 rounds"
        return f"{interval_text(self.ratio_low, self.ratio_high, self.coverage)}, {self.rounds} rounds"

    def compare(self, other: "BenchResult | None" = None, level: float = LEVEL) -> Comparison:
        """Does this kernel differ from cuBLAS (``other=None``), or from ``other``, beyond the noise?

        Against cuBLAS: the interval of the per-round ratios, which holds 1.0 when they are within
        noise. Against another result of the same problem on the same GPU: the ratio of the two
        kernels' speeds (each measured against cuBLAS in its own run) with a rank-sum interval.
        Print the returned :class:`gemmlab.spread.Comparison`; ``.within_noise`` is the verdict."""
        if other is None:
            if len(self.round_ratios) < 2:
                raise NoSpreadError(f"{self.label} was timed in {self.rounds} round(s): a comparison needs "
                                    "at least 2 (bench_gemm(..., rounds=12)).")
            return against_one(self.label, "cuBLAS", self.round_ratios, level,
                               f"median of {len(self.round_ratios)} rounds, cuBLAS interleaved")
        if (self.shape, self.convention, self.dtype, self.out_dtype) != (
                other.shape, other.convention, other.dtype, other.out_dtype):
            raise GemmlabError(f"{self.label} and {other.label} timed different problems "
                               f"({self._problem()} and {other._problem()}): compare timings of the same one.")
        if self.device != other.device:
            raise GemmlabError(f"{self.label} was timed on {self.device} and {other.label} on {other.device}: "
                               "ratios to cuBLAS from different GPUs differ by more than this noise; "
                               "time both on one GPU.")
        short = [r.label for r in (self, other) if len(r.round_ratios) < 2]
        if short:
            raise NoSpreadError(f"{', '.join(short)} carries fewer than 2 rounds: time it again with "
                                "bench_gemm(..., rounds=12) to compare beyond the noise.")
        subject, reference = self.label, other.label
        if subject == reference:
            subject, reference = f"{subject} (this run)", f"{reference} (the other run)"
        return between(subject, reference, self.round_ratios, other.round_ratios, level)

    def _problem(self) -> str:
        M, N, K = self.shape
        return f"{M}×{N}×{K} {self.convention} {self.dtype}→{self.out_dtype}"

    def _noise_note(self) -> str:
        """A sentence when cuBLAS (1.000×) lies inside this run's interval, else ''."""
        if self.interval is None or not self.ratio_low <= 1.0 <= self.ratio_high:
            return ""
        return "cuBLAS (1.000×) lies inside the interval: within noise of cuBLAS."

    def __str__(self) -> str:
        M, N, K = self.shape
        text = (f"{self.label}: {M}×{N}×{K} {self.convention} {self.dtype}→{self.out_dtype} on {self.device}\n"
                f"  yours : {self.ms:9.4f} ms  {self.tflops:8.1f} TFLOPS\n"
                f"  cuBLAS: {self.cublas_ms:9.4f} ms  {self.cublas_tflops:8.1f} TFLOPS\n"
                f"  ratio : {self.ratio:.3f}× cuBLAS  ({self.spread_text()}; L2 flushed)")
        note = self._noise_note()
        return text + (f"\n          {note}" if note else "")

    def _repr_html_(self) -> str:
        M, N, K = self.shape
        colour = "#e6f4ea" if self.ratio >= 0.8 else "#fff4e5" if self.ratio >= 0.3 else "#fce8e6"
        note = self._noise_note()
        return (
            f"<table><caption>{html.escape(self.label)}: {M}×{N}×{K} {self.convention} "
            f"{self.dtype}→{self.out_dtype} on {html.escape(self.device)}</caption>"
            "<tr><th></th><th>ms</th><th>TFLOPS</th></tr>"
            f"<tr><td>yours</td><td>{self.ms:.4f}</td><td>{self.tflops:.1f}</td></tr>"
            f"<tr><td>cuBLAS</td><td>{self.cublas_ms:.4f}</td><td>{self.cublas_tflops:.1f}</td></tr>"
            f"<tr style='background:{colour}'><td colspan=3><b>{self.ratio:.3f}× cuBLAS</b> "
            f"({html.escape(self.spread_text())}; L2 flushed)"
            + (f"<br>{html.escape(note)}" if note else "") + "</td></tr></table>"
        )


def result_from_rounds(kernel_rounds: list[list[float]], cublas_rounds: list[list[float]],
                       shape: tuple[int, int, int], convention: str, dtype: str, out_dtype: str, device: str,
                       label: str = "your kernel", level: float = LEVEL) -> BenchResult:
    """The :class:`BenchResult` of interleaved rounds (ms of each timed call, per round): times and
    TFLOPS from the medians of all calls, the ratio as the median of the per-round ratios (so it can
    differ slightly from ``tflops / cublas_tflops``), and the interval from their spread."""
    if not kernel_rounds or len(kernel_rounds) != len(cublas_rounds) or not all(kernel_rounds) \
            or not all(cublas_rounds):
        raise GemmlabError("each round needs timings of both the kernel and cuBLAS.")
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
                       low, high, coverage, len(round_ratios), round_ratios)


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
               rounds: int = ROUNDS) -> BenchResult:
    """Median time and TFLOPS (2·M·N·K / t) of ``fn`` and of cuBLAS on the same problem, and the
    ratio with its interval.

    ``fn`` follows gemmlab's conventions: ``fn(A, B, D)`` for "tn", ``fn(A, B, C, alpha, beta)``
    for "nn". Run :func:`gemmlab.check_gemm` first: a fast wrong kernel is not fast.

    The kernel and cuBLAS are timed in ``rounds`` alternating rounds, each of ``rep`` calls of
    each (default: as many as fit in ``rep_ms`` spread over the rounds, at least one a round).

    ``verify`` (default: on in the course's grader, ``GEMMLAB_GRADING=1``) defeats the known
    benchmark cheats: one input element changes before every timed call (so results cannot be
    cached), torch computation inside the timed calls fails, and afterwards the inputs get new values
    in place, the output is poisoned and one call must produce the right result on torch's current
    stream by the time it returns. A failure raises :class:`BenchIntegrityError`.

    After ``gemmlab.connect(...)`` on a machine without a GPU the class's GPU pool times it (verified,
    with this method's defaults; the result names the pool's GPU).
    """
    from .remote import pool_for_work

    pool = pool_for_work()
    if pool is not None:
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
    dtype = torch.float16 if dtype is None else dtype
    out_dtype = dtype if out_dtype is None else out_dtype
    dev = torch_device()
    try:
        A = torch.randn((M, K), device=dev).to(dtype)
        B = torch.randn((N, K) if convention == "tn" else (K, N), device=dev).to(dtype)
        out = torch.randn((M, N), device=dev).to(out_dtype)
        ref_out = out.clone()
        if convention == "tn":
            yours = lambda: fn(A, B, out)  # noqa: E731
        else:
            yours = lambda: fn(A, B, out, alpha, beta)  # noqa: E731
        check = grading_mode() if verify is None else bool(verify)
        what = f"{label} at {M}×{N}×{K}"
        # Compile, load and run once outside the exclusive timing: as graded GPU work (shared; a compile
        # hands that back), so other graders on this GPU may time meanwhile.
        with shared_gpu_work(), library_guard(check) as used:
            yours()
            synchronize(timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s, what=what)
        if used:
            raise BenchIntegrityError(library_message(used))
        with exclusive_timing():
            flush = l2_flush_buffer() if flush_l2 else None
            with library_guard(check) as used:
                mine = prepare_timer(yours, warmup_ms, flush_l2, timeout_s, what,
                                     input_nudger(A) if check else None, flush_buffer=flush)
            if used:
                raise BenchIntegrityError(library_message(used))
            cublas = prepare_timer(_cublas_fn(convention, A, B, ref_out, alpha, beta), warmup_ms, flush_l2,
                                   timeout_s, "cuBLAS", flush_buffer=flush)

            def run_mine(n: int) -> list[float]:
                with library_guard(check) as seen:
                    timed = mine.run(n)
                if seen:
                    raise BenchIntegrityError(library_message(seen))
                return timed

            reps = [round_reps(t.estimate_ms, rounds, rep, rep_ms) for t in (mine, cublas)]
            times, ctimes = interleaved_rounds([run_mine, cublas.run], reps, rounds)
            if check:
                verify_once(yours, A, B, out, convention, alpha, beta, timeout_s, label)
                verify_nothing_left_running(yours, statistics.median(t for r in times for t in r), label)
    except torch.cuda.OutOfMemoryError:
        raise GemmlabError(f"{M}×{N}×{K} does not fit in GPU memory: bench a smaller shape.") from None
    except RuntimeError as exc:
        translated = faults.translate(exc, f"{label} at {M}×{N}×{K}")
        if translated is exc:
            raise
        raise translated from None
    result = result_from_rounds(times, ctimes, (M, N, K), convention, str(dtype).replace("torch.", ""),
                                str(out_dtype).replace("torch.", ""), device_label(dev), label)
    if grading_mode():
        report.publish("bench", result)
    return result


def compare(a: BenchResult, b: BenchResult | None = None, level: float = LEVEL) -> Comparison:
    """``a.compare(b)``: does ``a`` differ from ``b`` (or from cuBLAS, when ``b`` is None) beyond the noise?"""
    return a.compare(b, level)


#: ``BenchIntegrityError`` and ``time_cuda`` live in gemmlab.integrity and gemmlab.timing; bench_gemm raises
#: the one and times with the other, and notebooks reach both through this module.
__all__ = ["ROUNDS", "BenchIntegrityError", "BenchResult", "Comparison", "bench_gemm", "compare", "result_from_rounds",
           "time_cuda"]
