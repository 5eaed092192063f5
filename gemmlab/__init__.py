"""gemmlab: compile, run, check and time GEMM kernels from a notebook, and see their layouts.

Names are imported lazily so that ``import gemmlab`` stays fast and never pulls in
torch, the CuTe DSL or matplotlib before they are needed.
"""
from __future__ import annotations

import importlib
from typing import Any

from .errors import (
    CompileError,
    CompileTimeoutError,
    ContextLostError,
    GemmlabError,
    KernelError,
    KernelTimeoutError,
    LaunchError,
    NoGPUError,
    ToolchainError,
)
from .gpu import current_arch, has_gpu, require_gpu

__version__ = "0.1.0"

_LAZY = {
    "compile": ("gemmlab.compiler", "compile"),
    "compile_ahead": ("gemmlab.ahead", "compile_ahead"),
    "set_compile_limit": ("gemmlab.compilation.worker", "set_compile_limit"),
    "Kernel": ("gemmlab.kernel", "Kernel"),
    "check_gemm": ("gemmlab.check", "check_gemm"),
    "check_copy": ("gemmlab.copy_check", "check_copy"),
    "bench_copy": ("gemmlab.copy_check", "bench_copy"),
    "bench_gemm": ("gemmlab.bench", "bench_gemm"),
    "ceilings": ("gemmlab.ceilings", "ceilings"),
    "roofline": ("gemmlab.roofline", "roofline"),
    "doctor": ("gemmlab.doctor", "doctor"),
    "performance_bar": ("gemmlab.perfbar", "performance_bar"),
    "run_isolated": ("gemmlab.isolate", "run_isolated"),
    "export_module": ("gemmlab.isolate", "export_module"),
    "connect": ("gemmlab.remote", "connect"),
    "disconnect": ("gemmlab.remote", "disconnect"),
    "profile": ("gemmlab.profiling.api", "profile"),
    "timeline": ("gemmlab.profiling.api", "timeline"),
}
_SUBMODULES = {"layout", "banks", "draw", "widgets", "dsl", "check", "copy_check", "bench", "roofline_math", "perfbar", "isolate",
               "integrity", "timing", "runtime", "remote", "profiling", "techniques"}

__all__ = [
    "CompileError", "CompileTimeoutError", "ContextLostError", "GemmlabError", "KernelError", "KernelTimeoutError",
    "LaunchError", "NoGPUError", "ToolchainError", "current_arch", "has_gpu", "require_gpu",
    *_LAZY, *sorted(_SUBMODULES),
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"gemmlab.{name}")
    raise AttributeError(f"module 'gemmlab' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext gemmlab``: the %%kernel magic and short error display."""
    from .magic import register

    register(ipython)
