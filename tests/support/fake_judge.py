"""A judge without a GPU, for tests and demos: the judge's flow with a backend whose kernels do what their names say.

Why here, in the tests' support: it passes every kernel not named ``*_wrong`` (and fails in the other named
ways below), so it must never be what a production judge runs; ``python -m gemmlab.judge`` knows only the GPU
backend. Tests use :class:`FakeBackend` in process (``gemmlab.judge.backend.judge(request, FakeBackend())``),
or as a judge process: this file is a script (:func:`main` is ``gemmlab.judge.__main__.serve`` with this
backend), and :func:`fake_judge_command` is the command line that runs it by its text (``python -c``), so it
runs inside the grading sandbox too, where nothing of the repository but gemmlab is visible. Tests hand that
command to ``gemmlab.judge.client.judge`` and to the pool's executors, which otherwise run the GPU judge.
"""
from __future__ import annotations

import math
import os
import secrets
import signal
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from gemmlab.checking.copy_check import MAP_TILE, copy_failure_message
from gemmlab.checking.integrity import BenchIntegrityError
from gemmlab.compiling.signature import Param
from gemmlab.errors import ContextLostError, KernelTimeoutError
from gemmlab.judge.backend import shapes_of
from gemmlab.judge.protocol import JudgeRequest
from gemmlab.judge.spec import DslSpec, KernelSpec
from gemmlab.results import BenchResult, CheckResult, CopyResult, CopyRow, CopyTiming, Row
from gemmlab.running import faults


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
        from gemmlab.judge.profiled_calls import check_request

        checking = check_request(request)
        return self.copy(checking) if request.is_copy else self.check(checking)

    def profile(self, request: JudgeRequest) -> tuple[Any, dict[str, Any] | None]:
        """A SYNTHETIC readout (gemmlab.profiling.synthetic) after the checked call; nothing is measured."""
        from gemmlab.profiling import synthetic
        from gemmlab.profiling.ncu import short_name
        from gemmlab.profiling.readout import Readout

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
        from gemmlab.profiling import synthetic
        from gemmlab.profiling.timeline import Timeline, parse_buffer

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


def fake_judge_command(compile_memory_mb: int = 16384, python: str = sys.executable) -> list[str]:
    """The command line of one fake judge process: this file run by its text, with the GPU judge's options."""
    return [python, "-s", "-P", "-c", Path(__file__).read_text(), "--compile-memory-mb", str(int(compile_memory_mb))]


def main(argv: Sequence[str] | None = None) -> int:
    """One request on stdin, one report on stdout, as ``python -m gemmlab.judge`` answers, with this backend."""
    from gemmlab.judge.__main__ import serve

    return serve(FakeBackend(), argv)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
