"""The smallest real DSL kernel, compiled by :func:`gemmlab.dsl.info` to test each target.

Kept in its own module because the DSL reads a function's source file to trace it.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute


@cute.kernel
def _fill_kernel(out: cute.Tensor, value: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    if tidx < out.shape[0]:
        out[tidx] = value


@cute.jit
def fill(out: cute.Tensor, value: cutlass.Float32):
    _fill_kernel(out, value).launch(grid=[1, 1, 1], block=[32, 1, 1])
