"""The judge's backends and the one flow they share: compile, bind, check or time, report.

Why a backend: the flow (which errors become which verdict, what a report holds) is the same
with and without a GPU, so CPU tests exercise it with :class:`FakeBackend`, which follows the
same protocol and builds its results through the same result classes, and only
:class:`GpuBackend` touches NVRTC, CUDA and torch.

Every :class:`~gemmlab.errors.GemmlabError` becomes a report. A lost CUDA context or a kernel
that did not finish is reported as such; the process that saw it is then done (``__main__``
exits after writing the report, so the next request gets a fresh process and context).
"""
from __future__ import annotations

import dataclasses
import math
import os
import secrets
import signal
import time
from typing import Any, Protocol, Sequence

from gemmlab.results import SUITES, BenchResult, CheckResult, CopyResult, CopyRow, CopyTiming, Row
from gemmlab.checking.copy_check import MAP_TILE, copy_failure_message
from ..errors import CompileTimeoutError, ContextLostError, GemmlabError, KernelTimeoutError
from gemmlab.checking.integrity import BenchIntegrityError
from gemmlab.running import faults
from gemmlab.compiling.signature import Param
from . import binding
from .errors import JudgeError
from .profile_options import PROFILE_ACTIONS
from .protocol import JudgeReport, JudgeRequest
from .spec import DslSpec, KernelSpec


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


# --------------------------------------------------------------------------- the fake one for CPU tests


class FakeBackend:
    """Follows the judge's protocol without a GPU; what a kernel "does" is read from its name's ending.

    ``*_wrong``: wrong in the last column of tiles (the check fails with a heatmap; a timing fails
    its verification). ``*_hang``: a kernel timeout. ``*_oob``: an illegal address (context lost).
    ``*_crash``: the judge process dies. ``*_stall``: the judge never answers. ``*_flood``: the
    kernel writes to standard output (which must not reach the report). Anything else passes.
    The parameters come from the kernel's declaration (no compile), so binding is real.
    """

    DEVICE = "fake GPU (CPU tests)"

    def device(self) -> str:
        return self.DEVICE

    def prepare(self, request: JudgeRequest) -> Sequence[Param]:
        from gemmlab.compiling.job import find_declaration

        if isinstance(request.spec, DslSpec):
            return []                                   # its plans were checked when the spec was made
        return find_declaration(request.spec.source, request.spec.name).params

    def _run_kernel(self, spec: KernelSpec | DslSpec, shape: tuple[int, int, int]) -> None:
        spec.geometry(*shape)  # the launch geometry is evaluated as the real launcher would
        kind = spec.name.rsplit("_", 1)[-1]
        if kind == "hang":
            raise KernelTimeoutError(f"kernel '{spec.name}' did not finish within its time limit.")
        if kind == "oob":
            # The error a real lost context raises, without marking this process's context lost: there is none.
            raise ContextLostError(faults.lost_message(
                f"kernel '{spec.name}' failed: an illegal memory access (CUDA_ERROR_ILLEGAL_ADDRESS)"))
        if kind == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "stall":
            while True:
                time.sleep(60)
        if kind == "flood":
            os.write(1, b"{\"verdict\": \"passed\"}\n" * 1000)
            print("printf from the kernel", flush=True)

    def check(self, request: JudgeRequest) -> CheckResult:
        import numpy as np

        rows = []
        for shape in shapes_of(request):
            self._run_kernel(request.spec, shape)
            if request.spec.name.endswith("_wrong"):
                M, N, _ = shape
                tiles = np.zeros((math.ceil(M / 128), math.ceil(N / 128)), dtype=np.float32)
                tiles[:, -1] = 1.0
                rows.append(Row(shape, False, 0.5, (0, N - 1, 0.0, 1.0), int(M * min(N, 128)), True, True,
                                "elements wrong in the last column of tiles", 0, 0, tiles))
            else:
                rows.append(Row(shape, True, 1e-4, (0, 0, 1.0, 1.0), 0, True, True, "ok"))
        out = request.out_dtype or request.dtype
        return CheckResult(rows, request.spec.convention, request.dtype, out, request.tile or (128, 128),
                           secrets.randbits(62),
                           self.DEVICE)

    def copy(self, request: JudgeRequest) -> CopyResult:
        import numpy as np

        rows = []
        who = bool((request.copy or {}).get("who"))
        for M, N, K in shapes_of(request):
            self._run_kernel(request.spec, (M, N, K))
            owner = None
            if who:   # 256 threads, 8 × 32, each copying its share of every 32 × 64 tile
                r, c = np.meshgrid(np.arange(M), np.arange(N), indexing="ij")
                owner = ((r % 8) * 32 + c % 32).astype(np.int32)
            if request.spec.name.endswith("_wrong"):
                tiles = tuple((t, (N - 1) // MAP_TILE) for t in range(-(-M // MAP_TILE)))[:8]
                bad = M * min(N, MAP_TILE)
                rows.append(CopyRow((M, N), False, bad, 0, True, True,
                                    copy_failure_message((M, N), False, bad, 0, tiles, True, True), tiles, owner))
            else:
                rows.append(CopyRow((M, N), True, 0, 0, True, True, "ok", (), owner))
        return CopyResult(rows, request.dtype, bool((request.copy or {}).get("transpose")), secrets.randbits(62),
                          self.DEVICE, who)

    def copy_bench(self, request: JudgeRequest) -> CopyTiming:
        self._run_kernel(request.spec, request.shape)
        if request.spec.name.endswith("_wrong"):
            raise BenchIntegrityError(f"the copy is not timed: {request.spec.name} failed its checked call.")
        M, N, _ = request.shape
        ms = 1e-3 * M * N / 1e6 + 0.01
        gbps = 2 * M * N * (4 if request.dtype == "float32" else 2) / 1e9 / (ms / 1e3)
        return CopyTiming((M, N), request.dtype, bool((request.copy or {}).get("transpose")), ms, gbps, 0.95 * gbps,
                          1.05 * gbps, 0.96, 20, self.DEVICE)

    def _checked_once(self, request: JudgeRequest) -> Any:
        from .profiled_calls import check_request

        checking = check_request(request)
        return self.copy(checking) if request.is_copy else self.check(checking)

    def profile(self, request: JudgeRequest) -> tuple[Any, dict[str, Any] | None]:
        """A SYNTHETIC readout (gemmlab.profiling.synthetic) after the checked call; nothing is measured."""
        from ..profiling import synthetic
        from ..profiling.ncu import short_name
        from ..profiling.readout import Readout

        checked = self._checked_once(request)
        if not checked.passed:
            return checked, None
        readout = Readout.from_counters(synthetic.counters(request.shape, "copy" if request.is_copy else "gemm"),
                                        kernel=short_name(request.spec.name), what="copy" if request.is_copy else "gemm",
                                        shape=request.shape, dtype=request.dtype, device=self.DEVICE,
                                        ncu_version="2025.3.1", measured_on="2026-01-01", source="synthetic")
        return checked, {"readout": readout.to_dict(), "report_bytes": 4, "report": "TkNVUg=="}

    def trace(self, request: JudgeRequest) -> tuple[Any, dict[str, Any] | None]:
        """A SYNTHETIC timeline of a warp-specialised kernel after the checked call; nothing is measured."""
        from ..profiling import synthetic
        from ..profiling.timeline import Timeline, parse_buffer

        checked = self._checked_once(request)
        if not checked.passed:
            return checked, None
        options = request.profile
        capacity = options.capacity if options is not None else 512
        records, full, head = parse_buffer(synthetic.trace_buffer(capacity=capacity, ctas=2))
        timeline = Timeline(request.spec.name, "copy" if request.is_copy else "gemm", request.shape, request.dtype,
                            self.DEVICE, "2026-01-01", 132, head["warps_per_cta"], capacity, head["ctas"], records,
                            tuple(full), 0, dict(options.names) if options else {}, "synthetic")
        return checked, timeline.to_dict()

    def bench(self, request: JudgeRequest) -> BenchResult:
        self._run_kernel(request.spec, request.shape)
        if request.spec.name.endswith("_wrong"):
            raise BenchIntegrityError(f"{request.spec.name}: the verified call gave a wrong result.")
        M, N, K = request.shape
        tflops = 2.0 * M * N * K / 1e-3 / 1e12
        return BenchResult(request.shape, request.spec.convention, request.dtype, request.out_dtype or request.dtype,
                           1.0, tflops, 0.5, 2 * tflops, 0.5, self.DEVICE, 10, request.spec.name)


__all__ = ["Backend", "FakeBackend", "GpuBackend", "judge", "shapes_of"]
