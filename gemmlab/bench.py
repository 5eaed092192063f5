"""How fast is this GEMM, and how far from cuBLAS on the same shape?

Times with CUDA events, after a warm-up, with L2 flushed before every repetition (so a
small problem cannot live in cache and look faster than DRAM allows), takes the median,
and measures cuBLAS (through torch) on the same shape, dtypes and convention in the same
call, so the ratio compares like with like on the same clocks.
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
from .runtime.device import torch_device
from .runtime.streams import DEFAULT_TIMEOUT_S, synchronize
from .timing import time_cuda
from .timing_lock import exclusive_timing, shared_gpu_work


@dataclass(frozen=True)
class BenchResult:
    """Median times (ms) and TFLOPS for a GEMM function and for cuBLAS on the same problem."""

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
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BenchResult":
        """The result :meth:`to_dict` wrote."""
        fields = dict(data)
        fields["shape"] = tuple(int(v) for v in fields["shape"])
        return cls(**fields)

    def __str__(self) -> str:
        M, N, K = self.shape
        return (f"{self.label}: {M}×{N}×{K} {self.convention} {self.dtype}→{self.out_dtype} on {self.device}\n"
                f"  yours : {self.ms:9.4f} ms  {self.tflops:8.1f} TFLOPS\n"
                f"  cuBLAS: {self.cublas_ms:9.4f} ms  {self.cublas_tflops:8.1f} TFLOPS\n"
                f"  ratio : {self.ratio:.2f}× cuBLAS  (median of {self.reps} runs, L2 flushed)")

    def _repr_html_(self) -> str:
        M, N, K = self.shape
        colour = "#e6f4ea" if self.ratio >= 0.8 else "#fff4e5" if self.ratio >= 0.3 else "#fce8e6"
        return (
            f"<table><caption>{html.escape(self.label)}: {M}×{N}×{K} {self.convention} "
            f"{self.dtype}→{self.out_dtype} on {html.escape(self.device)}</caption>"
            "<tr><th></th><th>ms</th><th>TFLOPS</th></tr>"
            f"<tr><td>yours</td><td>{self.ms:.4f}</td><td>{self.tflops:.1f}</td></tr>"
            f"<tr><td>cuBLAS</td><td>{self.cublas_ms:.4f}</td><td>{self.cublas_tflops:.1f}</td></tr>"
            f"<tr style='background:{colour}'><td colspan=3><b>{self.ratio:.2f}× cuBLAS</b> "
            f"(median of {self.reps} runs, L2 flushed)</td></tr></table>"
        )


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
               label: str = "your kernel", timeout_s: float | None = None, verify: bool | None = None) -> BenchResult:
    """Median time and TFLOPS (2·M·N·K / t) of ``fn`` and of cuBLAS on the same problem.

    ``fn`` follows gemmlab's conventions: ``fn(A, B, D)`` for "tn", ``fn(A, B, C, alpha, beta)``
    for "nn". Run :func:`gemmlab.check_gemm` first: a fast wrong kernel is not fast.

    ``verify`` (default: on in the course's grader, ``GEMMLAB_GRADING=1``) defeats the known
    benchmark cheats: one input element changes before every timed call (so results cannot be
    cached), torch computation inside the timed calls fails, and afterwards the inputs get new values
    in place, the output is poisoned and one call must produce the right result on torch's current
    stream by the time it returns. A failure raises :class:`BenchIntegrityError`.
    """
    require_gpu("bench_gemm")
    import torch

    if convention not in ("tn", "nn"):
        raise GemmlabError(f"convention must be 'tn' or 'nn', not {convention!r}.")
    M, N, K = (int(v) for v in shape)
    if min(M, N, K) <= 0:
        raise GemmlabError(f"shape must be three positive sizes (M, N, K), not {shape!r}.")
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
            with library_guard(check) as used:
                times = time_cuda(yours, warmup_ms, rep, rep_ms, flush_l2, timeout_s, what=what,
                                  before_each=input_nudger(A) if check else None)
            if used:
                raise BenchIntegrityError(library_message(used))
            if check:
                verify_once(yours, A, B, out, convention, alpha, beta, timeout_s, label)
                verify_nothing_left_running(yours, statistics.median(times), label)
            cublas = _cublas_fn(convention, A, B, ref_out, alpha, beta)
            ctimes = time_cuda(cublas, warmup_ms, rep, rep_ms, flush_l2, timeout_s, what="cuBLAS")
    except torch.cuda.OutOfMemoryError:
        raise GemmlabError(f"{M}×{N}×{K} does not fit in GPU memory: bench a smaller shape.") from None
    except RuntimeError as exc:
        translated = faults.translate(exc, f"{label} at {M}×{N}×{K}")
        if translated is exc:
            raise
        raise translated from None
    ms, cms = statistics.median(times), statistics.median(ctimes)
    work = 2.0 * M * N * K
    tflops, ctflops = work / (ms * 1e-3) / 1e12, work / (cms * 1e-3) / 1e12
    result = BenchResult((M, N, K), convention, str(dtype).replace("torch.", ""), str(out_dtype).replace("torch.", ""),
                       ms, tflops, cms, ctflops, tflops / ctflops, torch.cuda.get_device_name(dev), len(times), label)
    if grading_mode():
        report.publish("bench", result)
    return result


#: ``BenchIntegrityError`` and ``time_cuda`` live in gemmlab.integrity and gemmlab.timing; bench_gemm raises
#: the one and times with the other, and notebooks reach both through this module.
__all__ = ["BenchIntegrityError", "BenchResult", "bench_gemm", "time_cuda"]
