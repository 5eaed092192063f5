"""Errors a student can act on.

Every error gemmlab raises on purpose derives from :class:`GemmlabError`.
In IPython these are shown as one short message (see ``gemmlab.ipython``),
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
    """A compile ran past its time limit (``timeout=`` or ``GEMMLAB_COMPILE_TIMEOUT``) and was stopped."""

    def __init__(self, message: str, limit_s: float = 0.0) -> None:
        super().__init__(message)
        self.limit_s = limit_s
