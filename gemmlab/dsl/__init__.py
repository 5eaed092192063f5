"""CuTe DSL front-end: compile a student's ``@cute.jit`` function, run it on torch tensors.

``gemmlab.dsl.compile(fn, *example_args, arch=None)`` -> :class:`DslKernel` (callable on
CUDA tensors, with ``.ptx``, ``.resources``, ``.sass()``...); ``gemm_fn(fn)`` makes a
GEMM function for check_gemm/bench_gemm; ``info()`` says what the DSL can do here.
Importing this package does not import the DSL itself: that happens on first use.
"""
from __future__ import annotations

from .core import DslKernel, clear_cache, compile, gemm_fn
from .info import TARGETS, info

__all__ = ["DslKernel", "TARGETS", "clear_cache", "compile", "gemm_fn", "info"]
