"""A small CuTe DSL GEMM, D = A·Bᵀ ("tn"), with the timeline's marks (gemmlab.profiling.marks).

One thread per output element, K walked in k-tiles of 16 in a dynamic loop: each k-tile's loads and
multiply-adds are states of their own, so the tracer is carried through the loop as a pipeline state is.
The marks sit where every thread runs them (the bounds checks are inside); without a timeline being
recorded they compile to nothing.
"""
from __future__ import annotations

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute

from gemmlab.profiling import marks

TILE = 16
K_TILE = 16


@cute.kernel
def traced_kernel(mA: cute.Tensor, mB: cute.Tensor, mD: cute.Tensor):
    tracer = marks.begin()
    tx, ty, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    m = by * TILE + ty
    n = bx * TILE + tx
    M, K = mA.shape
    N = mB.shape[0]
    acc = cutlass.Float32(0.0)
    a = cute.make_rmem_tensor((K_TILE,), cutlass.Float32)
    b = cute.make_rmem_tensor((K_TILE,), cutlass.Float32)
    for kt in cutlass.range(cute.ceil_div(K, K_TILE), unroll=1):
        tracer.mark(marks.LOAD)                       # this k-tile's values of A and B into registers
        for kk in cutlass.range_constexpr(K_TILE):
            k = kt * K_TILE + kk
            a[kk] = cutlass.Float32(0.0)
            b[kk] = cutlass.Float32(0.0)
            if m < M and n < N and k < K:
                a[kk] = mA[m, k].to(cutlass.Float32)
                b[kk] = mB[n, k].to(cutlass.Float32)
        tracer.mark(marks.MMA)                        # ... and their products added up
        for kk in cutlass.range_constexpr(K_TILE):
            acc += a[kk] * b[kk]
    tracer.mark(marks.EPILOGUE)
    if m < M and n < N:
        mD[m, n] = acc.to(mD.element_type)
    tracer.mark(marks.DONE)


@cute.jit
def traced_gemm(mA: cute.Tensor, mB: cute.Tensor, mD: cute.Tensor, stream: cuda.CUstream):
    M, N = mD.shape
    traced_kernel(mA, mB, mD).launch(
        grid=[cute.ceil_div(N, TILE), cute.ceil_div(M, TILE), 1], block=[TILE, TILE, 1], stream=stream
    )
