"""gemmlab: compile, run, check and time GEMM kernels from a notebook, and see their layouts.

Names are imported lazily so that ``import gemmlab`` stays fast and never pulls in
torch, the CuTe DSL or matplotlib before they are needed. The modules live in one folder a stage
(``compiling``, ``running``, ``checking``, ``timing``, ``judge``, ``remote``, ``profiling``, ``seeing``,
``notebook``; docs/DESIGN.md draws them); the paths they had before, which notebooks use, keep working
(:mod:`gemmlab.moved`).
"""
from __future__ import annotations

import importlib
from typing import Any

from gemmlab import moved, offload
from gemmlab.errors import (
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
from gemmlab.running.gpu import current_arch, has_gpu, require_gpu

moved.install()


def _environment_pool() -> Any:
    """The class's GPU pool for the work asked for now, if any: :mod:`gemmlab.remote` decides (imported on first
    use, so that a pool named only by ``GEMMLAB_POOL`` is found without anyone calling ``gemmlab.connect``)."""
    from gemmlab.remote import pool_for_work

    return pool_for_work()


offload.register("pool", _environment_pool)

__version__ = "0.1.0"

_LAZY = {
    "compile": ("gemmlab.compiling.compiler", "compile"),
    "compile_ahead": ("gemmlab.compiling.ahead", "compile_ahead"),
    "set_compile_limit": ("gemmlab.compiling.worker", "set_compile_limit"),
    "Kernel": ("gemmlab.running.kernel", "Kernel"),
    "check_gemm": ("gemmlab.checking.check", "check_gemm"),
    "check_copy": ("gemmlab.checking.copy_check", "check_copy"),
    "bench_copy": ("gemmlab.checking.copy_check", "bench_copy"),
    "bench_gemm": ("gemmlab.timing.bench", "bench_gemm"),
    "ceilings": ("gemmlab.timing.ceilings", "ceilings"),
    "roofline": ("gemmlab.timing.roofline", "roofline"),
    "doctor": ("gemmlab.notebook.doctor", "doctor"),
    "performance_bar": ("gemmlab.timing.perfbar", "performance_bar"),
    "run_isolated": ("gemmlab.running.isolate", "run_isolated"),
    "export_module": ("gemmlab.running.isolate", "export_module"),
    "connect": ("gemmlab.remote", "connect"),
    "disconnect": ("gemmlab.remote", "disconnect"),
    "profile": ("gemmlab.profiling.api", "profile"),
    "timeline": ("gemmlab.profiling.api", "timeline"),
}
#: Submodules reached as attributes: the stage packages, and the old paths notebooks use (gemmlab.moved).
_SUBMODULES = {"compiling", "running", "checking", "timing", "judge", "remote", "profiling", "seeing", "notebook",
               "layout", "dsl", "techniques", "banks", "draw", "widgets", "check", "copy_check", "bench",
               "roofline_math", "perfbar", "isolate", "integrity", "runtime"}

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
    from gemmlab.notebook.magic import register

    register(ipython)
