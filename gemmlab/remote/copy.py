"""check_copy answered by the pool: record the copy kernel's launch per shape, send it, rebuild the result.

Why the same result object: a notebook tests and pictures a :class:`~gemmlab.checking.copy_check.CopyResult`
(its rows, its who maps) whether it came from a local GPU or the pool; its ``device`` names the pool's GPU.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from gemmlab.results import CopyResult, CopyRow, CopyTiming
from ..errors import GemmlabError
from gemmlab.dtypes import dtype_name
from .errors import UnsendableCallError
from .gemm import Judging, device_text, error_for, judge_limits, judged_rows
from .recording import DslRecording, Recording, record_copy
from .requests import copy_bench_request, copy_requests

Shape2 = tuple[int, int]


def remote_copy_check(pool: Judging, fn: Callable[..., Any], shapes: Sequence[Shape2], dtype: Any,
                      transpose: bool = False, who: bool = False, timeout_s: float | None = None) -> CopyResult:
    """``check_copy`` of ``fn`` on the pool: one recording per distinct shape, one request per kernel."""
    rows: dict[Shape2, CopyRow] = {}
    recorded: list[Recording | DslRecording] = []
    for shape in dict.fromkeys(tuple(s) for s in shapes):
        try:
            recorded.append(record_copy(fn, shape, dtype, transpose, who))  # type: ignore[arg-type]
        except UnsendableCallError:
            raise
        except GemmlabError as exc:  # the function refused this shape itself, as it would on a local GPU
            rows[shape] = CopyRow(shape, False, 0, 0, True, True, f"{type(exc).__name__}: {exc}")  # type: ignore[arg-type]
    requests = copy_requests(recorded, dtype_name(dtype), transpose, who, judge_limits(timeout_s))
    ordered, seed, device = judged_rows(pool, requests, CopyResult.from_dict, rows, shapes)
    return CopyResult(ordered, dtype_name(dtype), transpose, seed, device, who)


def remote_copy_bench(pool: Judging, fn: Callable[..., Any], shape: Shape2, dtype: Any, transpose: bool = False,
                      timeout_s: float | None = None) -> CopyTiming:
    """``bench_copy`` of ``fn`` on the pool: its launch recorded for ``shape``, checked and timed on the pool's GPU."""
    recording = record_copy(fn, shape, dtype, transpose)
    reply = pool.judge(copy_bench_request(recording, dtype_name(dtype), transpose, judge_limits(timeout_s)))
    if reply.report.verdict != "passed" or reply.report.bench is None:
        raise error_for(reply)
    timing = CopyTiming.from_dict(reply.report.bench)
    return CopyTiming(timing.shape, timing.dtype, timing.transpose, timing.ms, timing.gbps, timing.low_gbps,
                      timing.high_gbps, timing.coverage, timing.batches, device_text(reply))


__all__ = ["remote_copy_bench", "remote_copy_check"]
