"""check_gemm and bench_gemm answered by the pool: record the launches, send them, rebuild the results.

Why the same result objects: a notebook prints, plots and tests a :class:`~gemmlab.checking.check.CheckResult`
or :class:`~gemmlab.timing.bench.BenchResult` whether it came from a local GPU or the pool, so the
heatmaps, the roofline and the tests work unchanged. Their ``device`` names the pool's GPU.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Protocol, Sequence

from gemmlab.results import ROUNDS, BenchResult, CheckResult, Row
from ..errors import CompileError, CompileTimeoutError, GemmlabError, KernelTimeoutError, LaunchError, ToolchainError
from gemmlab.checking.integrity import BenchIntegrityError
from ..judge.protocol import MAX_COMPILE_S, MAX_KERNEL_S, TIMING_ACTIONS, JudgeLimits, JudgeRequest
from gemmlab.dtypes import dtype_name
from gemmlab.running.streams import DEFAULT_TIMEOUT_S
from .errors import PoolError, PoolKernelError, PoolRequestError, PoolUnavailableError, UnsendableCallError
from .recording import DslRecording, Recording, record
from .requests import bench_request, check_requests
from .transport import PoolReply

Shape = tuple[int, int, int]
#: Errors a judge reports by name that mean the same in a notebook.
_SAME_ERRORS: dict[str, type[GemmlabError]] = {
    "CompileError": CompileError, "LaunchError": LaunchError, "ToolchainError": ToolchainError,
    "BenchIntegrityError": BenchIntegrityError,
}


class Judging(Protocol):
    """What these functions need of a pool: judge one request."""

    def judge(self, request: JudgeRequest) -> PoolReply: ...


def device_text(reply: PoolReply) -> str:
    """Which GPU the numbers came from, e.g. 'NVIDIA H100 80GB HBM3 (shared GPU pool)': the judge's device name,
    so timings from two GPUs of one model compare like two timings on one."""
    return f"{reply.report.device or reply.gpu or 'unknown GPU'} (shared GPU pool)"


def error_for(reply: PoolReply) -> GemmlabError:
    """The error a notebook sees for a report that is not a result, saying it happened on the pool."""
    report, where = reply.report, device_text(reply)
    text = report.error or "(no message)"
    if report.verdict == "refused":
        return PoolRequestError(f"the pool's judge refused this call: {text}")
    if report.verdict == "context_lost":
        return PoolKernelError(f"your kernel broke the GPU context on {where}: {text} This happened in the pool's "
                               "own process, which is discarded: this notebook needs no restart. Look for an "
                               "out-of-bounds address in the kernel.")
    if report.verdict == "timeout":
        if report.error_type == "CompileTimeoutError":
            return CompileTimeoutError(f"on {where}: {text}", MAX_COMPILE_S)
        return KernelTimeoutError(f"on {where}: {text}")
    if report.verdict == "crashed":
        return PoolKernelError(f"the pool's judge process died running your kernel on {where}: {text}")
    if report.verdict == "failed" and report.action in TIMING_ACTIONS:
        return BenchIntegrityError(f"on {where}: {text}")
    kind = _SAME_ERRORS.get(report.error_type, PoolError)
    return kind(f"on {where}: {text}")


def judge_limits(timeout_s: float | None) -> JudgeLimits:
    """The judge limits of a call: its kernel timeout (default, capped at the judge's ceiling) and the longest compile."""
    kernel_s = DEFAULT_TIMEOUT_S if timeout_s is None else float(timeout_s)
    return JudgeLimits(MAX_COMPILE_S, min(max(kernel_s, 0.1), MAX_KERNEL_S))


def _dtypes(dtype: Any, out_dtype: Any) -> tuple[Any, Any]:
    import torch

    dtype = torch.float16 if dtype is None else dtype
    return dtype, dtype if out_dtype is None else out_dtype


def judged_rows(pool: Judging, requests: Sequence[JudgeRequest], parse: Callable[[Any], Any], rows: dict,
                shapes: Sequence[Any]) -> tuple[list[Any], int, str]:
    """Judge each check request and add its result's rows (``parse`` reads a report's check) to ``rows``, which
    may hold rows already (shapes the function refused while recording): the rows in the order of ``shapes``,
    the first result's seed and the device text. A report that is not a check's result raises its error."""
    seed, device = 0, ""
    for request in requests:
        reply = pool.judge(request)
        if reply.report.verdict not in ("passed", "failed") or reply.report.check is None:
            raise error_for(reply)
        result = parse(reply.report.check)
        rows.update((row.shape, row) for row in result.rows)
        seed, device = seed or result.seed, device or device_text(reply)
    missing = [s for s in shapes if tuple(s) not in rows]
    if missing:
        raise PoolUnavailableError(f"the pool answered no row for {missing[0]}: try again.")
    return [rows[tuple(s)] for s in shapes], seed, device


def remote_check(pool: Judging, fn: Callable[..., Any], convention: str, dtype: Any, out_dtype: Any,
                 shapes: Sequence[Shape], alpha: float, beta: float, tile: tuple[int, int],
                 atol: float | None = None, rtol: float | None = None, seed: int | None = None,
                 timeout_s: float | None = None, pad: int = 0, offset: int = 0) -> CheckResult:
    """``check_gemm`` of ``fn`` on the pool: one recording per distinct shape, one request per kernel (``pad``:
    every operand's rows that much longer, in the recording and in the judge's check)."""
    unsupported = [name for name, value in (("seed", seed), ("atol", atol), ("rtol", rtol)) if value is not None]
    if unsupported:
        raise PoolRequestError(f"check_gemm on the pool takes no {', '.join(unsupported)}: the pool draws its own "
                               "seed and uses check_gemm's tolerances. Leave them out.")
    dtype, out_dtype = _dtypes(dtype, out_dtype)
    rows: dict[Shape, Row] = {}
    recorded: list[Recording | DslRecording] = []
    for shape in dict.fromkeys(tuple(s) for s in shapes):
        try:
            recorded.append(record(fn, shape, convention, dtype, out_dtype, alpha, beta, pad, offset))
        except UnsendableCallError:
            raise
        except GemmlabError as exc:  # the function refused this shape itself, as it would on a local GPU
            rows[shape] = Row(shape, False, math.nan, None, 0, True, True, f"{type(exc).__name__}: {exc}")
    requests = check_requests(recorded, convention, dtype_name(dtype), dtype_name(out_dtype), alpha, beta, tile,
                              judge_limits(timeout_s), pad, offset)
    ordered, seed, device = judged_rows(pool, requests, CheckResult.from_dict, rows, shapes)
    return CheckResult(ordered, convention, dtype_name(dtype), dtype_name(out_dtype), tuple(tile), seed,
                       device)  # type: ignore[arg-type]


def remote_bench(pool: Judging, fn: Callable[..., Any], shape: Shape, convention: str, dtype: Any, out_dtype: Any,
                 alpha: float, beta: float, label: str, timeout_s: float | None = None, rounds: int = ROUNDS,
                 flush_l2: bool = True) -> BenchResult:
    """``bench_gemm`` of ``fn`` on the pool: verified, with cuBLAS timed on the same GPU in the same request."""
    if rounds != ROUNDS or not flush_l2:
        raise PoolRequestError(f"the pool times with bench_gemm's method ({ROUNDS} rounds, L2 flushed); leave "
                               "rounds= and flush_l2= out to time on the pool.")
    if convention not in ("tn", "nn"):
        raise GemmlabError(f"convention must be 'tn' or 'nn', not {convention!r}.")
    dtype, out_dtype = _dtypes(dtype, out_dtype)
    shape = tuple(int(v) for v in shape)  # type: ignore[assignment]
    if len(shape) != 3 or min(shape) <= 0:
        raise GemmlabError(f"shape must be three positive sizes (M, N, K), not {shape!r}.")
    recording = record(fn, shape, convention, dtype, out_dtype, alpha, beta)
    reply = pool.judge(bench_request(recording, convention, dtype_name(dtype), dtype_name(out_dtype), alpha, beta,
                                     judge_limits(timeout_s)))
    if reply.report.verdict != "passed" or reply.report.bench is None:
        raise error_for(reply)
    result = BenchResult.from_dict(reply.report.bench)
    return dataclasses.replace(result, label=label, device=device_text(reply))


__all__ = ["Judging", "device_text", "error_for", "judge_limits", "judged_rows", "remote_bench", "remote_check"]
