"""The ``trace`` action: one launch of the kernel with its timeline's marks recorded into a buffer the judge owns.

How: the kernel was compiled with its marks on (C++: ``GEMMLAB_TRACE_ON``; a DSL plan was recorded
inside :func:`gemmlab.profiling.switch.tracing`). After a checked call with the marks writing nothing
(the module's ``gemmlab_trace_buffer`` is 0), the judge allocates the buffer, writes its header,
writes its address into every loaded module's ``gemmlab_trace_buffer``, and runs a second checked
call on fresh data: that one launch's marks are the timeline. A kernel that is wrong either time
gets the check's verdict and no timeline.
"""
from __future__ import annotations

import math
import time
from typing import Any

from ..profiling.errors import TimelineError
from ..profiling.timeline import Timeline, buffer_bytes, header, parse_buffer
from ..profiling.trace_format import BUFFER_SYMBOL
from .profile_options import MAX_BUFFER_RECORDS
from .profiled_calls import launched_kernels, run_check
from .protocol import JudgeRequest


class TraceBuffer:
    """The GPU buffer of one traced launch, and the module globals pointing at it."""

    def __init__(self, capacity: int, ctas: int, warps_per_cta: int) -> None:
        import torch

        self.capacity, self.ctas, self.warps_per_cta = capacity, ctas, warps_per_cta
        self.nbytes = buffer_bytes(capacity, ctas, warps_per_cta)
        self.tensor = torch.zeros(self.nbytes, dtype=torch.uint8, device="cuda")
        self._globals: list[Any] = []

    def reset(self) -> None:
        """Zero every record and write the header (before the traced launch)."""
        import torch

        head = header(self.capacity, self.ctas, self.warps_per_cta)
        self.tensor.zero_()
        self.tensor[: len(head)].copy_(torch.frombuffer(bytearray(head), dtype=torch.uint8))

    def attach(self, modules: list[Any]) -> None:
        """Write the buffer's address into ``gemmlab_trace_buffer`` of every module that has one."""
        self._write(modules, self.tensor.data_ptr())
        if not self._globals:
            raise TimelineError(
                "the kernel has no timeline marks (no gemmlab_trace_buffer in its module): add GEMMLAB_TRACE_BEGIN() "
                "and GEMMLAB_TRACE(state) marks to a C++ kernel (#include <gemmlab_trace.h>), or "
                "tracer = marks.begin() and tracer.mark(marks.MMA) ... to a DSL kernel (from gemmlab.profiling "
                "import marks).")

    def detach(self) -> None:
        """Point the modules at no buffer again (their marks record nothing)."""
        for address in self._globals:
            self._store(address, 0)

    def _write(self, modules: list[Any], value: int) -> None:
        from gemmlab.running.device import driver

        d = driver()
        for module in modules:
            result, address, size = d.cuModuleGetGlobal(module, BUFFER_SYMBOL.encode())
            if int(result) != 0:
                continue                                  # this module has no marks
            if int(size) != 8:
                raise TimelineError(f"the kernel's {BUFFER_SYMBOL} has {int(size)} bytes, not 8: do not declare it "
                                    "yourself; #include <gemmlab_trace.h> declares it.")
            self._store(address, value)
            self._globals.append(address)

    @staticmethod
    def _store(address: Any, value: int) -> None:
        import ctypes

        from gemmlab.running.device import checked, driver

        word = ctypes.c_uint64(value)
        checked(driver().cuMemcpyHtoD(address, ctypes.addressof(word), 8), "writing the timeline buffer's address")

    def read(self) -> bytes:
        import torch

        torch.cuda.synchronize()
        return self.tensor.cpu().numpy().tobytes()


def geometry(request: JudgeRequest) -> tuple[int, int]:
    """(CTAs in the launch, warps per CTA) of the request's one shape; one launch per call, or a TimelineError."""
    kernels = launched_kernels(request)
    if len(kernels) != 1:
        raise TimelineError(f"a timeline shows one launch, and this call launches {len(kernels)} kernels "
                            f"({', '.join(k[:40] for k in kernels[:4])}): trace a function that launches one.")
    grid, block, _ = request.spec.geometry(*request.shape)
    return math.prod(grid), -(-math.prod(block) // 32)


def traced_ctas(grid_ctas: int, warps_per_cta: int, capacity: int, asked: int | None) -> int:
    """How many CTAs (from the first) to trace: those asked for (default all), as many as the buffer may hold."""
    fit = max(1, MAX_BUFFER_RECORDS // max(1, warps_per_cta * capacity))
    return max(1, min(grid_ctas, asked or grid_ctas, fit))


def trace_launch(request: JudgeRequest, backend: Any, modules: Any) -> tuple[Any, dict | None]:
    """The ``trace`` action on a prepared backend: (the check's result, the timeline as plain data or None when the
    kernel was wrong). ``modules()`` gives the CUDA modules the backend's launcher loaded."""
    options = request.profile
    assert options is not None
    grid_ctas, warps = geometry(request)
    ctas = traced_ctas(grid_ctas, warps, options.capacity, options.ctas)
    first = run_check(backend, request)               # marks on, buffer address 0: they record nothing
    if not first.passed:
        return first, None
    buffer = TraceBuffer(options.capacity, ctas, warps)
    buffer.reset()
    buffer.attach(modules())
    try:
        second = run_check(backend, request)          # this call's one launch is the timeline
        raw = buffer.read()
    finally:
        buffer.detach()
    if not second.passed:
        return second, None
    records, full, _ = parse_buffer(raw)
    from gemmlab.running.gpu import device_name

    timeline = Timeline(request.spec.name, "copy" if request.is_copy else "gemm", tuple(request.shape),  # type: ignore[arg-type]
                        request.dtype, device_name(), time.strftime("%Y-%m-%d", time.gmtime()), grid_ctas, warps,
                        options.capacity, ctas, records, tuple(full), 0, dict(options.names))
    return second, timeline.kept().to_dict()

__all__ = ["TraceBuffer", "geometry", "trace_launch", "traced_ctas"]
