"""The judge's backends and the one flow they share: compile, bind, check or time, report.

Why a backend: the flow (which errors become which verdict, what a report holds) is the same
with and without a GPU, so CPU tests exercise it with a test double of the tests' own
(``tests/support/fake_judge.py``), which follows the same protocol and builds its results through
the same result classes, and only :class:`GpuBackend` touches NVRTC, CUDA and torch.

Every :class:`~gemmlab.errors.GemmlabError` becomes a report. A lost CUDA context or a kernel
that did not finish is reported as such; the process that saw it is then done (``__main__``
exits after writing the report, so the next request gets a fresh process and context).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Protocol, Sequence

from gemmlab.results import SUITES, BenchResult, CheckResult, CopyResult, CopyTiming
from ..errors import CompileTimeoutError, ContextLostError, GemmlabError, KernelTimeoutError
from gemmlab.checking.integrity import BenchIntegrityError
from gemmlab.compiling.signature import Param
from . import binding
from .errors import JudgeError
from .profile_options import PROFILE_ACTIONS
from .protocol import JudgeReport, JudgeRequest
from .spec import DslSpec


class Backend(Protocol):
    """Compiles a spec, then checks or times the kernel it made; raises GemmlabErrors for the flow to report."""

    def prepare(self, request: JudgeRequest) -> Sequence[Param]:
        """Compile (or pretend to) and return the kernel's parameters."""

    def check(self, request: JudgeRequest) -> CheckResult: ...

    def bench(self, request: JudgeRequest) -> BenchResult: ...

    def copy(self, request: JudgeRequest) -> CopyResult: ...

    def copy_bench(self, request: JudgeRequest) -> CopyTiming: ...

    def profile(self, request: JudgeRequest) -> tuple[Any, dict[str, Any] | None]:
        """The checked call's result and the Nsight Compute readout (None when the kernel was wrong)."""

    def trace(self, request: JudgeRequest) -> tuple[Any, dict[str, Any] | None]:
        """The checked call's result and the in-kernel timeline (None when the kernel was wrong)."""

    def device(self) -> str: ...


def shapes_of(request: JudgeRequest) -> list[tuple[int, int, int]]:
    """The shapes a check runs: the request's list, or its suite's."""
    return list(SUITES[request.shapes]) if isinstance(request.shapes, str) else list(request.shapes)


def _error_report(request: JudgeRequest, verdict: str, exc: BaseException, device: str) -> JudgeReport:
    return JudgeReport(verdict, request.action, error=str(exc), error_type=type(exc).__name__, device=device)


def judge(request: JudgeRequest, backend: Backend) -> JudgeReport:
    """Run one request on ``backend`` and say how it went; never raises a GemmlabError."""
    device = ""
    try:
        device = backend.device()
        params = backend.prepare(request)
        if not isinstance(request.spec, DslSpec):     # a recorded DSL plan binds nothing by name or position
            binding.check_launches(params, request.spec.convention, request.spec.name, request.spec.launches)
        if request.action in ("check", "copy"):
            result = backend.check(request) if request.action == "check" else backend.copy(request)
            return JudgeReport("passed" if result.passed else "failed", request.action, check=result.to_dict(),
                               device=device)
        if request.action in PROFILE_ACTIONS:   # a checked call first: a wrong kernel gets its check, no profile
            checked, data = backend.profile(request) if request.action == "profile" else backend.trace(request)
            return JudgeReport("passed" if checked.passed and data is not None else "failed", request.action,
                               check=checked.to_dict(), device=device, profile=data)
        timed = backend.bench(request) if request.action == "bench" else backend.copy_bench(request)
        return JudgeReport("passed", request.action, bench=timed.to_dict(), device=device)
    except ContextLostError as exc:
        return _error_report(request, "context_lost", exc, device)
    except (KernelTimeoutError, CompileTimeoutError) as exc:
        return _error_report(request, "timeout", exc, device)
    except JudgeError as exc:  # the kernel's parameters or launch are outside what the judge understands
        return _error_report(request, "refused", exc, device)
    except BenchIntegrityError as exc:
        return _error_report(request, "failed", exc, device)
    except GemmlabError as exc:
        return _error_report(request, "error", exc, device)


# --------------------------------------------------------------------------- the real one


class GpuBackend:
    """Compiles with a time and memory limit, loads the cubin, and runs gemmlab's checks on a launcher it builds."""

    def __init__(self, compile_memory_bytes: int | None = 16 << 30) -> None:
        self.compile_memory_bytes = compile_memory_bytes
        self._launcher: Any = None

    def device(self) -> str:
        from gemmlab.running.gpu import device_name, require_gpu

        require_gpu("The kernel judge")
        return device_name()

    def prepare(self, request: JudgeRequest) -> Sequence[Param]:
        from gemmlab.compiling.job import check_arch
        from .compiling import compile_limited
        from .launcher import TrustedLauncher

        spec = request.spec
        if isinstance(spec, DslSpec):
            from .dsl_replay import ReplayLauncher

            self._launcher = ReplayLauncher(spec.launch_for, spec.convention)
            return []
        if request.action == "trace":    # the timeline's marks are compiled in only for a trace
            from ..profiling.trace_format import CPP_SWITCH

            spec = dataclasses.replace(spec, options=(*spec.options, f"-D{CPP_SWITCH}=1"))
        compiled = compile_limited(spec, check_arch(spec.arch), request.limits.compile_s, self.compile_memory_bytes)
        self._launcher = TrustedLauncher(compiled, spec)
        return compiled.params

    def adopt(self, launcher: Any) -> None:
        """Use ``launcher`` (built by the profiler's child process from the judge's own compile) for what follows."""
        self._launcher = launcher

    def profile(self, request: JudgeRequest) -> tuple[Any, dict[str, Any] | None]:
        from .ncu_run import profile_in_child

        return profile_in_child(request, self._launcher)

    def trace(self, request: JudgeRequest) -> tuple[Any, dict[str, Any] | None]:
        from .tracing import trace_launch

        return trace_launch(request, self, self._launcher.modules)

    def _dtypes(self, request: JudgeRequest) -> tuple[Any, Any]:
        import torch

        dtype = getattr(torch, request.dtype)
        return dtype, getattr(torch, request.out_dtype) if request.out_dtype else dtype

    def check(self, request: JudgeRequest) -> CheckResult:
        from gemmlab.checking.check import check_gemm

        dtype, out_dtype = self._dtypes(request)
        alpha = 1.0 if request.alpha is None else request.alpha
        return check_gemm(self._launcher, request.spec.convention, dtype, out_dtype, shapes_of(request), alpha,
                          request.beta, request.tile or (128, 128), timeout_s=request.limits.kernel_s,
                          forbid_library=True, pad=request.pad or 0, offset=request.offset or 0)

    def copy(self, request: JudgeRequest) -> CopyResult:
        import torch

        from gemmlab.checking.copy_check import check_copy
        from .copying import CopyLauncher

        options = request.copy or {}
        return check_copy(CopyLauncher(self._launcher, bool(options.get("who"))), [s[:2] for s in shapes_of(request)],
                          getattr(torch, request.dtype), transpose=bool(options.get("transpose")),
                          who=bool(options.get("who")), timeout_s=request.limits.kernel_s)

    def copy_bench(self, request: JudgeRequest) -> CopyTiming:
        import torch

        from gemmlab.checking.copy_check import bench_copy
        from .copying import CopyLauncher

        return bench_copy(CopyLauncher(self._launcher, False), request.shape[:2], getattr(torch, request.dtype),
                          transpose=bool((request.copy or {}).get("transpose")), timeout_s=request.limits.kernel_s)

    def bench(self, request: JudgeRequest) -> BenchResult:
        from gemmlab.timing.bench import bench_gemm

        dtype, out_dtype = self._dtypes(request)
        alpha = 1.0 if request.alpha is None else request.alpha
        beta = 0.0 if request.beta is None else request.beta
        return bench_gemm(self._launcher, request.shape, request.spec.convention, dtype, out_dtype, alpha=alpha,
                          beta=beta, label=request.spec.name, timeout_s=request.limits.kernel_s, verify=True)


__all__ = ["Backend", "GpuBackend", "judge", "shapes_of"]
