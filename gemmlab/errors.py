"""Errors a student can act on.

Every error gemmlab raises on purpose derives from :class:`GemmlabError`.
In IPython these are shown as one short message (see ``gemmlab.notebook.ipython``),
never as a traceback into gemmlab or the libraries under it.
"""
from __future__ import annotations


class GemmlabError(Exception):
    """Base class: the message says what went wrong and what to do."""


class ToolchainError(GemmlabError):
    """A piece of the compiler toolchain (NVRTC, headers, the CuTe DSL) is missing or broken."""


class CompileError(GemmlabError):
    """The kernel source did not compile; the message holds the diagnostics mapped to the user's lines."""

    def __init__(self, message: str, diagnostics: list | None = None, log: str = "") -> None:
        super().__init__(message)
        self.diagnostics = list(diagnostics or [])
        self.log = log


class NoGPUError(GemmlabError):
    """A call needs a CUDA GPU and none is usable here."""


class LaunchError(GemmlabError):
    """A kernel call was rejected before anything ran (bad arguments, grid, block or shared memory)."""


class KernelError(GemmlabError):
    """A kernel failed on the GPU after it was launched."""


class ContextLostError(KernelError):
    """The CUDA context is gone (e.g. illegal address): only restarting the Python kernel recovers."""


class KernelTimeoutError(KernelError):
    """A kernel did not finish in time (for example a deadlock on a barrier)."""


class CompileTimeoutError(CompileError):
    """A compile ran past its limit (``timeout=``, ``gemmlab.set_compile_limit`` or ``GEMMLAB_COMPILE_TIMEOUT``:
    compiler CPU seconds, with a wall-clock backstop) and was stopped. ``cpu_s``/``wall_s``: what it had used
    (None where unknown), so a runaway (CPU used up) can be told from a starved compile (the clock ran out)."""

    def __init__(self, message: str, limit_s: float = 0.0, cpu_s: float | None = None,
                 wall_s: float | None = None) -> None:
        super().__init__(message)
        self.limit_s, self.cpu_s, self.wall_s = limit_s, cpu_s, wall_s
