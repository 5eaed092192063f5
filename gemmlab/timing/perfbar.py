"""A performance bar for graded kernels: fast enough *relative to cuBLAS on the same GPU*.

Absolute TFLOPS depend on which GPU grades the notebook; the ratio to cuBLAS, measured in
the same call on the same clocks (:func:`gemmlab.bench_gemm`), mostly does not. So a bar
is a minimum ratio: ``performance_bar(fn, 0.2)`` passes when ``fn`` reaches at least 0.2×
cuBLAS's throughput at 4096³.

    bar = gemmlab.performance_bar(my_gemm, 0.2, convention="nn")
    bar                       # table + roofline: your kernel beside cuBLAS
    bar.raise_if_failed()     # in a graded test cell

The verdict is the median ratio against the bar. The result also states the ratio's interval
(``bench_gemm``'s rounds) and says when the bar lies inside it: then another run may land on
the other side, and the kernel is not clearly above (or below) the bar.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Callable

from gemmlab.timing import bench as _bench
from gemmlab.errors import GemmlabError
from gemmlab.checking import report
from gemmlab.seeing.figures import figure_img_tag
from gemmlab.checking.integrity import grading_mode
from gemmlab.running.gpu import require_gpu
from gemmlab.offload import pool_for_work


class PerfBarError(GemmlabError):
    """The kernel is slower than the bar (ratio to cuBLAS below the minimum)."""


_DEFAULT_HINT = ("check first that it is correct (check_gemm), then that it uses the tensor cores (mma), "
                 "copies with 128-bit vectors where alignment allows, and a CTA tile large enough "
                 "(e.g. 128×128) to reuse each loaded element many times.")


@dataclass
class PerfBarResult:
    """The verdict of :func:`performance_bar`; displays as a table and a roofline."""

    bench: _bench.BenchResult
    min_ratio: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: the timing (``BenchResult.to_dict``), the bar and the verdict."""
        return {"bench": self.bench.to_dict(), "min_ratio": self.min_ratio, "passed": self.passed,
                "bar_within_noise": self.bar_within_noise}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PerfBarResult":
        """The result :meth:`to_dict` wrote (``passed`` and ``bar_within_noise`` are recomputed)."""
        return cls(_bench.BenchResult.from_dict(data["bench"]), float(data["min_ratio"]))

    @property
    def ratio(self) -> float:
        return float(self.bench.ratio)

    @property
    def passed(self) -> bool:
        return self.ratio >= self.min_ratio

    def __bool__(self) -> bool:
        return self.passed

    @property
    def bar_within_noise(self) -> bool:
        """True when the bar lies inside the ratio's interval: this run cannot say which side it is on."""
        interval = self.bench.interval
        return interval is not None and interval[0] <= self.min_ratio <= interval[1]

    def _noise_sentence(self) -> str:
        if not self.bar_within_noise:
            return ""
        low, high = self.bench.interval
        return (f"The bar {self.min_ratio:.2f}× lies inside this run's interval ({low:.3f}–{high:.3f}): "
                "within noise, so another run may land on the other side of it.")

    @property
    def tflops(self) -> float:
        return float(self.bench.tflops)

    @property
    def cublas_tflops(self) -> float:
        return float(self.bench.cublas_tflops)

    @property
    def device(self) -> str:
        return str(self.bench.device)

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.bench.shape)

    def _headline(self) -> str:
        M, N, K = self.shape
        verdict = "PASSED" if self.passed else "FAILED"
        noise = ", within noise of the bar" if self.bar_within_noise else ""
        return (f"performance bar {verdict}: {self.ratio:.3f}× cuBLAS (bar {self.min_ratio:.2f}×{noise}; "
                f"{self.bench.spread_text()}) — "
                f"{self.tflops:.1f} vs {self.cublas_tflops:.1f} TFLOPS at {M}×{N}×{K} "
                f"{self.bench.convention} {self.bench.dtype} on {self.device}")

    def __str__(self) -> str:
        return self._headline()

    def raise_if_failed(self, hint: str | None = None) -> None:
        """Raise :class:`PerfBarError` (a GemmlabError) saying the ratio, the bar and what to try."""
        if self.passed:
            return
        M, N, K = self.shape
        raise PerfBarError(
            f"Your kernel reaches {self.ratio:.3f}× cuBLAS ({self.tflops:.1f} TFLOPS against cuBLAS's "
            f"{self.cublas_tflops:.1f} at {M}×{N}×{K}, on {self.device}); the bar is {self.min_ratio:.2f}×. "
            f"Hint: {hint or _DEFAULT_HINT}" + (f" {self._noise_sentence()}" if self.bar_within_noise else ""))

    def show(self, ceilings: Any = None) -> Any:
        """Roofline figure with your kernel and cuBLAS (``ceilings`` default: measured on this GPU)."""
        from gemmlab.timing.roofline import roofline

        fig = roofline(points=[self.bench], ceilings=ceilings, dtype=self.bench.dtype,
                       title=f"{self.bench.label} vs cuBLAS, bar {self.min_ratio:.2f}× ({self.device})")
        ax = fig.axes[0]
        x = float(self.bench.intensity)
        ax.scatter([x], [self.min_ratio * self.cublas_tflops], marker="_", s=400, color="red", zorder=4,
                   label=f"bar: {self.min_ratio:.2f}× cuBLAS = {self.min_ratio * self.cublas_tflops:.0f} TFLOPS")
        ax.legend(fontsize=8, loc="lower right")
        return fig

    def _repr_html_(self) -> str:
        colour = "#e6f4ea" if self.passed else "#fce8e6"
        text = f"<p style='background:{colour};padding:4px'><b>{html.escape(self._headline())}</b></p>"
        if self.bar_within_noise:
            text += f"<p>{html.escape(self._noise_sentence())}</p>"
        try:
            fig = self.show()
        except GemmlabError as err:  # no ceilings here (e.g. no GPU to measure them): the table alone
            return text + f"<p><i>no roofline: {html.escape(str(err).splitlines()[0])}</i></p>"
        return text + figure_img_tag(fig, "roofline: your kernel and cuBLAS")


def performance_bar(fn: Callable[..., Any], min_ratio: float, shape: tuple[int, int, int] = (4096, 4096, 4096),
                    convention: str = "tn", dtype: Any = None, **bench_kwargs: Any) -> PerfBarResult:
    """Time ``fn`` and cuBLAS in the same run and compare the ratio with ``min_ratio``.

    ``fn`` follows gemmlab's conventions (``fn(A, B, D)`` for "tn", ``fn(A, B, C, alpha, beta)``
    for "nn"); ``bench_kwargs`` go to :func:`gemmlab.bench_gemm` (``rep``, ``out_dtype``,
    ``label``, ...). Needs a GPU: this machine's, or the class's pool after ``gemmlab.connect`` (then
    bench_gemm times it there); :class:`gemmlab.NoGPUError` without either.
    """
    if pool_for_work() is None:
        require_gpu("performance_bar")
    try:
        bar = float(min_ratio)
    except (TypeError, ValueError):
        raise GemmlabError(f"min_ratio must be a number (a fraction of cuBLAS's speed), not {min_ratio!r}.") from None
    if not 0 < bar <= 10:
        raise GemmlabError(f"min_ratio is a fraction of cuBLAS's speed, e.g. 0.2; {min_ratio!r} makes no sense.")
    result = _bench.bench_gemm(fn, shape=shape, convention=convention, dtype=dtype, **bench_kwargs)
    bar_result = PerfBarResult(result, bar)
    if grading_mode():
        report.publish("perf_bar", bar_result)
    return bar_result


__all__ = ["PerfBarError", "PerfBarResult", "performance_bar"]
