"""Recorded launches turned into the judge's requests: one request per kernel, its launches per shape.

Why per kernel: a launcher may pick a different compile per shape (notebook 05 picks the vector
width from the shape), and a request names one kernel. Shapes whose recordings share a kernel
go together, at most :data:`~gemmlab.judge.protocol.MAX_SHAPES` to a request.
"""
from __future__ import annotations

from typing import Sequence

from ..judge.errors import JudgeError
from ..judge.protocol import MAX_SHAPES, JudgeLimits, JudgeRequest
from ..judge.spec import DslSpec, KernelSpec
from .errors import UnsendableCallError
from .recording import DslRecording, KernelSource, Recording


def spec_for(kernel: KernelSource, recordings: Sequence[Recording], convention: str) -> KernelSpec:
    """The kernel spec of ``kernel`` with the launches of ``recordings``; an UnsendableCallError says what cannot
    be sent."""
    try:
        return KernelSpec(kernel.source, kernel.name, convention, options=kernel.options, arch=kernel.arch,
                          launches=tuple(r.launch for r in recordings))
    except JudgeError as exc:
        raise UnsendableCallError(f"kernel '{kernel.name}' cannot be sent to the pool: {exc}") from None


def dsl_spec_for(recordings: Sequence[DslRecording], convention: str) -> DslSpec:
    """The spec carrying the plans of ``recordings``; an UnsendableCallError says what cannot be sent."""
    try:
        return DslSpec(convention, tuple((r.shape, r.plan) for r in recordings))
    except JudgeError as exc:
        raise UnsendableCallError(f"this CuTe DSL kernel cannot be sent to the pool: {exc}") from None


def by_kernel(recordings: Sequence[Recording | DslRecording]) -> list[list[Recording | DslRecording]]:
    """Recordings grouped by kernel (in order of first appearance; every DSL recording in one group, as its
    plans name their own kernels), each group cut to at most MAX_SHAPES."""
    groups: dict[KernelSource | None, list[Recording | DslRecording]] = {}
    for recording in recordings:
        groups.setdefault(getattr(recording, "kernel", None), []).append(recording)
    return [group[i: i + MAX_SHAPES] for group in groups.values() for i in range(0, len(group), MAX_SHAPES)]


def _spec(group: Sequence[Recording | DslRecording], convention: str) -> KernelSpec | DslSpec:
    if isinstance(group[0], DslRecording):
        return dsl_spec_for(group, convention)  # type: ignore[arg-type]
    return spec_for(group[0].kernel, group, convention)  # type: ignore[arg-type]


def _shape(recording: Recording | DslRecording) -> tuple[int, int, int]:
    return recording.shape if isinstance(recording, DslRecording) else recording.launch.shape


def check_requests(recordings: Sequence[Recording | DslRecording], convention: str, dtype: str, out_dtype: str,
                   alpha: float, beta: float, tile: tuple[int, int], limits: JudgeLimits,
                   pad: int = 0, offset: int = 0) -> list[JudgeRequest]:
    """The check requests that together run every recorded shape (recorded on rows padded by ``pad``, operands
    starting ``offset`` elements past alignment)."""
    return [_request(_spec(group, convention), "check", dtype, out_dtype, limits, alpha, beta, tile,
                     shapes=[_shape(r) for r in group], **({"pad": pad} if pad else {}),
                     **({"offset": offset} if offset else {}))
            for group in by_kernel(recordings)]


def bench_request(recording: Recording | DslRecording, convention: str, dtype: str, out_dtype: str, alpha: float,
                  beta: float, limits: JudgeLimits) -> JudgeRequest:
    """The timing request of one recorded shape."""
    return _request(_spec([recording], convention), "bench", dtype, out_dtype, limits, alpha, beta, None,
                    shape=_shape(recording))


def copy_requests(recordings: Sequence[Recording | DslRecording], dtype: str, transpose: bool, who: bool,
                  limits: JudgeLimits) -> list[JudgeRequest]:
    """The copy-check requests that together run every recorded (M, N, 1) shape."""
    requests = []
    for group in by_kernel(recordings):
        try:
            requests.append(JudgeRequest(_spec(group, "tn"), "copy", dtype, None, shapes=[_shape(r) for r in group],
                                         limits=limits, copy={"transpose": transpose, "who": who}))
        except JudgeError as exc:
            raise UnsendableCallError(f"this call cannot be sent to the pool: {exc}") from None
    return requests


def copy_bench_request(recording: Recording | DslRecording, dtype: str, transpose: bool,
                       limits: JudgeLimits) -> JudgeRequest:
    """The timing request of one recorded copy."""
    try:
        return JudgeRequest(_spec([recording], "tn"), "copy_bench", dtype, None, shape=_shape(recording), limits=limits,
                            copy={"transpose": transpose, "who": False})
    except JudgeError as exc:
        raise UnsendableCallError(f"this call cannot be sent to the pool: {exc}") from None


def _request(spec: KernelSpec | DslSpec, action: str, dtype: str, out_dtype: str, limits: JudgeLimits, alpha: float,
             beta: float, tile: tuple[int, int] | None, **shapes: object) -> JudgeRequest:
    try:
        return JudgeRequest(spec, action, dtype, out_dtype, limits=limits, alpha=alpha, beta=beta, tile=tile,
                            **shapes)  # type: ignore[arg-type]
    except JudgeError as exc:
        raise UnsendableCallError(f"this call cannot be sent to the pool: {exc}") from None


__all__ = ["bench_request", "by_kernel", "check_requests", "copy_bench_request", "copy_requests", "dsl_spec_for", "spec_for"]
