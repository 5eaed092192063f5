"""simple_gemm's kernel launched by a ``@cute.jit`` function that takes no stream: the DSL then
launches on CUDA's default stream, not on torch's current one."""
from __future__ import annotations

import cutlass.cute as cute

from .simple_gemm import TILE, gemm_kernel


@cute.jit
def gemm(mA: cute.Tensor, mB: cute.Tensor, mD: cute.Tensor):
    M, N = mD.shape
    gemm_kernel(mA, mB, mD).launch(grid=[cute.ceil_div(N, TILE), cute.ceil_div(M, TILE), 1], block=[TILE, TILE, 1])
