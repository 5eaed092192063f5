"""``gemmlab.profile`` and ``gemmlab.timeline``: why is my kernel slow, asked where the kernel runs.

Both take the callables ``check_gemm`` and ``check_copy`` take (``fn(A, B, D)``, ``fn(A, B, C, alpha,
beta)`` or a copy's ``fn(src, dst)``; a 3-number shape is a GEMM, a 2-number one a copy) and run them
the way the class's pool does: the function is called here on stand-in tensors and its launch written
down (:mod:`gemmlab.remote.recording`), and the kernel judge runs that launch itself, checks it once
on fresh data, and then profiles it (Nsight Compute) or records its marks (the timeline). With a
GPU here the judge runs in a fresh local process; without one, on the pool after
``gemmlab.connect(...)``. With neither, ``recorded="name"`` shows the course's recording of the
solution instead, labelled with the GPU and the date it came from.
"""
from __future__ import annotations

import base64
import dataclasses
import re
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..errors import CompileError, CompileTimeoutError, GemmlabError, KernelError, KernelTimeoutError, LaunchError
from .errors import ProfilerError, TimelineError
from .readout import Readout
from .timeline import Timeline

#: Seconds a local judge may take: its compile, the checked calls, ncu's replays and the power burst.
LOCAL_TIMEOUT_S = 600.0
#: Where report files are kept when ``report_dir`` is not given (under the notebook's folder).
REPORT_DIR = "gemmlab-profiles"
#: The data files of the course's recordings: ``readout_<name>.json`` and ``timeline_<name>.json``.
DATA = Path(__file__).resolve().parents[1] / "data"
_SAME_ERRORS: dict[str, type[GemmlabError]] = {
    "CompileError": CompileError, "LaunchError": LaunchError, "ProfilerError": ProfilerError,
    "TimelineError": TimelineError, "CompileTimeoutError": CompileTimeoutError}


def _shape(shape: Any) -> tuple[tuple[int, int, int], bool]:
    """(M, N, K) and whether it is a copy (given as (M, N))."""
    try:
        values = tuple(int(v) for v in shape)
    except (TypeError, ValueError):
        values = ()
    if len(values) not in (2, 3) or min(values, default=0) <= 0:
        raise ProfilerError(f"shape is (M, N, K) for a GEMM or (M, N) for a copy, all positive, not {shape!r:.60}.")
    return (values[0], values[1], values[2] if len(values) == 3 else 1), len(values) == 2


def _dtypes(dtype: Any, out_dtype: Any) -> tuple[str, str | None]:
    from gemmlab.dtypes import dtype_name

    import torch

    name = dtype_name(torch.float16 if dtype is None else dtype)
    return name, None if out_dtype is None else dtype_name(out_dtype)


@dataclasses.dataclass(frozen=True)
class _Call:
    """One call of the student's function as the judge will make it: the function, the problem and its operands."""

    fn: Callable[..., Any]
    problem: tuple[int, int, int]
    copy: bool
    convention: str
    dtype: Any
    out_dtype: Any
    alpha: float
    beta: float
    transpose: bool

    @classmethod
    def of(cls, fn: Callable[..., Any], shape: Any, convention: str, dtype: Any, out_dtype: Any, alpha: float,
           beta: float, transpose: bool) -> "_Call":
        problem, copy = _shape(shape)
        if convention not in ("tn", "nn"):
            raise ProfilerError(f"convention is 'tn' or 'nn', as for check_gemm, not {convention!r}.")
        return cls(fn, problem, copy, convention, dtype, out_dtype, float(alpha), float(beta), bool(transpose))

    def recording(self, traced: bool) -> Any:
        """The function's launch written down (the DSL compiling with the timeline's marks when ``traced``)."""
        import contextlib

        import torch

        from ..remote.recording import record, record_copy
        from .switch import tracing

        dt = torch.float16 if self.dtype is None else self.dtype
        with tracing() if traced else contextlib.nullcontext():
            if self.copy:
                return record_copy(self.fn, self.problem[:2], dt, self.transpose)
            return record(self.fn, self.problem, self.convention, dt, dt if self.out_dtype is None else self.out_dtype,
                          self.alpha, self.beta)

    def request(self, action: str, options: Any, timeout_s: float | None) -> Any:
        """The judge request of ``action`` for this call (recorded here, with the marks for a trace)."""
        from ..judge.errors import JudgeError
        from ..judge.protocol import JudgeRequest
        from ..remote.errors import UnsendableCallError
        from ..remote.gemm import judge_limits
        from ..remote.recording import DslRecording
        from ..remote.requests import dsl_spec_for, spec_for

        recording = self.recording(traced=action == "trace")
        dt, out = _dtypes(self.dtype, self.out_dtype)
        conv = "tn" if self.copy else self.convention
        spec = dsl_spec_for([recording], conv) if isinstance(recording, DslRecording) else \
            spec_for(recording.kernel, [recording], conv)
        try:
            if self.copy:
                return JudgeRequest(spec, action, dt, None, shape=self.problem, limits=judge_limits(timeout_s),
                                    copy={"transpose": self.transpose, "who": False}, profile=options)
            return JudgeRequest(spec, action, dt, out, shape=self.problem, limits=judge_limits(timeout_s),
                                alpha=self.alpha, beta=self.beta, profile=options)
        except JudgeError as exc:
            raise UnsendableCallError(f"this call cannot be profiled: {exc}") from None

    def judged(self, action: str, options: Any, timeout_s: float | None) -> tuple[dict[str, Any], str, bool]:
        """(the profile or timeline data the judge answered, where it ran, whether on the pool); the error of a
        report without one."""
        report, where, on_pool = _judged(self.request(action, options, timeout_s))
        if report.verdict != "passed" or not report.profile:
            _raise_for(report, where)
        return report.profile, where, on_pool


def _judged(request: Any) -> tuple[Any, str, bool]:
    """(the judge's report, where it ran, whether that was the pool): the local GPU first, else the pool."""
    from gemmlab.running.gpu import has_gpu
    from ..judge.client import judge
    from ..remote import pool_for_work

    if has_gpu():
        return judge(request, LOCAL_TIMEOUT_S, "gpu"), "this machine's GPU", False
    pool = pool_for_work()
    if pool is None:
        raise ProfilerError("no GPU here and no class pool connected")   # the caller says what to do
    from ..remote.gemm import device_text

    reply = pool.judge(request)
    return reply.report, device_text(reply), True


def _raise_for(report: Any, where: str) -> None:
    """The error of a report that carries no profile: a wrong kernel, a refusal, a fault, a timeout."""
    if report.verdict == "failed" and report.check is not None:
        from gemmlab.results import CheckResult, CopyResult

        try:
            result = (CheckResult if "convention" in report.check else CopyResult).from_dict(report.check)
            detail = str(result)
        except (GemmlabError, KeyError, TypeError, ValueError):
            detail = "(its check could not be read)"
        raise ProfilerError(f"your kernel failed its checked call on {where}, so it was not profiled: a wrong kernel's "
                            f"counters mean nothing. Fix it first:\n{detail}")
    text = report.error or "(no message)"
    kind = _SAME_ERRORS.get(report.error_type)
    if kind is CompileTimeoutError:
        raise CompileTimeoutError(f"on {where}: {text}", 0.0)
    if kind is not None:
        raise kind(f"on {where}: {text}")
    if report.verdict == "timeout":
        raise KernelTimeoutError(f"on {where}: {text}")
    if report.verdict in ("context_lost", "crashed"):
        raise KernelError(f"your kernel failed in the judge's own process on {where} (this notebook is unharmed): "
                          f"{text}")
    raise ProfilerError(f"on {where}: the judge answered {report.verdict}: {text}")


def _no_gpu(recorded: str | None, kind: str) -> Any:
    """Without a GPU or a pool: the course's recording when one was named, else what to do."""
    from gemmlab.checking.integrity import grading_mode

    why = "the grader runs no profiles" if grading_mode() else "No GPU here and no class pool connected"
    if recorded is not None:
        found = recorded_readout(recorded) if kind == "readout" else recorded_timeline(recorded)
        print(f"{why}: showing the recorded {kind} of '{recorded}' ({found.label}).")
        return found
    if grading_mode():
        raise ProfilerError(f"{why}: a {kind} is for exploring, not grading; pass recorded='<name>' to show the "
                            "course's recording there.")
    raise ProfilerError(f"a {kind} needs a GPU: there is none here and no class pool is connected. Connect to the "
                        "pool with gemmlab.connect(url, token), or pass recorded='<name>' to see the course's "
                        f"recording ({', '.join(recorded_names(kind)) or 'none shipped'}).")


def _keep_report(data: dict[str, Any], readout: Readout, report_dir: str | Path | None) -> Readout:
    """Write the report file that came back (if it did) and name it in the readout."""
    raw = data.get("report")
    if not isinstance(raw, str):
        return readout
    folder = Path(REPORT_DIR if report_dir is None else report_dir)
    folder.mkdir(parents=True, exist_ok=True)
    M, N, K = readout.shape
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{readout.kernel}-{M}x{N}x{K}-{readout.dtype}")[:80]
    path = folder / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}.ncu-rep"
    path.write_bytes(base64.b64decode(raw))
    return dataclasses.replace(readout, report_file=str(path))


def profile(fn: Callable[..., Any], shape: Sequence[int] = (4096, 4096, 4096), *, convention: str = "tn",
            dtype: Any = None, out_dtype: Any = None, alpha: float = 1.0, beta: float = 0.0, transpose: bool = False,
            predicted: Mapping[str, Any] | None = None, report_dir: str | Path | None = None,
            timeout_s: float | None = None, recorded: str | None = None) -> Readout:
    """Nsight Compute's curated readout of ``fn``'s kernel on one problem, after one checked call.

    ``shape``: (M, N, K) for a GEMM function (``convention`` "tn" or "nn", as check_gemm), (M, N) for a copy
    function ``fn(src, dst)`` (``transpose``: dst = srcᵀ). ``predicted``: the bank model's prediction per
    instruction kind, e.g. ``{"ld": gemmlab.seeing.banks.analyze(addresses, "ldmatrix.x4")}``, shown beside the
    measured wavefronts. The full report file is written to ``report_dir`` (default ``gemmlab-profiles/``) and
    named in the readout. ``recorded``: without a GPU or pool, the course's recorded readout of that name.
    """
    call = _Call.of(fn, shape, convention, dtype, out_dtype, alpha, beta, transpose)
    if not _can_run():
        readout = _no_gpu(recorded, "readout")
    else:
        data, where, on_pool = call.judged("profile", None, timeout_s)
        readout = Readout.from_dict(data["readout"])
        if on_pool:
            readout = dataclasses.replace(readout, device=where)
        readout = _keep_report(data, readout, report_dir)
    for kind, model in (predicted or {}).items():
        readout = readout.with_prediction(kind, model)
    return readout


def timeline(fn: Callable[..., Any], shape: Sequence[int] = (4096, 4096, 4096), *, convention: str = "tn",
             dtype: Any = None, out_dtype: Any = None, alpha: float = 1.0, beta: float = 0.0, transpose: bool = False,
             capacity: int = 512, ctas: int | None = None, names: Mapping[int, str] | None = None,
             timeout_s: float | None = None, recorded: str | None = None) -> Timeline:
    """The in-kernel timeline of one launch of ``fn``'s kernel: every traced warp's marks, after one checked call.

    The kernel marks its states (C++: ``#include <gemmlab_trace.h>``, ``GEMMLAB_TRACE_BEGIN()``,
    ``GEMMLAB_TRACE(WAIT_LOAD)`` ...; DSL: ``tracer = marks.begin()``, ``tracer.mark(marks.MMA)`` ...; see
    :mod:`gemmlab.profiling.marks`). The marks are compiled in only for this call: checks and timings run
    without them. ``capacity``: records per warp (a warp's later marks are dropped and said so); ``ctas``: how
    many CTAs from the first to trace (default all the buffer holds); ``names``: your own states' names by id
    (32 to 127). ``shape``, ``convention``, ``transpose`` and ``recorded`` as for :func:`profile`.
    """
    from ..judge.errors import JudgeError
    from ..judge.profile_options import ProfileOptions
    from .timeline import state_names

    call = _Call.of(fn, shape, convention, dtype, out_dtype, alpha, beta, transpose)
    try:
        options = ProfileOptions(capacity, ctas, state_names(names))
    except JudgeError as exc:
        raise TimelineError(str(exc)) from None
    if not _can_run():
        return _no_gpu(recorded, "timeline")
    data, where, on_pool = call.judged("trace", options, timeout_s)
    found = Timeline.from_dict(data)
    return dataclasses.replace(found, device=where) if on_pool else found


def _can_run() -> bool:
    """Whether a profile runs here or on the pool: never in the course's grader, whose time is for grading
    (a recording is shown there instead)."""
    from gemmlab.running.gpu import has_gpu
    from gemmlab.checking.integrity import grading_mode
    from ..remote import pool_for_work

    return not grading_mode() and (has_gpu() or pool_for_work() is not None)


# --------------------------------------------------------------------------- the course's recordings


def recorded_names(kind: str = "readout") -> list[str]:
    """The names of the recordings shipped with gemmlab (``kind``: "readout" or "timeline")."""
    return sorted(p.stem[len(kind) + 1:] for p in DATA.glob(f"{kind}_*.json"))


def _load(kind: str, name: str) -> dict[str, Any]:
    import json

    if not re.fullmatch(r"[A-Za-z0-9_]+", str(name)):
        raise ProfilerError(f"a recording's name is letters, digits and _, not {name!r:.40}.")
    path = DATA / f"{kind}_{name}.json"
    if not path.exists():
        raise ProfilerError(f"no recorded {kind} named {name!r}; recorded: {', '.join(recorded_names(kind)) or 'none'}.")
    data = json.loads(path.read_text())
    if data.get("source") == "measured":
        data["source"] = "recorded"
    return data


def recorded_readout(name: str) -> Readout:
    """The course's recorded readout ``name`` (e.g. '06_pipelined'), labelled with its GPU and date."""
    return Readout.from_dict(_load("readout", name))


def recorded_timeline(name: str) -> Timeline:
    """The course's recorded timeline ``name`` (e.g. '07_hopper_ws'), labelled with its GPU and date."""
    return Timeline.from_dict(_load("timeline", name))


def roles(**groups: Iterable[int]) -> dict[str, list[int]]:
    """Warp roles for a timeline's picture: ``roles(producer=[0], consumers=range(4, 12))``."""
    return {name.replace("_", " "): list(warps) for name, warps in groups.items()}


__all__ = ["DATA", "LOCAL_TIMEOUT_S", "REPORT_DIR", "profile", "recorded_names", "recorded_readout",
           "recorded_timeline", "roles", "timeline"]
